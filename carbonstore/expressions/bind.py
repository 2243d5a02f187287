"""Binding: names to schema columns, literals to the index arrays' comparable representation.

:func:`bind` pushes ``NOT`` down (expr.push_not), resolves names to :class:`BoundRef` and
coerces each literal to what the index arrays compare (see the contract in expr.py and
docs/pruning.md); :func:`session_zone` resolves the time zone naive timestamps are read in.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from carbonstore.errors import ExpressionError
from carbonstore.expressions.expr import (
    MAX_DEPTH,
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
    NotEq,
    NotIn,
    NotNaN,
    NotStartsWith,
    Or,
    StartsWith,
    Term,
    balanced,
    depth,
    push_not,
    rebalance,
    too_deep_error,
)
from carbonstore.expressions.literals import (
    spark_date,
    spark_double,
    spark_integer,
    spark_timestamp,
)
from carbonstore.store.schema import Column, TableSchema

__all__ = ["bind", "session_zone"]


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
    text = (name or "UTC").strip()
    if text.upper() in ("UTC", "Z", "GMT", "UT"):
        return dt.UTC
    m = re.fullmatch(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?", text, re.IGNORECASE)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        delta = dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0), seconds=int(m.group(4) or 0))
        return dt.timezone(sign * delta) if delta < dt.timedelta(hours=18, seconds=1) else None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # a region only: UTC needs none

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
        if isinstance(literal, str):
            # Spark casts the string to the column's integral type, or, against a decimal
            # column, compares both as doubles; text it cannot read fails the statement
            read = spark_integer(literal) if t.is_integral else spark_double(literal)
            if read is None:
                raise _refuse(ref, literal, "the string is not a number Spark reads"
                              + (" as a whole number" if t.is_integral else ""))
            return _bind_comparison(op, ref, read, zone)
        if isinstance(literal, float) and math.isfinite(literal):
            return _double_comparison(op, ref, literal, zone)
        if t.is_integral:
            lo, hi = _INT_RANGES[t.name]
            if type(literal) is int and lo < literal < hi:  # strictly inside: every operator
                return op(ref, literal)  # keeps it (what _exact_integral gives, without a Fraction)
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
    raise ExpressionError(f"cannot compare {t} column {ref.name} with {_shown(literal)}")


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


def _shown(literal: Any) -> str:
    """``literal`` for a message: its repr, shortened in the middle when long."""
    text = repr(literal) if not isinstance(literal, int) or abs(literal) < 10**100 else (
        f"a number of {len(str(abs(literal)))} digits")
    return text if len(text) <= 120 else f"{text[:58]} ... {text[-58:]}"


def _refuse(ref: BoundRef, literal: Any, why: str) -> ExpressionError:
    return ExpressionError(
        f"cannot compare {ref.type} column {ref.name} with {_shown(literal)}: {why}"
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
        read = spark_integer(literal)
        if read is None:
            raise _refuse(ref, literal, "the string is not a number Spark reads as a whole number")
        return Fraction(read)
    raise _refuse(ref, literal, f"a {type(literal).__name__} is not a number")


def _coerce_float(literal: Any, ref: BoundRef) -> float:
    if isinstance(literal, bool):
        raise _refuse(ref, literal, "use a number, not a boolean")
    try:
        if isinstance(literal, (int, float, Decimal)):
            value = float(literal)
        elif isinstance(literal, str):
            read = spark_double(literal)
            if read is None:
                raise _refuse(ref, literal, "the string is not a number Spark reads")
            value = read
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
        day = spark_date(literal)  # a time of day after the date is cut off, as Spark does
        if day is None:
            raise _refuse(ref, literal, "write dates as 'YYYY-MM-DD'")
        literal = day
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
        read = spark_timestamp(literal)
        if read is None:
            raise _refuse(ref, literal, "write timestamps as 'YYYY-MM-DD HH:MM:SS[.ffffff]'")
        literal = read
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
