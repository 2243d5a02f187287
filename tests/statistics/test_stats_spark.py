"""analyze on Spark: mapInArrow over the segment files, task states merged on the driver."""

from __future__ import annotations

from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from test_stats_store import SCHEMA, data

from carbonstore import Store
from carbonstore.segments.analyze import analyze_local
from carbonstore.statistics.store import get_segment_statistics, get_table_statistics
from carbonstore.store.tablestatus import SUCCESS

pytestmark = pytest.mark.spark


def test_analyze_on_spark_matches_local(store: Store, spark: Any) -> None:
    from carbonstore.spark.analyze_job import analyze

    table = store.create_table("t", SCHEMA)
    sfs = table.paths.sfs
    for seg_start in (0, 2000):  # two segments of three files each (split across tasks)
        rows = data(seg_start, 3000)
        seg = table.status.allocate(status=SUCCESS, row_count=rows.num_rows).load_name
        sfs.makedirs(table.paths.segment_dir(seg))
        for i in range(3):
            pq.write_table(rows.slice(i * 1000, 1000),
                           f"{table.paths.segment_dir(seg)}/part-{i}.parquet", filesystem=sfs.fs)
    done = analyze(table, spark=spark, tasks=4)
    assert [s.segment_id for s in done] == ["0", "1"]
    spark_stats = {s: get_segment_statistics(table, s) for s in ("0", "1")}
    local = {s.segment_id: s for s in analyze_local(table)}
    for sid in ("0", "1"):
        a, b = spark_stats[sid], local[sid]
        assert a is not None and a.row_count == b.row_count == 3000
        assert [c.column for c in a.columns] == [c.column for c in b.columns]
        for ca, cb in zip(a.columns, b.columns, strict=True):
            assert ca.num_nulls == cb.num_nulls
            assert getattr(ca, "low_value", None) == getattr(cb, "low_value", None)
            # tasks' sketches are unions (composite estimator), one pass uses HIP: both close
            assert getattr(ca, "num_dvs", 0) == pytest.approx(getattr(cb, "num_dvs", 0), rel=0.02)
        assert a.column("id").num_dvs == pytest.approx(3000, rel=0.02)  # type: ignore[attr-defined]
    ts = get_table_statistics(table)
    assert ts.column("id").num_dvs == pytest.approx(5000, rel=0.02)  # type: ignore[attr-defined]
    # only some columns of one segment: the others stay as they are
    done = analyze(table, spark=spark, segments=["1"], columns=["name"])
    stored = get_segment_statistics(table, "1")
    assert stored is not None and len(stored.columns) == 4
    names = pc.count_distinct(data(2000, 3000).column("name")).as_py()
    assert stored.column("name").num_dvs == names  # type: ignore[attr-defined]


def test_spark_load_stores_statistics(store: Store, spark: Any) -> None:
    from test_accumulator import check_exact

    from carbonstore.spark.load_job import load

    table = store.create_table("l", SCHEMA)
    rows = data(0, 4000)
    df = spark.createDataFrame(rows.to_pylist(), "id long, name string, score double, flag boolean")
    entry = load(table, df.repartition(3), spark=spark)
    stats = get_segment_statistics(table, entry.load_name)
    assert stats is not None and stats.source == "load"
    check_exact(stats, rows)  # three tasks' accumulators merged at the commit
