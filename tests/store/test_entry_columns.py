"""Entries written as columns (``entryColumns`` / ``upsertColumns``, formatVersion 2).

Long entry lists are written one array per CarbonData key; they must decode to exactly the
entries (and the refusals) of the same entries written as rows, and tables written before,
one object per entry, must still open.
"""

from __future__ import annotations

import os
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore import Store, Table
from carbonstore.errors import CorruptMetadataError
from carbonstore.store import LoadEntry
from carbonstore.store.entries import (
    ALL_STATUSES,
    DeleteDelta,
    decode_entries,
    decode_entry_columns,
    encode_entry_columns,
)
from carbonstore.store.records import replace
from carbonstore.store.tablestatus import CHECKPOINT_INTERVAL, SUCCESS, forget_decoded
from carbonstore.store.versions import COLUMNS_FORMAT_VERSION, COLUMNS_FROM

_NAMES = st.one_of(st.integers(0, 10**6).map(str),
                   st.tuples(st.integers(0, 999), st.integers(1, 9)).map(lambda t: f"{t[0]}.{t[1]}"))
_OPT_INT = st.one_of(st.none(), st.integers(0, 2**62))
_ENTRY = st.builds(
    LoadEntry,
    load_name=_NAMES, status=st.sampled_from(ALL_STATUSES), load_start_time=st.integers(0, 2**45),
    timestamp=_OPT_INT, data_size=st.integers(0, 2**40), index_size=st.integers(0, 2**40),
    row_count=st.integers(0, 2**40), bad_record_count=st.integers(0, 9),
    merged_load_name=st.one_of(st.none(), _NAMES), modification_or_deletion_timestamp=_OPT_INT,
    visibility=st.booleans(), major_compacted=st.booleans(),
    file_format=st.sampled_from(["parquet", "orc"]),
    segment_file=st.one_of(st.none(), st.from_regex(r"[0-9]{1,3}_[0-9]{1,5}\.carbonindexmerge", fullmatch=True)),
    delete_deltas=st.one_of(st.just(()), st.just((DeleteDelta(
        data_file="p.parquet", delta_file="p.deletedelta", deleted_rows=2),))),
)


def _unique(entries: list[LoadEntry]) -> list[LoadEntry]:
    return list({e.load_name: e for e in entries}.values())


@settings(max_examples=200, deadline=None)
@given(st.lists(_ENTRY, max_size=40).map(_unique))
def test_columns_round_trip_to_the_row_decode(entries: list[LoadEntry]) -> None:
    columns = encode_entry_columns(entries)
    assert columns is not None
    rows = orjson.loads(orjson.dumps([e.to_json() for e in entries]))
    got = decode_entry_columns(orjson.loads(orjson.dumps(columns)))
    assert got == decode_entries(rows) == _each(rows) == tuple(entries)


_EXTRA = st.dictionaries(
    st.sampled_from(["writer", "schemaVersion", "partitioning", "removedPartitions"]),
    st.one_of(st.integers(0, 3), st.sampled_from(["vm:1", "vm:2"]),
              st.just({"fields": [{"source": "d", "transform": "day"}]}), st.just(["a", "b"])),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_ENTRY, _EXTRA), max_size=30))
def test_entries_with_keys_beyond_carbondata_are_columns_too(pairs: list[Any]) -> None:
    entries = _unique([replace(e, extra=x) for e, x in pairs])
    columns = encode_entry_columns(entries)
    assert columns is not None
    if any(e.extra for e in entries):
        assert set(columns["extraColumns"]) == set().union(*(e.extra for e in entries))
    rows = orjson.loads(orjson.dumps([e.to_json() for e in entries]))
    assert decode_entry_columns(orjson.loads(orjson.dumps(columns))) == _each(rows) == tuple(entries)


def test_an_extra_key_with_a_null_value_stays_rows() -> None:
    e = LoadEntry(load_name="1", status=SUCCESS, load_start_time=1, extra={"removedPartitions": None})
    assert encode_entry_columns([e]) is None


@pytest.mark.parametrize("extra, message", [
    ({"loadName": {"values": ["1"], "index": [0]}}, "CarbonData's key"),
    ({"w": {"values": ["a"], "index": [1]}}, "out of range"),
    ({"w": {"values": ["a"], "index": [0, 0]}}, "an index of 1 items"),
    ({"w": {"values": [None], "index": [0]}}, "null value"),
    ({"w": ["a"]}, "values, index"),
    (["w"], "must be a JSON object"),
])
def test_malformed_extra_columns_are_refused(extra: Any, message: str) -> None:
    columns = {"loadName": ["1"], "loadStatus": ["Success"], "loadStartTime": [1], "extraColumns": extra}
    with pytest.raises(ValueError, match=message):
        decode_entry_columns(columns)


def _refusal(fn: Any, arg: Any) -> tuple[LoadEntry, ...] | str:
    try:
        return fn(arg)
    except ValueError as err:
        return f"refused: {err}"


_DAMAGE = st.sampled_from([
    ("loadStatus", "Succeeded"), ("loadName", "../1"), ("loadName", "1\n2"), ("loadName", 7),
    ("segmentFile", "../../x"), ("segmentFile", "a/b"), ("segmentFile", ""), ("dataSize", "12kb"),
    ("rowCount", 1.5), ("loadStartTime", True), ("visibility", "maybe"), ("mergedLoadName", "x"),
    ("fileFormat", 3), ("deleteDeltas", [{"dataFile": "../p", "deltaFile": "d", "deletedRows": 1}]),
    ("loadStatus", ["Success"]), ("timestamp", "17"),
])


@settings(max_examples=200, deadline=None)
@given(st.lists(_ENTRY, min_size=1, max_size=12).map(_unique), st.data())
def test_damaged_columns_are_refused_as_the_same_rows_are(entries: list[LoadEntry], data: Any) -> None:
    columns = orjson.loads(orjson.dumps(encode_entry_columns(entries)))
    key, value = data.draw(_DAMAGE)
    at = data.draw(st.integers(0, len(entries) - 1))
    columns.setdefault(key, [None] * len(entries))[at] = value
    if data.draw(st.booleans()):
        columns["loadName"][-1] = columns["loadName"][0]  # a loadName twice
    rows = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    assert _refusal(decode_entry_columns, columns) == _refusal(_each, rows)


def _each(rows: list[Any]) -> tuple[LoadEntry, ...]:
    """The oracle: entry by entry, then the duplicate check (no whole-list shortcut)."""
    out = tuple(LoadEntry.from_json(o) for o in rows)
    names = [e.load_name for e in out]
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise ValueError(f"loadName {dup} appears twice")
    return out


@pytest.mark.parametrize("columns, message", [
    ([], "must be a JSON object"),
    ({"loadName": ["1"], "loadStatus": ["Success", "Success"]}, "differ in length"),
    ({"loadName": "1"}, "must be an array"),
    ({"loadName": ["1"], "loadStatus": ["Success"], "loadStartTime": [1], "path": ["/x"]},
     "unknown entry column 'path'"),
    ({"loadStatus": ["Success"], "loadStartTime": [1]}, "invalid loadName None"),
])
def test_malformed_columns_are_refused(columns: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_entry_columns(columns)


def _entries(n: int, start: int = 0) -> list[LoadEntry]:
    return [LoadEntry(load_name=str(i), status=SUCCESS, load_start_time=i, timestamp=i + 1,
                      row_count=10, segment_file=f"{i}_1.carbonindexmerge") for i in range(start, start + n)]


def _version_file(table: Table, version: int) -> str:
    return f"{table.status.log_dir}/{version:020d}.json"


@pytest.fixture
def big(store: Store) -> Table:
    table = store.create_table("big", "id long")
    table.status.update(lambda s: [*s.entries, *_entries(COLUMNS_FROM + 5)], operation="LOAD")
    return table


def test_long_lists_are_written_as_columns_and_read_back(big: Table) -> None:
    delta = orjson.loads(open(_version_file(big, 1), "rb").read())
    assert delta["formatVersion"] == COLUMNS_FORMAT_VERSION
    assert "upserts" not in delta and len(delta["upsertColumns"]["loadName"]) == COLUMNS_FROM + 5
    for i in range(2, CHECKPOINT_INTERVAL + 1):  # up to a checkpoint of every entry
        big.status.allocate(status=SUCCESS, row_count=i)
    checkpoint = orjson.loads(open(_version_file(big, CHECKPOINT_INTERVAL), "rb").read())
    assert not checkpoint["checkpoint"] and "entries" not in checkpoint  # its entries: an Arrow file
    small = orjson.loads(open(_version_file(big, 2), "rb").read())
    assert small["formatVersion"] == 1 and isinstance(small["upserts"], list)  # short: rows
    warm = big.status.read()
    forget_decoded()
    assert big.status.read() == warm
    assert len(warm.entries) == COLUMNS_FROM + 5 + CHECKPOINT_INTERVAL - 1
    assert big.status.read(1).entries == tuple(_entries(COLUMNS_FROM + 5))


def test_a_table_written_as_rows_still_opens(big: Table, store: Store) -> None:
    """The format of tables written before: formatVersion 1, one object per entry."""
    path = _version_file(big, 1)
    rec = orjson.loads(open(path, "rb").read())
    columns = rec.pop("upsertColumns")
    rec["upserts"] = [dict(zip(columns, v, strict=True)) for v in zip(*columns.values(), strict=True)]
    rec["formatVersion"] = 1
    del rec["checksum"]  # written before versions carried checksums
    with open(path, "wb") as f:
        f.write(orjson.dumps(rec))
    forget_decoded()
    assert store.table("big").status.read().entries == tuple(_entries(COLUMNS_FROM + 5))


@pytest.mark.parametrize("damage", [
    lambda c: c["loadStatus"].__setitem__(3, "Succeeded"),
    lambda c: c["segmentFile"].__setitem__(7, "../../../../outside/x.carbonindexmerge"),
    lambda c: c["loadName"].__setitem__(9, c["loadName"][0]),
    lambda c: c["rowCount"].pop(),
    lambda c: c.__setitem__("where", [1] * len(c["loadName"])),
    lambda c: c.clear() or c.update({"loadName": 5}),
])
def test_damaged_columns_are_corrupt_metadata_naming_the_file(big: Table, store: Store, damage: Any) -> None:
    path = _version_file(big, 1)
    rec = orjson.loads(open(path, "rb").read())
    damage(rec["upsertColumns"])
    with open(path, "wb") as f:
        f.write(orjson.dumps(rec))
    forget_decoded()
    t = store.table("big")
    with pytest.raises(CorruptMetadataError, match=os.path.basename(path)) as err:
        t.status.read()
    assert "\n" not in str(err.value)
    with pytest.raises(CorruptMetadataError, match=os.path.basename(path)):  # writers refuse too
        t.status.allocate()



def test_a_version_without_its_checksum_key_where_writers_put_it_is_damage(big: Table, store: Store) -> None:
    """A file that still names a checksum, but not as the first key written (re-encoded by
    another tool, or a bit flipped in the prefix), cannot be checked: damage, not trusted."""
    path = _version_file(big, 1)
    rec = orjson.loads(open(path, "rb").read())
    rec["checksum"] = rec.pop("checksum")  # same content, the key moved to the end
    with open(path, "wb") as f:
        f.write(orjson.dumps(rec))
    forget_decoded()
    with pytest.raises(CorruptMetadataError, match="checksum"):
        store.table("big").status.read()


@pytest.mark.parametrize("position", [2, 20, 40, 200, -3])
def test_a_flipped_bit_anywhere_in_a_version_is_damage(big: Table, store: Store, position: int) -> None:
    path = _version_file(big, 1)
    data = bytearray(open(path, "rb").read())
    data[position] ^= 0x01
    with open(path, "wb") as f:
        f.write(bytes(data))
    forget_decoded()
    with pytest.raises(CorruptMetadataError, match=os.path.basename(path)):
        store.table("big").status.read()
