"""The statistics visitor on hand-built statistics: what pyarrow never writes.

pyarrow writes no nan_count, no truncated (inexact) bounds and no NaN bounds, so this file
builds :class:`UnitStats` directly from random units of values (known or forgotten counts,
NaN-only units with min = max = NaN, loose numeric bounds, string bounds truncated the
Parquet way or merely cut) and checks soundness against the row oracle, plus table-driven
cases for the rules in docs/pruning.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.errors import ExpressionError
from carbonstore.expressions.bind import bind
from carbonstore.expressions.expr import (
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
    Or,
    StartsWith,
)
from carbonstore.pruning.evaluator import (
    LEVEL_COUNTS,
    LEVEL_MINMAX,
    ROWS_CANNOT_MATCH,
    ROWS_MIGHT_MATCH,
    StatsEvaluator,
    UnitStats,
)
from carbonstore.pruning.planner import level_masks
from carbonstore.pruning.rows import evaluate_rows
from carbonstore.store.ordering import prefix_successor
from carbonstore.store.records import replace
from carbonstore.store.schema import Column, DataType, TableSchema

_KINDS = {
    "long": (DataType("long"), pa.int64(), st.integers(-4, 4)),
    "double": (DataType("double"), pa.float64(),
               st.sampled_from([-1.5, -0.0, 0.0, 1.0, 2.5, math.inf, -math.inf, math.nan])),
    "string": (DataType("string"), pa.string(),
               st.sampled_from(["", "a", "a\x00", "ab", "abc", "abd", "b", "\u00e9", "\U0010ffff", "a\U0010ffff"])),
}


def _schema(kind: str) -> TableSchema:
    return TableSchema(database="db", table="t", columns=(Column(name="x", type=_KINDS[kind][0]),))


def _comparable(kind: str, v: Any) -> Any:
    return v.encode() if kind == "string" else v


class _Raw:
    """The attributes UnitStats.from_arrays reads from ColumnArrays / PageArrays."""

    def __init__(self, n: int, obj: bool, dtype: Any) -> None:
        self.min = np.empty(n, dtype=object) if obj else np.zeros(n, dtype=dtype)
        self.max = self.min.copy()
        self.has_min = np.zeros(n, bool)
        self.has_max = np.zeros(n, bool)
        self.min_exact = np.zeros(n, bool)
        self.max_exact = np.zeros(n, bool)
        self.null_count = np.zeros(n, np.int64)
        self.nan_count = np.zeros(n, np.int64)
        self.null_page = np.zeros(n, bool)


@st.composite
def _unit_stats(draw: st.DrawFn, kind: str, units: list[list[Any]]) -> UnitStats:
    n = len(units)
    obj = kind == "string"
    raw = _Raw(n, obj, np.int64 if kind == "long" else np.float64)
    for i, unit in enumerate(units):
        nulls = sum(v is None for v in unit)
        nans = sum(isinstance(v, float) and math.isnan(v) for v in unit)
        raw.null_count[i] = nulls if draw(st.booleans()) else -1
        raw.nan_count[i] = nans if draw(st.booleans()) else -1
        raw.null_page[i] = nulls == len(unit) and draw(st.booleans())
        vals = [_comparable(kind, v) for v in unit if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if not vals:
            if nans and draw(st.booleans()):  # PARQUET-2249: only NaN -> min = max = NaN
                raw.min[i] = raw.max[i] = math.nan
                raw.has_min[i] = raw.has_max[i] = True
            continue
        mn, mx = min(vals), max(vals)
        lo_exact = hi_exact = True
        if kind == "double":  # the spec's zero rule
            mn = -0.0 if mn == 0 else mn
            mx = 0.0 if mx == 0 else mx
        if kind == "long" and draw(st.booleans()):  # loose but valid bounds
            mn, mx = mn - draw(st.integers(0, 2)), mx + draw(st.integers(0, 2))
            lo_exact = hi_exact = False
        if obj and len(mx) > 1 and draw(st.booleans()):  # inexact string max
            mx = mx[: draw(st.integers(1, len(mx) - 1))]
            if draw(st.booleans()):  # Parquet rounds the cut max up; some writers only cut
                mx = prefix_successor(mx) or mx
            hi_exact = False
        if obj and len(mn) > 1 and draw(st.booleans()):  # a cut min is still a lower bound
            mn = mn[: draw(st.integers(0, len(mn) - 1))]
            lo_exact = False
        raw.min[i], raw.max[i] = mn, mx
        raw.has_min[i] = draw(st.integers(0, 5)) > 0
        raw.has_max[i] = draw(st.integers(0, 5)) > 0
        raw.min_exact[i], raw.max_exact[i] = lo_exact, hi_exact
    kind_name = {"long": "INT64", "double": "FLOAT64", "string": "BYTES"}[kind]
    return UnitStats.from_arrays(raw, np.array([len(u) for u in units], np.int64), kind=kind_name)


@st.composite
def _pred(draw: st.DrawFn, kind: str, depth: int = 0) -> Expr:
    if depth < 2 and draw(st.integers(0, 4)) == 0:
        a, b = draw(_pred(kind, depth + 1)), draw(_pred(kind, depth + 1))
        return draw(st.sampled_from([And(a, b), Or(a, b), Not(a)]))
    lit = _KINDS[kind][2]
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return draw(st.sampled_from([IsNull("x"), IsNotNull("x"), IsNaN("x")]))
    if choice == 1:
        return draw(st.sampled_from([In, NotIn]))("x", tuple(draw(st.lists(lit, min_size=1, max_size=3))))
    if choice == 2 and kind == "string":
        return StartsWith("x", draw(lit))
    return draw(st.sampled_from([Eq, NotEq, Lt, LtEq, Gt, GtEq]))("x", draw(lit))


@st.composite
def _case(draw: st.DrawFn) -> tuple[str, list[list[Any]], UnitStats, list[Expr]]:
    kind = draw(st.sampled_from(sorted(_KINDS)))
    units = draw(st.lists(st.lists(st.none() | _KINDS[kind][2], min_size=0, max_size=5), min_size=1, max_size=8))
    stats = draw(_unit_stats(kind, units))
    return kind, units, stats, draw(st.lists(_pred(kind), min_size=1, max_size=20))


@settings(max_examples=250, deadline=None)
@given(_case())
def test_units_holding_a_match_are_kept(case: tuple[str, list[list[Any]], UnitStats, list[Expr]]) -> None:
    kind, units, stats, exprs = case
    schema = _schema(kind)
    table = pa.table({"x": pa.array([v for u in units for v in u], type=_KINDS[kind][1])})
    unit_of_row = np.repeat(np.arange(len(units)), [len(u) for u in units])
    for expr in exprs:
        bound = bind(expr, schema)
        must_keep = np.zeros(len(units), bool)
        must_keep[unit_of_row[evaluate_rows(bound, table)]] = True
        for level in (LEVEL_COUNTS, LEVEL_MINMAX):
            mask = StatsEvaluator(len(units), lambda ref: stats, level=level).evaluate(bound)
            dropped = np.flatnonzero(must_keep & (mask == ROWS_CANNOT_MATCH)).tolist()
            assert not dropped, f"units {[units[i] for i in dropped]} dropped for {bound} at level {level}"


@settings(max_examples=150, deadline=None)
@given(_case(), st.data())
def test_masks_kept_with_statistics_do_not_depend_on_earlier_filters(
    case: tuple[str, list[list[Any]], UnitStats, list[Expr]], data: st.DataObject,
) -> None:
    """A UnitStats serves many plans: the masks it keeps (derived masks, each leaf's mask at
    the counts level, whether its bounds are usable) must not carry one literal's answer to
    another. Every filter evaluated on statistics shared with the filters before it equals
    the same filter on fresh statistics; on units taken from them it equals the fresh mask
    taken; and level_masks over the larger units (``whole``) equals level_masks over ours."""
    kind, units, stats, exprs = case
    schema = _schema(kind)
    n = len(units)
    idx = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n)), dtype=np.intp)
    taken = stats.take(idx)
    for expr in exprs:
        bound = bind(expr, schema)
        for level in (LEVEL_COUNTS, LEVEL_MINMAX):
            fresh = StatsEvaluator(n, lambda ref: replace(stats), level=level).evaluate(bound)
            shared = StatsEvaluator(n, lambda ref: stats, level=level).evaluate(bound)
            assert np.array_equal(shared, fresh), (bound, level)
            got = StatsEvaluator(len(idx), lambda ref: taken, level=level).evaluate(bound)
            assert np.array_equal(got, fresh[idx]), (bound, level)
        ours = level_masks(bound, len(idx), lambda ref: replace(taken))
        whole = level_masks(bound, len(idx), lambda ref: taken, whole=(n, lambda ref: stats, idx))
        for a, b in zip(ours, whole, strict=True):
            assert np.array_equal(a, b), bound


# ---- table-driven rules ------------------------------------------------------------------

_REF = BoundRef(Column(name="x", type=DataType("double")))


def _one(lo: float | None, hi: float | None, *, nulls: int = 0, nans: int = -1, rows: int = 10,
         floating: bool = True) -> UnitStats:
    return UnitStats(
        floating=floating,
        lo=np.array([0.0 if lo is None else lo]), hi=np.array([0.0 if hi is None else hi]),
        lo_ok=np.array([lo is not None]), hi_ok=np.array([hi is not None]), hi_strict=np.zeros(1, bool),
        null_count=np.array([nulls], np.int64), nan_count=np.array([nans], np.int64),
        num_rows=np.array([rows], np.int64), null_unit=np.zeros(1, bool),
    )


@pytest.mark.parametrize(
    ("expr", "stats", "expected"),
    [
        (Gt(_REF, 5.0), _one(0.0, 1.0, nans=-1), ROWS_MIGHT_MATCH),  # NaN > 5 and nan_count unknown
        (Gt(_REF, 5.0), _one(0.0, 1.0, nans=0), ROWS_CANNOT_MATCH),
        (Gt(_REF, 5.0), _one(0.0, 1.0, nans=2), ROWS_MIGHT_MATCH),
        (GtEq(_REF, math.inf), _one(0.0, 1.0, nans=1), ROWS_MIGHT_MATCH),  # NaN >= +inf
        (Lt(_REF, 0.5), _one(1.0, 2.0, nans=3), ROWS_CANNOT_MATCH),  # NaN < 0.5 is false
        (Eq(_REF, math.nan), _one(1.0, 2.0, nans=0), ROWS_CANNOT_MATCH),
        (Eq(_REF, math.nan), _one(1.0, 2.0, nans=-1), ROWS_MIGHT_MATCH),
        (Eq(_REF, 0.0), _one(-0.0, -0.0, nans=0), ROWS_MIGHT_MATCH),  # -0.0 = 0.0
        (Lt(_REF, 0.0), _one(-0.0, 0.0, nans=0), ROWS_CANNOT_MATCH),  # -0.0 < 0.0 is false
        (NotEq(_REF, 1.0), _one(1.0, 1.0, nans=0), ROWS_CANNOT_MATCH),
        (NotEq(_REF, 1.0), _one(1.0, 1.0, nans=-1), ROWS_MIGHT_MATCH),  # a NaN differs
        (Eq(_REF, 3.0), _one(None, None, nans=0), ROWS_MIGHT_MATCH),  # missing bounds
        (Eq(_REF, 3.0), _one(0.0, 9.0, nulls=10), ROWS_CANNOT_MATCH),  # all null
        (IsNull(_REF), _one(0.0, 9.0, nulls=0), ROWS_CANNOT_MATCH),
        (IsNull(_REF), _one(0.0, 9.0, nulls=-1), ROWS_MIGHT_MATCH),
        (IsNotNull(_REF), _one(None, None, nulls=10), ROWS_CANNOT_MATCH),
        (IsNaN(_REF), _one(0.0, 1.0, nulls=10, nans=-1), ROWS_CANNOT_MATCH),  # isnan(NULL) false
        (NotNaN(_REF), _one(math.nan, math.nan, nulls=0, nans=10), ROWS_CANNOT_MATCH),
        (NotNaN(_REF), _one(math.nan, math.nan, nulls=1, nans=9), ROWS_MIGHT_MATCH),  # null row
        (Lt(_REF, 5.0), _one(math.nan, math.nan, nans=-1), ROWS_CANNOT_MATCH),  # NaN-only unit
        (In(_REF, (7.0, 8.0)), _one(0.0, 6.5, nans=0), ROWS_CANNOT_MATCH),
        (In(_REF, (7.0, math.nan)), _one(0.0, 6.5, nans=-1), ROWS_MIGHT_MATCH),
    ],
)
def test_rules(expr: Expr, stats: UnitStats, expected: bool) -> None:
    mask = StatsEvaluator(1, lambda ref: stats, level=LEVEL_MINMAX).evaluate(expr)
    assert bool(mask[0]) == expected


def test_missing_statistics_might_match() -> None:
    expr = Eq(_REF, 1.0)
    assert StatsEvaluator(3, lambda ref: None, level=LEVEL_MINMAX).evaluate(expr).all()


def test_unbound_or_not_expressions_are_refused() -> None:
    with pytest.raises(ExpressionError, match="bind the expression"):
        StatsEvaluator(1, lambda ref: None, level=LEVEL_MINMAX).evaluate(Eq("x", 1))
    with pytest.raises(ExpressionError, match="NOT must be pushed down"):
        StatsEvaluator(1, lambda ref: None, level=LEVEL_MINMAX).evaluate(Not(Eq(_REF, 1.0)))


@pytest.mark.parametrize(
    ("prefix", "successor"),
    [(b"ab", b"ac"), (b"a\xff", b"b"), (b"\xff\xff", None), (b"", None), (b"a\xfe", b"a\xff")],
)
def test_prefix_successor(prefix: bytes, successor: bytes | None) -> None:
    assert prefix_successor(prefix) == successor


def test_truncated_string_max_is_used_safely() -> None:
    """A max cut to 'ab' without rounding up may hide 'abz'; the successor 'ac' covers it."""
    ref = BoundRef(Column(name="s", type=DataType("string")))

    raw = _Raw(1, True, object)
    raw.min[0], raw.max[0] = b"aa", b"ab"
    raw.has_min[0] = raw.has_max[0] = raw.min_exact[0] = True
    raw.nan_count[0] = -1
    stats = UnitStats.from_arrays(raw, np.array([5]), kind="BYTES")
    ev = StatsEvaluator(1, lambda r: stats, level=LEVEL_MINMAX)
    assert ev.evaluate(Eq(ref, b"abz"))[0] == ROWS_MIGHT_MATCH
    assert ev.evaluate(Gt(ref, b"ab"))[0] == ROWS_MIGHT_MATCH
    assert ev.evaluate(GtEq(ref, b"ac"))[0] == ROWS_CANNOT_MATCH
    assert ev.evaluate(StartsWith(ref, b"b"))[0] == ROWS_CANNOT_MATCH


@pytest.mark.parametrize("expr_cls", [Eq, LtEq, GtEq])
def test_trailing_nul_bytes_compare_as_bytes(expr_cls: type) -> None:
    """numpy would turn a bare b"a\\x00" into 'S' and drop the NUL; the unit must stay."""
    ref = BoundRef(Column(name="s", type=DataType("string")))
    raw = _Raw(2, True, object)
    raw.min[0] = raw.max[0] = b"a\x00"
    raw.min[1] = raw.max[1] = b"b"
    raw.has_min[:] = raw.has_max[:] = raw.min_exact[:] = raw.max_exact[:] = True
    stats = UnitStats.from_arrays(raw, np.array([1, 1]), kind="BYTES")
    mask = StatsEvaluator(2, lambda r: stats, level=LEVEL_MINMAX).evaluate(expr_cls(ref, b"a\x00"))
    assert mask[0] == ROWS_MIGHT_MATCH


@settings(max_examples=80, deadline=None)
@given(
    pool=st.lists(st.binary(max_size=4).map(lambda b: b.replace(b"\x01", b"\xff")), min_size=1, max_size=12),
    picks=st.lists(st.tuples(st.integers(0, 100), st.booleans(), st.booleans()), min_size=1, max_size=400),
)
def test_inexact_string_maxima_become_their_successors(
    pool: list[bytes], picks: list[tuple[int, bool, bool]]
) -> None:
    """Every inexact usable max becomes prefix_successor of itself (a strict bound), one with
    no successor (empty, all 0xff) is no bound; pages repeat their maxima, so the successors
    are computed per distinct value - the result is the value-by-value one."""
    n = len(picks)
    raw = _Raw(n, True, object)
    for i, (k, usable, exact) in enumerate(picks):
        raw.min[i], raw.max[i] = b"", pool[k % len(pool)]
        raw.has_min[i], raw.has_max[i], raw.max_exact[i] = True, usable, exact
    stats = UnitStats.from_arrays(raw, np.ones(n, np.int64), kind="BYTES")
    for i, (k, usable, exact) in enumerate(picks):
        v = pool[k % len(pool)]
        succ = None if exact or not usable else prefix_successor(v)
        want_ok = usable and (exact or succ is not None)
        assert bool(stats.hi_ok[i]) == want_ok
        assert bool(stats.hi_strict[i]) == (want_ok and not exact)
        if want_ok:
            assert stats.hi[i] == (v if exact else succ) and type(stats.hi[i]) is bytes
    assert raw.max.tolist() == [pool[k % len(pool)] for k, _, _ in picks]  # the input is kept
