"""Text read as Spark casts it: the string literals of a filter compared with a typed column.

Spark (ANSI, its default) casts a string compared with a column to the column's type (a
string against a decimal column: both to DOUBLE) and fails the statement on a string it
cannot read; a session without ANSI reads such a string as NULL, or truncates ``'5.5'`` to
``5`` for an integer. Each function here returns the value Spark reads, or None when the
text is not one Spark surely reads the same way in both modes: the binder then refuses the
literal, so the filter prunes nothing and Spark decides (fails, or finds its rows). Python's
own readers accept more than Spark (``Decimal('1_000')``, ``'５'``, ``'20240105'`` as a
date, ``'2024-W01-5'``), and a value read where Spark fails would answer a count that Spark
never gives.

Accepted (ASCII only, surrounding whitespace ignored, as Spark trims it):

- integers: ``[+-]digits`` within the BIGINT range (not ``5.0``, ``1e3``, ``0x10``);
- doubles: ``[+-]digits[.digits][e[+-]digits]``, ``.5``, ``5.``, ``NaN``, ``Infinity``,
  ``inf`` (any case, signed);
- dates: ``yyyy-[m]m-[d]d``, optionally followed by a time of day after a space or ``T``
  (Spark ignores it);
- timestamps: ``yyyy-[m]m-[d]d[( |T)hh[:mm[:ss[.fraction]]]][Z|(+|-)hh[:mm]]``, the
  fraction cut to microseconds as Spark cuts it.
"""

from __future__ import annotations

import datetime as dt
import re

__all__ = ["spark_date", "spark_double", "spark_integer", "spark_timestamp"]

_INTEGER = re.compile(r"[+-]?[0-9]+")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_DOUBLE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SPECIAL = {"nan": float("nan"), "infinity": float("inf"), "inf": float("inf")}
_DAY = r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
_TIME = r"([0-9]{1,2})(?::([0-9]{1,2})(?::([0-9]{1,2})(?:\.([0-9]+))?)?)?"
_DATE = re.compile(_DAY + r"(?:[ T]" + _TIME + r")?")
_TIMESTAMP = re.compile(_DAY + r"(?:[ T]" + _TIME + r"(Z|[+-][0-9]{2}(?::?[0-9]{2})?)?)?")


def _trimmed(text: str) -> str | None:
    text = text.strip(" \t\n\r\f\v")
    return text if text.isascii() else None


def spark_integer(text: str) -> int | None:
    """The integer Spark reads from ``text`` compared with an integral column (the text is
    cast to BIGINT: beyond its range the statement fails), or None."""
    t = _trimmed(text)
    if t is None or not _INTEGER.fullmatch(t):
        return None
    digits = t.lstrip("+-").lstrip("0")  # leading zeros: still a BIGINT, read without them
    if len(digits) > 19:  # beyond BIGINT (and Python's int() limit of 4,300 digits)
        return None
    value = -int(digits or "0") if t.startswith("-") else int(digits or "0")
    return value if _LONG_MIN <= value <= _LONG_MAX else None


def spark_double(text: str) -> float | None:
    """The double Spark reads from ``text``, or None."""
    t = _trimmed(text)
    if t is None:
        return None
    body = t.lstrip("+-")
    special = _SPECIAL.get(body.lower())
    if special is not None and len(t) - len(body) <= 1:
        return -special if t.startswith("-") else special
    if not _DOUBLE.fullmatch(t):
        return None
    try:
        return float(t)
    except (ValueError, OverflowError):
        return None


def spark_date(text: str) -> dt.date | None:
    """The date Spark reads from ``text`` (a time of day after it ignored), or None."""
    t = _trimmed(text)
    m = _DATE.fullmatch(t) if t is not None else None
    if m is None:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def spark_timestamp(text: str) -> dt.datetime | None:
    """The timestamp Spark reads from ``text``: naive without an offset (the caller reads
    it in the session time zone), aware with one; or None."""
    t = _trimmed(text)
    m = _TIMESTAMP.fullmatch(t) if t is not None else None
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, offset = m.groups()
    try:
        value = dt.datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0),
                            int(second or 0), int((fraction or "0")[:6].ljust(6, "0")))
    except ValueError:
        return None
    if offset is None:
        return value
    if offset == "Z":
        return value.replace(tzinfo=dt.UTC)
    digits = offset[1:].replace(":", "")
    delta = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
    if delta > dt.timedelta(hours=18):
        return None
    try:
        return value.replace(tzinfo=dt.timezone(-delta if offset[0] == "-" else delta))
    except ValueError:
        return None
