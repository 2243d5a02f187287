"""Loads and driver-local reads for the schema tests (no Spark)."""

from __future__ import annotations

import pyarrow as pa

from carbonstore import Store, Table
from carbonstore.pruning.plan import TablePlan, bind_where, prune
from carbonstore.pruning.rows import evaluate_rows
from carbonstore.segments.commit import begin_segment, commit_segment
from carbonstore.segments.compaction import write_settings
from carbonstore.segments.writer import arrow_schema, write_task
from carbonstore.spark.reader import (
    arrow_read_schema,
    plan_partitions,
    plan_projections,
    read_row_groups,
)


def load(table: Table, data: pa.Table | list[dict[str, object]]) -> str:
    """Load rows through the load writer and commit (the segment records its schema)."""
    settings = write_settings(table, "0")
    schema = arrow_schema(settings.columns)
    if isinstance(data, list):
        data = pa.Table.from_pylist(data, schema=schema)
    entry, lock = begin_segment(table)
    try:
        settings = write_settings(table, entry.load_name)
        result = write_task(data.cast(schema).to_batches(), settings, task_id="00000")
        commit_segment(table, entry.load_name, [result])
    finally:
        if lock is not None:
            lock.release()
    return entry.load_name


def reopen(table: Table) -> Table:
    return table.store.table(str(table.name))


def read(table: Table, where: str | None = None) -> tuple[pa.Table, TablePlan]:
    """The rows ``where`` selects (driver-local read path: plan, then read kept row groups)."""
    plan = prune(table, where)
    expr = bind_where(table, where) if where else None
    slices = [sl for part in plan_partitions(plan, projections=plan_projections(table, plan))
              for sl in part.slices]
    batches = list(read_row_groups(table, slices, expr=expr))
    rows = pa.Table.from_batches(batches, schema=arrow_read_schema(table))
    if expr is not None:  # the read keeps rows the filter may match; SQL keeps the TRUE ones
        view = rows
        while any(pa.types.is_struct(f.type) for f in view.schema):
            view = view.flatten()
        rows = rows.filter(pa.array(evaluate_rows(expr, view)))
    return rows, plan


__all__ = ["Store", "load", "read", "reopen"]
