"""Bloom probes of many bitsets at once (split-block bloom filters, see bloom.py).

A lookup probes one bitset per row group of every candidate segment; one numpy call per
bitset costs more in call overhead than in arithmetic. :func:`might_contain_any` takes
all of them: per (bitset, hash) only the one 32-byte block the hash selects is read, the
blocks are gathered with one join and tested in one vectorised pass.
:func:`might_contain_packed` does the same over bitsets already laid out in one array of
32-bit words (a column's bitsets of many segments, read once and kept): no Python work per
bitset at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.bloom import BLOCK_BYTES, SALTS

__all__ = ["might_contain_any", "might_contain_packed"]

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
