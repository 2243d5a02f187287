"""Storing statistics: per-segment files, table level merged on read, deletes, processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from carbonstore import Store, Table
from carbonstore.errors import InvalidNameError
from carbonstore.segments.analyze import compute_segment_statistics
from carbonstore.statistics.accumulator import StatsAccumulator
from carbonstore.statistics.model import SegmentStatistics, StatisticsScope
from carbonstore.statistics.store import (
    delete_segment_statistics,
    delete_table_statistics,
    get_segment_statistics,
    get_table_statistics,
    segment_bounds,
    stats_path,
    update_segment_statistics,
)
from carbonstore.store.tablestatus import MARKED_FOR_DELETE, SUCCESS

SCHEMA = "id long not null, name string, score double, flag boolean"


def data(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"n{i % 97}" if i % 11 else None for i in ids.tolist()], pa.string()),
        "score": pa.array(np.where(ids % 13 == 0, np.nan, ids / 4.0), pa.float64()),
        "flag": pa.array(ids % 3 == 0),
    })


def add_segment(table: Table, rows: pa.Table, *, with_stats: bool = True) -> str:
    """A Success segment whose folder holds one Parquet file of ``rows``."""
    entry = table.status.allocate(status=SUCCESS, row_count=rows.num_rows)
    seg = entry.load_name
    sfs = table.paths.sfs
    sfs.makedirs(table.paths.segment_dir(seg))
    pq.write_table(rows, f"{table.paths.segment_dir(seg)}/part-0.parquet", filesystem=sfs.fs)
    if with_stats:
        acc = StatsAccumulator(table.schema)
        acc.update(rows)
        update_segment_statistics(
            table, acc.finish(StatisticsScope(table=str(table.name), segment_id=seg))
        )
    return seg


@pytest.fixture
def table(store: Store) -> Table:
    return store.create_table("t", SCHEMA)


def test_segment_statistics_are_stored_and_read_back(table: Table) -> None:
    seg = add_segment(table, data(0, 1000))
    stats = get_segment_statistics(table, seg)
    assert stats is not None and stats.row_count == 1000
    assert stats_path(table, seg).endswith(f"Metadata/stats/segment_{seg}.stats")
    assert table.paths.sfs.exists(stats_path(table, seg))
    assert stats.column("id").low_value == 0  # type: ignore[attr-defined]
    assert stats.column("score").num_nans == 77  # type: ignore[attr-defined]
    assert get_segment_statistics(table, "42") is None
    only = get_segment_statistics(table, seg, columns=["ID"])
    assert only is not None and [c.column for c in only.columns] == ["id"]
    assert set(only.sketches) == {"id"}
    with pytest.raises(InvalidNameError):
        get_segment_statistics(table, "../x")


def test_table_statistics_follow_the_readable_segments(table: Table) -> None:
    s0 = add_segment(table, data(0, 1000))
    s1 = add_segment(table, data(500, 1000))  # overlaps s0 on ids 500..999
    s2 = add_segment(table, data(5000, 10), with_stats=False)
    ts = get_table_statistics(table)
    assert ts.segments == (s0, s1) and ts.missing_segments == (s2,)
    assert ts.row_count == 2000
    assert ts.column("id").num_dvs == 1500  # type: ignore[attr-defined]
    assert ts.column("id").high_value == 1499  # type: ignore[attr-defined]
    assert ts.column("flag").num_trues == 334 + 333  # type: ignore[attr-defined]
    assert ts.column("name").num_dvs == 97  # type: ignore[attr-defined]
    # a deleted segment drops out of the table level at once
    table.status.set_status(s1, MARKED_FOR_DELETE)
    ts = get_table_statistics(table)
    assert ts.segments == (s0,) and ts.column("id").num_dvs == 1000  # type: ignore[attr-defined]
    assert ts.column("id").high_value == 999  # type: ignore[attr-defined]


def test_table_cache_is_used_and_invalidated(table: Table) -> None:
    s0 = add_segment(table, data(0, 100))
    first = get_table_statistics(table)
    cache = f"{table.paths.stats_dir}/table.stats"
    assert table.paths.sfs.exists(cache)
    assert get_table_statistics(table) == first
    assert get_table_statistics(table, columns=["id"]).columns == (first.column("id"),)
    # re-analysing the segment with other data changes the result although tablestatus did not
    acc = StatsAccumulator(table.schema)
    acc.update(data(10_000, 100))
    update_segment_statistics(table, acc.finish(StatisticsScope(table="default.t", segment_id=s0)))
    again = get_table_statistics(table)
    assert again.column("id").low_value == 10_000  # type: ignore[attr-defined]
    table.paths.sfs.write_bytes(cache, b"garbage")
    assert get_table_statistics(table) == again


def test_partial_update_keeps_other_columns(table: Table) -> None:
    seg = add_segment(table, data(0, 100))
    acc = StatsAccumulator(table.schema, columns=["id"])
    acc.update(data(0, 100))
    update_segment_statistics(table, acc.finish(StatisticsScope(table="default.t", segment_id=seg)))
    stored = get_segment_statistics(table, seg)
    assert stored is not None and {c.column for c in stored.columns} == {"id", "name", "score", "flag"}
    # a different row count means the data changed: nothing old is kept
    acc = StatsAccumulator(table.schema, columns=["id"])
    acc.update(data(0, 50))
    update_segment_statistics(table, acc.finish(StatisticsScope(table="default.t", segment_id=seg)))
    stored = get_segment_statistics(table, seg)
    assert stored is not None and [c.column for c in stored.columns] == ["id"]


def test_delete_segment_and_table_statistics(table: Table) -> None:
    s0 = add_segment(table, data(0, 100))
    s1 = add_segment(table, data(100, 100))
    assert delete_segment_statistics(table, s0, columns=["name"])
    stored = get_segment_statistics(table, s0)
    assert stored is not None and stored.find("name") is None and "name" not in stored.sketches
    assert not delete_segment_statistics(table, s0, columns=["name"])
    assert delete_segment_statistics(table, s0)
    assert get_segment_statistics(table, s0) is None
    assert not delete_segment_statistics(table, s0)
    ts = get_table_statistics(table)
    assert ts.segments == (s1,) and ts.missing_segments == (s0,)
    assert delete_table_statistics(table, columns=["score"]) == [s1]
    assert get_table_statistics(table).find("score") is None
    assert delete_table_statistics(table) == [s1]
    assert get_table_statistics(table).columns == ()
    assert not table.paths.sfs.exists(stats_path(table, s1))


def test_segment_bounds(table: Table) -> None:
    s0 = add_segment(table, data(0, 100))
    s1 = add_segment(table, data(1000, 10))
    add_segment(table, data(0, 5), with_stats=False)
    assert segment_bounds(table, "id") == {s0: (0, 99), s1: (1000, 1009)}
    assert segment_bounds(table, "score") == {s0: (0.25, 24.75), s1: (250.0, 252.25)}
    assert segment_bounds(table, "name") == {}  # strings have no low/high in Hive's shape


def test_compute_segment_statistics_from_files(table: Table) -> None:
    rows = data(0, 3000)
    seg = add_segment(table, rows, with_stats=False)
    stats = compute_segment_statistics(table, seg)
    assert stats.row_count == 3000 and stats.source == "analyze"
    assert stats.column("name").num_nulls == rows.column("name").null_count
    assert stats.column("name").num_dvs == pc.count_distinct(rows.column("name")).as_py()  # type: ignore[attr-defined]
    assert stats.column("score").high_value == pc.max(rows.column("score")).as_py()  # type: ignore[attr-defined]


_WRITER = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from carbonstore import Store
    from carbonstore.statistics.accumulator import StatsAccumulator
    from carbonstore.statistics.model import StatisticsScope
    from carbonstore.statistics.store import update_segment_statistics
    from carbonstore.store import load_conf

    location, own, shared, column, rounds = sys.argv[1:6]
    conf = load_conf(None).with_overrides({"carbon.lock.retry.timeout.sec": "30"})
    table = Store(location, conf=conf).table("t")
    for r in range(int(rounds)):
        rows = pa.table({"id": pa.array(range(r, r + 100), pa.int64()),
                         "name": [f"x{i}" for i in range(100)]})
        for seg, cols in ((own, None), (shared, [column])):
            acc = StatsAccumulator(table.schema, columns=cols)
            acc.update(rows)
            update_segment_statistics(
                table, acc.finish(StatisticsScope(table="default.t", segment_id=seg)))
    """
)


def test_concurrent_writers_store_their_own_segments(table: Table, tmp_path: object) -> None:
    """Two processes: each stores its own segment's statistics, and both update different
    columns of one shared segment; nothing is lost or torn."""
    for _ in range(3):
        table.status.allocate(status=SUCCESS, row_count=100)
    location = table.store.location
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, location, own, "2", col, "15"],
                         stderr=subprocess.PIPE)
        for own, col in (("0", "id"), ("1", "name"))
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    for seg in ("0", "1"):
        s = get_segment_statistics(table, seg)
        assert s is not None and s.row_count == 100
        assert s.column("id").low_value == 14  # the last round  # type: ignore[attr-defined]
    shared = get_segment_statistics(table, "2")
    assert shared is not None and {c.column for c in shared.columns} == {"id", "name"}
    leftovers = [i.base_name for i in table.paths.sfs.list_dir(table.paths.stats_dir)
                 if i.base_name.endswith(".tmp")]
    assert leftovers == []
    assert isinstance(SegmentStatistics.from_bytes(
        table.paths.sfs.read_bytes(stats_path(table, "2"))), SegmentStatistics)
    ts = get_table_statistics(table)
    assert ts.segments == ("0", "1", "2") and ts.column("id").num_dvs == 100  # type: ignore[attr-defined]
