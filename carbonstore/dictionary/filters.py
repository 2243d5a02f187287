"""Filter translation: predicates on values -> sets of surrogates.

The pruning layer rewrites a predicate on a dictionary column into one on its INT32
surrogates before min/max, page and bloom pruning. Each function takes the column's
``ColumnDictionary`` and plain Python values of the column type and returns:

* ``eq``: one surrogate, or None when the value is not in the dictionary (no row can match:
  prune everything);
* ``in_``, ``range_``, ``startswith``, ``is_null``, ``not_null``: a sorted ``numpy`` int32
  array of surrogates (empty: no row can match).

Ranges and prefixes go through the sort index: a binary search gives the rank interval of
the matching values, and the sort index maps ranks to surrogates. Strings compare by their
UTF-8 bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from carbonstore.dictionary.column import NULL_SURROGATE, ColumnDictionary
from carbonstore.errors import ExpressionError

_STRING_ID = pa.string().id
_BINARY_ID = pa.binary().id

__all__ = ["eq", "in_", "is_null", "not_null", "prefix_upper_bound", "range_", "startswith"]


def eq(d: ColumnDictionary, value: Any) -> int | None:
    """The surrogate equal to ``value``; None when no row can match.

    ``value`` None means SQL ``= NULL``, which matches nothing.
    """
    if value is None:
        return None
    s = d.surrogate_of(value)
    return s if s and s != NULL_SURROGATE else None


def in_(d: ColumnDictionary, values: Iterable[Any]) -> np.ndarray:
    """Surrogates of the ``values`` present in the dictionary (nulls in the list match nothing)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return np.empty(0, dtype=np.int32)
    if len(vals) <= 16:  # binary searches beat hashing the whole dictionary
        found = [d.surrogate_of(v) for v in vals]
        return np.unique(np.array([x for x in found if x], dtype=np.int32))
    s = d.lookup_many(vals)
    return np.unique(s[s >= 2]).astype(np.int32)


def range_(
    d: ColumnDictionary,
    lo: Any = None,
    lo_inclusive: bool = True,
    hi: Any = None,
    hi_inclusive: bool = True,
) -> np.ndarray:
    """Surrogates of values in the interval between ``lo`` and ``hi`` (None: unbounded)."""
    if d.size == 0:
        return np.empty(0, dtype=np.int32)
    lo_rank = 0 if lo is None else d.rank_bound(lo, right=not lo_inclusive)
    hi_rank = d.size if hi is None else d.rank_bound(hi, right=hi_inclusive)
    return d.surrogates_in_rank_range(lo_rank, hi_rank)


def prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest byte string above every string starting with ``prefix`` (None: none)."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return None
    p[-1] += 1
    return bytes(p)


def startswith(d: ColumnDictionary, prefix: str | bytes) -> np.ndarray:
    """Surrogates of string/binary values starting with ``prefix``."""
    if d.arrow_type.id not in (_STRING_ID, _BINARY_ID):
        raise ExpressionError(f"startswith needs a string column, {d.column.name!r} is {d.arrow_type}")
    raw = prefix.encode("utf-8") if isinstance(prefix, str) else bytes(prefix)
    if d.size == 0:
        return np.empty(0, dtype=np.int32)
    lo_rank = d.rank_bound(raw, right=False) if raw else 0
    upper = prefix_upper_bound(raw)
    hi_rank = d.size if upper is None else d.rank_bound(upper, right=False)
    return d.surrogates_in_rank_range(lo_rank, hi_rank)


def is_null(d: ColumnDictionary) -> np.ndarray:
    """``{1}``: the surrogate every null is stored as."""
    return np.array([NULL_SURROGATE], dtype=np.int32)


def not_null(d: ColumnDictionary) -> np.ndarray:
    """Every value surrogate (2 .. size + 1)."""
    return np.arange(2, d.max_surrogate + 1, dtype=np.int32)
