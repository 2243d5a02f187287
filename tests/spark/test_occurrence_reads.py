"""How run_statement reads an occurrence with a tiny filtered result: on the driver when the
statement reads that one table (Spark collects it without a job), by Spark's Parquet
reader next to other tables (the same jobs as a file scan there, and no JVM Arrow
ingestion on a statement's first run). The answers are the same either way."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from carbonstore import Store
from carbonstore.spark.sql import run_statement
from tests.indexfiles.segbuild import add_segments


def _leaves(df: object) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())  # type: ignore[attr-defined]


def test_local_read_only_for_a_statement_of_one_table(spark: object, tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    facts = store.create_table("db.facts", "k int not null, v long")
    dims = store.create_table("db.dims", "k int not null, name string")
    add_segments(facts, [pa.table({"k": pa.array([i % 5 for i in range(2000)], pa.int32()),
                                   "v": pa.array(range(2000), pa.int64())})])
    add_segments(dims, [pa.table({"k": pa.array(range(5), pa.int32()),
                                  "name": [f"n{i}" for i in range(5)]})])

    alone = run_statement(spark, store, "SELECT k, name FROM db.dims WHERE name = 'n3'")
    assert [tuple(r) for r in alone.collect()] == [(3, "n3")]
    assert "LocalTableScan" in _leaves(alone)

    joined = run_statement(spark, store, "SELECT count(*), sum(v) FROM db.facts f JOIN db.dims d "
                                         "ON f.k = d.k WHERE d.name = 'n3'")
    assert [tuple(r) for r in joined.collect()] == [(400, sum(range(3, 2000, 5)))]
    plan = _leaves(joined)
    assert "LocalTableScan" not in plan
    assert plan.count("FileScan parquet") >= 2
