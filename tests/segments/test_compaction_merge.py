"""Merge units: key ranges cover every row once; the local merge works unit by unit."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from test_compaction import SCHEMA, add_segment, read_segments, rows

from carbonstore import Store
from carbonstore.segments import compaction_merge
from carbonstore.segments.compaction import compact, segment_data_files
from carbonstore.segments.compaction_merge import _range_filter, key_ranges


@pytest.mark.parametrize("n", [1, 2, 3, 7])
@pytest.mark.parametrize("kind", ["int", "str", "few", "nan"])
def test_key_ranges_cover_every_row_once(tmp_path: Path, n: int, kind: str) -> None:
    values: list[object]
    if kind == "nan":  # NaN belongs to the last range
        values = [None if i % 11 == 0 else math.nan if i % 10 == 0 else (i * 7919) % 1000 / 3 for i in range(3000)]
    elif kind == "int":
        values = [None if i % 11 == 0 else (i * 7919) % 1000 for i in range(3000)]
    elif kind == "str":
        values = [None if i % 13 == 0 else f"v{(i * 31) % 500:04d}" for i in range(3000)]
    else:
        values = [i % 2 for i in range(3000)]  # two distinct values only
    files = []
    for part in range(3):
        path = str(tmp_path / f"f{part}.parquet")
        pq.write_table(pa.table({"k": values[part::3]}), path, row_group_size=200)
        files.append(path)
    fs = pafs.LocalFileSystem()
    ranges = key_ranges(fs, files, "k", n)
    assert 1 <= len(ranges) <= n
    dataset = ds.dataset(files, format="parquet")
    seen = 0
    for _idx, lo, hi, nulls in ranges:
        expr = _range_filter("k", lo, hi, nulls, floating=kind == "nan")
        seen += dataset.to_table(filter=expr).num_rows if expr is not None else dataset.count_rows()
    assert seen == len(values)


def test_local_merge_in_several_units(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    table = store.create_table("t", SCHEMA, properties={"sort_columns": "id"})
    for i in range(4):
        add_segment(table, rows(i * 1000, 1000), tasks=2)
    before = read_segments(table)
    size = sum(e.data_size for e in table.status.read().readable)
    monkeypatch.setattr(compaction_merge, "UNIT_BYTES", size // 3)
    compact(table, "custom", segment_ids=["0", "1", "2", "3"])
    parts = [pq.read_table(p)["id"].to_pylist() for p in segment_data_files(table, "0.1")]
    assert len(parts) >= 3
    flat = [x for part in parts for x in part]
    assert flat == sorted(flat) == list(range(4000))  # units in order, each sorted
    assert read_segments(table).equals(before)


def test_dictionary_columns_keep_surrogates_and_sort_by_value(store: Store) -> None:
    pytest.importorskip("carbonstore.dictionary.load")
    from carbonstore.dictionary.load import decode_batch
    from carbonstore.segments.commit import begin_segment, commit_segment
    from carbonstore.segments.load import parse_load_options
    from carbonstore.segments.load import write_settings as load_settings
    from carbonstore.segments.writer import write_task

    table = store.create_table(
        "d", SCHEMA, properties={"sort_columns": "name,id", "dictionary_include": "name"}
    )
    # Each load brings new words, so surrogate order (order of arrival) is not value order.
    per_load = [["pear", "zebra", None], ["apple", "mango"], ["kiwi", "banana", None]]
    for seg, words in enumerate(per_load):
        n = 60
        data = pa.table({
            "id": pa.array(range(seg * n, (seg + 1) * n), pa.int64()),
            "name": pa.array([words[i % len(words)] for i in range(n)], pa.string()),
            "score": pa.array([float(i) for i in range(n)]),
        })
        entry, lock = begin_segment(table)
        try:
            settings = load_settings(table, entry.load_name, parse_load_options(table, {}))
            commit_segment(table, entry.load_name, [write_task(data.to_batches(), settings,
                                                               task_id="00000")])
        finally:
            if lock is not None:
                lock.release()

    def decoded(ids: list[str] | None = None) -> pa.Table:
        raw = read_segments(table, ids)
        return pa.Table.from_batches([decode_batch(b, table) for b in raw.to_batches()])

    before = decoded().sort_by("id")
    compact(table, "custom", segment_ids=["0", "1", "2"])
    files = segment_data_files(table, "0.1")
    stored = pa.concat_tables(pq.read_table(p) for p in files)
    assert stored.schema.field("name").type == pa.int32()  # surrogates, not values
    assert decoded().sort_by("id").equals(before)
    in_order = pa.Table.from_batches(
        [decode_batch(b, table) for b in stored.to_batches()]
    )["name"].to_pylist()
    non_null = [v for v in in_order if v is not None]
    assert in_order[: in_order.count(None)] == [None] * in_order.count(None)  # nulls first
    assert non_null == sorted(non_null)  # value order, not surrogate order


@pytest.mark.parametrize("overlap", [False, True])
def test_sorted_sources_in_any_order_give_sorted_output(store: Store, overlap: bool) -> None:
    table = store.create_table("s", SCHEMA, properties={"sort_columns": "id"})
    n, segs = 50, 4
    for s in (2, 0, 3, 1):  # loaded out of key order
        ids = [i * segs + s for i in range(n)] if overlap else list(range(s * n, (s + 1) * n))
        data = rows(0, n).set_column(0, "id", pa.array(ids, pa.int64())).sort_by("id")
        add_segment(table, data)
    before = read_segments(table)
    compact(table, "custom", segment_ids=["0", "1", "2", "3"])
    files = segment_data_files(table, "0.1")
    stored = pa.concat_tables(pq.read_table(p) for p in files)["id"].to_pylist()
    assert stored == list(range(n * segs))
    assert read_segments(table).equals(before)


def test_a_float_sort_column_orders_nan_last_in_every_unit_count(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's order (nulls, numbers, NaN) in the output, whether one unit or several merge;
    no NaN row is lost between the key ranges."""
    table = store.create_table("t", SCHEMA, properties={"sort_columns": "score"})
    for i in range(3):
        data = rows(i * 1000, 1000)
        score = [None if j % 13 == 0 else math.nan if j % 10 == 0 else -0.0 if j % 17 == 0 else j / 7
                 for j in range(i * 1000, i * 1000 + 1000)]
        add_segment(table, data.set_column(2, "score", pa.array(score, pa.float64())))
    size = sum(e.data_size for e in table.status.read().readable)
    monkeypatch.setattr(compaction_merge, "UNIT_BYTES", size // 3)
    compact(table, "custom", segment_ids=["0", "1", "2"])
    flat = [x for p in segment_data_files(table, "0.1") for x in pq.read_table(p)["score"].to_pylist()]
    assert len(flat) == 3000
    nulls = [x for x in flat if x is None]
    nans = [x for x in flat if x is not None and math.isnan(x)]
    numbers = [x for x in flat if x is not None and not math.isnan(x)]
    assert flat == nulls + numbers + nans
    assert numbers == sorted(numbers) and len(nans) == 3000 // 10 - 3000 // 130 - 1


@pytest.mark.parametrize("sort", [True, False])
def test_output_row_groups_follow_the_blocklet_size(store: Store, sort: bool) -> None:
    """A merge unit is one sorted chunk: written as one batch it was ONE row group of the
    whole unit (a 200k-row output in 1 row group at a 1 MB blocklet size), whose min/max
    prune nothing. The output's row groups are cut at the blocklet size as a load's are."""
    import numpy as np

    table = store.create_table("rg", "id long not null, name string, score double", properties={
        "blocklet_size_in_mb": "1", **({"sort_columns": "id"} if sort else {})})
    for k in range(2):
        ids = np.arange(k * 100_000, (k + 1) * 100_000)[::-1]
        add_segment(table, pa.table({"id": ids, "name": [f"name-{i:012d}" for i in ids],
                                     "score": ids / 3}), tasks=4)
    compact(table, "major")
    groups = [pq.ParquetFile(p).metadata for p in segment_data_files(table, "0.1")]
    sizes = [md.row_group(i).num_rows for md in groups for i in range(md.num_row_groups)]
    assert sum(sizes) == 200_000
    assert len(sizes) >= 5 and max(sizes) <= 60_000, sizes  # ~40 bytes a row: ~26k rows a MB
    assert read_segments(table)["id"].to_pylist() == list(range(200_000))
