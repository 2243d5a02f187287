"""The fixed cost of a small statement: the Spark jobs it runs (docs/dml.md, "Execution").

A DELETE is one Spark job (read, match, shuffle by file, write the deltas), an UPDATE two
(the deltas, the new rows), a MERGE of a small pyarrow source three (the source's
broadcast, the deltas, the new rows: its key range comes from the pyarrow table, not from
a job). Before, adaptive execution ran each query stage as a job of its own (2, 3 and 7
jobs); no statement writes through a Python data source (whose planning
and commit run in Python processes of their own); and a statement with no new row runs no
insert job (no ``LOAD BEGIN`` in the history).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from carbonstore import Store, Table
from carbonstore.dml import WhenMatched, merge_rows
from tests.dml.rows import SCHEMA, load, read_live, rows

_groups = itertools.count()


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.jobs", SCHEMA, properties={"sort_columns": "id"})
    load(t, rows(range(0, 300)))
    load(t, rows(range(300, 600)))
    return t


def _jobs(spark: Any, statement: Callable[[], Any]) -> tuple[Any, list[str]]:
    """The statement's result and the names of the stages of the Spark jobs it ran."""
    group = f"dml-jobs-{next(_groups)}"
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        result = statement()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    jobs = sorted(tracker.getJobIdsForGroup(group))
    stages = [tracker.getStageInfo(s) for j in jobs for s in tracker.getJobInfo(j).stageIds]
    return (result, jobs), [s.name for s in stages if s is not None]


def test_a_small_statement_runs_one_job_per_step(spark: Any, table: Table) -> None:
    (r, jobs), stages = _jobs(spark, lambda: table.delete("id % 100 = 7 AND name LIKE '%0'"))
    assert r.deleted == 1 and len(jobs) == 1, stages
    (r, jobs), stages = _jobs(spark, lambda: table.update({"score": "score + 1"},
                                                          where="id % 250 = 1"))
    assert (r.deleted, r.inserted) == (3, 3) and len(jobs) == 2, stages
    src = pa.table({"id": pa.array([5, 700], pa.int64()), "name": ["a", "b"],
                    "score": [1.0, 2.0]})
    (r, jobs), stages = _jobs(spark, lambda: table.merge(
        src, on=["id"], when_matched_update="*", when_not_matched_insert="*"))
    assert (r.deleted, r.inserted) == (1, 2) and len(jobs) == 3, stages
    assert not any("save at" in s for s in stages), stages  # no data source writer
    live = {x["id"]: x for x in read_live(table).to_pylist()}
    assert len(live) == 600 and live[5]["name"] == "a" and live[700]["score"] == 2.0
    assert 7 not in live and live[251]["score"] == 251 / 4 + 1


def test_a_merge_with_nothing_new_begins_no_insert_segment(spark: Any, table: Table) -> None:
    before = len(table.history())
    src = pa.table({"id": pa.array([5], pa.int64()), "name": ["x"], "score": [0.0]})
    clause = WhenMatched(action="update", condition="s.score > 100")  # matches, takes none
    (r, jobs), stages = _jobs(spark, lambda: merge_rows(table, src, on=["id"],
                                                        matched=[clause]))
    assert r.version is None and (r.deleted, r.inserted) == (0, 0)
    assert len(table.history()) == before  # no LOAD BEGIN, no aborted segment
    assert len(jobs) == 2, stages  # the broadcast, the deltas
    assert len(read_live(table)) == 600


def test_statements_of_two_threads_restore_the_adaptive_setting_they_found() -> None:
    """The first statement turns adaptive execution off, the last one out restores it,
    however the statements of two threads interleave (JVM-free: a session's conf)."""
    from carbonstore.dml.engine import ADAPTIVE_KEY, adaptive_off

    class Conf(dict):
        def set(self, key: str, value: str) -> None:
            self[key] = value

    class Session:
        conf = Conf({ADAPTIVE_KEY: "true"})

    spark = Session()
    a, b = adaptive_off(spark), adaptive_off(spark)
    a.__enter__()
    b.__enter__()
    assert spark.conf[ADAPTIVE_KEY] == "false"
    a.__exit__(None, None, None)  # the first one out leaves it off: b still runs
    assert spark.conf[ADAPTIVE_KEY] == "false"
    b.__exit__(None, None, None)
    assert spark.conf[ADAPTIVE_KEY] == "true"
    with adaptive_off(spark, off=False):
        assert spark.conf[ADAPTIVE_KEY] == "true"
