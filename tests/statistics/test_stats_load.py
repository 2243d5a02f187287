"""Loads store segment statistics as they write (executor accumulators, merged at commit)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from test_accumulator import check_exact, mixed_table

from carbonstore import Store, Table
from carbonstore.segments.commit import begin_segment, commit_segment
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import TaskResult, write_task
from carbonstore.statistics.store import get_segment_statistics, get_table_statistics

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "segments"))
from test_load_writer import _rows  # noqa: E402

SCHEMA = (
    "b boolean, by byte, i int, l long, f float, d double, s string, bin binary, dt date, "
    "ts timestamp, dec decimal(18,2)"
)


def load(table: Table, tasks: list[list[pa.RecordBatch]], *, statistics: bool = True,
         ) -> tuple[str, list[TaskResult]]:
    opts = parse_load_options(table, {"BAD_RECORDS_ACTION": "FORCE"})
    entry, lock = begin_segment(table)
    try:
        settings = dataclasses.replace(write_settings(table, entry.load_name, opts),
                                       statistics=statistics)
        results = [write_task(b, settings, task_id=f"{i:05d}") for i, b in enumerate(tasks)]
        commit_segment(table, entry.load_name, results, action=opts.action)
    finally:
        if lock is not None:
            lock.release()
    return entry.load_name, results


@pytest.fixture
def table(store: Store) -> Table:
    return store.create_table("t", SCHEMA)


def test_load_stores_exact_segment_statistics(table: Table) -> None:
    data = mixed_table(6000, seed=17)
    parts = [data.slice(0, 2500), data.slice(2500, 0), data.slice(2500)]
    seg, results = load(table, [p.to_batches(max_chunksize=1000) for p in parts])
    assert all(r.stats is not None for r in results if r.rows)
    stats = get_segment_statistics(table, seg)
    assert stats is not None and stats.source == "load" and stats.row_count == 6000
    check_exact(stats, data)  # three tasks' accumulators merged on the driver
    ts = get_table_statistics(table)
    assert ts.segments == (seg,) and ts.missing_segments == ()


def test_two_loads_give_table_level_union(table: Table) -> None:
    first = mixed_table(3000, seed=1)
    second = mixed_table(3000, seed=2)
    load(table, [first.to_batches()])
    load(table, [second.to_batches()])
    merged = get_table_statistics(table)
    both = pa.concat_tables([first, second])
    from carbonstore.statistics.model import SegmentStatistics

    check_exact(SegmentStatistics(table="default.t", segment_id="x", row_count=merged.row_count,
                                  columns=merged.columns), both)


def test_statistics_can_be_switched_off(table: Table) -> None:
    seg, results = load(table, [mixed_table(10).to_batches()], statistics=False)
    assert results[0].stats is None and get_segment_statistics(table, seg) is None
    assert get_table_statistics(table).missing_segments == (seg,)


def test_every_type_of_the_writer_round_trip(store: Store) -> None:
    from test_load_writer import SCHEMA as WRITER_SCHEMA

    table = store.create_table("w", WRITER_SCHEMA)
    seg, _ = load(table, [_rows().to_batches()])
    stats = get_segment_statistics(table, seg)
    assert stats is not None
    check_exact(stats, _rows())


def test_statistics_of_another_family_than_the_table_are_not_stored(store: Store) -> None:
    """A writer that declares a dictionary string column as its INT32 surrogates (as a
    compaction does) must not store long statistics for a string column."""
    from carbonstore.statistics.accumulator import StatsAccumulator
    from carbonstore.statistics.analyze import store_task_statistics

    table = store.create_table("d", "id long, name string")
    acc = StatsAccumulator([("id", "long"), ("name", "int")])
    acc.update(pa.table({"id": pa.array([1, 2, 3]), "name": pa.array([2, 1, 3], pa.int32())}))
    result = TaskResult(task_id="0", rows=3, stats=acc.to_bytes().decode())
    stored = store_task_statistics(table, "0", [result], source="compaction")
    assert stored is not None and [c.column for c in stored.columns] == ["id"]
    assert set(stored.sketches) == {"id"}
    # a task that wrote rows without statistics: nothing is stored
    assert store_task_statistics(table, "1", [TaskResult(task_id="0", rows=3)]) is None
