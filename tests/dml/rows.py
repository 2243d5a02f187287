"""Helpers of the DML tests: load rows without Spark, read a table's live rows."""

from __future__ import annotations

import pyarrow as pa

from carbonstore.pruning.plan import prune
from carbonstore.segments.compaction import write_segment
from carbonstore.store import LoadEntry, Table
from carbonstore.store.tablestatus import SUCCESS

SCHEMA = "id long not null, name string, score double"


def rows(ids: list[int] | range, *, tag: str = "n") -> pa.Table:
    ids = list(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([None if i % 11 == 0 else f"{tag}{i % 7}" for i in ids], pa.string()),
        "score": pa.array([i / 4 for i in ids], pa.float64()),
    })


def load(table: Table, data: pa.Table, *, tasks: int = 1) -> LoadEntry:
    """Write and commit one segment as a load does (no Spark)."""
    if table.schema.dictionary_columns:  # values must be encoded: the DML insert path does it
        from carbonstore.segments.dml import insert_rows

        sid = insert_rows(table, data).inserted_segment
        assert sid is not None
        return table.status.read().get(sid)
    entry = table.status.allocate()
    step = max(1, -(-data.num_rows // tasks))
    parts = [data.slice(i, step).to_batches() for i in range(0, data.num_rows, step)]
    out = write_segment(table, entry.load_name, parts)
    return table.status.set_status(
        entry.load_name, SUCCESS, timestamp=entry.load_start_time + 1, row_count=out.row_count,
        data_size=out.data_size, index_size=out.index_size, segment_file=out.segment_file,
    )


def read_live(table: Table, where: str | None = None) -> pa.Table:
    """The table's rows through the driver-local read path (plan + read_row_groups), sorted."""
    from carbonstore.spark.reader import arrow_read_schema, plan_partitions, read_row_groups

    plan = prune(table, where)
    slices = [s for p in plan_partitions(plan) for s in p.slices]
    got = pa.Table.from_batches(list(read_row_groups(table, slices, expr=plan.expr if where else None)),
                                schema=arrow_read_schema(table))
    return got.sort_by([("id", "ascending"), ("name", "ascending"), ("score", "ascending")])


def ids(table: Table, where: str | None = None) -> list[int]:
    return sorted(read_live(table, where)["id"].to_pylist())
