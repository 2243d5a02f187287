"""The condition of a row-level DELETE / UPDATE / MERGE (docs/dml.md).

A WHERE is split into the conjuncts the store's filter parser binds - the index prunes with
them and the row evaluator checks them row by row with Spark's semantics - and the rest
(arithmetic, functions, column-to-column comparisons), which DuckDB evaluates as Spark SQL
on the rows the first part keeps (``segments.merge.filter_mask``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from carbonstore.expressions.expr import AlwaysTrue, Expr
from carbonstore.store.table import Table

__all__ = ["RowFilter", "row_filter"]


@dataclass(frozen=True, slots=True)
class RowFilter:
    """A DML condition: the conjuncts the index and the row evaluator take (``expr``) and
    the rest (``residual``, Spark SQL evaluated by DuckDB on the rows ``expr`` keeps)."""

    expr: Expr
    residual: str | None = None
    time_zone: str = "UTC"  # Spark's session time zone (segments.timezones)


def _residual_error(err: Exception) -> bool:
    """The filter parser cannot bind the conjunct, but Spark SQL may evaluate it (a function
    or arithmetic where the parser wants a column or a literal)."""
    return any(k in str(err) for k in ("compare a column with a literal", "expected a column name"))


def row_filter(table: Table, where: str | Expr | None, *, time_zone: str = "UTC") -> RowFilter:
    """Split ``where`` into the conjuncts the store's filter parser binds and the rest
    (arithmetic, functions, column-to-column comparisons: ``id % 8 = 0``); timestamps
    without an offset are read in Spark's session time zone ``time_zone``.

    Raises:
        ExpressionError: a conjunct names an unknown column or the text does not parse.
    """
    from carbonstore.errors import ExpressionError
    from carbonstore.expressions.bind import session_zone
    from carbonstore.expressions.expr import And
    from carbonstore.pruning.plan import bind_where
    from carbonstore.segments.timezones import duckdb_zone

    duckdb_zone(time_zone)  # a zone DuckDB cannot name is a user error here
    zone = session_zone(time_zone) or dt.UTC
    if where is None or not isinstance(where, str):
        return RowFilter(bind_where(table, where, time_zone=zone), None, time_zone)
    try:
        return RowFilter(bind_where(table, where, time_zone=zone), None, time_zone)
    except ExpressionError as err:
        if not _residual_error(err):
            raise
    import sqlglot

    from carbonstore.expressions.parser import and_terms

    terms = and_terms(sqlglot.parse_one(where, read="spark"))
    bound: Expr = AlwaysTrue()
    rest: list[str] = []
    for term in terms:
        text = term.sql(dialect="spark")
        try:
            e = bind_where(table, text, time_zone=zone)
        except ExpressionError as err:
            if not _residual_error(err):
                raise
            rest.append(f"({text})")
            continue
        bound = e if isinstance(bound, AlwaysTrue) else And(bound, e)
    return RowFilter(bound, " AND ".join(rest) or None, time_zone)
