"""Spark's (ANSI) casts of text to a double, a float, a boolean and a date, for DML
expressions (``segments.merge``): DuckDB's own casts read other text than Spark's (DuckDB
refuses ``'1.5d'``, ``' true '`` and ``'2024-1'``, which Spark reads, and reads text Spark
refuses), so these casts are DuckDB functions over Arrow that read text exactly as Spark
does, and fail (``CAST_INVALID_INPUT``) where Spark fails.

- a double: Java's ``Double.parseDouble`` (blanks and control characters around the text
  ignored, a ``d``/``D``/``f``/``F`` suffix, hexadecimal ``0x1.8p1``, ``NaN``,
  ``Infinity``, a value beyond the double range is infinite), then Spark's special words
  (``inf``, ``-inf``, ``infinity``, ``nan`` in any case);
- a float: the same text rounded to a float once (Java's ``Float.parseFloat``); a text whose
  double lies exactly half way between two floats is refused (rounding it twice could give
  the other float);
- a boolean: ``t true y yes 1`` / ``f false n no 0`` in any case, between blanks;
- a date: ``[+-]yyyy[-m[m][-d[d]]]`` with a year of 4 to 7 digits, a day followed by a
  blank or ``T`` and anything (Spark's ``stringToDate``); dates outside the years 1 to 9999
  are refused (the store's writer cannot hold them).
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa

__all__ = ["BLANKS_PATTERN", "spark_boolean", "spark_date", "spark_double", "spark_double_decimal", "to_boolean", "to_date", "to_double"]

# the characters Spark 4 strips around text it casts (checked one by one against Spark:
# the controls U+0000-U+001F and the space are; U+007F is, except around a double; U+0085,
# U+00A0, U+1680, U+2028, U+202F, U+205F, U+FEFF are not). Spark strips some other
# spaces (U+3000, U+2003) in some casts and not in others: text with them fails here, a
# clear error where Spark may give a value, never another value.
_SPACES = "".join(chr(c) for c in range(33))
_JAVA_TRIM = _SPACES
_DIGITS = r"[0-9]+"
_EXPONENT = r"(?:[eE][+-]?[0-9]+)"
_DECIMAL_TEXT = re.compile(
    rf"[+-]?(?:{_DIGITS}\.(?:[0-9]*){_EXPONENT}?|\.{_DIGITS}{_EXPONENT}?|{_DIGITS}{_EXPONENT}?)[dDfF]?")
_HEX_TEXT = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+))[pP]([+-]?[0-9]+)[dDfF]?")
_JAVA_WORDS = {"nan": float("nan"), "+nan": float("nan"), "-nan": float("nan"),
               "infinity": float("inf"), "+infinity": float("inf"), "-infinity": float("-inf")}
# Spark's processFloatingPointSpecialLiterals (after Java's parse fails), case-insensitive
_SPARK_WORDS = {"inf": float("inf"), "+inf": float("inf"), "infinity": float("inf"),
                "+infinity": float("inf"), "-inf": float("-inf"), "-infinity": float("-inf"),
                "nan": float("nan")}


def _invalid(text: str, to: str) -> ValueError:
    return ValueError(f"[CAST_INVALID_INPUT] the value {text!r} cannot be cast to {to}")


def to_double(text: str) -> float:
    """Spark's ``CAST(text AS DOUBLE)``."""
    s = text.strip(_JAVA_TRIM)
    if _DECIMAL_TEXT.fullmatch(s):
        return float(s.rstrip("dDfF"))
    m = _HEX_TEXT.fullmatch(s)
    if m:
        sign, mantissa, power = m.groups()
        return float.fromhex(f"{sign}0x{mantissa}p{power}")
    # Java reads NaN and Infinity with a sign and no suffix, case-sensitively
    if s.lstrip("+-") in ("NaN", "Infinity") and s.count("+") + s.count("-") <= 1:
        return _JAVA_WORDS[s.lower()]
    word = s.lower()  # Spark: its own words, trimmed
    if word in _SPARK_WORDS:
        return _SPARK_WORDS[word]
    raise _invalid(text, "DOUBLE")


def _to_float(text: str) -> float:
    """Spark's ``CAST(text AS FLOAT)``, as a double holding the float."""
    import numpy as np

    d = to_double(text)
    with np.errstate(over="ignore"):  # beyond the float range: Infinity, as in Java
        f = float(np.float32(d))
    if d != f and abs(d) < 3.4e38:
        other = float(np.nextafter(np.float32(f), np.float32(np.inf if d > f else -np.inf)))
        plain = text.strip(_JAVA_TRIM).rstrip("dDfF")
        exact = _DECIMAL_TEXT.fullmatch(plain) and Decimal(plain) == Decimal(d)
        if abs(d - f) == abs(other - d) and not exact:  # half way only after rounding to a
            # double: Java rounds the text once, to the float (a true tie goes to even)
            raise ValueError(f"cannot cast {text!r} to FLOAT exactly as Spark does (half way "
                             "between two floats): cast it to DOUBLE")
    return f


_TRUE = frozenset({"t", "true", "y", "yes", "1"})
_FALSE = frozenset({"f", "false", "n", "no", "0"})
_BLANKS = _SPACES + "\x7f"
# the same as a regular expression (RE2, for DuckDB): text cast to an integer
BLANKS_PATTERN = "[\\x00-\\x20\\x7f]"


def to_boolean(text: str) -> bool:
    """Spark's ``CAST(text AS BOOLEAN)``."""
    word = text.strip(_BLANKS).lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise _invalid(text, "BOOLEAN")


_EPOCH = dt.date(1970, 1, 1).toordinal()


def to_date(text: str) -> int:
    """Spark's ``CAST(text AS DATE)`` as days since 1970-01-01 (Spark's ``stringToDate``)."""
    s = text.strip(_BLANKS)
    i, sign = 0, 1
    if s[:1] in ("+", "-"):
        sign, i = (-1 if s[0] == "-" else 1), 1
    segments, digits, part = [1, 1, 1], 0, 0
    value = 0
    while i < len(s) and part < 3 and s[i] not in (" ", "T"):
        c = s[i]
        if part < 2 and c == "-":
            if not _valid_digits(part, digits):
                raise _invalid(text, "DATE")
            segments[part], value, digits, part = value, 0, 0, part + 1
        elif "0" <= c <= "9":
            value, digits = value * 10 + ord(c) - 48, digits + 1
        else:
            raise _invalid(text, "DATE")
        i += 1
    if not _valid_digits(part, digits) or (part < 2 and i < len(s)):
        raise _invalid(text, "DATE")
    segments[part] = value
    year = sign * segments[0]
    if not 1 <= year <= 9999:
        if 1 <= segments[1] <= 12 and 1 <= segments[2] <= 31:
            raise ValueError(f"cannot store the date {text!r}: only the years 1 to 9999 are "
                             "stored")
        raise _invalid(text, "DATE")
    try:
        return dt.date(year, segments[1], segments[2]).toordinal() - _EPOCH
    except ValueError:
        raise _invalid(text, "DATE") from None


def _valid_digits(part: int, digits: int) -> bool:
    return 4 <= digits <= 7 if part == 0 else 0 < digits <= 2


def _each(values: Any, convert: Any, kind: pa.DataType) -> Any:
    return pa.array([None if v is None else convert(v) for v in values.to_pylist()], kind)


def spark_double(text: Any, kind: Any) -> Any:
    """DuckDB function (Arrow): text as Spark casts it to a double (``kind`` "DOUBLE") or a
    float ("FLOAT"), as doubles; NULL stays NULL."""
    floats = kind.to_pylist()
    return pa.array([None if v is None else (_to_float(v) if k == "FLOAT" else to_double(v))
                     for v, k in zip(text.to_pylist(), floats, strict=True)], pa.float64())


def spark_boolean(text: Any) -> Any:
    """DuckDB function (Arrow): text as Spark casts it to a boolean."""
    return _each(text, to_boolean, pa.bool_())


def spark_date(text: Any) -> Any:
    """DuckDB function (Arrow): text as Spark casts it to a date."""
    return _each(text, to_date, pa.int32()).cast(pa.date32())


def spark_double_decimal(values: Any, scale: Any) -> Any:
    """DuckDB function (Arrow): doubles as Spark casts them to a decimal of ``scale``, as
    plain text: the double's Java text (Scala's ``BigDecimal(double)``) rounded half up;
    NaN and Infinity NULL. A double whose Java text differs between Java versions is
    refused (DuckDB's own cast of a double to a decimal is inexact past 2^53)."""
    import math
    from decimal import ROUND_HALF_UP, Context

    from carbonstore.segments.spark_text import java_double_text

    context = Context(prec=80, rounding=ROUND_HALF_UP)
    out: list[str | None] = []
    for v, k in zip(values.to_pylist(), scale.to_pylist(), strict=True):
        if v is None or not math.isfinite(v):
            out.append(None)
            continue
        if v != 0:
            java_double_text(repr(v))  # raises where Java versions print it differently
        out.append(format(Decimal(repr(v)).quantize(Decimal(1).scaleb(-k), context=context), "f"))
    return pa.array(out, pa.string())
