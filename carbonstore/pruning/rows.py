"""Row-level filters: a bound expression over the rows of a pyarrow table.

:func:`evaluate_rows` is the oracle: SQL three-valued logic over every row with the
evaluator's semantics (Spark: NaN = NaN, NaN greatest, -0.0 = 0.0, nulls never satisfy a
comparison); tests use it as the brute-force truth the pruner must cover.
:func:`rows_may_match` is the driver-side filter with vectorised kernels only (a superset of
the matching rows), :func:`rows_exact` / :func:`narrows` say when it is exact / useful.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from carbonstore.errors import ExpressionError
from carbonstore.expressions.expr import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundRef,
    Comparison,
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
    nodes,
)
from carbonstore.pruning.evaluator import Mask

__all__ = ["evaluate_rows", "narrows", "rows_exact", "rows_may_match"]


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


# ---- the row-level oracle ----------------------------------------------------------------


def _comparable(column: pa.ChunkedArray | pa.Array, ref: BoundRef) -> tuple[Any, Mask]:
    """Column values in the comparable representation, and the validity mask."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    t = ref.type
    if t.is_floating:
        vals = np.asarray(pc.fill_null(arr.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False))
        return vals, valid
    if t.name in ("string", "binary"):
        # a pyarrow binary array: compared by pyarrow's byte-wise kernels, as Spark compares
        # UTF-8 strings
        big = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
        return arr.cast(pa.large_binary() if big else pa.binary()), valid
    if t.name == "decimal":
        out = np.empty(len(arr), dtype=object)
        exact = decimal.Context(prec=100)  # the default 28 digits would round decimal(38)
        out[:] = [0 if v is None else int(v.scaleb(t.scale, exact)) for v in arr.to_pylist()]
        return out, valid
    if t.name == "date":
        ints = arr.cast(pa.int32())
    elif t.name == "timestamp":
        tz = getattr(arr.type, "tz", None)
        ints = arr.cast(pa.timestamp("us", tz=tz)).cast(pa.int64())
    elif t.name == "boolean":
        ints = arr.cast(pa.int8())
    else:
        ints = arr
    return np.asarray(pc.fill_null(ints.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)), valid


_PC_OPS: dict[type[Comparison], Callable[[Any, Any], Any]] = {
    Eq: pc.equal, NotEq: pc.not_equal, Lt: pc.less, LtEq: pc.less_equal,
    Gt: pc.greater, GtEq: pc.greater_equal,
}


def _row_compare(vals: Any, op: type[Comparison], v: Any, floating: bool) -> Mask:
    """Spark comparison of non-null values with a non-null literal (NaN greatest, NaN = NaN)."""
    if isinstance(vals, pa.Array):  # binary: nulls come out False, masked by valid anyway
        res = pc.fill_null(_PC_OPS[op](vals, pa.scalar(v, vals.type)), False)
        return np.asarray(res.to_numpy(zero_copy_only=False), dtype=bool)
    if floating:
        nan = np.isnan(vals)
        if _is_nan(v):
            table = {Eq: nan, NotEq: ~nan, Lt: ~nan, LtEq: np.ones_like(nan), Gt: np.zeros_like(nan), GtEq: nan}
            return table[op]
        with np.errstate(invalid="ignore"):
            base = {Eq: vals == v, NotEq: vals != v, Lt: vals < v, LtEq: vals <= v,
                    Gt: vals > v, GtEq: vals >= v}[op]
        return base | nan if op in (Gt, GtEq) else base
    fn = {Eq: lambda a: a == v, NotEq: lambda a: a != v, Lt: lambda a: a < v,
          LtEq: lambda a: a <= v, Gt: lambda a: a > v, GtEq: lambda a: a >= v}[op]
    if vals.dtype == object:
        return np.fromiter((bool(fn(a)) for a in vals), dtype=bool, count=len(vals))
    return np.asarray(fn(vals), dtype=bool)


def evaluate_rows(expr: Expr, table: pa.Table) -> Mask:
    """The rows of ``table`` for which the bound ``expr`` is TRUE (not FALSE, not NULL).

    SQL three-valued logic over every row; columns are looked up by name. Tests use it as
    the truth the pruner must cover; tests/spark/test_spark_semantics.py checks it against
    Spark.
    """
    true, _false = _rows3(expr, table, {}, exact=True)
    return true


# ---- driver-side row filter -------------------------------------------------------------------

_FAST_TYPES = frozenset({"byte", "short", "int", "long", "float", "double", "date", "timestamp",
                         "boolean", "string", "binary"})


def rows_may_match(expr: Expr, table: pa.Table) -> Mask:
    """A superset of the rows of ``table`` for which the bound ``expr`` is TRUE.

    :func:`evaluate_rows` with vectorised kernels only (numpy and pyarrow, no per-row
    Python): a leaf without one (decimals, prefixes) keeps every row, so the mask may hold
    rows that do not match but never drops one that does. The reader narrows its reads with
    it; Spark still applies the filter unless :func:`rows_exact`.
    """
    may_true, _may_false = _rows3(expr, table, {}, exact=False)
    return may_true


def narrows(expr: Expr) -> bool:
    """Whether :func:`rows_may_match` can drop rows for ``expr`` (a leaf with a kernel in a
    conjunction, or on both sides of a disjunction)."""
    if isinstance(expr, And):
        return any(narrows(e) for e in flatten(expr))
    if isinstance(expr, Or):
        return all(narrows(e) for e in flatten(expr))
    if isinstance(expr, Not):
        return narrows(expr.child)
    if isinstance(expr, AlwaysFalse):
        return True
    return _fast_leaf(expr)


def rows_exact(expr: Expr) -> bool:
    """Whether :func:`rows_may_match` is exactly the rows ``expr`` is TRUE for (every leaf
    has a kernel): then a reader that applied it need not filter again."""
    return all(
        isinstance(e, (And, Or, Not, AlwaysTrue, AlwaysFalse)) or _fast_leaf(e) for e in nodes(expr)
    )


def _fast_leaf(expr: Expr) -> bool:
    ref = getattr(expr, "term", None)
    return (isinstance(ref, BoundRef) and ref.type.name in _FAST_TYPES
            and not isinstance(expr, (StartsWith, NotStartsWith)))


def _rows3(
    expr: Expr, table: pa.Table, cache: dict[str, tuple[Any, Mask]], *, exact: bool
) -> tuple[Mask, Mask]:
    """(is TRUE, is FALSE) masks; NULL is neither. Not ``exact``: a leaf without a vectorised
    kernel is (every row, every row), so both masks are supersets of the exact ones."""
    n = table.num_rows
    if isinstance(expr, AlwaysTrue):
        return np.ones(n, bool), np.zeros(n, bool)
    if isinstance(expr, AlwaysFalse):
        return np.zeros(n, bool), np.ones(n, bool)
    if isinstance(expr, (And, Or)):
        first, *rest = flatten(expr)
        t, f = _rows3(first, table, cache, exact=exact)
        for e in rest:
            rt, rf = _rows3(e, table, cache, exact=exact)
            t, f = (t & rt, f | rf) if isinstance(expr, And) else (t | rt, f & rf)
        return t, f
    if isinstance(expr, Not):
        t, f = _rows3(expr.child, table, cache, exact=exact)
        return f, t
    ref = expr.term  # type: ignore[attr-defined]
    if not isinstance(ref, BoundRef):
        raise ExpressionError(f"bind the expression before evaluating it: {expr}")
    if not exact and not _fast_leaf(expr):
        return np.ones(n, bool), np.ones(n, bool)
    if ref.name not in cache:
        cache[ref.name] = _comparable(table.column(ref.name), ref)
    vals, valid = cache[ref.name]
    floating = ref.type.is_floating
    if isinstance(expr, IsNull):
        return ~valid, valid
    if isinstance(expr, IsNotNull):
        return valid, ~valid
    if isinstance(expr, (IsNaN, NotNaN)):
        nan = valid & np.isnan(vals) if floating else np.zeros(n, bool)
        return (nan, ~nan) if isinstance(expr, IsNaN) else (~nan, nan)
    if isinstance(expr, Comparison):
        hit = _row_compare(vals, type(expr), expr.literal, floating)
    elif isinstance(expr, (In, NotIn)):
        if isinstance(vals, pa.Array):
            hit = np.asarray(pc.is_in(vals, value_set=pa.array(list(expr.literals), vals.type))
                             .to_numpy(zero_copy_only=False), dtype=bool)
        else:
            hit = np.zeros(n, bool)
            for v in expr.literals:
                hit |= _row_compare(vals, Eq, v, floating)
        hit = ~hit if isinstance(expr, NotIn) else hit
    elif isinstance(expr, (StartsWith, NotStartsWith)):
        hit = np.fromiter((v is not None and v.startswith(expr.prefix) for v in vals.to_pylist()),
                          dtype=bool, count=n)
        hit = ~hit if isinstance(expr, NotStartsWith) else hit
    else:
        raise ExpressionError(f"cannot evaluate {expr} on rows")
    return valid & hit, valid & ~hit
