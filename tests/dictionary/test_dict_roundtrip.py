"""Round trips through add-values, encode and decode, on real dictionary files."""

from __future__ import annotations

import datetime as dt
import io
import os
import pickle
from decimal import Decimal

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from carbonstore.dictionary import (
    METADATA_KEY,
    MissingDictionaryValueError,
    add_values,
    add_values_from_file,
    clear_cache,
    decode_batch,
    decode_schema,
    distinct_values,
    encode_batch,
    load_dictionary,
    obsolete_sortindex_files,
    prepare_dictionaries,
    snapshot,
)
from carbonstore.errors import DictionaryError, SchemaError, UserError
from carbonstore.store import Table

LOADS = [
    ["München", "a", None, "b", "a", "日本語", ""],
    ["b", "zz", None, "Ä", "a", "🙂 emoji"],
    ["new", "München", "😀", "a\x00b", "a"],
]


def test_round_trip_across_loads_with_nulls_and_unicode(table: Table) -> None:
    batches = []
    for seg, values in enumerate(LOADS):
        snap = prepare_dictionaries(table, {"city": pa.array(values, pa.string())}, str(seg))
        batch = pa.record_batch({"id": pa.array(range(len(values)), pa.int64()),
                                 "city": pa.array(values, pa.string())})
        enc = encode_batch(batch, snap)
        assert enc.schema.field("city").type == pa.int32()
        assert enc.column(1).null_count == 0
        batches.append(enc)
    clear_cache()
    for values, enc in zip(LOADS, batches, strict=True):
        # The newest dictionary decodes files written with every older one.
        assert decode_batch(enc, table).column(1).to_pylist() == values
    d = load_dictionary(table, "city")
    distinct = {v for vs in LOADS for v in vs if v is not None}
    assert d.size == len(distinct)
    assert sorted(d.values.to_pylist()) == sorted(distinct)
    assert len(set(d.values.to_pylist())) == d.size
    # Each load appended its new values in byte order after the older ones.
    bounds = [(e.min_surrogate, e.max_surrogate) for e in d.meta.entries]
    assert bounds[0][0] == 2 and all(b[0] == a[1] + 1 for a, b in zip(bounds, bounds[1:], strict=False))
    for lo, hi in bounds:
        chunk = d.values.to_pylist()[lo - 2 : hi - 1]
        assert chunk == sorted(chunk, key=lambda s: s.encode())
    assert [e.segment_id for e in d.meta.entries] == ["0", "1", "2"]


def test_null_is_surrogate_one_and_values_start_at_two(table: Table) -> None:
    d = add_values(table, "city", ["b", "a", None], segment_id="0")
    assert d.encode(pa.array([None, "a", "b"])).to_pylist() == [1, 2, 3]
    assert d.surrogate_of(None) == 1 and d.value_of(1) is None
    assert d.value_of(2) == "a" and d.surrogate_of("zzz") is None
    with pytest.raises(UserError, match="not in the dictionary"):
        d.value_of(4)


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("code", pa.array([7, -3, None, 2**31 - 1, 7], pa.int32())),
        ("day", pa.array([dt.date(2024, 2, 29), None, dt.date(1970, 1, 1)], pa.date32())),
        ("price", pa.array([Decimal("12.50"), Decimal("-0.01"), None], pa.decimal128(10, 2))),
        ("ts", pa.array([dt.datetime(2020, 1, 1, 12, tzinfo=dt.UTC), None], pa.timestamp("us", tz="UTC"))),
        ("raw", pa.array([b"\xff\x00", b"", None, b"\x01"], pa.binary())),
    ],
)
def test_other_types_round_trip_and_sort(table: Table, column: str, values: pa.Array) -> None:
    add_values(table, column, values, segment_id="0")
    clear_cache()
    d = load_dictionary(table, column)
    assert decode_batch(
        encode_batch(pa.record_batch({column: values}), snapshot(table)), table
    ).column(0).to_pylist() == values.to_pylist()
    order, _ = d.sort_index()
    in_order = [d.value_of(int(s)) for s in order]
    assert in_order == sorted(v for v in set(values.to_pylist()) if v is not None)


def test_chunks_hold_at_most_chunk_size_values(small_chunks: Table) -> None:
    values = [f"v{i:03d}" for i in range(10)]
    d = add_values(small_chunks, "s", values, segment_id="0")
    assert d.meta.entries[0].chunk_count == 4  # 3 + 3 + 3 + 1
    clear_cache()
    assert load_dictionary(small_chunks, "s").values.to_pylist() == values


def test_readding_known_values_commits_nothing(table: Table) -> None:
    add_values(table, "city", ["a", "b"], segment_id="0")
    meta_path = load_dictionary(table, "city").files.meta_path
    before = open(meta_path, "rb").read()
    d = add_values(table, "city", ["b", None, "a"], segment_id="1")
    assert open(meta_path, "rb").read() == before and len(d.meta.entries) == 1


def test_encoding_a_value_missing_from_the_dictionary_fails(table: Table) -> None:
    snap = prepare_dictionaries(table, {"city": pa.array(["a"])}, "0")
    with pytest.raises(MissingDictionaryValueError, match="'b'"):
        encode_batch(pa.record_batch({"city": pa.array(["a", "b"])}), snap)


def test_prebuilt_dictionary_file_skips_the_distinct_pass(table: Table, tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "cities.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("Zürich\nBern\n\nGenève\nBern\n")
    snap = prepare_dictionaries(table, {}, "0", prebuilt={"city": path})
    assert sorted(snap.columns["city"].values.to_pylist()) == ["", "Bern", "Genève", "Zürich"]
    batch = pa.record_batch({"city": pa.array(["Bern", None, "Zürich", ""])})
    assert decode_batch(encode_batch(batch, snap), table).column(0).to_pylist() == batch.column(0).to_pylist()
    codes = os.path.join(str(tmp_path), "codes.txt")
    with open(codes, "w") as f:
        f.write("5\n\n-2\n")
    assert add_values_from_file(table, "code", codes, segment_id="1").values.to_pylist() == [-2, 5]
    with open(codes, "w") as f:
        f.write("five\n")
    with pytest.raises(UserError, match="'five' is not a valid int"):
        add_values_from_file(table, "code", codes, segment_id="2")


def test_parquet_metadata_records_column_ids_and_sizes(table: Table) -> None:
    snap = prepare_dictionaries(table, {"city": pa.array(["x", "y"]), "code": pa.array([1], pa.int32())}, "0")
    batch = encode_batch(pa.record_batch({"id": pa.array([1, 2]), "city": pa.array(["y", "x"])}), snap)
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_batches([batch]), buf)
    md = pq.read_metadata(io.BytesIO(buf.getvalue())).metadata
    doc = orjson.loads(md[METADATA_KEY])
    assert doc["city"] == {"columnId": table.schema.column("city").column_id, "size": 2}
    assert doc["code"]["size"] == 1
    read = pq.read_table(io.BytesIO(buf.getvalue()))
    assert read.column("city").to_pylist() == [3, 2]  # plain readers see the surrogates
    decoded = decode_batch(read.to_batches()[0], table)
    assert decoded.column("city").to_pylist() == ["y", "x"]
    assert decoded.schema == decode_schema(read.schema, table)
    assert METADATA_KEY not in (decoded.schema.metadata or {})


def test_snapshot_pickles_without_caches(table: Table) -> None:
    snap = prepare_dictionaries(table, {"city": pa.array(["q", "p"])}, "0")
    snap.columns["city"].sort_index()
    again = pickle.loads(pickle.dumps(snap))
    batch = pa.record_batch({"city": pa.array(["p", None, "q"])})
    assert encode_batch(batch, again).column(0).to_pylist() == [2, 1, 3]


def test_cache_reads_only_new_ranges_and_sees_other_writers(table: Table) -> None:
    d1 = add_values(table, "city", ["a"], segment_id="0")
    assert load_dictionary(table, "city") is d1
    clear_cache()  # a second process: its cache is stale after this writer commits
    stale = load_dictionary(table, "city")
    add_values(table, "city", ["c", "b"], segment_id="1")
    fresh = load_dictionary(table, "city")
    assert fresh is not stale and fresh.values.to_pylist() == ["a", "b", "c"]


def test_obsolete_sortindex_files(table: Table) -> None:
    add_values(table, "city", ["a"], segment_id="0")
    add_values(table, "city", ["b"], segment_id="1")
    add_values(table, "code", [1], segment_id="1")
    cid = table.schema.column("city").column_id
    obsolete = obsolete_sortindex_files(table)
    assert [os.path.basename(p) for p in obsolete] == [f"{cid}_1.sortindex"]
    assert os.path.exists(os.path.join(table.paths.dictionary_dir, f"{cid}_2.sortindex"))


def test_distinct_values_helper_and_errors(table: Table) -> None:
    batches = [pa.record_batch({"city": pa.array(["a", "b", None])}),
               pa.record_batch({"city": pa.array(["b", "c"])})]
    got = distinct_values(batches, ["city"])["city"]
    assert sorted(v for v in got.to_pylist() if v is not None) == ["a", "b", "c"]
    with pytest.raises(SchemaError, match="no global dictionary"):
        prepare_dictionaries(table, {"id": pa.array([1])}, "0")
    with pytest.raises(SchemaError, match="no global dictionary"):
        load_dictionary(table, "id")


def test_decode_rejects_unknown_surrogates(table: Table) -> None:
    d = add_values(table, "city", ["a"], segment_id="0")
    with pytest.raises(DictionaryError, match="outside its dictionary"):
        d.decode(np.array([1, 2, 3], dtype=np.int32))


def test_naive_and_other_unit_timestamps_are_taken_as_utc(table: Table) -> None:
    import datetime as dt

    naive = pa.array([dt.datetime(2021, 5, 1, 8, 30)], pa.timestamp("ms"))
    d = add_values(table, "ts", naive, segment_id="0")
    assert d.values.to_pylist() == [dt.datetime(2021, 5, 1, 8, 30, tzinfo=dt.UTC)]
    assert d.surrogate_of(dt.datetime(2021, 5, 1, 8, 30)) == 2
    assert d.encode(naive).to_pylist() == [2]


def test_value_bounds_follow_value_order_not_surrogate_order(table: Table) -> None:
    add_values(table, "city", ["m", "n"], segment_id="0")
    d = add_values(table, "city", ["a", "z"], segment_id="1")  # a=4, z=5: later, yet extreme
    assert d.value_bounds(np.array([2, 4, 1], dtype=np.int32)) == ("a", "m")
    assert d.value_bounds(pa.array([5, 3], pa.int32())) == ("n", "z")
    assert d.value_bounds(np.array([1], dtype=np.int32)) == (None, None)
