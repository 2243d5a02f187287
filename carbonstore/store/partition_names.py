"""Partition folder names: Hive-style escaping of a value or field name (``%XX``) and the
null value's folder text (moved from partitioning.py, which re-exports them)."""

from __future__ import annotations

import re

__all__ = ["NULL_PARTITION", "escape", "unescape"]

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# Hive's FileUtils.escapePathName set, plus '%' itself: these become %XX (UTF-8 bytes).
_ESCAPED = frozenset('"#%\'*/:=?\\\x7f{[]^') | {chr(i) for i in range(0x20)}


def escape(text: str) -> str:
    """Hive-style escaping of a folder name part: unsafe characters become ``%XX``.

    Escaped: control characters, DEL, ``" # % ' * / : = ? \\ { [ ] ^``; a part that is only
    dots (``.``, ``..``) is escaped whole; a value equal to the null marker gets its first
    character escaped, so it never reads back as null. Every other character, any Unicode,
    stays as it is.
    """
    if text and set(text) == {"."}:
        return "%2E" * len(text)
    out = "".join(_pct(ch) if ch in _ESCAPED else ch for ch in text)
    if out == NULL_PARTITION:
        out = "%5F" + out[1:]
    return out


def _pct(ch: str) -> str:
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))


_PCT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def unescape(text: str) -> str:
    """Inverse of :func:`escape`."""
    return _PCT_RUN.sub(
        lambda m: bytes.fromhex(m.group(0).replace("%", "")).decode("utf-8", "surrogatepass"), text
    )
