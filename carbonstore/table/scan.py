"""``Table.scan``: read a table into Arrow, pandas or DuckDB in this process, without a JVM.

::

    scan = table.scan(where="id = 42", columns=["id", "name"], as_of=7)
    scan.to_arrow()        # a pyarrow Table
    for batch in scan.to_batches():   # a RecordBatchReader: streaming, bounded memory
        ...
    scan.to_pandas(); scan.to_duckdb(con)

Exact by construction, because it is the Spark data source's read path run locally:

- the plan is the index's (``pruning.plan.prune``: segments, files, row groups, pages) on one
  tablestatus version (the newest, or ``as_of``'s);
- the row groups are read by :func:`carbonstore.segments.arrow_read.read_row_groups`, the
  reader of the ``carbonstore`` Spark data source: rows of delete deltas removed, files of
  older schema versions projected by column id (renamed, added, widened columns), dictionary
  columns decoded, the table's exact types and nullability;
- the condition is the one the index evaluator binds (``pruning.plan.bind_where``) and every
  row read is checked with :func:`carbonstore.pruning.rows.evaluate_rows` - Spark's
  semantics (three-valued logic, NaN greatest and equal to itself); the reader's narrowing
  only skips rows that cannot match.

A condition the evaluator does not bind (functions, arithmetic, column-to-column
comparisons) is refused in one line that points to Spark; the scan never guesses.
Memory: ``to_batches`` holds one batch of ``batch_rows`` rows (and one row group's filter
columns) at a time, whatever the table's size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from carbonstore.errors import ExpressionError, UserError
from carbonstore.expressions.bind import session_zone
from carbonstore.expressions.expr import AlwaysTrue, Expr
from carbonstore.expressions.sql_checks import unknown_column
from carbonstore.pruning.plan import TablePlan, bind_where, prune
from carbonstore.pruning.rows import evaluate_rows
from carbonstore.segments.arrow_read import (
    arrow_read_schema,
    plan_projections,
    plan_slices,
    read_row_groups,
)
from carbonstore.segments.timezones import process_time_zone
from carbonstore.store.table import Table

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TableScan"]

#: the size a group of slices is read in (the reader's per-task unit; memory stays per batch)
_GROUP_BYTES = 64 << 20


class TableScan:
    """A planned read of one table version: ``to_arrow``, ``to_batches``, ``to_pandas``,
    ``to_duckdb`` (pyiceberg's ``DataScan`` in spirit). Planning happens on first use."""

    def __init__(
        self,
        table: Table,
        *,
        where: str | None = None,
        columns: Sequence[str] | None = None,
        as_of: int | str | None = None,
        time_zone: str | None = None,
        batch_rows: int = 65536,
    ) -> None:
        self.table = table.as_of(as_of)
        self.where = where
        self.time_zone = time_zone or process_time_zone(table.store.conf)
        self.batch_rows = max(1, int(batch_rows))
        self.columns = _columns(self.table, columns)
        self.expr = _bind(self.table, where, self.time_zone)
        self._plan: TablePlan | None = None

    def __repr__(self) -> str:
        return (f"TableScan({self.table.name}, where={self.where!r}, columns={self.columns!r}, "
                f"version={self.table.pinned_version})")

    # ---- planning ---------------------------------------------------------------------------
    @property
    def plan(self) -> TablePlan:
        """The index's plan (segments, files, row groups, row ranges; ``.explain`` text)."""
        if self._plan is None:
            self._plan = prune(self.table, self.expr)
        return self._plan

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the rows returned (the selected columns, the table's types)."""
        full = arrow_read_schema(self.table)
        return pa.schema([full.field(n) for n in self.columns])

    # ---- reading ----------------------------------------------------------------------------
    def to_batches(self) -> pa.RecordBatchReader:
        """The matching rows as a stream of record batches (read as they are consumed)."""
        return pa.RecordBatchReader.from_batches(self.schema, self._batches())

    def to_arrow(self) -> pa.Table:
        """The matching rows as one pyarrow Table."""
        return pa.Table.from_batches(list(self._batches()), schema=self.schema)

    def to_pandas(self, **kwargs: Any) -> pd.DataFrame:
        """The matching rows as a pandas DataFrame (``kwargs`` go to ``Table.to_pandas``)."""
        return self.to_arrow().to_pandas(**kwargs)

    def to_duckdb(self, con: Any = None, *, name: str | None = None) -> Any:
        """The matching rows as a DuckDB relation of ``con`` (default: DuckDB's default
        connection); with ``name``, also registered there as a view of that name."""
        import duckdb

        con = con if con is not None else duckdb.default_connection()
        data = self.to_arrow()
        if name is not None:
            con.register(name, data)
            return con.table(name)
        return con.from_arrow(data)

    def count(self) -> int:
        """The number of matching rows (reads only what the condition needs)."""
        return sum(b.num_rows for b in self._batches())

    def _batches(self) -> Iterator[pa.RecordBatch]:
        plan = self.plan
        groups = plan_slices(plan, max_bytes=_GROUP_BYTES,
                             projections=plan_projections(self.table, plan))
        exact = None if isinstance(self.expr, AlwaysTrue) else self.expr
        names = self.columns
        everything = names == list(self.table.schema.column_names)
        for group in groups:
            for batch in read_row_groups(self.table, group, batch_rows=self.batch_rows,
                                         expr=exact):
                if exact is not None:
                    batch = _exact(exact, batch)
                    if not batch.num_rows:
                        continue
                yield batch if everything else batch.select(names)


def _exact(expr: Expr, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The rows of ``batch`` ``expr`` is TRUE for (struct fields seen as ``s.a`` columns)."""
    view = pa.Table.from_batches([batch])
    while any(pa.types.is_struct(f.type) for f in view.schema):
        view = view.flatten()
    mask = evaluate_rows(expr, view)
    return batch if mask.all() else batch.filter(pa.array(mask))


def _columns(table: Table, columns: Sequence[str] | None) -> list[str]:
    names = list(table.schema.column_names)
    if columns is None:
        return names
    if isinstance(columns, str):
        columns = [columns]
    out: list[str] = []
    for c in columns:
        name = str(c).strip().lower()
        if name not in names:
            raise UserError(f"scan of {table.name}: no column {c!r}; the table has "
                            f"{', '.join(names)}")
        if name not in out:
            out.append(name)
    return out


def _bind(table: Table, where: str | None, time_zone: str) -> Expr:
    """The bound condition, or one line saying it needs Spark."""
    if where is not None and not isinstance(where, str):
        raise UserError(f"scan of {table.name}: where must be a SQL condition string, got "
                        f"{type(where).__name__}")
    zone = session_zone(time_zone)
    if zone is None:
        raise UserError(f"scan of {table.name}: not a time zone: {time_zone!r}")
    try:
        return bind_where(table, where, time_zone=zone)
    except ExpressionError as err:
        # a condition DML splits into a bound part and a Spark SQL rest: the rest needs Spark
        # (the split's zone does not matter: only whether a rest exists)
        # an unknown column, or text Spark cannot read either, is the condition's mistake
        if not isinstance(where, str) or unknown_column(
                where, table.schema.column_names, table.name.table) is not None or \
                "parse" in str(err).lower():
            raise ExpressionError(f"scan of {table.name}: {err}") from None
    raise UserError(
        f"scan of {table.name}: {where} is not a condition the index evaluator binds (it "
        "takes a column compared with a literal, IN, IS [NOT] NULL, LIKE 'prefix%', "
        "AND/OR/NOT); run it in Spark: carbonstore.spark.api.to_spark(table, spark, "
        "where=...)")
