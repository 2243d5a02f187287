"""The dual of the pruning evaluator: units whose statistics prove that EVERY row matches.

:class:`AllRowsEvaluator` returns ``ROWS_ALL_MATCH`` where a unit's min/max, null and NaN
counts prove that each of its rows satisfies the bound, ``Not``-free expression (TRUE, not
NULL), so a metadata answer (answers.py) may count or aggregate the unit from its
statistics alone. Missing statistics mean "some row may fail".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from carbonstore.expressions.expr import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundRef,
    Eq,
    Expr,
    Gt,
    GtEq,
    In,
    IsNaN,
    IsNotNull,
    IsNull,
    Lt,
    LtEq,
    Not,
    NotEq,
    NotIn,
    NotNaN,
    NotStartsWith,
    Or,
    StartsWith,
    flatten,
)
from carbonstore.expressions.visitors import ExprVisitor
from carbonstore.pruning.evaluator import Mask, UnitStats
from carbonstore.pruning.unit_stats import comparable
from carbonstore.store.ordering import prefix_successor

__all__ = ["ROWS_ALL_MATCH", "ROWS_SOME_MAY_FAIL", "AllRowsEvaluator"]

ROWS_ALL_MATCH = True  # AllRowsEvaluator: every row of the unit satisfies the filter
ROWS_SOME_MAY_FAIL = False


def _cmp(values: Any, ok: Mask, op: Callable[[Any, Any], Any], literal: Any) -> Mask:
    """``op(values, literal)`` where ``ok``; False (not proved) elsewhere."""
    out = np.zeros(len(ok), dtype=bool)
    if ok.any():
        sel, literal = comparable(values[ok], literal)  # (exact for every kind of bounds)
        with np.errstate(invalid="ignore"):
            out[ok] = np.asarray(op(sel, literal), dtype=bool)
    return out


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


class AllRowsEvaluator(ExprVisitor[Mask]):
    """Visitor: a mask over units, ``ROWS_ALL_MATCH`` where the statistics prove that every
    row of the unit satisfies the bound, ``Not``-free expression (TRUE, not NULL).

    The dual of :class:`carbonstore.pruning.evaluator.StatsEvaluator`; missing statistics
    mean "some row may fail". Valid bounds suffice (an inexact string minimum is still below
    every value, a strict maximum above every value).
    """

    def __init__(self, size: int, stats_for: Callable[[BoundRef], UnitStats | None]) -> None:
        self.size = size
        self.stats_for = stats_for

    def evaluate(self, expr: Expr) -> Mask:
        return self.visit(expr)

    # ---- connectives ------------------------------------------------------------------------
    def visit_unknown(self, expr: Expr) -> Mask:
        return np.full(self.size, ROWS_SOME_MAY_FAIL)

    def visit_always_true(self, expr: AlwaysTrue) -> Mask:
        return np.full(self.size, ROWS_ALL_MATCH)

    def visit_always_false(self, expr: AlwaysFalse) -> Mask:
        return np.full(self.size, ROWS_SOME_MAY_FAIL)

    def visit_and(self, expr: And) -> Mask:
        first, *rest = flatten(expr)
        out = self.evaluate(first)
        for e in rest:
            out = out & self.evaluate(e)
        return out

    def visit_or(self, expr: Or) -> Mask:
        first, *rest = flatten(expr)
        out = self.evaluate(first)
        for e in rest:  # an OR matches whole where one side does (sufficient, not necessary)
            out = out | self.evaluate(e)
        return out

    def visit_not(self, expr: Not) -> Mask:  # bound expressions hold no Not
        return self.visit_unknown(expr)

    # ---- leaves: the column's statistics, then the operator's evidence ----------------------
    def _on_stats(self, expr: Any, leaf: Callable[[Any, UnitStats], Mask]) -> Mask:
        term = getattr(expr, "term", None)
        if not isinstance(term, BoundRef):
            return np.full(self.size, ROWS_SOME_MAY_FAIL)
        s = self.stats_for(term)
        if s is None:
            return np.full(self.size, ROWS_SOME_MAY_FAIL)
        return leaf(expr, s)

    def visit_eq(self, expr: Eq) -> Mask:
        return self._on_stats(expr, self.eq)

    def visit_not_eq(self, expr: NotEq) -> Mask:
        return self._on_stats(expr, self.not_eq)

    def visit_lt(self, expr: Lt) -> Mask:
        return self._on_stats(expr, self.lt)

    def visit_lt_eq(self, expr: LtEq) -> Mask:
        return self._on_stats(expr, self.lt_eq)

    def visit_gt(self, expr: Gt) -> Mask:
        return self._on_stats(expr, self.gt)

    def visit_gt_eq(self, expr: GtEq) -> Mask:
        return self._on_stats(expr, self.gt_eq)

    def visit_in(self, expr: In) -> Mask:
        return self._on_stats(expr, self.in_)

    def visit_not_in(self, expr: NotIn) -> Mask:
        return self._on_stats(expr, self.not_in)

    def visit_is_null(self, expr: IsNull) -> Mask:
        return self._on_stats(expr, self.is_null)

    def visit_is_not_null(self, expr: IsNotNull) -> Mask:
        return self._on_stats(expr, self.is_not_null)

    def visit_is_nan(self, expr: IsNaN) -> Mask:
        return self._on_stats(expr, self.is_nan)

    def visit_not_nan(self, expr: NotNaN) -> Mask:
        return self._on_stats(expr, self.not_nan)

    def visit_starts_with(self, expr: StartsWith) -> Mask:
        return self._on_stats(expr, self.starts_with)

    def visit_not_starts_with(self, expr: NotStartsWith) -> Mask:
        return self._on_stats(expr, self.not_starts_with)

    # ---- evidence ---------------------------------------------------------------------------
    @staticmethod
    def _no_null(s: UnitStats) -> Mask:
        return (s.null_count == 0) & ~s.null_unit

    @staticmethod
    def _no_nan(s: UnitStats) -> Mask:
        return s.nan_count == 0 if s.floating else np.ones(s.size, dtype=bool)

    @staticmethod
    def _all_nan(s: UnitStats) -> Mask:
        """Every row is NaN (with _no_null)."""
        return (s.nan_count == s.num_rows) if s.floating else np.zeros(s.size, dtype=bool)

    @staticmethod
    def _bounds(s: UnitStats) -> tuple[Mask, Mask]:
        """Where lo / hi bound the non-NaN values (a NaN bound: only NaN values)."""
        if not s.floating:
            return s.lo_ok, s.hi_ok
        lo_ok = s.lo_ok & ~_cmp(s.lo, s.lo_ok, lambda a, _: np.isnan(a), None)
        hi_ok = s.hi_ok & ~_cmp(s.hi, s.hi_ok, lambda a, _: np.isnan(a), None)
        return lo_ok, hi_ok

    def _all_above(self, s: UnitStats, v: Any, *, strict: bool) -> Mask:
        """Every non-NaN value is > v (``strict``) or >= v."""
        lo_ok, _ = self._bounds(s)
        return _cmp(s.lo, lo_ok, (lambda a, b: a > b) if strict else (lambda a, b: a >= b), v)

    def _all_below(self, s: UnitStats, v: Any, *, strict: bool) -> Mask:
        """Every non-NaN value is < v (``strict``) or <= v."""
        _, hi_ok = self._bounds(s)
        below = _cmp(s.hi, hi_ok, (lambda a, b: a < b) if strict else (lambda a, b: a <= b), v)
        # values lie strictly below a strict bound: hi <= v proves < v
        return np.where(s.hi_strict, _cmp(s.hi, hi_ok, lambda a, b: a <= b, v), below)

    # ---- leaves -----------------------------------------------------------------------------
    def eq(self, expr: Eq, s: UnitStats) -> Mask:
        v = expr.literal
        if _is_nan(v):
            return self._no_null(s) & self._all_nan(s)
        lo_ok, hi_ok = self._bounds(s)
        both = lo_ok & hi_ok & ~s.hi_strict
        return (self._no_null(s) & self._no_nan(s) & _cmp(s.lo, both, lambda a, b: a == b, v)
                & _cmp(s.hi, both, lambda a, b: a == b, v))

    def not_eq(self, expr: NotEq, s: UnitStats) -> Mask:
        v = expr.literal
        if _is_nan(v):
            return self._no_null(s) & self._no_nan(s)
        # NaN rows differ from every number
        return self._no_null(s) & (self._all_above(s, v, strict=True)
                                   | self._all_below(s, v, strict=True) | self._all_nan(s))

    def lt(self, expr: Lt, s: UnitStats) -> Mask:
        if _is_nan(expr.literal):  # every number is below NaN
            return self._no_null(s) & self._no_nan(s)
        return self._no_null(s) & self._no_nan(s) & self._all_below(s, expr.literal, strict=True)

    def lt_eq(self, expr: LtEq, s: UnitStats) -> Mask:
        if _is_nan(expr.literal):
            return self._no_null(s)
        return self._no_null(s) & self._no_nan(s) & self._all_below(s, expr.literal, strict=False)

    def gt(self, expr: Gt, s: UnitStats) -> Mask:
        if _is_nan(expr.literal):
            return np.full(s.size, ROWS_SOME_MAY_FAIL)
        # NaN rows are greater than every number
        return self._no_null(s) & (self._all_above(s, expr.literal, strict=True) | self._all_nan(s))

    def gt_eq(self, expr: GtEq, s: UnitStats) -> Mask:
        if _is_nan(expr.literal):
            return self._no_null(s) & self._all_nan(s)
        return self._no_null(s) & (self._all_above(s, expr.literal, strict=False) | self._all_nan(s))

    def in_(self, expr: In, s: UnitStats) -> Mask:
        out = np.zeros(s.size, dtype=bool)
        if any(v is None for v in expr.literals):
            return out
        for v in expr.literals:  # every row holds one and the same listed value
            out |= self.eq(Eq(expr.term, v), s)
        return out

    def not_in(self, expr: NotIn, s: UnitStats) -> Mask:
        out = self._no_null(s)
        if any(v is None for v in expr.literals):
            return np.zeros(s.size, dtype=bool)
        for v in expr.literals:
            out &= self.not_eq(NotEq(expr.term, v), s)
        return out

    def is_null(self, expr: IsNull, s: UnitStats) -> Mask:
        return (s.null_count == s.num_rows) | s.null_unit

    def is_not_null(self, expr: IsNotNull, s: UnitStats) -> Mask:
        return self._no_null(s)

    def is_nan(self, expr: IsNaN, s: UnitStats) -> Mask:
        return self._no_null(s) & self._all_nan(s)

    def not_nan(self, expr: NotNaN, s: UnitStats) -> Mask:
        return self._no_null(s) & self._no_nan(s)

    def starts_with(self, expr: StartsWith, s: UnitStats) -> Mask:
        p = expr.prefix
        out = self._no_null(s) & self._all_above(s, p, strict=False)
        succ = prefix_successor(p)
        return out if succ is None else out & self._all_below(s, succ, strict=True)

    def not_starts_with(self, expr: NotStartsWith, s: UnitStats) -> Mask:
        p = expr.prefix
        out = self._all_below(s, p, strict=True)  # a string that starts with p is >= p
        succ = prefix_successor(p)
        if succ is not None:
            out = out | self._all_above(s, succ, strict=False)
        return self._no_null(s) & out
