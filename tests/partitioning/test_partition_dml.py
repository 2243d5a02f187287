"""Row-level DML on partitioned and bucketed tables: deltas of files in partition folders,
dynamic partition overwrite after a DELETE, compaction of both (oracle: DuckDB)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.pruning.plan import prune
from carbonstore.segments.compaction import compact
from carbonstore.segments.dml import delete_rows
from carbonstore.spark.reader import arrow_read_schema, plan_partitions, read_row_groups
from carbonstore.store.table import Table
from tests.partitioning.test_table import LINEITEM, lineitem, load


def _rows(table: Table) -> list[tuple]:  # type: ignore[type-arg]
    plan = prune(table)
    slices = [s for p in plan_partitions(plan) for s in p.slices]
    got = pa.Table.from_batches(list(read_row_groups(table, slices)),
                                schema=arrow_read_schema(table))
    return sorted(got.select(["l_orderkey", "l_shipdate", "l_quantity"]).to_pylist(),
                  key=lambda r: r["l_orderkey"])


def _duck(data: pa.Table, where: str | None = None) -> list[dict]:  # type: ignore[type-arg]
    con = duckdb.connect()
    con.register("t", data)
    sql = "SELECT l_orderkey, l_shipdate, l_quantity FROM t"
    rel = con.execute(sql + (f" WHERE NOT ({where})" if where else "") + " ORDER BY 1")
    return [dict(zip(["l_orderkey", "l_shipdate", "l_quantity"], r, strict=True))
            for r in rel.fetchall()]


def _count(table: Table) -> int:
    plan = prune(table)
    return plan.levels["rows"].total - plan.deleted_rows


@pytest.fixture
def table(store: Store) -> Table:
    return store.create_table("tpch.li", LINEITEM, properties={
        "partition_by": "day(l_shipdate)", "bucket_number": "3", "bucket_columns": "l_orderkey"})


def test_delete_in_partition_folders_then_compaction(table: Table) -> None:
    a = lineitem(400, seed=1)
    b = lineitem(300, seed=2, key0=1000)
    load(table, a)
    load(table, b)
    everything = pa.concat_tables([a, b])
    cond = "l_quantity < 10 OR l_orderkey % 7 = 3"
    keys = sorted({k for k in everything["l_orderkey"].to_pylist() if k % 7 == 3})
    # the same condition as one the index binds (no Spark): the keys it names
    r = delete_rows(table, f"l_quantity < 10 OR l_orderkey IN ({', '.join(map(str, keys))})")
    assert r.deleted == everything.num_rows - len(_duck(everything, cond))
    deltas = [d for e in table.status.read().entries for d in e.delete_deltas]
    assert deltas and all("=" in d.data_file.split("/")[0] for d in deltas)  # in folders
    assert _rows(table) == _duck(everything, cond)
    assert _count(table) == len(_duck(everything, cond))
    compact(table, "custom", segment_ids=["0", "1"])
    assert _rows(table) == _duck(everything, cond)
    assert _count(table) == len(_duck(everything, cond))


def test_overwrite_of_a_partition_with_deleted_rows(table: Table) -> None:
    a = lineitem(400, seed=3, days=range(4))
    load(table, a)
    delete_rows(table, "l_quantity > 40")
    # replace day 0 and day 1 (deleted rows among them must not be subtracted twice)
    new = lineitem(50, seed=4, days=range(2), key0=5000)
    load(table, new, options={"overwrite_partitions": "true"})
    days = set(new["l_shipdate"].to_pylist())
    kept = a.filter(pa.array([d not in days for d in a["l_shipdate"].to_pylist()]))
    want = _duck(pa.concat_tables([kept, new.cast(kept.schema)]) , None)
    want = [w for w in want if not (w["l_orderkey"] < 5000 and w["l_quantity"] > 40)]
    assert _rows(table) == want
    assert _count(table) == len(want)
    compact(table, "custom", segment_ids=[e.load_name for e in table.status.read().entries
                                          if e.status == "Success"])
    assert _rows(table) == want
    assert _count(table) == len(want)
