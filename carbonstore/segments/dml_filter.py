"""The condition of a row-level DELETE / UPDATE / MERGE (docs/dml.md).

The JVM-free DELETE takes a WHERE the store's filter parser binds whole: the index prunes
with it and the row evaluator checks it row by row with Spark's semantics. Any other
condition (arithmetic, functions, column-to-column comparisons) is evaluated by Spark
(carbonstore/dml).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from carbonstore.expressions.bind import session_zone
from carbonstore.expressions.expr import Expr
from carbonstore.store.table import Table

__all__ = ["RowFilter", "row_filter"]


@dataclass(frozen=True, slots=True)
class RowFilter:
    """A DML condition the index and the row evaluator take whole."""

    expr: Expr
    time_zone: str = "UTC"  # Spark's session time zone (segments.timezones)


def row_filter(table: Table, where: str | Expr | None, *, time_zone: str = "UTC") -> RowFilter:
    """Bind ``where`` whole; timestamps without an offset are read in Spark's session time
    zone ``time_zone``.

    Raises:
        ExpressionError: it names an unknown column, does not parse, or is not a filter the
            parser binds (``carbonstore.dml`` evaluates those with Spark).
    """
    from carbonstore.pruning.plan import bind_where

    zone = session_zone(time_zone) or dt.UTC
    return RowFilter(bind_where(table, where, time_zone=zone), time_zone)
