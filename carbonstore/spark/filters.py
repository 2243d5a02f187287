"""Spark Python Data Source filters (``pyspark.sql.datasource``) -> pruning expressions.

Spark pushes a list of conjuncts. :func:`convert_filters` converts each one it can, bound to
the table schema, and reports which filters the conversion represents *exactly* (pruning
may still keep extra rows, so the reader returns every pushed filter to Spark unless the
plan is exact; see DESIGN.md section 9). Filters that cannot be converted (nested column
paths, StringEndsWith, StringContains, literals of a type the column cannot compare with)
are left for Spark to evaluate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import datasource as ds

from carbonstore.errors import ExpressionError
from carbonstore.indexfiles.expr import (
    AlwaysTrue,
    And,
    Eq,
    Expr,
    Gt,
    GtEq,
    In,
    IsNotNull,
    IsNull,
    Lt,
    LtEq,
    Not,
    Or,
    StartsWith,
    bind,
)
from carbonstore.store.schema import TableSchema

__all__ = ["ConvertedFilters", "convert_filter", "convert_filters"]

_COMPARISONS: dict[type, type] = {
    ds.EqualTo: Eq, ds.GreaterThan: Gt, ds.GreaterThanOrEqual: GtEq, ds.LessThan: Lt,
    ds.LessThanOrEqual: LtEq,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ConvertedFilters:
    """Result of :func:`convert_filters`.

    ``expr`` is the bound conjunction of every converted filter (``AlwaysTrue`` if none);
    ``converted`` / ``unsupported`` partition the input filters (in input order) by whether
    they take part in pruning; ``reasons`` says why each unsupported one was left out.
    """

    expr: Expr
    converted: tuple[ds.Filter, ...]
    unsupported: tuple[ds.Filter, ...]
    reasons: tuple[str, ...] = field(default=())


def _column(attribute: Sequence[str]) -> str:
    if len(attribute) != 1:
        raise ExpressionError(
            f"nested column {'.'.join(attribute)} cannot prune; only top-level columns can"
        )
    return attribute[0]


def convert_filter(f: ds.Filter) -> Expr:
    """Convert one Spark filter into an unbound expression with the same SQL semantics.

    ``EqualNullSafe(a, v)`` is never null, so it becomes ``a = v AND a IS NOT NULL`` (or
    ``a IS NULL`` for ``v = None``), which stays exact under ``Not``.

    Raises:
        ExpressionError: the filter has no equivalent (nested path, StringEndsWith, ...).
    """
    kind = type(f)
    if kind in _COMPARISONS:
        return _COMPARISONS[kind](_column(f.attribute), _literal(f.value))  # type: ignore[attr-defined]
    if isinstance(f, ds.EqualNullSafe):
        name = _column(f.attribute)
        if f.value is None:
            return IsNull(name)
        return And(Eq(name, _literal(f.value)), IsNotNull(name))
    if isinstance(f, ds.In):
        return In(_column(f.attribute), tuple(_literal(v) for v in f.value))
    if isinstance(f, ds.IsNull):
        return IsNull(_column(f.attribute))
    if isinstance(f, ds.IsNotNull):
        return IsNotNull(_column(f.attribute))
    if isinstance(f, ds.Not):
        return Not(convert_filter(f.child))
    if isinstance(f, ds.StringStartsWith):
        return StartsWith(_column(f.attribute), f.value)
    and_cls = getattr(ds, "And", None)  # not in pyspark 4.1-4.3; accepted if a release adds it
    or_cls = getattr(ds, "Or", None)
    if and_cls is not None and isinstance(f, and_cls):
        return And(convert_filter(f.left), convert_filter(f.right))  # type: ignore[attr-defined]
    if or_cls is not None and isinstance(f, or_cls):
        return Or(convert_filter(f.left), convert_filter(f.right))  # type: ignore[attr-defined]
    raise ExpressionError(f"{kind.__name__} cannot prune; Spark evaluates it after the scan")


def _literal(value: Any) -> Any:
    if isinstance(value, (list, dict, tuple)):
        raise ExpressionError(f"complex literal {value!r} cannot prune")
    return value


def convert_filters(filters: Sequence[ds.Filter], schema: TableSchema) -> ConvertedFilters:
    """Convert and bind the filters Spark pushes (a conjunction); never raises for one filter.

    A filter that cannot be converted or bound is reported in ``unsupported`` with the
    reason, and pruning proceeds with the others (dropping a conjunct only keeps more).
    """
    exprs: list[Expr] = []
    converted: list[ds.Filter] = []
    unsupported: list[ds.Filter] = []
    reasons: list[str] = []
    for f in filters:
        try:
            bound = bind(convert_filter(f), schema)
        except ExpressionError as err:
            unsupported.append(f)
            reasons.append(str(err))
            continue
        exprs.append(bound)
        converted.append(f)
    expr: Expr = AlwaysTrue()
    for e in exprs:
        expr = e if isinstance(expr, AlwaysTrue) else And(expr, e)
    return ConvertedFilters(
        expr=expr, converted=tuple(converted), unsupported=tuple(unsupported), reasons=tuple(reasons)
    )
