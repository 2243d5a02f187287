"""Pruning expressions: small frozen value objects, bound to a table schema once.

An expression is built unbound (column names as ``str``), from SQL with
:func:`parse_where` or from Python with :func:`col` / :func:`eq` and friends.
:func:`bind` then does three things, once:

1. pushes ``NOT`` down to the leaves (De Morgan; ``NOT (x < 3)`` becomes ``x >= 3``, which
   is exact under Spark's total order where NaN is the greatest value and nulls stay null);
2. resolves names to :class:`BoundRef` (the schema ``Column`` and its type), refusing unknown
   columns with the list of known ones;
3. coerces literals to the *comparable representation* the index arrays use: ``int`` for
   integral types, dates (days since epoch), timestamps (microseconds since epoch, UTC) and
   decimals (unscaled, at the column's scale); ``float`` for float/double (``-0.0`` becomes
   ``0.0``); ``bytes`` (UTF-8) for strings and binary; ``bool`` for booleans. Literals that can
   never match become ``AlwaysFalse`` / ``IsNotNull`` / ``AlwaysTrue`` exactly (see
   docs/pruning.md).

Bound expressions contain no ``Not`` node, so a rewrite such as ``x < 1e30`` -> ``x IS NOT
NULL`` on an int column is exact: nothing negates it afterwards.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, ClassVar, TypeAlias

from carbonstore.errors import ExpressionError
from carbonstore.store.schema import Column, DataType, TableSchema

__all__ = [
    "AlwaysFalse", "AlwaysTrue", "And", "BoundRef", "and_terms", "Comparison", "Eq", "Expr", "Gt", "GtEq",
    "In", "IsNaN", "IsNotNull", "IsNull", "Lt", "LtEq", "Not", "NotEq", "NotIn", "NotNaN",
    "MAX_DEPTH", "MAX_NESTING", "NotStartsWith", "Or", "StartsWith", "Term", "and_", "bind",
    "col", "flatten", "nodes", "not_", "or_", "parse_where", "push_not", "references",
    "session_zone", "sql_error_message", "balanced", "rebalance", "depth", "too_deep_error",
]

# Limits that keep every walk over an expression (binding, the evaluators, the planner,
# which recurse per level) far from Python's recursion limit. A chain of one connective
# (an OR of 500 terms, an AND of 10,000) is no nesting: it is kept balanced, so its depth
# grows with the logarithm of its length.
MAX_NESTING = 32  # parentheses, NOT and unary signs nested in a SQL filter
MAX_DEPTH = 128  # levels of a bound expression tree


@dataclass(frozen=True, slots=True)
class BoundRef:
    """A column resolved against a schema: the ``Column`` and therefore its type."""

    column: Column

    @property
    def name(self) -> str:
        return self.column.name

    @property
    def type(self) -> DataType:
        return self.column.type

    def __str__(self) -> str:
        return self.column.name


Term: TypeAlias = "str | BoundRef"


class Expr:
    """Base of every expression; ``&``, ``|`` and ``~`` build And / Or / Not."""

    __slots__ = ()

    def __and__(self, other: Expr) -> Expr:
        return And(self, other)

    def __or__(self, other: Expr) -> Expr:
        return Or(self, other)

    def __invert__(self) -> Expr:
        return Not(self)


@dataclass(frozen=True, slots=True)
class AlwaysTrue(Expr):
    """True for every row, null or not."""

    def __str__(self) -> str:
        return "TRUE"


@dataclass(frozen=True, slots=True)
class AlwaysFalse(Expr):
    """True for no row."""

    def __str__(self) -> str:
        return "FALSE"


@dataclass(frozen=True, slots=True)
class And(Expr):
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return _text(self)


@dataclass(frozen=True, slots=True)
class Or(Expr):
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return _text(self)


@dataclass(frozen=True, slots=True)
class Not(Expr):
    child: Expr

    def __str__(self) -> str:
        return _text(self)


@dataclass(frozen=True, slots=True)
class Comparison(Expr):
    """``term <op> literal``; never true for a null value or a null literal."""

    term: Term
    literal: Any
    op: ClassVar[str] = "?"

    def __str__(self) -> str:
        return f"{self.term} {self.op} {self.literal!r}"


class Eq(Comparison):
    op = "="


class NotEq(Comparison):
    op = "<>"


class Lt(Comparison):
    op = "<"


class LtEq(Comparison):
    op = "<="


class Gt(Comparison):
    op = ">"


class GtEq(Comparison):
    op = ">="


@dataclass(frozen=True, slots=True)
class In(Expr):
    term: Term
    literals: tuple[Any, ...]

    def __str__(self) -> str:
        return f"{self.term} IN {self.literals!r}"


@dataclass(frozen=True, slots=True)
class NotIn(Expr):
    term: Term
    literals: tuple[Any, ...]

    def __str__(self) -> str:
        return f"{self.term} NOT IN {self.literals!r}"


@dataclass(frozen=True, slots=True)
class IsNull(Expr):
    term: Term

    def __str__(self) -> str:
        return f"{self.term} IS NULL"


@dataclass(frozen=True, slots=True)
class IsNotNull(Expr):
    term: Term

    def __str__(self) -> str:
        return f"{self.term} IS NOT NULL"


@dataclass(frozen=True, slots=True)
class IsNaN(Expr):
    """Spark ``isnan(x)``: false (not null) for a null ``x``."""

    term: Term

    def __str__(self) -> str:
        return f"isnan({self.term})"


@dataclass(frozen=True, slots=True)
class NotNaN(Expr):
    """``NOT isnan(x)``: true for nulls and for every non-NaN value."""

    term: Term

    def __str__(self) -> str:
        return f"NOT isnan({self.term})"


@dataclass(frozen=True, slots=True)
class StartsWith(Expr):
    term: Term
    prefix: Any

    def __str__(self) -> str:
        return f"{self.term} STARTSWITH {self.prefix!r}"


@dataclass(frozen=True, slots=True)
class NotStartsWith(Expr):
    term: Term
    prefix: Any

    def __str__(self) -> str:
        return f"{self.term} NOT STARTSWITH {self.prefix!r}"


# ---- Python builders ---------------------------------------------------------------------


class col:  # noqa: N801 - reads like a function at call sites: col("x") > 3
    """Column reference for the Python API: ``(col("x") > 3) & col("s").startswith("a")``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return Eq(self.name, other)

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return NotEq(self.name, other)

    def __lt__(self, other: object) -> Expr:
        return Lt(self.name, other)

    def __le__(self, other: object) -> Expr:
        return LtEq(self.name, other)

    def __gt__(self, other: object) -> Expr:
        return Gt(self.name, other)

    def __ge__(self, other: object) -> Expr:
        return GtEq(self.name, other)

    __hash__ = None  # type: ignore[assignment]

    def isin(self, values: Any) -> Expr:
        return In(self.name, tuple(values))

    def is_null(self) -> Expr:
        return IsNull(self.name)

    def is_not_null(self) -> Expr:
        return IsNotNull(self.name)

    def is_nan(self) -> Expr:
        return IsNaN(self.name)

    def startswith(self, prefix: str | bytes) -> Expr:
        return StartsWith(self.name, prefix)


def and_(*exprs: Expr) -> Expr:
    """Conjunction of any number of expressions (``AlwaysTrue`` for none), kept balanced."""
    items = list(exprs)
    while len(items) > 1 and isinstance(items[0], AlwaysTrue):
        items.pop(0)
    return balanced(And, items) if items else AlwaysTrue()


def or_(*exprs: Expr) -> Expr:
    """Disjunction of any number of expressions (``AlwaysFalse`` for none), kept balanced."""
    items = list(exprs)
    while len(items) > 1 and isinstance(items[0], AlwaysFalse):
        items.pop(0)
    return balanced(Or, items) if items else AlwaysFalse()


def not_(expr: Expr) -> Expr:
    return Not(expr)


# ---- walking without recursion -----------------------------------------------------------


def nodes(expr: Expr) -> Iterator[Expr]:
    """Every node of ``expr``, parents before children, left before right (no recursion)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        if isinstance(e, (And, Or)):
            stack.append(e.right)
            stack.append(e.left)
        elif isinstance(e, Not):
            stack.append(e.child)


def flatten(expr: Expr) -> list[Expr]:
    """The operands, left to right, of the chain of ``expr``'s connective that ``expr`` heads
    (``a AND (b AND c)`` gives ``[a, b, c]``); ``[expr]`` for anything but And / Or."""
    if not isinstance(expr, (And, Or)):
        return [expr]
    kind = type(expr)
    out: list[Expr] = []
    stack: list[Expr] = [expr]
    while stack:
        e = stack.pop()
        if type(e) is kind:
            stack.append(e.right)  # type: ignore[attr-defined]
            stack.append(e.left)  # type: ignore[attr-defined]
        else:
            out.append(e)
    return out


def _text(expr: Expr) -> str:
    """``str`` of a tree of any depth: ``(a AND b)``, ``(a OR b)``, ``(NOT a)``, built with
    an explicit stack instead of recursion."""
    out: list[str] = []
    stack: list[Expr | str] = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, str):
            out.append(e)
        elif isinstance(e, (And, Or)):
            stack += [")", e.right, " AND " if isinstance(e, And) else " OR ", e.left, "("]
        elif isinstance(e, Not):
            stack += [")", e.child, "(NOT "]
        else:
            out.append(str(e))
    return "".join(out)


def balanced(kind: type[And] | type[Or], items: list[Expr]) -> Expr:
    """``items`` joined by ``kind`` as a balanced tree (depth log2 of their number)."""
    while len(items) > 1:
        items = [kind(items[i], items[i + 1]) if i + 1 < len(items) else items[i]
                 for i in range(0, len(items), 2)]
    return items[0]


def rebalance(expr: Expr) -> Expr:
    """``expr`` with every And / Or chain balanced; recursion only where connectives alternate."""
    if isinstance(expr, (And, Or)):
        return balanced(type(expr), [rebalance(e) for e in flatten(expr)])
    if isinstance(expr, Not):
        return Not(rebalance(expr.child))
    return expr


def depth(expr: Expr) -> int:
    """Levels of ``expr`` (a leaf is 1), counted with an explicit stack."""
    deepest = 0
    stack = [(expr, 1)]
    while stack:
        e, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(e, (And, Or)):
            stack += [(e.left, d + 1), (e.right, d + 1)]
        elif isinstance(e, Not):
            stack.append((e.child, d + 1))
    return deepest


def too_deep_error(what: str) -> ExpressionError:
    """The error for a ``what`` (filter, expression) nested beyond :data:`MAX_NESTING`."""
    return ExpressionError(
        f"{what} nests too deeply: at most {MAX_NESTING} levels of parentheses / NOT are "
        "supported (a long AND / OR chain or an IN list needs no nesting)"
    )


# ---- NOT push-down -----------------------------------------------------------------------

_NEGATED_CMP: dict[type[Comparison], type[Comparison]] = {
    Eq: NotEq, NotEq: Eq, Lt: GtEq, GtEq: Lt, Gt: LtEq, LtEq: Gt,
}


def push_not(expr: Expr, *, negate: bool = False) -> Expr:
    """Rewrite ``expr`` (negated if ``negate``) so that no ``Not`` node remains.

    Exact under SQL three-valued logic: a comparison and its complement are both null on a
    null value, and Spark orders all non-null values totally (NaN greatest, -0.0 = 0.0).
    ``isnan`` is never null, so its negation ``NotNaN`` is true for nulls.
    """
    if isinstance(expr, Not):
        return push_not(expr.child, negate=not negate)
    if not negate:
        if isinstance(expr, And):
            return And(push_not(expr.left), push_not(expr.right))
        if isinstance(expr, Or):
            return Or(push_not(expr.left), push_not(expr.right))
        return expr
    if isinstance(expr, And):
        return Or(push_not(expr.left, negate=True), push_not(expr.right, negate=True))
    if isinstance(expr, Or):
        return And(push_not(expr.left, negate=True), push_not(expr.right, negate=True))
    if isinstance(expr, Comparison):
        return _NEGATED_CMP[type(expr)](expr.term, expr.literal)
    pairs: list[tuple[type, type]] = [
        (In, NotIn), (IsNull, IsNotNull), (IsNaN, NotNaN), (StartsWith, NotStartsWith),
        (AlwaysTrue, AlwaysFalse),
    ]
    for a, b in pairs:
        for src, dst in ((a, b), (b, a)):
            if type(expr) is src:
                return dst(*[getattr(expr, f) for f in expr.__dataclass_fields__])  # type: ignore[attr-defined]
    raise ExpressionError(f"cannot negate expression {expr}")


def references(expr: Expr) -> set[str]:
    """Names of the columns an expression refers to."""
    out: set[str] = set()
    for e in nodes(expr):
        term = getattr(e, "term", None)
        if term is not None:
            out.add(term.name if isinstance(term, BoundRef) else str(term).lower())
    return out


# ---- binding and literal coercion ---------------------------------------------------------

_INT_RANGES = {
    "byte": (-(2**7), 2**7 - 1), "short": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1),
}
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH_TS = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_DAY_MICROS = 86_400_000_000


class _Above:
    """Marker: a literal above every value of the column type (+inf, NaN, too large)."""


class _Below:
    """Marker: a literal below every value of the column type (-inf, too small)."""


def bind(
    expr: Expr, schema: TableSchema, *, case_sensitive: bool = False, time_zone: dt.tzinfo = dt.UTC
) -> Expr:
    """Push ``NOT`` down, resolve column names and coerce literals (see module docstring).

    ``time_zone`` is the session time zone: a timestamp without an offset (a naive datetime,
    ``TIMESTAMP '2024-01-01 08:00'``, a string) and the midnight of a date compared with a
    timestamp are read in it, as Spark reads them in ``spark.sql.session.timeZone``.

    Raises:
        ExpressionError: unknown column, or a literal that cannot be compared with the
            column's type (the message names both).
    """
    by_name = {c.name if case_sensitive else c.name.lower(): c for c in schema.columns}
    try:
        bound = _simplify(
            _bind(push_not(rebalance(expr)), schema, by_name, case_sensitive, time_zone)
        )
    except RecursionError:
        raise too_deep_error("the filter") from None
    if depth(bound) > MAX_DEPTH:
        raise too_deep_error("the filter")
    return bound


def session_zone(name: str | None) -> dt.tzinfo | None:
    """The tzinfo of a Spark session time zone id (``UTC``, ``Europe/Paris``, ``+08:00``,
    ``GMT-3``); None when it is not one this process can resolve."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    text = (name or "UTC").strip()
    if text.upper() in ("UTC", "Z", "GMT", "UT"):
        return dt.UTC
    m = re.fullmatch(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?", text, re.IGNORECASE)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        delta = dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0), seconds=int(m.group(4) or 0))
        return dt.timezone(sign * delta) if delta < dt.timedelta(hours=18, seconds=1) else None
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _resolve(term: Term, schema: TableSchema, by_name: dict[str, Column], cs: bool) -> BoundRef:
    if isinstance(term, BoundRef):
        return term
    key = term if cs else term.lower()
    column = by_name.get(key)
    if column is None and "." in key:  # a struct field: s.a, s.t.x
        from carbonstore.store.evolution import struct_field_column

        head, *path = key.split(".")
        parent = by_name.get(head)
        column = None if parent is None else struct_field_column(parent, path)
    if column is None:
        raise ExpressionError(
            f"filter names unknown column {term!r}; table {schema.qualified_name} has columns "
            f"{', '.join(schema.column_names)}"
            + (" (use plain column names without a table qualifier; s.f names field f of "
               "struct column s)" if "." in term else "")
        )
    return BoundRef(column)


def _bind(expr: Expr, schema: TableSchema, by_name: dict[str, Column], cs: bool, zone: dt.tzinfo) -> Expr:
    if isinstance(expr, (And, Or)):
        return type(expr)(_bind(expr.left, schema, by_name, cs, zone), _bind(expr.right, schema, by_name, cs, zone))
    if isinstance(expr, (AlwaysTrue, AlwaysFalse)):
        return expr
    ref = _resolve(expr.term, schema, by_name, cs)  # type: ignore[attr-defined]
    t = ref.type
    if isinstance(expr, (IsNull, IsNotNull)):
        return type(expr)(ref)
    if isinstance(expr, (IsNaN, NotNaN)):
        if t.is_floating:
            return type(expr)(ref)
        return AlwaysFalse() if isinstance(expr, IsNaN) else AlwaysTrue()
    if isinstance(expr, (StartsWith, NotStartsWith)):
        if t.name not in ("string", "binary"):
            raise ExpressionError(
                f"LIKE / startswith needs a string column; {ref.name} is {t}"
            )
        if expr.prefix is None:
            return AlwaysFalse()
        prefix = _coerce_bytes(expr.prefix, ref)
        if isinstance(expr, StartsWith):
            return IsNotNull(ref) if prefix == b"" else StartsWith(ref, prefix)
        return AlwaysFalse() if prefix == b"" else NotStartsWith(ref, prefix)
    if isinstance(expr, Comparison):
        return _bind_comparison(type(expr), ref, expr.literal, zone)
    if isinstance(expr, (In, NotIn)):
        return _bind_in(expr, ref, zone)
    raise ExpressionError(f"cannot bind expression {expr}")


def _bind_in(expr: In | NotIn, ref: BoundRef, zone: dt.tzinfo) -> Expr:
    literals = list(expr.literals)
    if (ref.type.is_integral or ref.type.name == "decimal") and any(
        isinstance(v, float) for v in literals
    ):
        # Spark compares the column and every item in the common type, double.
        literals = [v if v is None or isinstance(v, (bool, str)) else _as_double(v) for v in literals]
    values: list[Any] = []
    ranges: list[Any] = []  # items that match a range of values (a double's preimage)
    has_null = False
    for lit in literals:
        if lit is None:
            has_null = True
            continue
        bound = _bind_comparison(Eq, ref, lit, zone)
        if isinstance(bound, Eq):
            values.append(bound.literal)
        elif not isinstance(bound, AlwaysFalse):
            ranges.append(lit)
    # NaN compares equal to itself in Spark, so dedupe with a NaN-aware key.
    unique = tuple(dict.fromkeys(_dedupe_key(v) for v in values).keys())
    values = [float("nan") if k == ("nan",) else k for k in unique]
    if isinstance(expr, In):
        out: Expr = AlwaysFalse()
        if values:
            out = Eq(ref, values[0]) if len(values) == 1 else In(ref, tuple(values))
        return _simplify(balanced(Or, [out, *(_bind_comparison(Eq, ref, lit, zone) for lit in ranges)]))
    if has_null:  # x NOT IN (..., NULL) is never true
        return AlwaysFalse()
    out = IsNotNull(ref)
    if values:
        out = NotEq(ref, values[0]) if len(values) == 1 else NotIn(ref, tuple(values))
    return _simplify(
        balanced(And, [out, *(_bind_comparison(NotEq, ref, lit, zone) for lit in ranges)])
    )


def _as_double(v: Any) -> Any:
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return v


def _dedupe_key(v: Any) -> Any:
    return ("nan",) if isinstance(v, float) and math.isnan(v) else v


def _bind_comparison(op: type[Comparison], ref: BoundRef, literal: Any, zone: dt.tzinfo = dt.UTC) -> Expr:
    if literal is None:  # comparing with NULL is null, never true, negated or not
        return AlwaysFalse()
    t = ref.type
    if t.is_floating:
        return op(ref, _coerce_float(literal, ref))
    if t.name in ("string", "binary"):
        return op(ref, _coerce_bytes(literal, ref))
    if t.name == "boolean":
        return op(ref, _coerce_bool(literal, ref))
    if t.is_integral or t.name == "decimal":
        if isinstance(literal, float) and math.isfinite(literal):
            return _double_comparison(op, ref, literal, zone)
        if t.is_integral:
            lo, hi = _INT_RANGES[t.name]
            bound = _exact_integral(op, ref, _to_fraction(literal, ref), lo, hi)
            if isinstance(bound, IsNotNull) and op not in (Eq, NotEq) and _beyond_long(literal):
                # Spark 4 folds an integral column compared with an integer literal beyond
                # the long range (a decimal literal) to TRUE, null rows included.
                return AlwaysTrue()
            return bound
        scale = 10**t.scale
        top = 10**t.precision - 1
        q = _to_fraction(literal, ref)
        if isinstance(q, Fraction):
            q = q * scale
        return _exact_integral(op, ref, q, -top, top)
    if t.name == "date":
        return _exact_integral(op, ref, _date_days(literal, ref, zone), -(2**31), 2**31 - 1)
    if t.name == "timestamp":
        return _exact_integral(op, ref, Fraction(_timestamp_micros(literal, ref, zone)), -(2**63), 2**63 - 1)
    raise ExpressionError(f"cannot compare {t} column {ref.name} with {literal!r}")


def _beyond_long(literal: Any) -> bool:
    if isinstance(literal, bool) or not isinstance(literal, (int, Decimal)):
        return False
    if isinstance(literal, Decimal) and not literal.is_finite():
        return False
    return not -(2**63) <= literal <= 2**63 - 1


def _double_comparison(op: type[Comparison], ref: BoundRef, f: float, zone: dt.tzinfo) -> Expr:
    """An integral or decimal column against a double: Spark casts the column to double, so
    ``x = f`` holds for every x that rounds to f (round half to even), not only x == f."""
    low, high, closed = _double_preimage(f)
    lt_low = (Lt if closed else LtEq, low)  # double(x) < f
    le_high = (LtEq if closed else Lt, high)  # double(x) <= f
    gt_high = (Gt if closed else GtEq, high)  # double(x) > f
    ge_low = (GtEq if closed else Gt, low)  # double(x) >= f

    def cmp(pair: tuple[type[Comparison], Fraction]) -> Expr:
        return _bind_comparison(pair[0], ref, pair[1], zone)

    if op in (Eq, NotEq):
        first, last = cmp(ge_low), cmp(le_high)
        k = _single_value(first, last)
        if k is not None:  # one value rounds to f: a plain (bloom-checkable) x = k
            return op(ref, k)
        if op is Eq:
            return _simplify(And(first, last))
        return _simplify(Or(cmp(lt_low), cmp(gt_high)))
    return cmp({Lt: lt_low, LtEq: le_high, Gt: gt_high, GtEq: ge_low}[op])


def _single_value(first: Expr, last: Expr) -> int | None:
    """k when ``first AND last`` (bound bounds on an integer-valued column) is ``x = k``."""
    if isinstance(first, (Gt, GtEq)) and isinstance(last, (Lt, LtEq)):
        lo = first.literal + (1 if isinstance(first, Gt) else 0)
        hi = last.literal - (1 if isinstance(last, Lt) else 0)
        if lo == hi:
            return int(lo)
    return None


def _double_preimage(f: float) -> tuple[Fraction, Fraction, bool]:
    """(low, high, closed): the reals that round to the finite double ``f`` lie between low
    and high, the ends included when ``closed`` (an even significand wins the ties)."""
    import struct

    x = Fraction(f)
    below, above = math.nextafter(f, -math.inf), math.nextafter(f, math.inf)
    low = (Fraction(below) + x) / 2 if math.isfinite(below) else x - (Fraction(above) - x) / 2
    high = (x + Fraction(above)) / 2 if math.isfinite(above) else x + (x - Fraction(below)) / 2
    closed = struct.unpack("<q", struct.pack("<d", f))[0] & 1 == 0
    return low, high, closed


def _exact_integral(
    op: type[Comparison], ref: BoundRef, q: Fraction | _Above | _Below, lo: int, hi: int
) -> Expr:
    """``x <op> q`` for an integer-valued column in ``[lo, hi]`` and an exact rational ``q``."""
    if isinstance(q, (_Above, _Below)):
        below_all = isinstance(q, _Above)  # every value of x is below q
        if op is Eq:
            return AlwaysFalse()
        if op is NotEq:
            return IsNotNull(ref)
        if op in (Lt, LtEq):
            return IsNotNull(ref) if below_all else AlwaysFalse()
        return AlwaysFalse() if below_all else IsNotNull(ref)
    integral = q.denominator == 1
    if op in (Eq, NotEq):
        if not integral or not lo <= q <= hi:
            return AlwaysFalse() if op is Eq else IsNotNull(ref)
        return op(ref, int(q))
    # Lt / LtEq become x <= k; Gt / GtEq become x >= k.
    if op is Lt:
        k = math.ceil(q) - 1
    elif op is LtEq:
        k = math.floor(q)
    elif op is Gt:
        k = math.floor(q) + 1
    else:
        k = math.ceil(q)
    if op in (Lt, LtEq):
        if k >= hi:
            return IsNotNull(ref)
        if k < lo:
            return AlwaysFalse()
        return op(ref, int(q)) if integral else LtEq(ref, k)
    if k <= lo:
        return IsNotNull(ref)
    if k > hi:
        return AlwaysFalse()
    return op(ref, int(q)) if integral else GtEq(ref, k)


def _refuse(ref: BoundRef, literal: Any, why: str) -> ExpressionError:
    return ExpressionError(
        f"cannot compare {ref.type} column {ref.name} with {literal!r}: {why}"
    )


def _to_fraction(literal: Any, ref: BoundRef) -> Fraction | _Above | _Below:
    if isinstance(literal, bool):
        raise _refuse(ref, literal, "use a number, not a boolean")
    if isinstance(literal, (int, Fraction)):
        return Fraction(literal)
    if isinstance(literal, Decimal):
        if literal.is_nan():
            return _Above()
        if literal.is_infinite():
            return _Above() if literal > 0 else _Below()
        return Fraction(literal)
    if isinstance(literal, float):
        if math.isnan(literal) or literal == math.inf:
            return _Above()  # NaN is greater than every number in Spark
        if literal == -math.inf:
            return _Below()
        # The shortest repr is what the user typed: 0.1 means one tenth.
        return Fraction(Decimal(repr(literal)))
    if isinstance(literal, str):
        try:
            return _to_fraction(Decimal(literal.strip()), ref)
        except InvalidOperation:
            raise _refuse(ref, literal, "the string is not a number") from None
    raise _refuse(ref, literal, f"a {type(literal).__name__} is not a number")


def _coerce_float(literal: Any, ref: BoundRef) -> float:
    if isinstance(literal, bool):
        raise _refuse(ref, literal, "use a number, not a boolean")
    try:
        if isinstance(literal, (int, float, Decimal)):
            value = float(literal)
        elif isinstance(literal, str):
            value = float(Decimal(literal.strip()))
        else:
            raise _refuse(ref, literal, f"a {type(literal).__name__} is not a number")
    except (InvalidOperation, OverflowError, ValueError):
        raise _refuse(ref, literal, "the string is not a number") from None
    return 0.0 if value == 0.0 else value  # -0.0 = 0.0


def _coerce_bytes(literal: Any, ref: BoundRef) -> bytes:
    if isinstance(literal, str):
        try:
            return literal.encode("utf-8")
        except UnicodeEncodeError:
            raise _refuse(ref, literal, "the text is not valid UTF-8") from None
    if isinstance(literal, (bytes, bytearray, memoryview)) and ref.type.name == "binary":
        return bytes(literal)
    raise _refuse(ref, literal, "quote the value as a string")


def _coerce_bool(literal: Any, ref: BoundRef) -> bool:
    if isinstance(literal, bool):
        return literal
    if isinstance(literal, str) and literal.strip().lower() in ("true", "false"):
        return literal.strip().lower() == "true"
    raise _refuse(ref, literal, "use TRUE or FALSE")


def _date_days(literal: Any, ref: BoundRef, zone: dt.tzinfo = dt.UTC) -> Fraction:
    """Days since epoch. A string is cast to a date as Spark casts it (a time of day is cut
    off); a timestamp gives a fractional day: Spark compares the date's midnight in the
    session zone with it, so the day count is of the timestamp's wall-clock time there."""
    if isinstance(literal, str):
        text = literal.strip()
        if len(text) > 10 and text[10] in " T":
            text = text[:10]
        try:
            literal = dt.date.fromisoformat(text)
        except ValueError:
            raise _refuse(ref, literal, "write dates as 'YYYY-MM-DD'") from None
    if isinstance(literal, dt.datetime):
        micros = _timestamp_micros(literal, ref, zone)
        wall = _EPOCH_TS + dt.timedelta(microseconds=micros)
        if zone is not dt.UTC:
            try:
                wall = wall.astimezone(zone).replace(tzinfo=dt.UTC)
            except OverflowError:  # within a day of year 1 or 9999: no date lies beyond
                pass
        return Fraction(_timestamp_micros(wall, ref), _DAY_MICROS)
    if isinstance(literal, dt.date):
        return Fraction((literal - _EPOCH_DATE).days)
    raise _refuse(ref, literal, "use a date or a 'YYYY-MM-DD' string")


def _timestamp_micros(literal: Any, ref: BoundRef, zone: dt.tzinfo = dt.UTC) -> int:
    """Microseconds since epoch; naive values, strings without an offset and dates (their
    midnight) are read in ``zone``."""
    if isinstance(literal, str):
        try:
            literal = dt.datetime.fromisoformat(literal.strip())
        except ValueError:
            raise _refuse(ref, literal, "write timestamps as 'YYYY-MM-DD HH:MM:SS[.ffffff]'") from None
    if isinstance(literal, dt.datetime):
        if literal.tzinfo is None:
            literal = literal.replace(tzinfo=zone)
        delta = literal - _EPOCH_TS
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(literal, dt.date):
        if zone is dt.UTC:
            return (literal - _EPOCH_DATE).days * _DAY_MICROS
        return _timestamp_micros(dt.datetime(literal.year, literal.month, literal.day), ref, zone)
    raise _refuse(ref, literal, "use a datetime or a timestamp string")


def _simplify(expr: Expr) -> Expr:
    """Fold AlwaysTrue / AlwaysFalse through And / Or (exact: no Not remains)."""
    if isinstance(expr, (And, Or)):
        left, right = _simplify(expr.left), _simplify(expr.right)
        absorbing = AlwaysFalse if isinstance(expr, And) else AlwaysTrue
        neutral = AlwaysTrue if isinstance(expr, And) else AlwaysFalse
        if isinstance(left, absorbing) or isinstance(right, absorbing):
            return absorbing()
        if isinstance(left, neutral):
            return right
        if isinstance(right, neutral):
            return left
        return type(expr)(left, right)
    return expr


# ---- SQL WHERE clauses (sqlglot) --------------------------------------------------------


def parse_where(sql: str) -> Expr:
    """Parse a Spark SQL boolean condition, e.g. ``"d >= DATE '2024-01-01' AND s LIKE 'ab%'"``.

    Supports AND / OR / NOT, comparisons, [NOT] IN, IS [NOT] NULL, [NOT] BETWEEN,
    [NOT] LIKE 'prefix%' (or a pattern without wildcards), ``isnan(x)``, and literals:
    numbers, strings, TRUE / FALSE, NULL, DATE '...', TIMESTAMP '...', CAST('...' AS type).
    The result is unbound; :func:`bind` checks the column names and literal types.

    Raises:
        ExpressionError: a syntax error (with sqlglot's message) or an unsupported construct
            such as a column compared with a column.
    """
    from sqlglot import exp
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import ParseError, TokenError

    if not sql or not sql.strip():
        raise ExpressionError("empty filter; write a condition such as \"x > 3\"")
    bad = _not_utf8(sql)
    if bad is not None:
        raise ExpressionError(f"filter {_shown(sql)} is not valid UTF-8 text ({bad})")
    spark = Dialect.get_or_raise("spark")
    try:
        tokens = spark.tokenize(sql)
    except TokenError:
        raise ExpressionError(f"cannot parse filter {_shown(sql)}: {_unclosed(sql)}") from None
    if _nesting(tokens) > MAX_NESTING:
        raise too_deep_error(f"filter {_shown(sql)}")
    try:
        trees = spark.parser().parse(tokens, sql)
        if len(trees) != 1 or trees[0] is None:
            raise ExpressionError(f"cannot parse filter {_shown(sql)}: give one condition, without ';'")
        return _SqlConverter(sql, exp).convert(trees[0])
    except ParseError as err:
        raise ExpressionError(f"cannot parse filter {_shown(sql)}: {_syntax_error(err)}") from None
    except RecursionError:
        raise too_deep_error(f"filter {_shown(sql)}") from None


def _shown(text: str, limit: int = 120) -> str:
    """``text`` quoted for a one-line message, shortened in the middle when long."""
    if len(text) > limit:
        text = f"{text[: limit // 2]} ... {text[-limit // 2:]}"
    return repr(text)


def _not_utf8(text: str) -> str | None:
    """Where ``text`` holds a byte that is not UTF-8 (a lone surrogate, as Python decodes
    such bytes of command-line arguments), or None."""
    for i, ch in enumerate(text):
        if "\ud800" <= ch <= "\udfff":
            code = ord(ch)
            byte = f"byte 0x{code - 0xDC00:02x}" if code >= 0xDC80 else f"character U+{code:04X}"
            return f"{byte} at position {i}"
    return None


def _nesting(tokens: list[Any]) -> int:
    """How deep parentheses, NOT and unary signs nest (each costs the parser a level)."""
    from sqlglot.tokens import TokenType

    def kinds(*names: str) -> set[Any]:  # names differ between sqlglot versions (TILDA/TILDE)
        return {getattr(TokenType, n) for n in names if hasattr(TokenType, n)}

    prefix = kinds("NOT", "DASH", "PLUS", "TILDA", "TILDE")
    opens = kinds("L_PAREN", "L_BRACKET")
    closes = kinds("R_PAREN", "R_BRACKET")
    depth = deepest = 0
    run: list[int] = []  # prefix operators still open at each parenthesis level
    unary = 0
    for tok in tokens:
        if tok.token_type in opens:
            run.append(unary)
            depth += 1
            unary = 0
        elif tok.token_type in closes:
            depth = max(0, depth - 1)
            unary = run.pop() if run else 0
        elif tok.token_type in prefix:
            unary += 1
        else:
            continue
        deepest = max(deepest, depth + unary + sum(run))
    return deepest


# sqlglot node names -> what the user typed
_SQL_WORDS = {
    "EQ": "=", "NEQ": "<>", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=", "NullSafeEQ": "<=>",
    "And": "AND", "Or": "OR", "Not": "NOT", "Like": "LIKE", "ILike": "ILIKE", "In": "IN",
    "Between": "BETWEEN", "Is": "IS", "Add": "+", "Sub": "-", "Mul": "*", "Div": "/",
    "Mod": "%", "Neg": "-", "Cast": "CAST", "TryCast": "TRY_CAST",
}


def sql_error_message(err: Any) -> str:
    """sqlglot's ParseError in the user's words (no class names, no tokens, no terminal
    codes), for any message about SQL text the user wrote."""
    return _syntax_error(err)


def _syntax_error(err: Any) -> str:
    """sqlglot's ParseError in the user's words (no class names, no terminal codes)."""
    first = (getattr(err, "errors", None) or [{}])[0]
    desc = str(first.get("description") or err)
    col = first.get("col")
    near = re.sub(r"\x1b\[[0-9;]*m", "", str(first.get("highlight") or "")).strip()
    where = f" at column {col}" if col else ""
    m = re.match(r"Required keyword: '(\w+)' missing for <class '[\w.]*\.(\w+)'>", desc)
    if m:
        key, node = m.groups()
        word = _SQL_WORDS.get(node, node.upper())
        if node in ("Not", "Neg", "Cast", "TryCast") or key != "this":
            side = {"low": "a lower bound", "high": "an upper bound after AND"}.get(key)
            return (f"{word!r} needs {side}{where}" if side
                    else f"{word!r} is missing what follows it{where}")
        return f"{word!r} is missing what comes before it{where}"
    if desc.startswith("Invalid expression / Unexpected token"):
        return f"unexpected {near!r}{where}" if near else f"unexpected end of the filter{where}"
    if desc.startswith("Error tokenizing"):
        return "a quoted string, quoted name or comment is not closed"
    if desc.startswith("Expecting )"):
        return f"a '(' is not closed (expected ')'{where})"
    text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", desc).split())
    text = re.sub(r"<class '[\w.]*\.(\w+)'>", lambda g: repr(_SQL_WORDS.get(g[1], g[1])), text)
    text = re.sub(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: [^>]*>",
                  lambda g: "the end" if g[1] == "SENTINEL" else repr(g[2]), text)
    return f"{text}{where}"


def _unclosed(sql: str) -> str:
    for opener, what in (("'", "a string"), ('"', "a string"), ("`", "a quoted name"),
                         ("/*", "a comment")):
        if opener in sql:
            return f"{what} opened with {opener} is not closed"
    return "it cannot be split into words"


_UNSET = object()


class _SqlConverter:
    def __init__(self, sql: str, exp: Any) -> None:
        self.sql = sql
        self.exp = exp
        self.cmp: dict[type, type[Comparison]] = {
            exp.EQ: Eq, exp.NEQ: NotEq, exp.LT: Lt, exp.LTE: LtEq, exp.GT: Gt, exp.GTE: GtEq,
        }
        self.flip: dict[type[Comparison], type[Comparison]] = {
            Eq: Eq, NotEq: NotEq, Lt: Gt, LtEq: GtEq, Gt: Lt, GtEq: LtEq,
        }

    def fail(self, node: Any, why: str) -> ExpressionError:
        text = node.sql(dialect="spark")
        shown = text if len(text) <= 80 else text[:77] + "..."
        return ExpressionError(f"cannot use {shown!r} in filter {_shown(self.sql)}: {why}")

    def chain(self, node: Any) -> list[Any]:
        """Operands of a chain of one connective, parentheses around its links dropped
        (sqlglot nests a long chain one level per term: walked here without recursion)."""
        exp = self.exp
        kind = type(node)
        out: list[Any] = []
        stack = [node]
        while stack:
            n = stack.pop()
            while isinstance(n, exp.Paren) and isinstance(n.this, kind):
                n = n.this
            if type(n) is kind:
                stack += [n.expression, n.this]
            else:
                out.append(n)
        return out

    def convert(self, node: Any) -> Expr:
        exp = self.exp
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, (exp.And, exp.Or)):
            kind = And if isinstance(node, exp.And) else Or
            return balanced(kind, [self.convert(n) for n in self.chain(node)])
        if isinstance(node, exp.Alias):  # "a IS" reads as "a AS IS"
            raise ExpressionError(
                f"cannot parse filter {_shown(self.sql)}: unexpected {node.alias!r} after "
                f"{node.this.sql(dialect='spark')!r}"
            )
        if isinstance(node, exp.Not):
            return Not(self.convert(node.this))
        if isinstance(node, exp.Boolean):
            return AlwaysTrue() if node.this else AlwaysFalse()
        if type(node) in self.cmp:
            op = self.cmp[type(node)]
            left, right = node.this, node.expression
            if self.is_column(left) and not self.is_column(right):
                return op(self.column(left), self.literal(right))
            if self.is_column(right) and not self.is_column(left):
                return self.flip[op](self.column(right), self.literal(left))
            raise self.fail(node, "compare a column with a literal (column op column and arithmetic cannot prune)")
        if isinstance(node, exp.NullSafeEQ):
            left, right = node.this, node.expression
            if not self.is_column(left):
                left, right = right, left
            value = self.literal(right)
            name = self.column(left)
            return IsNull(name) if value is None else And(Eq(name, value), IsNotNull(name))
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise self.fail(node, "IN needs a list of literals")
            return In(self.column(node.this), tuple(self.literal(e) for e in node.expressions))
        if isinstance(node, exp.Is):
            if isinstance(node.expression, exp.Null):
                return IsNull(self.column(node.this))
            if isinstance(node.expression, exp.Boolean):
                # x IS TRUE is never null: (x = TRUE) AND x IS NOT NULL
                name = self.column(node.this)
                return And(Eq(name, bool(node.expression.this)), IsNotNull(name))
            raise self.fail(node, "IS supports NULL, TRUE and FALSE")
        if isinstance(node, exp.Between):
            name = self.column(node.this)
            return And(GtEq(name, self.literal(node.args["low"])), LtEq(name, self.literal(node.args["high"])))
        if isinstance(node, exp.Like):
            return self.like(node)
        if isinstance(node, exp.IsNan):
            return IsNaN(self.column(node.this))
        if self.is_column(node):  # a bare boolean column: WHERE flag
            return Eq(self.column(node), True)
        raise self.fail(node, "not a supported predicate")

    def like(self, node: Any) -> Expr:
        if node.args.get("escape") is not None:
            raise self.fail(node, "LIKE ... ESCAPE is not supported")
        name = self.column(node.this)
        pattern = self.literal(node.expression)
        if not isinstance(pattern, str):
            raise self.fail(node, "LIKE needs a string pattern")
        prefix: list[str] = []
        i = 0
        while i < len(pattern):
            ch = pattern[i]
            if ch == "\\" and i + 1 < len(pattern):
                prefix.append(pattern[i + 1])
                i += 2
                continue
            if ch == "%":
                if pattern[i:].strip("%") == "":
                    return StartsWith(name, "".join(prefix))
                break
            if ch == "_":
                break
            prefix.append(ch)
            i += 1
        else:
            return Eq(name, "".join(prefix))
        raise self.fail(node, "only LIKE 'prefix%' or a pattern without wildcards can prune")

    def is_column(self, node: Any) -> bool:
        return isinstance(node, self.exp.Column)

    def column(self, node: Any) -> str:
        if not isinstance(node, self.exp.Column):
            raise self.fail(node, "expected a column name")
        if node.table:  # s.a: a struct field (bind refuses it when s is not a struct)
            return ".".join(str(p.name) for p in node.parts)
        return str(node.name)

    def literal(self, node: Any) -> Any:
        exp = self.exp
        if isinstance(node, exp.Paren):
            return self.literal(node.this)
        if isinstance(node, exp.Neg):
            value = self.literal(node.this)
            if isinstance(value, Decimal):
                return value.copy_negate()  # exact: unary minus rounds to 28 digits
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return -value
            raise self.fail(node, "only numbers can be negated")
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Literal):
            text = str(node.this)
            if node.is_string:
                return text
            try:
                value = Decimal(text)
            except InvalidOperation:
                raise self.fail(node, "not a number") from None
            if "e" in text.lower():  # Spark reads 1e10 / 1.5E-3 as a DOUBLE literal
                return float(value)
            return int(value) if value == value.to_integral_value() and "." not in text else value
        if isinstance(node, (exp.Cast, exp.TryCast)):
            inner = self.literal(node.this)
            target = node.to.this
            DT = exp.DataType.Type
            if inner is None:
                return None
            if isinstance(inner, str) and target == DT.DATE:
                try:
                    return dt.date.fromisoformat(inner.strip())
                except ValueError:
                    raise self.fail(node, "write dates as 'YYYY-MM-DD'") from None
            if isinstance(inner, str) and target in (DT.TIMESTAMP, DT.TIMESTAMPTZ, DT.TIMESTAMPNTZ, DT.DATETIME):
                try:
                    return dt.datetime.fromisoformat(inner.strip())
                except ValueError:
                    raise self.fail(node, "write timestamps as 'YYYY-MM-DD HH:MM:SS'") from None
            if target in (DT.DOUBLE, DT.FLOAT) and isinstance(inner, (str, int, float, Decimal)):
                try:
                    value = float(Decimal(str(inner).strip()))
                except InvalidOperation:
                    raise self.fail(node, "not a number") from None
                if target == DT.FLOAT:  # a FLOAT literal holds the nearest float32
                    import numpy as np

                    with np.errstate(over="ignore"):
                        value = float(np.float32(value))
                return value
            if target in (DT.TEXT, DT.VARCHAR, DT.CHAR) and isinstance(inner, str):
                return inner
            if target == DT.DECIMAL or target in (DT.INT, DT.BIGINT, DT.SMALLINT, DT.TINYINT):
                if isinstance(inner, (int, Decimal, str)) and not isinstance(inner, bool):
                    try:
                        value = Decimal(str(inner).strip())
                    except InvalidOperation:
                        raise self.fail(node, "not a number") from None
                    return value if target == DT.DECIMAL else int(value)
            raise self.fail(node, "unsupported CAST of a literal")
        raise self.fail(node, "expected a literal (number, string, TRUE/FALSE, NULL, DATE '...')")


def and_terms(condition: Any) -> list[Any]:
    """The top-level AND terms of a sqlglot condition, in order (parentheses removed):
    what each WHERE / ON splitter of the package walks."""
    from sqlglot import exp

    out: list[Any] = []
    stack = [condition]
    while stack:
        node = stack.pop()
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            stack.extend([node.right, node.left])
        else:
            out.append(node)
    return out
