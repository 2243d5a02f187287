"""Spark's decimal arithmetic, exactly (docs/dml.md): the result type of ``+ - * / %``,
``pmod`` and ``div`` with a decimal operand (Spark's ``DecimalPrecision`` with
``spark.sql.decimalOperations.allowPrecisionLoss=true``, its default) and the value Spark
computes: Java's ``BigDecimal`` (a product and a remainder within 38 significant digits,
rounded half up; a quotient at scale 38, rounded half up), then rounded half up to the
result scale; a value the result precision
cannot hold fails (ANSI mode, Spark 4's default: ``NUMERIC_VALUE_OUT_OF_RANGE``).

DuckDB keeps at most 38 digits and its own scale rules (``decimal(38,10) + decimal(38,10)``
is a ``DECIMAL(38,10)`` there, a ``decimal(38,9)`` in Spark), so DML expressions
(``segments.merge``) evaluate such arithmetic through :func:`spark_decimal_op`, a DuckDB
function over the operands' text.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

__all__ = ["INTEGRAL_DIGITS", "MAX_PRECISION", "SCALA_DIGITS", "decimal_of", "literal_type", "result_type", "spark_decimal_op"]

MAX_PRECISION = 38
MINIMUM_ADJUSTED_SCALE = 6
# the decimal type Spark gives an integral operand of a decimal operation
INTEGRAL_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INTEGER": 10, "BIGINT": 20}

_EXACT = Context(prec=200, rounding=ROUND_HALF_UP, Emin=-999999, Emax=999999)
_JAVA = Context(prec=MAX_PRECISION, rounding=ROUND_HALF_UP, Emin=-999999, Emax=999999)
# Scala's BigDecimal default (MathContext.DECIMAL128): Spark's unary minus and abs of a
# decimal past 18 digits go through it, so -x and abs(x) keep 34 significant digits
SCALA_DIGITS = 34
_SCALA = Context(prec=SCALA_DIGITS, rounding=ROUND_HALF_EVEN, Emin=-999999, Emax=999999)


def decimal_of(duckdb_type: str) -> tuple[int, int] | None:
    """(precision, scale) Spark gives a value of DuckDB type ``duckdb_type`` in a decimal
    operation: decimals as they are, integers as decimals of their range (an ``int`` is a
    ``decimal(10,0)``, a ``bigint`` a ``decimal(20,0)``); None for anything else."""
    m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", duckdb_type)
    if m:
        return int(m.group(1)), int(m.group(2))
    if duckdb_type in INTEGRAL_DIGITS:
        return INTEGRAL_DIGITS[duckdb_type], 0
    return None


def literal_type(text: str) -> tuple[int, int]:
    """(precision, scale) of a number literal's text as Spark reads it into a decimal:
    ``0.5`` is a ``decimal(1,1)``, ``1.50`` a ``decimal(3,2)``, an integer literal its digits
    (Spark's ``DecimalType.fromLiteral``, used where an integer literal meets a decimal)."""
    d = Decimal(text)
    _, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    scale = max(-exponent, 0)
    precision = len(digits) + max(exponent, 0)
    return max(precision, scale), scale


def _adjust(precision: int, scale: int) -> tuple[int, int]:
    """Spark's ``DecimalType.adjustPrecisionScale``: past 38 digits the integer digits are
    kept and the scale lowered, to no less than min(scale, 6)."""
    if precision <= MAX_PRECISION:
        return precision, scale
    int_digits = precision - scale
    min_scale = min(scale, MINIMUM_ADJUSTED_SCALE)
    return MAX_PRECISION, max(MAX_PRECISION - int_digits, min_scale)


def result_type(op: str, left: tuple[int, int], right: tuple[int, int]) -> tuple[int, int, bool]:
    """(precision, scale, exact) of Spark's result of ``left op right`` (``op`` one of
    ``+ - * / % pmod``); ``exact``: the result type holds every exact result (no adjustment),
    so DuckDB's own arithmetic, cast to the type, gives Spark's value. For ``div`` (whose
    result is a bigint): the decimal type both operands are cast to first (Spark's
    ``widerDecimalType``)."""
    (p1, s1), (p2, s2) = left, right
    if op in ("+", "-"):
        scale = max(s1, s2)
        precision = max(p1 - s1, p2 - s2) + scale + 1
    elif op == "*":
        scale = s1 + s2
        precision = p1 + p2 + 1
    elif op in ("%", "pmod"):
        scale = max(s1, s2)
        precision = min(p1 - s1, p2 - s2) + scale
    elif op == "/":
        scale = max(MINIMUM_ADJUSTED_SCALE, s1 + p2 + 1)
        precision = p1 - s1 + s2 + scale
    elif op == "div":  # a bigint; the operands are first cast to their wider decimal type
        scale = max(s1, s2)
        return min(max(p1 - s1, p2 - s2) + scale, MAX_PRECISION), scale, False
    else:
        raise ValueError(op)
    p, s = _adjust(precision, scale)
    return p, s, (p, s) == (precision, scale) and op in ("+", "-", "*")


def _apply(op: str, x: Decimal, y: Decimal) -> Decimal:
    if op == "neg":
        return _SCALA.minus(x)
    if op == "abs":
        return _SCALA.abs(x)
    if op == "+":
        return _EXACT.add(x, y)
    if op == "-":
        return _EXACT.subtract(x, y)
    if op == "*":  # Java: multiply(that, MathContext(38, HALF_UP))
        return _JAVA.multiply(x, y)
    if y == 0:
        raise ValueError("[DIVIDE_BY_ZERO] Division by zero")
    if op == "/":  # Java: divide(that, 38, HALF_UP): the exact quotient rounded at scale 38
        (xn, xd), (yn, yd) = x.as_integer_ratio(), y.as_integer_ratio()
        top, bottom = xn * yd * 10 ** MAX_PRECISION, xd * yn
        sign = -1 if (top < 0) != (bottom < 0) else 1
        units = (2 * abs(top) + abs(bottom)) // (2 * abs(bottom))
        return _EXACT.scaleb(Decimal(sign * units), -MAX_PRECISION)
    try:  # Java: remainder(that, MathContext(38, HALF_UP)), failing when the integral
        # quotient needs more than 38 digits (as Python's DivisionImpossible)
        r = _JAVA.remainder(x, y)
        if op == "pmod" and r < 0:
            r = _JAVA.remainder(_EXACT.add(r, y), y)
    except InvalidOperation as err:
        raise ValueError("[ARITHMETIC_OVERFLOW] the quotient of a decimal remainder needs more "
                         "than 38 digits") from err
    return r


def _quotient(a: str, b: str, precision: int, scale: int) -> str:
    """Spark's ``a div b`` of decimals: both cast to ``decimal(precision, scale)`` (ANSI:
    failing when one does not fit), the integral part of the quotient (Java's
    ``divideToIntegralValue`` within 38 digits), a bigint; a quotient beyond the bigint range
    is refused."""
    x, y = Decimal(a), Decimal(b)
    for v in (x, y):
        if v != 0 and v.adjusted() + 1 > precision - scale:
            raise ValueError(f"[NUMERIC_VALUE_OUT_OF_RANGE] {a} cannot be represented as "
                             f"Decimal({precision}, {scale})")
    if y == 0:
        raise ValueError("[DIVIDE_BY_ZERO] Division by zero")
    q = _EXACT.divide_int(x, y)
    if q != 0 and q.adjusted() + 1 > MAX_PRECISION:
        raise ValueError("[ARITHMETIC_OVERFLOW] the quotient of div needs more than 38 digits")
    if not -(2**63) <= q < 2**63:
        raise ValueError(f"[ARITHMETIC_OVERFLOW] the quotient {q} of div is beyond the bigint range")
    return str(int(q))


def _value(op: str, a: str, b: str, precision: int, scale: int) -> str:
    if op == "div":
        return _quotient(a, b, precision, scale)
    r = _apply(op, Decimal(a), Decimal(b))
    out = r.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=_EXACT)
    if out.is_zero():
        out = out.copy_abs()  # Java's BigDecimal has no -0
    if out != 0 and out.adjusted() + 1 > precision - scale:
        raise ValueError(f"[NUMERIC_VALUE_OUT_OF_RANGE] {format(out, 'f')} cannot be "
                         f"represented as Decimal({precision}, {scale})")
    return format(out, "f")


def spark_decimal_op(op: Any, a: Any, b: Any, precision: Any, scale: Any) -> Any:
    """DuckDB function (Arrow): Spark's decimal ``a op b`` (operands as text) as the text of
    a ``decimal(precision, scale)``; NULL where an operand is NULL."""
    import pyarrow as pa

    rows = zip(op.to_pylist(), a.to_pylist(), b.to_pylist(), precision.to_pylist(),
               scale.to_pylist(), strict=True)
    return pa.array([None if x is None or y is None or o is None else _value(o, x, y, p, s)
                     for o, x, y, p, s in rows], pa.string())
