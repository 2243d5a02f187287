"""Vectorised pruning: a bound expression against statistics arrays of many units at once.

A *unit* is a row group or a page fragment. :class:`UnitStats` holds one column's statistics
for ``n`` units as numpy arrays (see arrays.py for the representation). The visitor
:class:`StatsEvaluator` turns a bound, ``Not``-free expression (see expressions.bind) into a bool
mask of length ``n``: ``ROWS_MIGHT_MATCH`` where a unit may hold a matching row,
``ROWS_CANNOT_MATCH`` where the statistics prove that no row matches. Missing statistics
always mean "might match". Semantics (Spark): NaN = NaN, NaN is greater than every other
value, -0.0 = 0.0, nulls never satisfy a comparison. See docs/pruning.md.

Evaluation runs at increasing *levels* so that each drop is attributed to the first kind
of evidence that proves it: null/NaN counts, then min/max, then bloom filters.

The row-level filter (the oracle :func:`carbonstore.pruning.rows.evaluate_rows`) implements
the same semantics on real rows.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.errors import ExpressionError
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
from carbonstore.pruning.unit_stats import NP, SOURCE, Mask, UnitStats, comparable, exact_bytes
from carbonstore.store.ordering import prefix_successor

__all__ = [
    "LEVEL_BLOOM", "LEVEL_COUNTS", "LEVEL_MINMAX", "ROWS_CANNOT_MATCH", "ROWS_MIGHT_MATCH",
    "BloomProbe", "Mask", "StatsEvaluator", "UnitStats",
]

ROWS_MIGHT_MATCH = True
ROWS_CANNOT_MATCH = False

LEVEL_COUNTS = 0  # null_count / nan_count / num_rows only
LEVEL_MINMAX = 1  # plus min / max
LEVEL_BLOOM = 2  # plus bloom filters (row groups only)


# (expression leaf, candidate unit indices) -> mask over those candidates (True = might hold)
BloomProbe = Callable[[Expr, npt.NDArray[np.intp]], Mask]


def _cmp(values: NP, ok: Mask, op: Callable[[Any, Any], Any], literal: Any,
         usable: tuple[bool, bool] | None = None) -> Mask:
    """``op(values, literal)`` where ``ok``; True (might) elsewhere. Filler values are never read.
    ``usable``: (every unit ok, some unit ok), when the caller knows it (_usable)."""
    every, some = (bool(ok.all()) and len(ok) > 0, None) if usable is None else usable
    if not every and not (ok.any() if some is None else some):
        return np.ones(len(ok), dtype=bool)
    sel = values if every else values[ok]  # every bound usable: no gather
    # (object bounds: the literal boxed, else numpy 'S' would drop its trailing NULs;
    # fixed-width bytes bounds: as Python bytes unless numpy compares them exactly)
    sel, literal = comparable(sel, literal)
    got = np.asarray(op(sel, literal), dtype=bool)
    if every:
        return got if got is not sel and got.base is None else got.copy()  # a new array
    out = np.ones(len(ok), dtype=bool)
    out[ok] = got
    return out




def _derived(s: UnitStats, key: Any, compute: Callable[[UnitStats], Any]) -> Any:
    """The derived value ``key`` of ``s`` (a read-only mask or tuple of masks): kept in
    ``s.derived``; for units taken from another UnitStats, taken from its value (computed
    there once: every derived mask is computed unit by unit, so taking commutes)."""
    got = s.derived.get(key)
    if got is None:
        source = s.derived.get(SOURCE)
        if source is not None:
            parent, idx = source
            full = _derived(parent, key, compute)
            got = tuple(_frozen(m[idx]) for m in full) if isinstance(full, tuple) else _frozen(full[idx])
        else:
            got = compute(s)
        s.derived[key] = got
    return got


def _frozen(mask: Mask) -> Mask:
    """``mask`` made read-only (a derived mask is shared by later evaluations)."""
    mask.flags.writeable = False
    return mask


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


class StatsEvaluator(ExprVisitor[Mask]):
    """Visitor: one method per operator, each returning a "might match" mask over units.

    Args:
        size: number of units.
        stats_for: the statistics of a bound column, or None when there are none.
        level: LEVEL_COUNTS, LEVEL_MINMAX or LEVEL_BLOOM.
        bloom: at LEVEL_BLOOM, probes Eq / In leaves for the candidate units.
        alive: at LEVEL_BLOOM, units still alive after min/max (only those are probed).
        leaves: at LEVEL_MINMAX, filled with each leaf's mask (by the leaf's ``id``); at
            LEVEL_BLOOM, the masks an evaluation of the same expression at LEVEL_MINMAX left
            there: a leaf found in it is not evaluated again (its bloom probe only runs).
    """

    def __init__(
        self, size: int, stats_for: Callable[[BoundRef], UnitStats | None], *, level: int,
        bloom: BloomProbe | None = None, alive: Mask | None = None,
        leaves: dict[int, Mask] | None = None,
    ) -> None:
        self.size = size
        self.stats_for = stats_for
        self.level = level
        self.bloom = bloom
        self.alive = alive
        self.leaves = leaves

    def evaluate(self, expr: Expr) -> Mask:
        return self.visit(expr)

    def visit(self, expr: Expr) -> Mask:
        if self.level == LEVEL_COUNTS:
            flags = _COUNTS_FLAGS.get(type(expr))
            if flags is not None:
                return self._counts_leaf(expr, flags(expr))
        leaves = self.leaves
        if leaves is None or isinstance(expr, (And, Or)):
            return super().visit(expr)
        if self.level >= LEVEL_BLOOM:
            known = leaves.get(id(expr))
            if known is not None:  # min/max evidence is the same at both levels
                return self._probe(expr, known) if isinstance(expr, (Eq, In)) else known
            return super().visit(expr)
        out = super().visit(expr)
        if self.level == LEVEL_MINMAX:
            leaves[id(expr)] = out
        return out

    def visit_unknown(self, expr: Expr) -> Mask:
        raise ExpressionError(f"cannot evaluate {expr} against statistics")

    def _counts_leaf(self, expr: Expr, flags: Any) -> Mask:
        """A leaf at LEVEL_COUNTS: its mask depends on the column's statistics and on
        ``flags`` (whether its literals are NaN; see _COUNTS_FLAGS) only - no bound is usable
        at this level - so it is kept with the statistics (``UnitStats.derived``) and a new
        literal of the same kind costs a lookup (read-only, like every derived mask)."""
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())

        def compute(st: UnitStats) -> Mask:
            ev = StatsEvaluator(st.size, lambda _ref: st, level=LEVEL_COUNTS)
            return _frozen(np.array(ExprVisitor.visit(ev, expr), dtype=bool))

        return _derived(s, ("counts", type(expr), flags), compute)  # type: ignore[no-any-return]

    # ---- connectives --------------------------------------------------------------------
    def visit_always_true(self, expr: AlwaysTrue) -> Mask:
        return np.full(self.size, ROWS_MIGHT_MATCH)

    def visit_always_false(self, expr: AlwaysFalse) -> Mask:
        return np.full(self.size, ROWS_CANNOT_MATCH)

    # A chain of one connective is evaluated in a loop: recursion only where they alternate.
    def visit_and(self, expr: And) -> Mask:
        first, *rest = flatten(expr)
        out = self.evaluate(first)
        for e in rest:
            out = out & self.evaluate(e)
        return out

    def visit_or(self, expr: Or) -> Mask:
        first, *rest = flatten(expr)
        out = self.evaluate(first)
        for e in rest:
            out = out | self.evaluate(e)
        return out

    def visit_not(self, expr: Not) -> Mask:
        raise ExpressionError("bind the expression first: NOT must be pushed down to the leaves")

    # ---- evidence helpers ---------------------------------------------------------------
    def _stats(self, expr: Any) -> UnitStats | None:
        term = expr.term
        if not isinstance(term, BoundRef):
            raise ExpressionError(f"bind the expression before pruning: {expr}")
        return self.stats_for(term)

    @property
    def _minmax(self) -> bool:
        return self.level >= LEVEL_MINMAX

    # The masks below depend on the statistics (and the level) only: each is computed once
    # per UnitStats and kept read-only in ``s.derived`` (callers combine them into new arrays).
    @staticmethod
    def _nonnull(s: UnitStats) -> Mask:
        """Some non-null value may exist."""
        return _derived(s, "nonnull",  # type: ignore[no-any-return]
                        lambda s: _frozen(~((s.null_count == s.num_rows) | s.null_unit)))

    @staticmethod
    def _has_null(s: UnitStats) -> Mask:
        return _derived(s, "has_null",  # type: ignore[no-any-return]
                        lambda s: _frozen((s.null_count != 0) | s.null_unit))

    def _nan_possible(self, s: UnitStats) -> Mask:
        return _derived(s, ("nan_possible", self._minmax),  # type: ignore[no-any-return]
                        lambda s: _frozen(self._nan_possible_now(s)))

    def _nan_possible_now(self, s: UnitStats) -> Mask:
        if not s.floating:
            return np.zeros(s.size, dtype=bool)
        out = s.nan_count != 0
        if self._minmax:
            out = out | _cmp(s.lo, s.lo_ok, lambda a, _: np.isnan(a), None) & s.lo_ok
        return out

    def _nonnan_possible(self, s: UnitStats) -> Mask:
        """Some non-null, non-NaN value may exist."""
        return _derived(s, ("nonnan_possible", self._minmax),  # type: ignore[no-any-return]
                        lambda s: _frozen(self._nonnan_possible_now(s)))

    def _nonnan_possible_now(self, s: UnitStats) -> Mask:
        if not s.floating:
            return self._nonnull(s)
        known = (s.null_count >= 0) & (s.nan_count >= 0)
        out = self._nonnull(s) & ~(known & (s.null_count + s.nan_count == s.num_rows))
        if self._minmax:  # min = max = NaN: every non-null value is NaN (PARQUET-2249)
            both = s.lo_ok & s.hi_ok
            out &= ~(both & _cmp(s.lo, both, lambda a, _: np.isnan(a), None)
                     & _cmp(s.hi, both, lambda a, _: np.isnan(a), None))
        return out

    def _bound_ok(self, s: UnitStats) -> tuple[Mask, Mask]:
        return _derived(s, ("bound_ok", self._minmax),  # type: ignore[no-any-return]
                        lambda s: tuple(_frozen(m) for m in self._bound_ok_now(s)))

    def _bound_ok_now(self, s: UnitStats) -> tuple[Mask, Mask]:
        if not self._minmax:
            none = np.zeros(s.size, dtype=bool)
            return none, none
        if s.floating:  # a NaN bound says nothing about the non-NaN range
            lo_ok = s.lo_ok & ~_cmp(s.lo, s.lo_ok, lambda a, _: np.isnan(a), None)
            hi_ok = s.hi_ok & ~_cmp(s.hi, s.hi_ok, lambda a, _: np.isnan(a), None)
            return lo_ok, hi_ok
        return s.lo_ok.copy(), s.hi_ok.copy()

    @staticmethod
    def _unbounded(s: UnitStats) -> Mask:
        """All True: what a comparison with the bounds gives where none is usable (at
        LEVEL_COUNTS none is: callers combine it, never write to it)."""
        return _derived(s, "unbounded",  # type: ignore[no-any-return]
                        lambda s: _frozen(np.ones(s.size, dtype=bool)))

    def _usable(self, s: UnitStats) -> tuple[tuple[bool, bool], tuple[bool, bool], bool]:
        """Of :meth:`_bound_ok`'s masks: (every unit, some unit) usable, for the lower and the
        upper bound; and whether some upper bound is strict - kept with the statistics (a
        new literal compares with the same bounds)."""
        key = ("usable", self._minmax)
        got = s.derived.get(key)
        if got is None:
            source = s.derived.get(SOURCE)
            if source is not None:  # every bound of the units taken from is usable, none
                whole = self._usable(source[0])  # strict: so are those of any units taken
                if whole == ((True, True), (True, True), False) and len(source[1]):
                    s.derived[key] = whole
                    return whole
            lo_ok, hi_ok = self._bound_ok(s)
            n = len(lo_ok) > 0
            got = s.derived[key] = ((bool(lo_ok.all()) and n, bool(lo_ok.any())),
                                    (bool(hi_ok.all()) and n, bool(hi_ok.any())), bool(s.hi_strict.any()))
        return got  # type: ignore[no-any-return]

    def _some_le(self, s: UnitStats, v: Any) -> Mask:
        """Some non-NaN value may be <= v."""
        if not self._minmax:
            return self._unbounded(s)
        lo_ok, _ = self._bound_ok(s)
        return _cmp(s.lo, lo_ok, operator.le, v, self._usable(s)[0])

    def _some_lt(self, s: UnitStats, v: Any) -> Mask:
        if not self._minmax:
            return self._unbounded(s)
        lo_ok, _ = self._bound_ok(s)
        return _cmp(s.lo, lo_ok, operator.lt, v, self._usable(s)[0])

    def _some_ge(self, s: UnitStats, v: Any) -> Mask:
        if not self._minmax:
            return self._unbounded(s)
        _, hi_ok = self._bound_ok(s)
        _, usable, strict = self._usable(s)
        ge = _cmp(s.hi, hi_ok, operator.ge, v, usable)
        if strict:  # values lie strictly below a strict bound
            gt = _cmp(s.hi, hi_ok, operator.gt, v, usable)
            ge = np.where(s.hi_strict, gt, ge)
        return ge

    def _some_gt(self, s: UnitStats, v: Any) -> Mask:
        if not self._minmax:
            return self._unbounded(s)
        _, hi_ok = self._bound_ok(s)
        return _cmp(s.hi, hi_ok, operator.gt, v, self._usable(s)[1])

    def _all_equal(self, s: UnitStats, v: Any) -> Mask:
        """Every non-NaN value equals v (bounds meet at v)."""
        lo_ok, hi_ok = self._bound_ok(s)
        both = lo_ok & hi_ok & ~s.hi_strict
        return both & _cmp(s.lo, both, lambda a, b: a == b, v) & _cmp(s.hi, both, lambda a, b: a == b, v)

    def _eq_mask(self, s: UnitStats, v: Any) -> Mask:
        if _is_nan(v):
            return self._nonnull(s) & self._nan_possible(s)
        return self._nonnan_possible(s) & self._some_le(s, v) & self._some_ge(s, v)

    def _probe(self, expr: Expr, mask: Mask) -> Mask:
        if self.level < LEVEL_BLOOM or self.bloom is None:
            return mask
        cand = mask if self.alive is None else mask & self.alive
        idx = np.flatnonzero(cand)
        if len(idx) == 0:
            return mask
        out = mask.copy()
        out[idx] = self.bloom(expr, idx)
        return out

    # ---- leaves -------------------------------------------------------------------------
    def visit_eq(self, expr: Eq) -> Mask:
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())
        return self._probe(expr, self._eq_mask(s, expr.literal))

    def visit_not_eq(self, expr: NotEq) -> Mask:
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())
        v = expr.literal
        if _is_nan(v):
            return self._nonnan_possible(s)
        return self._nonnull(s) & (self._nan_possible(s) | (self._nonnan_possible(s) & ~self._all_equal(s, v)))

    def visit_lt(self, expr: Lt) -> Mask:
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())
        if _is_nan(expr.literal):
            return self._nonnan_possible(s)
        return self._nonnan_possible(s) & self._some_lt(s, expr.literal)

    def visit_lt_eq(self, expr: LtEq) -> Mask:
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())
        if _is_nan(expr.literal):
            return self._nonnull(s)
        return self._nonnan_possible(s) & self._some_le(s, expr.literal)

    def visit_gt(self, expr: Gt) -> Mask:
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())
        if _is_nan(expr.literal):
            return self.visit_always_false(AlwaysFalse())
        nan = self._nonnull(s) & self._nan_possible(s)
        return nan | (self._nonnan_possible(s) & self._some_gt(s, expr.literal))

    def visit_gt_eq(self, expr: GtEq) -> Mask:
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())
        nan = self._nonnull(s) & self._nan_possible(s)
        if _is_nan(expr.literal):
            return nan
        return nan | (self._nonnan_possible(s) & self._some_ge(s, expr.literal))

    def visit_in(self, expr: In) -> Mask:
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())
        lits = [v for v in expr.literals if not _is_nan(v)]
        out = np.zeros(s.size, dtype=bool)
        if len(lits) < len(expr.literals):
            out |= self._eq_mask(s, math.nan)
        if lits:
            out |= self._nonnan_possible(s) & self._any_in_range(s, lits)
        return self._probe(expr, out)

    def _any_in_range(self, s: UnitStats, lits: list[Any]) -> Mask:
        """Some literal lies within [lo, hi] (vectorised with two binary searches)."""
        arr = np.empty(len(lits), dtype=object)
        arr[:] = sorted(lits)
        s_lo, s_hi = s.lo, s.hi
        if s_lo.dtype.kind == "S" or s_hi.dtype.kind == "S":  # fixed-width bytes: exact
            if s_lo.dtype.kind == s_hi.dtype.kind == "S" and all(map(exact_bytes, lits)):
                width = max(s_lo.dtype.itemsize, s_hi.dtype.itemsize, *map(len, lits))
                arr = arr.astype(f"S{width}")
            else:  # (comparable: searched as Python bytes)
                s_lo, s_hi = s_lo.astype(object), s_hi.astype(object)
        elif s_lo.dtype != object:
            arr = arr.astype(s_lo.dtype)
        lo_ok, hi_ok = self._bound_ok(s)
        i = np.zeros(s.size, dtype=np.intp)
        j = np.full(s.size, len(arr), dtype=np.intp)
        if lo_ok.any():
            i[lo_ok] = np.searchsorted(arr, s_lo[lo_ok], side="left")
        if hi_ok.any():
            strict = s.hi_strict[hi_ok]
            hi = s_hi[hi_ok]
            j[hi_ok] = np.where(strict, np.searchsorted(arr, hi, side="left"),
                                np.searchsorted(arr, hi, side="right"))
        return j > i

    def visit_not_in(self, expr: NotIn) -> Mask:
        out = np.ones(self.size, dtype=bool)
        for v in expr.literals:  # x NOT IN (a, b) = x <> a AND x <> b
            out &= self.visit_not_eq(NotEq(expr.term, v))
        return out

    def visit_is_null(self, expr: IsNull) -> Mask:
        s = self._stats(expr)
        return self.visit_always_true(AlwaysTrue()) if s is None else self._has_null(s)

    def visit_is_not_null(self, expr: IsNotNull) -> Mask:
        s = self._stats(expr)
        return self.visit_always_true(AlwaysTrue()) if s is None else self._nonnull(s)

    def visit_is_nan(self, expr: IsNaN) -> Mask:
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())
        return self._nonnull(s) & self._nan_possible(s)

    def visit_not_nan(self, expr: NotNaN) -> Mask:
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())
        return self._has_null(s) | self._nonnan_possible(s)

    def visit_starts_with(self, expr: StartsWith) -> Mask:
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())
        p = expr.prefix
        succ = prefix_successor(p)
        out = self._nonnull(s) & self._some_ge(s, p)
        return out if succ is None else out & self._some_lt(s, succ)

    def visit_not_starts_with(self, expr: NotStartsWith) -> Mask:
        s = self._stats(expr)
        if s is None:
            return self.visit_always_true(AlwaysTrue())
        p = expr.prefix
        succ = prefix_successor(p)
        if succ is None:
            return self._nonnull(s)
        lo_ok, hi_ok = self._bound_ok(s)
        # every value starts with p when p <= lo and hi < succ(p) (hi <= succ(p) if strict)
        all_prefixed = (
            lo_ok & hi_ok & _cmp(s.lo, lo_ok, lambda a, b: a >= b, p)
            & np.where(s.hi_strict, _cmp(s.hi, hi_ok, lambda a, b: a <= b, succ),
                       _cmp(s.hi, hi_ok, lambda a, b: a < b, succ))
        )
        return self._nonnull(s) & ~all_prefixed


def _nan_flag(expr: Any) -> bool:
    return _is_nan(expr.literal)


def _nan_flags(expr: Any) -> tuple[bool, bool]:
    nans = sum(1 for v in expr.literals if _is_nan(v))
    return nans > 0, nans < len(expr.literals)


def _no_flags(expr: Any) -> bool:
    return False


#: leaf class -> what its LEVEL_COUNTS mask depends on besides the statistics: at that level
#: every bound comparison is "might" (``_unbounded``, ``_bound_ok`` all False), so only
#: whether a literal is NaN (and for a list, whether one is and one is not) chooses the
#: formula; a prefix never matters (``_some_ge`` / ``_some_lt`` are all True, and
#: ``NotStartsWith``'s all-prefixed test needs bounds)
_COUNTS_FLAGS: dict[type[Expr], Callable[[Any], Any]] = {
    Eq: _nan_flag, NotEq: _nan_flag, Lt: _nan_flag, LtEq: _nan_flag, Gt: _nan_flag,
    GtEq: _nan_flag, In: _nan_flags, NotIn: _nan_flags, IsNull: _no_flags,
    IsNotNull: _no_flags, IsNaN: _no_flags, NotNaN: _no_flags, StartsWith: _no_flags,
    NotStartsWith: _no_flags,
}
