"""Bloom probes of many bitsets at once (split-block bloom filters, see bloom.py).

A lookup probes one bitset per row group of every candidate segment; one numpy call per
bitset costs more in call overhead than in arithmetic. :func:`might_contain_any` takes
all of them: per (bitset, hash) only the one 32-byte block the hash selects is read, the
blocks are gathered with one join and tested in one vectorised pass.
:func:`might_contain_packed` does the same over bitsets already laid out in one array of
32-bit words (a column's bitsets of many segments, read once and kept): no Python work per
bitset at all.

A segment-level probe of the table's bloom pack (pruning/segment_blooms.py) sees the
bitsets of every row group of a candidate segment; where all of them answer alike for a
set of hashes, :func:`remember_verdicts` keeps that answer with the index snapshot the
segment is planned from, and the row-group level asks :func:`known_verdict` before it reads
the bitset again from the segment's merge index (one read and one whole-bitset checksum per
surviving segment, the same answer). Keys are exact: the snapshot object, the segment's row
in it, the index column's name and the hash values; a bitset's answer for a hash never
changes (index files are immutable), so a kept verdict never goes stale.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.bloom import BLOCK_BYTES, SALTS

__all__ = ["has_verdicts", "known_verdict", "might_contain_any", "might_contain_packed", "remember_verdicts"]

_MASK32 = np.uint64(0xFFFFFFFF)


def might_contain_any(
    bitsets: Sequence[bytes | memoryview | None], hashes: npt.NDArray[np.uint64] | Sequence[Any]
) -> npt.NDArray[np.bool_]:
    """Per bitset: True unless it proves every value of ``hashes`` absent.

    ``None`` (no bitset) may hold anything: True. Same answers as
    ``bloom.might_contain_many(b, hashes).any()`` for each bitset ``b``.

    Raises:
        CorruptIndexError: a bitset is not a whole number of 32-byte blocks.
    """
    n = len(bitsets)
    out = np.ones(n, dtype=bool)
    h = np.asarray(hashes, dtype=np.uint64).reshape(-1)
    if not n:
        return out
    if not len(h):
        return np.array([b is None for b in bitsets], dtype=bool)
    present = [i for i, b in enumerate(bitsets) if b is not None]
    if not present:
        return out
    blocks = np.empty(len(present), dtype=np.uint64)
    for j, i in enumerate(present):
        size = len(bitsets[i])  # type: ignore[arg-type]
        if size < BLOCK_BYTES or size % BLOCK_BYTES:
            raise CorruptIndexError(f"bloom bitset of {size} bytes is not a whole number of 32-byte blocks")
        blocks[j] = size // BLOCK_BYTES
    # block of each (bitset, hash): ((h >> 32) * num_blocks) >> 32 (fits: both < 2^32)
    block = (((h >> np.uint64(32))[None, :] * blocks[:, None]) >> np.uint64(32)).astype(np.int64)
    starts = (block * BLOCK_BYTES).tolist()
    width = len(h)
    chunks = []
    for j, i in enumerate(present):
        b = bitsets[i]
        for s in starts[j]:
            chunks.append(b[s : s + BLOCK_BYTES])  # type: ignore[index]
    words = np.frombuffer(b"".join(chunks), dtype="<u4").reshape(len(present), width, 8)
    key = (h & _MASK32).astype(np.uint32)
    bits = (key[:, None] * SALTS[None, :]) >> np.uint32(27)  # uint32 multiply wraps mod 2^32
    hit = np.all((words >> bits[None, :, :]) & np.uint32(1), axis=2)  # (bitset, hash)
    out[np.asarray(present, dtype=np.intp)] = hit.any(axis=1)
    return out


def might_contain_packed(
    words: npt.NDArray[np.uint32], start: npt.NDArray[np.int64], num_blocks: npt.NDArray[np.int64],
    hashes: npt.NDArray[np.uint64],
) -> npt.NDArray[np.bool_]:
    """Per bitset ``i`` (``num_blocks[i]`` 32-byte blocks at word ``start[i]`` of ``words``):
    True unless it proves every value of ``hashes`` absent.

    Same answers as :func:`might_contain_any` over the bitsets; no hashes: all False. The
    caller checked the layout (every bitset inside ``words``, ``num_blocks >= 1``).
    """
    h = np.asarray(hashes, dtype=np.uint64).reshape(-1)
    n = len(start)
    if not n or not len(h):
        return np.zeros(n, dtype=bool)
    nb = np.asarray(num_blocks, dtype=np.uint64)
    block = ((h >> np.uint64(32))[None, :] * nb[:, None]) >> np.uint64(32)  # (bitset, hash)
    first = np.asarray(start, dtype=np.int64)[:, None] + block.astype(np.int64) * 8
    picked = words[first[:, :, None] + np.arange(8, dtype=np.int64)]  # (bitset, hash, 8)
    key = (h & _MASK32).astype(np.uint32)
    bits = (key[:, None] * SALTS[None, :]) >> np.uint32(27)  # uint32 multiply wraps mod 2^32
    hit = np.all((picked >> bits[None, :, :]) & np.uint32(1), axis=2)
    return hit.any(axis=1)


# ---- answers a whole-segment probe already proved ------------------------------------------------
_VERDICTS: weakref.WeakKeyDictionary[Any, dict[tuple[int, str, bytes], bool]] = weakref.WeakKeyDictionary()
_VERDICT_COLUMNS: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_VERDICTS_LOCK = threading.Lock()
_VERDICTS_PER_SNAPSHOT = 4096  # a few hundred lookups' survivors: then forgotten and relearned


def remember_verdicts(snapshot: Any, rows: Sequence[int], column: str, hashes: npt.NDArray[np.uint64],
                      might: bool) -> None:
    """Every bitset of index column ``column`` of segment row ``rows[i]`` of ``snapshot``
    (each of its row groups has one) answers ``might`` for ``hashes``."""
    if not len(rows):
        return
    h = np.asarray(hashes, dtype=np.uint64).tobytes()
    with _VERDICTS_LOCK:
        try:
            known = _VERDICTS.setdefault(snapshot, {})
        except TypeError:  # an owner that cannot be weakly referenced: nothing kept
            return
        if len(known) + len(rows) > _VERDICTS_PER_SNAPSHOT:
            known.clear()
        _VERDICT_COLUMNS.setdefault(snapshot, set()).add(column)
        for row in rows:
            known[(int(row), column, h)] = might


def has_verdicts(arrays: Any, column: str) -> bool:
    """Whether :func:`known_verdict` may know something of index column ``column`` of
    ``arrays`` (cheap: ask it per row group only then)."""
    if not _VERDICT_COLUMNS:
        return False
    parts = getattr(arrays, "parts", None)
    if parts is not None:
        return any(has_verdicts(p, column) for p in parts)
    snapshot = getattr(arrays, "snapshot", None)
    try:
        return snapshot is not None and column in _VERDICT_COLUMNS.get(snapshot, ())
    except TypeError:  # not weakly referenceable: nothing kept
        return False


def known_verdict(arrays: Any, rg: int, column: str, hashes: npt.NDArray[np.uint64]) -> bool | None:
    """What :func:`remember_verdicts` proved of row group ``rg`` of ``arrays`` (index arrays
    over snapshot segments: ``snapshot``, ``rows``, ``rg_part``; or a concatenation of them:
    ``parts``, ``rg_part``, ``rg_offsets``) and index column ``column`` for ``hashes``, or
    None (unknown: probe its bitset)."""
    parts = getattr(arrays, "parts", None)
    if parts is not None:  # concatenated indexes: the part holding the row group
        try:
            part = int(arrays.rg_part[rg])
            return known_verdict(parts[part], rg - int(arrays.rg_offsets[part]), column, hashes)
        except (AttributeError, IndexError, TypeError):
            return None
    snapshot = getattr(arrays, "snapshot", None)
    if snapshot is None or not _VERDICTS:
        return None
    try:
        known = _VERDICTS.get(snapshot)
        if not known:
            return None
        row = int(arrays.rows[int(arrays.rg_part[rg])])
    except (AttributeError, IndexError, TypeError):
        return None
    return known.get((row, column, np.asarray(hashes, dtype=np.uint64).tobytes()))
