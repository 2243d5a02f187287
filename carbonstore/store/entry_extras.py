"""Keys beyond CarbonData's (``LoadEntry.extra``) written as dictionary-encoded columns.

Every entry this product commits carries some (``writer``, ``schemaVersion``, a
partitioned table's ``partitioning``), so without them no real table's checkpoint could be
written as columns. In ``entryColumns`` / ``upsertColumns`` (formatVersion 3) the key
``extraColumns`` maps each extra key to ``{"values": [distinct values], "index": [i, ...]}``:
entry ``j`` holds ``values[index[j]]`` under that key, or lacks the key when ``index[j]`` is
-1. A loaded table's extras take a handful of distinct values (every segment of a
partitioned table has the same spec), so a checkpoint of 100,000 entries parses a few
values and one integer array per key instead of 100,000 objects (docs/tablestatus.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

__all__ = ["EXTRA_COLUMNS", "check_extra_columns", "decode_extra_columns", "encode_extra_columns"]

EXTRA_COLUMNS = "extraColumns"


def encode_extra_columns(extras: Sequence[dict[str, Any]], known: frozenset[str]) -> dict[str, Any] | None:
    """The columns of ``extras`` (one dict per entry); None when a value is null (null and
    absent would read alike) or a key is one of CarbonData's."""
    keys: dict[str, None] = {}
    for x in extras:
        keys.update(dict.fromkeys(x))
    if keys.keys() & known:
        return None
    out: dict[str, Any] = {}
    for key in keys:
        values: list[Any] = []
        seen: dict[bytes, int] = {}
        index: list[int] = []
        for x in extras:
            if key not in x:
                index.append(-1)
                continue
            v = x[key]
            if v is None:
                return None
            token = orjson.dumps(v, option=orjson.OPT_SORT_KEYS)
            i = seen.get(token)
            if i is None:
                i = seen[token] = len(values)
                values.append(v)
            index.append(i)
        out[key] = {"values": values, "index": index}
    return out


def decode_extra_columns(columns: Any, n: int, known: frozenset[str]) -> list[dict[str, Any]]:
    """The extras of ``n`` entries from ``extraColumns``.

    Raises:
        ValueError: not an object of ``{"values": [...], "index": [...]}`` per key, an index
            of another length or out of range, a null value, or a key of CarbonData's.
    """
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, values, index in check_extra_columns(columns, n, known):
        for x, i in zip(out, index, strict=True):
            if i >= 0:
                x[key] = values[i]
    return out


def check_extra_columns(columns: Any, n: int, known: frozenset[str]) -> list[tuple[str, list[Any], list[int]]]:
    """``extraColumns`` checked as ``decode_extra_columns`` checks it, as ``(key, values,
    index)`` per key (entries are built from them when used).

    Raises:
        ValueError: as ``decode_extra_columns``.
    """
    if type(columns) is not dict:
        raise ValueError(f"{EXTRA_COLUMNS} must be a JSON object")
    out = []
    for key, col in columns.items():
        if key in known:
            raise ValueError(f"{EXTRA_COLUMNS} holds CarbonData's key {key!r}")
        if type(col) is not dict or col.keys() != {"values", "index"}:
            raise ValueError(f"{EXTRA_COLUMNS} {key!r} must be {{values, index}}")
        values, index = col["values"], col["index"]
        if type(values) is not list or type(index) is not list or len(index) != n:
            raise ValueError(f"{EXTRA_COLUMNS} {key!r}: values and an index of {n} items expected")
        if any(v is None for v in values):
            raise ValueError(f"{EXTRA_COLUMNS} {key!r} holds a null value")
        if not set(map(type, index)) <= {int} or (index and not -1 <= min(index) <= max(index) < len(values)):
            raise ValueError(f"{EXTRA_COLUMNS} {key!r}: an index out of range")
        out.append((key, values, index))
    return out
