"""Merge units: key ranges cover every row once; the local merge works unit by unit."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from test_compaction import SCHEMA, add_segment, read_segments, rows

from carbonstore.segments import compaction_merge
from carbonstore.segments.compaction import compact, segment_data_files
from carbonstore.segments.compaction_merge import _range_filter, key_ranges
from carbonstore.store import Store


@pytest.mark.parametrize("n", [1, 2, 3, 7])
@pytest.mark.parametrize("kind", ["int", "str", "few"])
def test_key_ranges_cover_every_row_once(tmp_path: Path, n: int, kind: str) -> None:
    values: list[object]
    if kind == "int":
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
        expr = _range_filter("k", lo, hi, nulls)
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
