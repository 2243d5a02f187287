"""Clustering on Spark executors, through the CLI and the SQL verbs (each costs seconds)."""

from __future__ import annotations

import json

import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.errors import CompactionError
from carbonstore.segments.compaction import compact
from carbonstore.spark.sql import SparkEngine
from carbonstore.sql import parse, run
from tests.segments.test_clustering import _sorted, clustered, frame, live, load

pytestmark = pytest.mark.spark


def test_cluster_on_spark_cli_and_sql(spark, store: Store, capsys) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.spark.compact_job import spark_cluster_merger

    table = store.create_table("t", "a long, b long, c string, d double",
                               properties={"page_rows": "500"})
    for s in range(3):
        load(table, frame(2000, s))
    before = _sorted(live(table))
    result = compact(table, "cluster", by=["b", "c"], curve="hilbert",
                     cluster_merger=spark_cluster_merger(spark, tasks=3))
    assert [(m.output, m.sources) for m in result.merged] == [("0.1", ("0", "1", "2"))]
    assert clustered(table) == {"0.1": "hilbert(b,c)"}
    assert _sorted(live(table)).equals(before)

    # the CLI (default engine: Spark) clusters only the new segment
    load(table, frame(500, 9))
    assert main(["compact", "t", "--type", "cluster", "--by", "b,c", "--curve", "hilbert",
                 "--json", "--store", store.location]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [m["sources"] for m in out["merged"]] == [["3"]]

    # SQL: OPTIMIZE ... ZORDER BY rewrites both (another curve); ALTER TABLE ... COMPACT
    # 'CLUSTER' then follows the table property, absent here: one line naming the fix
    result = run(store, parse("OPTIMIZE t ZORDER BY (a, `b`)"), engine=SparkEngine(spark))
    assert [r["clustering"] for r in result.rows] == ["zorder(a,b)"]
    assert "clustering" in result.columns
    assert clustered(table) == {"0.2": "zorder(a,b)"}
    with pytest.raises(CompactionError, match="no clustering.columns property"):
        run(store, parse("alter table t compact 'cluster'"), engine=SparkEngine(spark))
    assert live(table).num_rows == 6500


def test_cluster_on_spark_is_a_shuffle(spark, store: Store) -> None:  # type: ignore[no-untyped-def]
    """A map task per source file (each read once), a reduce task per curve-key range; the
    driver gets only commit messages."""
    from carbonstore.segments.compaction import segment_data_files
    from carbonstore.spark.compact_job import spark_cluster_merger

    table = store.create_table("s", "a long, b long, c string, d double",
                               properties={"page_rows": "500"})
    for s in range(3):
        load(table, frame(1500, s))
    files = sum(len(segment_data_files(table, e.load_name)) for e in table.status.read().entries)
    before = _sorted(live(table))
    sc = spark.sparkContext
    sc.setJobGroup("cluster-shuffle-test", "clustering")
    try:
        compact(table, "cluster", by=["a", "d"], cluster_merger=spark_cluster_merger(spark, tasks=2))
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    stages = [tracker.getStageInfo(s) for j in tracker.getJobIdsForGroup("cluster-shuffle-test")
              for s in tracker.getJobInfo(j).stageIds]
    assert sorted(s.numTasks for s in stages if s is not None) == sorted([files, 2])
    assert _sorted(live(table)).equals(before)
    assert len(segment_data_files(table, "0.1")) == 2
