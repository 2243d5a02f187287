"""Spark reuses a Python data source's reader across scans of one relation.

PySpark 4.3 (``spark.sql.python.filterPushdown.enabled=true``) keeps the read function and
partitions that a ``pushFilters`` call planned on the relation's provider, not on the scan:
every later scan of that relation (the same ``load()``, in the same query or a later one)
reads with the reader of the most recent scan that pushed a filter. docs/semantics.md,
"Spark's reader reuse", has the analysis. The first test is the minimal reproduction with no
carbonstore code; the others pin that carbonstore's answers do not depend on it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, InputPartition

from carbonstore import Store
from tests.indexfiles.segbuild import add_segments

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


def _repro_source() -> type[DataSource]:
    """The reproduction's data source (defined in a function: pickled by value, not by a
    module name the Python workers cannot import)."""

    class _Reader(DataSourceReader):
        def __init__(self) -> None:
            self.only = None  # the value of a pushed x = v

        def pushFilters(self, filters):  # type: ignore[no-untyped-def]  # noqa: N802
            for f in filters:
                if isinstance(f, EqualTo) and f.attribute == ("x",):
                    self.only = f.value  # prune: read only that partition
            yield from filters  # and let Spark evaluate every filter again

        def partitions(self):  # type: ignore[no-untyped-def]
            return [InputPartition(i) for i in range(10) if self.only in (None, i)]

        def read(self, partition):  # type: ignore[no-untyped-def]
            yield (partition.value,)

    class _Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "reuse_repro"

        def schema(self) -> str:
            return "x int"

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return _Reader()

    return _Source


@pytest.fixture
def pushdown(spark: object) -> Iterator[object]:
    """The session with Python filter pushdown on (PySpark's default is off)."""
    before = spark.conf.get(PUSHDOWN)  # type: ignore[attr-defined]
    spark.conf.set(PUSHDOWN, "true")  # type: ignore[attr-defined]
    yield spark
    spark.conf.set(PUSHDOWN, before)  # type: ignore[attr-defined]


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="PySpark 4.3 reuses the reader of the last scan that "
                   "pushed a filter (docs/semantics.md); strict: tells when a release fixes it")
def test_minimal_reproduction_without_carbonstore(pushdown: object) -> None:
    spark = pushdown
    spark.dataSource.register(_repro_source())  # type: ignore[attr-defined]
    df = spark.read.format("reuse_repro").load()  # type: ignore[attr-defined]
    assert df.count() == 10
    assert df.where("x = 3").count() == 1
    assert df.count() == 10  # PySpark 4.3: 1 (the reader pruned for x = 3 is reused)


def test_what_spark_reuses(pushdown: object) -> None:
    """The rule docs/semantics.md states, pinned on the installed PySpark: the most recent
    scan of a relation that pushed a filter plans every scan of it, in later queries and in
    the same query (the partitions are planned after all scans pushed their filters)."""
    spark = pushdown
    spark.dataSource.register(_repro_source())  # type: ignore[attr-defined]
    df = spark.read.format("reuse_repro").load()  # type: ignore[attr-defined]
    df.createOrReplaceTempView("reuse_repro_t")
    counts = {r.k: r.n for r in spark.sql(  # type: ignore[attr-defined]
        "SELECT 'x=3' AS k, count(*) AS n FROM reuse_repro_t WHERE x = 3 "
        "UNION ALL SELECT 'x=5', count(*) FROM reuse_repro_t WHERE x = 5").collect()}
    fixed = counts == {"x=3": 1, "x=5": 1}
    if not fixed:  # both scans read with the x = 5 reader
        assert counts == {"x=3": 0, "x=5": 1}
        assert df.count() == 1
        assert spark.read.format("reuse_repro").load().count() == 10  # type: ignore[attr-defined]


@pytest.fixture
def orders(store: Store) -> object:
    t = store.create_table("shop.orders", "order_id long not null, city string, v double")
    parts = []
    for k in range(4):
        ids = np.arange(k * 250, (k + 1) * 250)
        parts.append(pa.table({"order_id": ids,
                               "city": [None if i % 9 == 0 else f"c{i % 4}" for i in ids],
                               "v": ids / 7}))
    add_segments(t, parts, row_group_size=50, page_rows=10)
    return t


@pytest.mark.parametrize("enabled", ["true", "false"])
def test_a_reused_data_source_frame_answers_every_scan(
    spark: object, orders: object, enabled: str
) -> None:
    before = spark.conf.get(PUSHDOWN)  # type: ignore[attr-defined]
    spark.conf.set(PUSHDOWN, enabled)  # type: ignore[attr-defined]
    try:
        df = spark.read.format("carbonstore").option(  # type: ignore[attr-defined]
            "store", orders.store.location).load("shop.orders")  # type: ignore[attr-defined]
        assert df.where("order_id = 123").count() == 1
        assert df.count() == 1000
        assert df.where("city IS NULL").count() == 112
        assert df.groupBy("city").count().count() == 5
        df.createOrReplaceTempView("reuse_orders")
        got = {r.k: r.n for r in spark.sql(  # type: ignore[attr-defined]
            "SELECT 'a' AS k, count(*) AS n FROM reuse_orders WHERE order_id = 5 UNION ALL "
            "SELECT 'b', count(*) FROM reuse_orders WHERE order_id = 700 UNION ALL "
            "SELECT 'all', count(*) FROM reuse_orders").collect()}
        assert got == {"a": 1, "b": 1, "all": 1000}
    finally:
        spark.conf.set(PUSHDOWN, before)  # type: ignore[attr-defined]


def test_sql_reading_one_table_twice(
    capsys: pytest.CaptureFixture[str], spark: object, orders: object
) -> None:
    from carbonstore.cli import main

    code = main(["--store", orders.store.location, "sql", "--csv",  # type: ignore[attr-defined]
                 "SELECT 'filtered' AS k, count(*) AS n FROM shop.orders WHERE order_id = 5 "
                 "UNION ALL SELECT 'all', count(*) FROM shop.orders"])
    out = capsys.readouterr().out
    assert code == 0
    assert sorted(out.splitlines()[1:]) == ["all,1000", "filtered,1"]


def test_registered_views_answer_every_scan_and_see_new_loads(
    pushdown: object, orders: object
) -> None:
    from carbonstore.spark.sql import register

    spark = pushdown
    assert register(spark, store=orders.store, tables=["shop.orders"]) == ["shop_orders"]  # type: ignore[attr-defined]
    q = ("SELECT 'one' AS k, count(*) AS n FROM shop_orders WHERE order_id = 5 "
         "UNION ALL SELECT 'all', count(*) FROM shop_orders")
    assert {r.k: r.n for r in spark.sql(q).collect()} == {"one": 1, "all": 1000}  # type: ignore[attr-defined]
    add_segments(orders, [pa.table({"order_id": np.arange(1000, 1100), "city": ["x"] * 100,  # type: ignore[arg-type]
                                    "v": np.zeros(100)})])
    assert {r.k: r.n for r in spark.sql(q).collect()} == {"one": 1, "all": 1100}  # type: ignore[attr-defined]
