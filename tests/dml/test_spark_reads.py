"""Every Spark read path honours the deltas of the version it reads."""

from __future__ import annotations

import pytest

from carbonstore import Store, Table
from carbonstore.dml import delete_rows
from carbonstore.spark.api import to_spark
from tests.dml.rows import SCHEMA, ids, load, rows

pytestmark = pytest.mark.spark


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id",
                                                        "dictionary_include": "name"})
    load(t, rows(range(0, 3000)), tasks=2)
    load(t, rows(range(3000, 5000)))
    load(t, rows(range(5000, 5100)))  # a segment without deltas
    delete_rows(t, "score > 100 AND score < 200 OR name = 'n4'")
    return t


def _want(table: Table) -> list[int]:
    return ids(table)  # the driver-local read (tests/dml/test_delete.py pins it)


def test_native_read(spark, table: Table, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import carbonstore.spark.dml as spark_dml

    calls: list[int] = []
    real = spark_dml.without_deleted_rows

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(spark_dml, "without_deleted_rows", spy)
    table.store.conf.values["carbon.read.local.rows"] = "0"  # never the driver-local shortcut
    want = _want(table)
    assert len(want) < 5100
    df = to_spark(table, spark)
    assert sorted(r.id for r in df.select("id").collect()) == want
    sub = to_spark(table, spark, where="id >= 390 AND id < 900 AND name <> 'n1'")
    got = sorted(r.id for r in sub.collect())
    assert got == [i for i in want if 390 <= i < 900 and (i % 11 == 0 or i % 7 != 1)
                   and i % 11 != 0]
    assert len(calls) == 2  # both reads went through the native path for deltas


def test_data_source_read(spark, table: Table) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.spark.session import register_data_source

    register_data_source(spark)
    df = spark.read.format("carbonstore").option("store", table.store.location).load("db.t")
    assert sorted(r.id for r in df.select("id").collect()) == _want(table)
    old = spark.read.format("carbonstore").option("store", table.store.location) \
        .option("versionAsOf", "6").load("db.t")
    assert old.count() == 5100  # before the DELETE


def test_sql_and_spark_compaction(spark, table: Table) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.segments.compaction import compact
    from carbonstore.spark.compact_job import spark_merger
    from carbonstore.spark.sql import run_statement

    want = _want(table)
    n = run_statement(spark, table.store, "SELECT count(*) AS n FROM db.t").collect()[0].n
    assert n == len(want)
    compact(table, "custom", segment_ids=["0", "1", "2"], merger=spark_merger(spark))
    assert ids(table) == want
    assert to_spark(table, spark).count() == len(want)


def test_native_read_of_many_files_with_deltas(spark, store: Store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Files with deltas read in several scans (more than FILES_PER_FILTER), positions on
    and across 64-bit word boundaries, the last row of a file and whole words deleted."""
    import carbonstore.spark.dml as spark_dml

    monkeypatch.setattr(spark_dml, "FILES_PER_FILTER", 2)
    t = store.create_table("db.many", SCHEMA, properties={"sort_columns": "id"})
    for start in range(0, 1000, 200):
        load(t, rows(range(start, start + 200)))
    edges = [s + p for s in range(0, 1000, 200) for p in (0, 63, 64, 127, 128, 199)]
    delete_rows(t, f"id IN ({', '.join(map(str, edges))}) OR (id >= 256 AND id < 384) "
                   "OR id % 13 = 5")
    t.store.conf.values["carbon.read.local.rows"] = "0"
    want = ids(t)
    assert 0 < len(want) < 1000
    assert sorted(r.id for r in to_spark(t, spark).select("id").collect()) == want
    sub = to_spark(t, spark, where="id >= 100 AND id < 700")
    assert sorted(r.id for r in sub.select("id").collect()) == [i for i in want if 100 <= i < 700]
