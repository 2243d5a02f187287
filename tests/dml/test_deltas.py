"""The delete delta format and the tablestatus field that names deltas."""

from __future__ import annotations

import pytest
from pyroaring import BitMap

from carbonstore import Store
from carbonstore.errors import CorruptMetadataError
from carbonstore.segments.deltas import (
    decode_delta,
    deleted_mask,
    encode_delta,
    positions,
    read_delta,
    write_delta,
)
from carbonstore.store.entries import DeleteDelta, LoadEntry


def test_round_trip_and_mask() -> None:
    bits = BitMap([0, 5, 6, 7, 1_000_000])
    got = decode_delta(encode_delta(bits))
    assert got == bits
    pos = positions(got)
    assert pos.tolist() == [0, 5, 6, 7, 1_000_000]
    assert deleted_mask(pos, 4, 4).tolist() == [False, True, True, True]
    assert not deleted_mask(pos, 8, 100).any()


def test_payload_is_portable_roaring() -> None:
    bits = BitMap(range(100))
    data = encode_delta(bits)
    assert data[:4] == b"CSDD"
    assert BitMap.deserialize(data[24:]) == bits  # any RoaringFormatSpec reader can read it


@pytest.mark.parametrize("damage", [
    lambda d: d[:10],  # torn header
    lambda d: b"XXXX" + d[4:],  # not a delta
    lambda d: d[:-1] + bytes([d[-1] ^ 1]),  # payload bit flip: checksum
    lambda d: d + b"\0",  # trailing garbage
])
def test_damage_is_an_error(damage) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CorruptMetadataError, match="delete delta"):
        decode_delta(damage(encode_delta(BitMap([1, 2, 3]))))


def test_missing_or_mismatched_file(store: Store) -> None:
    sfs = store.sfs
    sfs.makedirs("seg")
    d = write_delta(sfs, "seg", "part-1.parquet", BitMap([3, 4]))
    assert d.delta_file.startswith("part-1.") and d.deleted_rows == 2
    assert read_delta(sfs, "seg", d) == BitMap([3, 4])
    with pytest.raises(CorruptMetadataError, match="tablestatus says 5"):
        read_delta(sfs, "seg", DeleteDelta(data_file=d.data_file, delta_file=d.delta_file,
                                           deleted_rows=5))
    sfs.delete_file(f"seg/{d.delta_file}")
    with pytest.raises(CorruptMetadataError, match="missing"):
        read_delta(sfs, "seg", d)


def test_entry_field_omitted_when_empty_and_checked() -> None:
    e = LoadEntry(load_name="1", status="Success", load_start_time=1)
    assert "deleteDeltas" not in e.to_json()
    d = DeleteDelta(data_file="part-1.parquet", delta_file="part-1.ab.deletedelta", deleted_rows=3)
    with_d = LoadEntry(load_name="1", status="Success", load_start_time=1, delete_deltas=(d,))
    back = LoadEntry.from_json(with_d.to_json())
    assert back == with_d and back.deleted_rows == 3 and back.extra == {}
    bad = with_d.to_json()
    bad["deleteDeltas"][0]["deltaFile"] = "../../x.deletedelta"
    with pytest.raises(ValueError, match="leaves its segment folder"):
        LoadEntry.from_json(bad)
    bad["deleteDeltas"] = [{"dataFile": "a.parquet", "deltaFile": "a.deletedelta",
                            "deletedRows": -1}]
    with pytest.raises(ValueError, match="negative"):
        LoadEntry.from_json(bad)
