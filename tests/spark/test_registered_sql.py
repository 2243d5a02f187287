"""carbonstore.spark.sql.sql: registered views planned per occurrence, pruned by the query."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from carbonstore import Store
from carbonstore.spark.sql import register, registered, sql
from carbonstore.store import load_conf
from tests.indexfiles.segbuild import add_segments


def _orders(root: Path) -> Any:
    # no driver-local read: every occurrence is a file scan whose files can be listed
    store = Store(str(root / "store"), conf=load_conf(None).with_overrides({"carbon.read.local.rows": "0"}))
    t = store.create_table("shop.orders", "order_id long not null, city string, v double")
    parts = [pa.table({"order_id": np.arange(k * 250, (k + 1) * 250),
                       "city": [f"c{i % 4}" for i in range(250)], "v": np.arange(250) / 7})
             for k in range(4)]
    add_segments(t, parts, row_group_size=50, page_rows=10)
    return t


def test_registered_views_are_pruned_by_each_occurrences_filters(spark: Any, tmp_path: Path) -> None:
    orders = _orders(tmp_path)
    assert register(spark, store=orders.store, tables=["shop.orders"]) == ["shop_orders"]
    assert set(registered(spark)) == {"shop_orders"}
    one = sql(spark, "SELECT * FROM shop_orders WHERE order_id >= 760")
    files = one.inputFiles()
    assert len(files) == 1 and "Segment_3" in files[0]  # the other segments are not read
    assert one.count() == 240
    q = ("SELECT 'one' AS k, count(*) AS n FROM shop_orders o WHERE o.order_id = 5 "
         "UNION ALL SELECT 'all', count(*) FROM shop_orders")
    assert {r.k: r.n for r in sql(spark, q).collect()} == {"one": 1, "all": 1000}
    joined = sql(spark, "SELECT count(*) FROM shop_orders a JOIN shop_orders b "
                        "ON a.order_id = b.order_id WHERE a.order_id < 10 AND b.city = 'c1'")
    assert joined.collect()[0][0] == 3  # 1, 5, 9
    # answered from the index: a one-row local frame, nothing read
    assert sql(spark, "SELECT max(order_id) FROM shop_orders").inputFiles() == []
    assert sql(spark, "SELECT max(order_id) FROM shop_orders").collect()[0][0] == 999
    add_segments(orders, [pa.table({"order_id": np.arange(1000, 1100), "city": ["x"] * 100,
                                    "v": np.zeros(100)})])
    assert sql(spark, "SELECT count(*) FROM shop_orders WHERE city = 'x'").collect()[0][0] == 100
    spark.catalog.dropTempView("shop_orders")
    assert registered(spark) == {}


def test_a_repeated_statement_sees_every_new_version(spark: Any, tmp_path: Path) -> None:
    # run_statement reuses an occurrence's DataFrame while the table's version is unchanged;
    # a load, a restore, and a dropped and re-created table of the same name must all miss
    from carbonstore.spark.sql import run_statement

    orders = _orders(tmp_path)
    store = orders.store
    q = "SELECT city, count(*) AS n FROM shop.orders WHERE order_id >= 500 GROUP BY city"
    unfiltered = "SELECT city, count(*) AS n FROM shop.orders GROUP BY city"

    def counts(statement: str) -> dict[str, int]:
        return {r.city: r.n for r in run_statement(spark, store, statement).collect()}

    assert counts(q) == {"c0": 126, "c1": 126, "c2": 124, "c3": 124}
    assert counts(q) == counts(q)  # the same version: the same rows
    assert sum(counts(unfiltered).values()) == 1000
    loaded = orders.status.read().version
    add_segments(orders, [pa.table({"order_id": np.arange(1000, 1100), "city": ["x"] * 100,
                                    "v": np.zeros(100)})])
    assert counts(q)["x"] == 100
    assert counts(unfiltered)["x"] == 100
    assert sum(counts(unfiltered).values()) == 1100
    store.table("shop.orders").restore(loaded)  # back to the rows before the load
    assert "x" not in counts(q) and sum(counts(unfiltered).values()) == 1000
    store.drop_table("shop.orders")
    again = store.create_table("shop.orders", "order_id long not null, city string, v double")
    add_segments(again, [pa.table({"order_id": np.arange(600, 610), "city": ["y"] * 10,
                                   "v": np.zeros(10)})])
    assert counts(q) == {"y": 10}
    assert counts(unfiltered) == {"y": 10}
