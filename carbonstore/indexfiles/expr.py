"""Pruning expressions: small frozen value objects, bound to a table schema once.

An expression is built unbound (column names as ``str``), from SQL with
:func:`parse_where`, from Python with :func:`col` / :func:`eq` and friends, or from Spark
filters (``carbonstore.spark.filters``). :func:`bind` then does three things, once:

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
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, ClassVar, TypeAlias

from carbonstore.errors import ExpressionError
from carbonstore.store.schema import Column, DataType, TableSchema

__all__ = [
    "AlwaysFalse", "AlwaysTrue", "And", "BoundRef", "Comparison", "Eq", "Expr", "Gt", "GtEq",
    "In", "IsNaN", "IsNotNull", "IsNull", "Lt", "LtEq", "Not", "NotEq", "NotIn", "NotNaN",
    "NotStartsWith", "Or", "StartsWith", "Term", "and_", "bind", "col", "not_", "or_",
    "parse_where", "push_not", "references",
]


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
        return f"({self.left} AND {self.right})"


@dataclass(frozen=True, slots=True)
class Or(Expr):
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return f"({self.left} OR {self.right})"


@dataclass(frozen=True, slots=True)
class Not(Expr):
    child: Expr

    def __str__(self) -> str:
        return f"(NOT {self.child})"


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
    """Conjunction of any number of expressions (``AlwaysTrue`` for none)."""
    out: Expr = AlwaysTrue()
    for e in exprs:
        out = e if isinstance(out, AlwaysTrue) else And(out, e)
    return out


def or_(*exprs: Expr) -> Expr:
    """Disjunction of any number of expressions (``AlwaysFalse`` for none)."""
    out: Expr = AlwaysFalse()
    for e in exprs:
        out = e if isinstance(out, AlwaysFalse) else Or(out, e)
    return out


def not_(expr: Expr) -> Expr:
    return Not(expr)


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
    if isinstance(expr, (And, Or)):
        return references(expr.left) | references(expr.right)
    if isinstance(expr, Not):
        return references(expr.child)
    term = getattr(expr, "term", None)
    if term is None:
        return set()
    return {term.name if isinstance(term, BoundRef) else str(term).lower()}


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


def bind(expr: Expr, schema: TableSchema, *, case_sensitive: bool = False) -> Expr:
    """Push ``NOT`` down, resolve column names and coerce literals (see module docstring).

    Raises:
        ExpressionError: unknown column, or a literal that cannot be compared with the
            column's type (the message names both).
    """
    by_name = {c.name if case_sensitive else c.name.lower(): c for c in schema.columns}
    return _simplify(_bind(push_not(expr), schema, by_name, case_sensitive))


def _resolve(term: Term, schema: TableSchema, by_name: dict[str, Column], cs: bool) -> BoundRef:
    if isinstance(term, BoundRef):
        return term
    key = term if cs else term.lower()
    column = by_name.get(key)
    if column is None:
        raise ExpressionError(
            f"filter names unknown column {term!r}; table {schema.qualified_name} has columns "
            f"{', '.join(schema.column_names)}"
        )
    return BoundRef(column)


def _bind(expr: Expr, schema: TableSchema, by_name: dict[str, Column], cs: bool) -> Expr:
    if isinstance(expr, (And, Or)):
        return type(expr)(_bind(expr.left, schema, by_name, cs), _bind(expr.right, schema, by_name, cs))
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
        return _bind_comparison(type(expr), ref, expr.literal)
    if isinstance(expr, (In, NotIn)):
        return _bind_in(expr, ref)
    raise ExpressionError(f"cannot bind expression {expr}")


def _bind_in(expr: In | NotIn, ref: BoundRef) -> Expr:
    values: list[Any] = []
    has_null = False
    for lit in expr.literals:
        if lit is None:
            has_null = True
            continue
        bound = _bind_comparison(Eq, ref, lit)
        if isinstance(bound, Eq):
            values.append(bound.literal)
    # NaN compares equal to itself in Spark, so dedupe with a NaN-aware key.
    unique = tuple(dict.fromkeys(_dedupe_key(v) for v in values).keys())
    values = [float("nan") if k == ("nan",) else k for k in unique]
    if isinstance(expr, In):
        if not values:
            return AlwaysFalse()
        return Eq(ref, values[0]) if len(values) == 1 else In(ref, tuple(values))
    if has_null:  # x NOT IN (..., NULL) is never true
        return AlwaysFalse()
    if not values:
        return IsNotNull(ref)
    return NotEq(ref, values[0]) if len(values) == 1 else NotIn(ref, tuple(values))


def _dedupe_key(v: Any) -> Any:
    return ("nan",) if isinstance(v, float) and math.isnan(v) else v


def _bind_comparison(op: type[Comparison], ref: BoundRef, literal: Any) -> Expr:
    if literal is None:  # comparing with NULL is null, never true, negated or not
        return AlwaysFalse()
    t = ref.type
    if t.is_floating:
        return op(ref, _coerce_float(literal, ref))
    if t.name in ("string", "binary"):
        return op(ref, _coerce_bytes(literal, ref))
    if t.name == "boolean":
        return op(ref, _coerce_bool(literal, ref))
    if t.is_integral:
        lo, hi = _INT_RANGES[t.name]
        return _exact_integral(op, ref, _to_fraction(literal, ref), lo, hi)
    if t.name == "decimal":
        scale = 10**t.scale
        bound = 10**t.precision - 1
        q = _to_fraction(literal, ref)
        if isinstance(q, Fraction):
            q = q * scale
        return _exact_integral(op, ref, q, -bound, bound)
    if t.name == "date":
        return _exact_integral(op, ref, _date_days(literal, ref), -(2**31), 2**31 - 1)
    if t.name == "timestamp":
        return _exact_integral(op, ref, Fraction(_timestamp_micros(literal, ref)), -(2**63), 2**63 - 1)
    raise ExpressionError(f"cannot compare {t} column {ref.name} with {literal!r}")


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
    if isinstance(literal, int):
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
        return literal.encode("utf-8")
    if isinstance(literal, (bytes, bytearray, memoryview)) and ref.type.name == "binary":
        return bytes(literal)
    raise _refuse(ref, literal, "quote the value as a string")


def _coerce_bool(literal: Any, ref: BoundRef) -> bool:
    if isinstance(literal, bool):
        return literal
    if isinstance(literal, str) and literal.strip().lower() in ("true", "false"):
        return literal.strip().lower() == "true"
    raise _refuse(ref, literal, "use TRUE or FALSE")


def _date_days(literal: Any, ref: BoundRef) -> Fraction:
    """Days since epoch; a timestamp literal gives a fractional day (d < ts rounds right)."""
    if isinstance(literal, str):
        text = literal.strip()
        try:
            if len(text) <= 10:
                literal = dt.date.fromisoformat(text)
            else:
                literal = dt.datetime.fromisoformat(text)
        except ValueError:
            raise _refuse(ref, literal, "write dates as 'YYYY-MM-DD'") from None
    if isinstance(literal, dt.datetime):
        return Fraction(_timestamp_micros(literal, ref), _DAY_MICROS)
    if isinstance(literal, dt.date):
        return Fraction((literal - _EPOCH_DATE).days)
    raise _refuse(ref, literal, "use a date or a 'YYYY-MM-DD' string")


def _timestamp_micros(literal: Any, ref: BoundRef) -> int:
    """Microseconds since epoch; naive values and strings without an offset are UTC."""
    if isinstance(literal, str):
        try:
            literal = dt.datetime.fromisoformat(literal.strip())
        except ValueError:
            raise _refuse(ref, literal, "write timestamps as 'YYYY-MM-DD HH:MM:SS[.ffffff]'") from None
    if isinstance(literal, dt.datetime):
        if literal.tzinfo is None:
            literal = literal.replace(tzinfo=dt.UTC)
        delta = literal - _EPOCH_TS
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(literal, dt.date):
        return (literal - _EPOCH_DATE).days * _DAY_MICROS
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
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    if not sql or not sql.strip():
        raise ExpressionError("empty filter; write a condition such as \"x > 3\"")
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except (ParseError, TokenError) as err:
        message = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(err)).split())
        raise ExpressionError(f"cannot parse filter {sql!r}: {message}") from err
    return _SqlConverter(sql, exp).convert(tree)


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
        return ExpressionError(f"cannot use {node.sql(dialect='spark')!r} in filter {self.sql!r}: {why}")

    def convert(self, node: Any) -> Expr:
        exp = self.exp
        if isinstance(node, exp.Paren):
            return self.convert(node.this)
        if isinstance(node, exp.And):
            return And(self.convert(node.this), self.convert(node.expression))
        if isinstance(node, exp.Or):
            return Or(self.convert(node.this), self.convert(node.expression))
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
        if node.table:
            raise self.fail(node, "use plain column names without a table qualifier")
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
            return int(value) if value == value.to_integral_value() and "." not in text and "e" not in text.lower() else value
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
            if target in (DT.DOUBLE, DT.FLOAT) and isinstance(inner, (str, int, Decimal)):
                try:
                    return float(Decimal(str(inner).strip()))
                except InvalidOperation:
                    raise self.fail(node, "not a number") from None
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
