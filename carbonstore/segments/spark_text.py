"""Spark's text of the values DML expressions cast to string (``segments.merge``).

DuckDB prints a value as its own text; Spark casts it to string as Java does. Where the two
agree (strings, integers, decimals, booleans, dates) DuckDB's text is kept; doubles are laid
out as Java's ``Double.toString`` (:func:`java_double_text`), timestamps lose the offset DuckDB
appends (the connection's zone is the session's: ``segments.timezones``); anything else
(floats, intervals, years past 9999, ...) is refused rather than written with other text.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

__all__ = ["java_double_text", "spark_case", "spark_text"]


_TWO_53 = 2.0 ** 53


def java_double_text(text: str) -> str:
    """DuckDB's shortest text of a double as Java's ``Double.toString`` lays it out."""
    if "e" not in text and "n" not in text and 1e-3 <= abs(float(text)) < 1e7:
        return text  # DuckDB's shortest digits, in Java's plain layout already ("100.0")
    low = text.lower()
    if low in ("nan", "-nan"):
        return "NaN"
    if low in ("inf", "infinity", "-inf", "-infinity"):
        return "-Infinity" if low.startswith("-") else "Infinity"
    from decimal import Decimal

    d = Decimal(text)
    if d == 0:
        return "-0.0" if text.startswith("-") else "0.0"
    sign, digits, exponent = d.normalize().as_tuple()
    s = "".join(map(str, digits))
    size = abs(float(d))
    if not (1e-3 <= size < 1e7 or (1e-11 <= size < _TWO_53 and len(s) <= 15)):
        # Java 17's Double.toString prints some doubles with more digits than the shortest
        # (whole numbers from 2^53, powers of two, 1e23, ...); Java 19+ prints the shortest.
        # Inside these ranges both were checked to print the shortest digits.
        raise ValueError(f"cannot cast the double {text} to string exactly as Spark does (Java "
                         "versions print it differently): only values from 1e-11 to 2^53 "
                         "with at most 15 digits, or from 0.001 to 1e7, are cast")
    e10 = len(s) + int(exponent) - 1
    neg = "-" if sign else ""
    if -3 <= e10 < 7:
        if e10 >= 0:
            return f"{neg}{s[:e10 + 1].ljust(e10 + 1, '0')}.{s[e10 + 1:] or '0'}"
        return f"{neg}0.{'0' * (-e10 - 1)}{s}"
    return f"{neg}{s[0]}.{s[1:] or '0'}E{e10}"


_PLAIN_TEXT = ("VARCHAR", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "DECIMAL",
               "BOOLEAN", "DATE", '"NULL"', "NULL")
# DuckDB's text of a timestamp: the wall time (Spark's layout, a fraction without trailing
# zeros) and, WITH TIME ZONE, the offset of the connection's zone, which Spark leaves out.
# Years past 9999 (Spark writes "+10000-...") and BC are refused.
_WALL_TEXT = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?)"
                        r"(?:[+-]\d\d(?::\d\d){0,2})?")


def _wall_text(kind: str, text: str) -> str | None:
    """Spark's text of a TIMESTAMP (``TIMESTAMP WITH TIME ZONE``: the offset dropped) or
    TIMESTAMP_NTZ (``TIMESTAMP``) value DuckDB printed as ``text``; None outside Spark's
    layout."""
    m = _WALL_TEXT.fullmatch(text)
    if m is None or (m.group(1) == text) != (kind == "TIMESTAMP"):
        return None
    return m.group(1)


def spark_text(kind: Any, text: Any) -> Any:
    """Spark's text of a value DuckDB typed ``kind`` and printed as ``text`` (Arrow arrays)."""
    import pyarrow.compute as pc

    if not any(k == "DOUBLE" or not k.startswith(_PLAIN_TEXT)
               for k in pc.unique(kind).to_pylist() if k is not None):
        return text  # DuckDB's text is Spark's
    kinds = kind.to_pylist()
    values = text.to_pylist()
    out = []
    for k, v in zip(kinds, values, strict=True):
        if v is None:
            out.append(None)
        elif k == "DOUBLE":
            out.append(java_double_text(v))
        elif k in ("TIMESTAMP", "TIMESTAMP WITH TIME ZONE") and (wall := _wall_text(k, v)):
            out.append(wall)
        elif k == "FLOAT" or k.startswith(("TIMESTAMP", "INTERVAL", "BLOB", "TIME", "UUID")) \
                or k.endswith("[]") or k.startswith(("STRUCT", "MAP", "UNION", "BIT")):
            raise ValueError(f"cast of a {k.lower()} value to string is not supported in DML "
                             "expressions (its text could differ from Spark's)")
        else:
            out.append(v)
    return pa.array(out, pa.string())


def _assigned(text: str) -> str:
    """``text``, or an error when a character is unassigned in this Python's Unicode
    database (Spark's ICU may know it, and case it, otherwise)."""
    import unicodedata

    if not text.isascii() and any(unicodedata.category(c) == "Cn" for c in text):
        raise ValueError("text with a character this Unicode version does not know cannot be "
                         "cased exactly as Spark does")
    return text


def _initcap(text: str) -> str:
    """Spark's ``initcap``: each word (words are separated by spaces only) lowercased, its
    first character title-cased with the full mapping instead (ß -> Ss, İ stays İ)."""
    def word(w: str) -> str:
        low, first = w.lower(), w[:1].lower()
        return w[:1].title() + low[len(first):] if low.startswith(first) else w.title()
    return " ".join(word(w) for w in text.split(" "))


_CASES = {"upper": str.upper, "lower": str.lower, "initcap": _initcap}


def spark_case(kind: Any, text: Any) -> Any:
    """DuckDB function (Arrow): Spark's ``upper`` / ``lower`` / ``initcap`` of ``text``, with
    Unicode's full case mappings as Java and ICU apply them (``upper('ß')`` is ``SS``, where
    DuckDB gives ``ẞ``; ``lower('İ')`` is ``i̇``)."""
    import pyarrow.compute as pc

    kinds = set(kind.to_pylist())
    if len(kinds) == 1 and pc.all(pc.string_is_ascii(text)).as_py() is not False:
        # ASCII only (one chunk of the usual case): Arrow's ASCII mappings are Spark's
        only = kinds.pop()
        if only == "upper":
            return pc.ascii_upper(text)
        if only == "lower":
            return pc.ascii_lower(text)
    cases = [_CASES[k] if k is not None else None for k in kind.to_pylist()]
    return pa.array([None if t is None or f is None else f(_assigned(t))
                     for f, t in zip(cases, text.to_pylist(), strict=True)], pa.string())
