"""The order of stored strings and binary: unsigned bytewise (Parquet's order for UTF8 and
BINARY statistics). Shared by pruning (truncated maximums, LIKE prefixes) and partition
bounds (truncate transforms), so it lives below both."""

from __future__ import annotations

__all__ = ["prefix_successor"]


def prefix_successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``.

    None when there is none (empty prefix or all 0xff bytes).
    """
    p = prefix.rstrip(b"\xff")
    if not p:
        return None
    return p[:-1] + bytes([p[-1] + 1])
