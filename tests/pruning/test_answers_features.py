"""Metadata answers on tables with row-level deletes, schema changes and replaced
partitions: exact when given, equal to a read of the same rows (DuckDB as the oracle)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from carbonstore import Store, Table
from carbonstore.pruning.answers import Aggregate, answer
from carbonstore.pruning.plan import prune
from carbonstore.segments.dml import delete_rows
from carbonstore.spark.reader import (
    arrow_read_schema,
    plan_partitions,
    plan_projections,
    read_row_groups,
)
from carbonstore.store.alter import SUB_ACTIONS, alter_table
from tests.dml.rows import SCHEMA, load, rows
from tests.partitioning.test_table import LINEITEM, lineitem
from tests.partitioning.test_table import load as load_partitioned

AGGS = [Aggregate(func="count"), Aggregate(func="min", column="id"),
        Aggregate(func="max", column="id"), Aggregate(func="count", column="name")]


def _live(table: Table) -> pa.Table:
    plan = prune(table)
    slices = [s for p in plan_partitions(plan, projections=plan_projections(table, plan))
              for s in p.slices]
    return pa.Table.from_batches(list(read_row_groups(table, slices)),
                                 schema=arrow_read_schema(table))


def _oracle(data: pa.Table, sql: str, where: str | None) -> tuple:  # type: ignore[type-arg]
    con = duckdb.connect()
    con.register("t", data)
    return con.execute(f"SELECT {sql} FROM t" + (f" WHERE {where}" if where else "")).fetchone()


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    load(t, rows(range(0, 400)), tasks=2)
    load(t, rows(range(400, 800)))
    return t


@pytest.mark.parametrize("where", [None, "id >= 400", "id < 400"])
def test_deleted_rows_never_counted(table: Table, where: str | None) -> None:
    # every fifth id, the last and the first (a condition the index binds: no Spark)
    fifth = ", ".join(str(i) for i in range(0, 800, 5))
    delete_rows(table, f"id IN ({fifth}) OR id = 799 OR id = 0")
    got = answer(table, AGGS, where)
    want = _oracle(_live(table), "count(*), min(id), max(id), count(name)", where)
    if got is not None:  # given only when exact
        assert got == want
    count = answer(table, [Aggregate(func="count")], where)
    assert count is not None and count == (want[0],)  # whole segments: rows minus deleted


def test_after_an_alter_answers_are_right_or_absent(table: Table) -> None:
    alter_table(table, SUB_ACTIONS["rename-column"][1](["name", "label"]),
                operation="rename-column name label")
    t = table.store.table("db.t")
    alter_table(t, SUB_ACTIONS["add-column"][1](["flag int default 3"]), operation="add flag")
    t = t.store.table("db.t")
    aggs = [Aggregate(func="count"), Aggregate(func="min", column="flag"),
            Aggregate(func="count", column="label")]
    got = answer(t, aggs, None)
    want = _oracle(_live(t), "count(*), min(flag), count(label)", None)
    assert got is None or got == want


def test_replaced_partitions_are_not_counted(store: Store) -> None:
    t = store.create_table("tpch.li", LINEITEM, properties={"partition_by": "day(l_shipdate)"})
    a = lineitem(300, seed=5, days=range(4))
    load_partitioned(t, a)
    new = lineitem(40, seed=6, days=range(1), key0=9000)
    load_partitioned(t, new, options={"overwrite_partitions": "true"})
    data = _live(t)
    want = _oracle(data, "count(*), min(l_orderkey), max(l_orderkey)", None)
    got = answer(t, [Aggregate(func="count"), Aggregate(func="min", column="l_orderkey"),
                     Aggregate(func="max", column="l_orderkey")], None)
    assert got is None or got == want
    plan = prune(t)
    assert plan.levels["rows"].total - plan.deleted_rows == want[0]
