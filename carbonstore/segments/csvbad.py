"""Values Spark's CSV reader certainly takes for bad records, found by the in-task parser.

When pyarrow cannot convert a column of a split, the load task looks for the first value
that Spark's reader (``PERMISSIVE``) would also refuse: then a load with
``BAD_RECORDS_ACTION=FAIL`` fails at once, naming the file, line, column and value,
instead of reading the whole input again through Spark only to fail there. Only forms
whose fate is certain are judged (ASCII text; integers, floats and doubles, booleans);
anything else still goes to Spark's reader, which decides.

Spark reads an integer with Java's ``Integer.parseInt`` family (an optional sign and
digits, in range), a double with ``Double.parseDouble`` after the ``nanValue``,
``positiveInf`` and ``negativeInf`` texts, and a boolean with ``equalsIgnoreCase`` of
``true`` / ``false``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["certainly_bad", "hint", "nth_row_line"]

_INTEGER = r"^[+-]?[0-9]+$"
_SMALL = r"^-?[0-9]{1,18}$"
_RANGES = {"byte": (-(1 << 7), (1 << 7) - 1), "short": (-(1 << 15), (1 << 15) - 1),
           "int": (-(1 << 31), (1 << 31) - 1)}
_BLANK = r"[\x00-\x20]*"
_HEX = r"0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+"
_JAVA_DOUBLE = (
    "^" + _BLANK + r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
    + "|" + _HEX + r")[fFdD]?)" + _BLANK + "$"
)
_NAN = frozenset({"nan", "+nan", "-nan"})
_POS_INF = frozenset({"inf", "+inf", "infinity", "+infinity"})
_NEG_INF = frozenset({"-inf", "-infinity"})
_DEFAULTS = {"nanValue": "NaN", "positiveInf": "Inf", "negativeInf": "-Inf"}


def certainly_bad(text: pa.Array, type_name: str, specials: tuple[str, ...]) -> pa.Array | None:
    """A mask of the values of ``text`` (a column's fields, nulls already applied) that
    Spark reads as bad records for ``type_name``; None when the type is not judged.

    ``specials``: the ``nanValue``, ``positiveInf`` and ``negativeInf`` texts.
    """
    ascii_ = pc.fill_null(pc.string_is_ascii(text), False)
    if type_name in ("byte", "short", "int", "long"):
        bad = pc.invert(pc.match_substring_regex(text, _INTEGER))
        if type_name in _RANGES:
            lo, hi = _RANGES[type_name]
            small = pc.fill_null(pc.match_substring_regex(text, _SMALL), False)
            values = pc.cast(pc.if_else(small, text, pa.scalar(None, pa.string())), pa.int64())
            out = pc.fill_null(pc.or_(pc.less(values, lo), pc.greater(values, hi)), False)
            bad = pc.or_(bad, out)
    elif type_name in ("float", "double"):
        bad = pc.and_(pc.invert(pc.match_substring_regex(text, _JAVA_DOUBLE)),
                      pc.invert(pc.is_in(text, value_set=pa.array(list(specials)))))
    elif type_name == "boolean":
        bad = pc.invert(pc.is_in(pc.utf8_lower(text), value_set=pa.array(["true", "false"])))
    else:
        return None
    return pc.fill_null(pc.and_(ascii_, bad), False)


def hint(type_name: str, value: str) -> str:
    """What to do about a bad ``value`` that is a common spelling Spark does not read."""
    v = value.strip().lower()
    if type_name in ("float", "double"):
        for names, option in ((_NAN, "nanValue"), (_POS_INF, "positiveInf"),
                              (_NEG_INF, "negativeInf")):
            if v in names:
                return (f"Spark's CSV reader takes {option} from its option (default "
                        f"{_DEFAULTS[option]}); for a file written by pyarrow or pandas load "
                        "with --option nanValue=nan --option positiveInf=inf "
                        "--option negativeInf=-inf")
    return ""


def nth_row_line(data: bytes, row: int) -> int:
    """The 1-based line of ``data`` that holds its ``row``-th (0-based) non-empty line
    (0 when there is none); lines hold no line break inside a field."""
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == 0x0A)
    if len(ends) == 0 or ends[-1] != len(buf) - 1:
        ends = np.append(ends, len(buf))
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts
    last = np.clip(ends - 1, 0, max(len(buf) - 1, 0))
    empty = (lengths == 0) | ((lengths == 1) & (buf[last] == 0x0D) if len(buf) else True)
    nonempty = np.flatnonzero(~empty)
    return int(nonempty[row]) + 1 if row < len(nonempty) else 0
