"""HLL keys hashed exactly as Apache DataSketches hashes them, many at a time.

MurmurHash3_x64_128 (seed 9001) of each 8-byte value or of a string's UTF-8 bytes, its slot
and rank, with numpy or with the compiled kernels of :mod:`carbonstore.statistics.hll_native`
(numba; :func:`native_kernels` says whether they are there). Importing this module does not
import numba.
"""

from __future__ import annotations

import logging
import os
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = [
    "EMPTY_STRING_KEY",
    "WARMUP_KEYS",
    "hll_slots",
    "hll_update",
    "key_slots",
    "key_slots_numpy",
    "native_kernels",
    "raise_registers",
]

log = logging.getLogger(__name__)

WARMUP_KEYS = 4096  # keys handed over between checks of the sketch's mode
_HASH_CHUNK = 32768  # keys hashed per numpy pass
# MurmurHash3_x64_128 as DataSketches calls it for one 8-byte value (seed 9001), so the HLL
# slot and rank of every value can be computed with numpy, without a Python call per value.
_SEED = np.uint64(9001)
_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)
_F1 = np.uint64(0xFF51AFD7ED558CCD)
_F2 = np.uint64(0xC4CEB9FE1A85EC53)
_NAN_BITS = np.uint64(0x7FF8000000000000)


def _fmix64(k: np.ndarray) -> np.ndarray:
    k ^= k >> np.uint64(33)
    k *= _F1
    k ^= k >> np.uint64(33)
    k *= _F2
    k ^= k >> np.uint64(33)
    return k


def _murmur_8(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(h1, h2) of MurmurHash3_x64_128 over each uint64 as 8 little-endian bytes."""
    with np.errstate(over="ignore"):
        k1 = words * _C1
        k1 = np.bitwise_or(k1 << np.uint64(31), k1 >> np.uint64(33), out=k1)
        k1 *= _C2
        h1 = np.bitwise_xor(k1, _SEED ^ np.uint64(8), out=k1)  # tail, then length
        h1 += _SEED ^ np.uint64(8)  # h1 += h2
        h2 = h1 + (_SEED ^ np.uint64(8))  # h2 += h1
        h1 = _fmix64(h1)
        h2 = _fmix64(h2)
        h1 += h2
        h2 += h1
    return h1, h2


def hll_slots(words: np.ndarray, lg_k: int) -> tuple[np.ndarray, np.ndarray]:
    """(slot, rank) of each 8-byte value in a DataSketches HLL sketch of ``lg_k``."""
    return _slots_ranks(*_murmur_8(words), lg_k)


def _hash_words(keys: np.ndarray) -> np.ndarray:
    """The 8 bytes DataSketches hashes: int64 as is, doubles with -0.0 and NaN canonical."""
    if keys.dtype == np.float64:
        keys = np.where(keys == 0.0, 0.0, keys)
        words = keys.view(np.uint64).copy()
        words[np.isnan(keys)] = _NAN_BITS
        return words
    return keys.astype(np.int64, copy=False).view(np.uint64)


def _rotl_inplace(x: np.ndarray, r: int, scratch: np.ndarray) -> None:
    np.left_shift(x, np.uint64(r), out=scratch)
    np.right_shift(x, np.uint64(64 - r), out=x)
    x |= scratch


def _fmix64_inplace(k: np.ndarray, scratch: np.ndarray) -> None:
    for mul in (_F1, _F2, None):
        np.right_shift(k, np.uint64(33), out=scratch)
        k ^= scratch
        if mul is not None:
            k *= mul


EMPTY_STRING_KEY = -1  # DataSketches ignores "": it is counted as the int64 -1 instead,
# whose 8 bytes (all 0xFF) are no valid UTF-8 string, so no string can share its hash.


def _murmur_strings(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(h1, h2) of MurmurHash3_x64_128 (seed 9001) over each string's UTF-8 bytes,
    vectorised over the strings (one numpy pass per 16-byte block of the longest, in
    place: the 8-byte gathers are most of the cost)."""
    if not pa.types.is_string(arr.type):
        arr = arr.cast(pa.large_string()) if not pa.types.is_large_string(arr.type) else arr
    n = len(arr)
    off_type = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offs: np.ndarray[Any, np.dtype[np.int64]] = np.frombuffer(
        arr.buffers()[1], dtype=off_type)[arr.offset: arr.offset + n + 1].astype(np.int64)
    buf = arr.buffers()[2]
    raw = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.empty(0, np.uint8)
    first, last = int(offs[0]), int(offs[-1])
    padded = np.empty(last - first + 32, dtype=np.uint8)
    padded[: last - first] = raw[first:last]
    padded[last - first:] = 0
    starts = offs[:-1] - first
    lengths = offs[1:] - offs[:-1]
    words = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    h1 = np.full(n, _SEED, dtype=np.uint64)
    h2 = np.full(n, _SEED, dtype=np.uint64)
    scratch = np.empty(n, dtype=np.uint64)
    nblocks = lengths >> 4
    c5, m1, m2 = np.uint64(5), np.uint64(0x52DCE729), np.uint64(0x38495AB5)
    every_row = int(nblocks.min()) if n else 0
    with np.errstate(over="ignore"):
        for j in range(int(nblocks.max()) if n else 0):
            if j < every_row:
                idx = None
                pos = starts + 16 * j
                a, b, t = h1, h2, scratch
            else:
                idx = np.flatnonzero(nblocks > j)
                pos = starts[idx] + 16 * j
                a, b, t = h1[idx], h2[idx], scratch[: len(idx)]
            k = words[pos]
            k *= _C1
            _rotl_inplace(k, 31, t)
            k *= _C2
            a ^= k
            _rotl_inplace(a, 27, t)
            a += b
            a *= c5
            a += m1
            pos += 8
            k = words[pos]
            k *= _C2
            _rotl_inplace(k, 33, t)
            k *= _C1
            b ^= k
            _rotl_inplace(b, 31, t)
            b += a
            b *= c5
            b += m2
            if idx is not None:
                h1[idx], h2[idx] = a, b
        # The tail: the bytes past the last block (zero or more), masked to the string.
        tail = (lengths & 15).astype(np.uint64)
        tpos = starts + (nblocks << 4)
        eight = np.uint64(8)
        lo_bits = np.minimum(tail, eight) << np.uint64(3)  # 0..64
        mask = np.where(lo_bits == 64, np.uint64(0xFFFFFFFFFFFFFFFF),
                        (np.uint64(1) << (lo_bits & np.uint64(63))) - np.uint64(1))
        k = words[tpos]
        k &= mask
        k *= _C1
        _rotl_inplace(k, 31, scratch)
        k *= _C2
        h1 ^= k  # no tail: k is 0
        hi_bits = (np.maximum(tail, eight) - eight) << np.uint64(3)  # 0..56
        mask = (np.uint64(1) << hi_bits) - np.uint64(1)
        tpos += 8
        k = words[tpos]
        k &= mask
        k *= _C2
        _rotl_inplace(k, 33, scratch)
        k *= _C1
        h2 ^= k
        length = lengths.astype(np.uint64)
        h1 ^= length
        h2 ^= length
        h1 += h2
        h2 += h1
        _fmix64_inplace(h1, scratch)
        _fmix64_inplace(h2, scratch)
        h1 += h2
        h2 += h1
    empty = lengths == 0
    if empty.any():
        e1, e2 = _murmur_8(np.array([EMPTY_STRING_KEY], dtype=np.int64).view(np.uint64))
        h1[empty], h2[empty] = e1[0], e2[0]
    return h1, h2


def _slots_ranks(h1: np.ndarray, h2: np.ndarray, lg_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Slot = low ``lg_k`` bits of h1; rank = leading zeros of h2 plus one, at most 63.

    The bit length comes from the float64 exponent of each 32-bit half, which float64
    holds exactly (a whole 64-bit value could round up to the next power of two).
    """
    slot = (h1 & np.uint64((1 << lg_k) - 1)).astype(np.intp)
    high = (h2 >> np.uint64(32)).astype(np.float64)
    low = (h2 & np.uint64(0xFFFFFFFF)).astype(np.float64)
    bits = np.where(high > 0, np.frexp(high)[1] + 32, np.frexp(low)[1])
    rank = (np.minimum(64 - bits, 62) + 1).astype(np.uint8)
    return slot, rank


def native_kernels() -> ModuleType | None:
    """The compiled kernels (:mod:`carbonstore.statistics.hll_native`), or None without numba
    or when ``CARBONSTORE_NATIVE_HLL=0``; the numpy functions here then compute the same."""
    global _native_module
    if _native_module is _UNSET:
        module: ModuleType | None = None
        if os.environ.get("CARBONSTORE_NATIVE_HLL", "1") != "0":
            try:
                from carbonstore.statistics import hll_native as module
            except ImportError:
                module = None
            except (RuntimeError, OSError) as err:  # numba found no folder to cache code in
                log.warning("column statistics are hashed with numpy: %s", err)
                module = None
        _native_module = module
    return _native_module  # type: ignore[return-value]


_UNSET = object()
_native_module: object = _UNSET


def _string_buffers(keys: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, bytes, the bytes' whole 8-byte words) of a string/large_string array."""
    off_type = np.int64 if pa.types.is_large_string(keys.type) else np.int32
    offsets = np.frombuffer(keys.buffers()[1], dtype=off_type)[
        keys.offset: keys.offset + len(keys) + 1]
    buf = keys.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(8, np.uint8)
    if data.ctypes.data % 8:  # Arrow allocates aligned; a foreign buffer may not be
        data = data.copy()
    return offsets, data, data[: len(data) // 8 * 8].view(np.uint64)


def _words(keys: pa.Array) -> tuple[np.ndarray, bool]:
    """The 8-byte keys as uint64 (no copy), and whether they are doubles (which the
    kernels make canonical as ``_hash_words`` does)."""
    values = keys.to_numpy()
    return values.view(np.uint64), values.dtype == np.float64


def _is_strings(keys: pa.Array) -> bool:
    return pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)


def key_slots(keys: pa.Array, lg_k: int) -> tuple[np.ndarray, np.ndarray]:
    """(slot, rank) of each sketch key (int64, float64 or string; no nulls)."""
    native = native_kernels()
    if native is None:
        return key_slots_numpy(keys, lg_k)
    if _is_strings(keys):
        return native.slots_ranks_strings(*_string_buffers(keys), lg_k)  # type: ignore[no-any-return]
    words, doubles = _words(keys)
    return native.slots_ranks_words(words, lg_k, doubles)  # type: ignore[no-any-return]


def key_slots_numpy(keys: pa.Array, lg_k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`key_slots` with numpy.

    Hashed in chunks of ``_HASH_CHUNK`` keys: the temporaries of some forty numpy steps
    then stay small (cache-resident, reused by the allocator) instead of fresh
    page-faulting megabytes per step, which is several times faster.
    """
    strings = _is_strings(keys)
    slots, ranks = [], []
    for lo in range(0, len(keys), _HASH_CHUNK):
        part = keys.slice(lo, _HASH_CHUNK)
        if strings:
            h = _murmur_strings(part)
        else:
            h = _murmur_8(_hash_words(part.to_numpy()))
        s, r = _slots_ranks(*h, lg_k)
        slots.append(s)
        ranks.append(r)
    if len(slots) == 1:
        return slots[0], ranks[0]
    return np.concatenate(slots), np.concatenate(ranks)


def hll_update(keys: pa.Array, registers: np.ndarray, state: np.ndarray) -> int:
    """DataSketches' HLL_8 update by each key, in order, with the compiled kernels:
    ``registers`` and ``state`` ([hipAccum, kxq0, kxq1]) change in place; returns how many
    registers rose."""
    native = native_kernels()
    if native is None:
        raise RuntimeError("hll_update needs the compiled kernels")
    if _is_strings(keys):
        return int(native.update_strings(*_string_buffers(keys), registers, state))
    words, doubles = _words(keys)
    return int(native.update_words(words, registers, state, doubles))


def raise_registers(keys: pa.Array, registers: np.ndarray) -> np.ndarray:
    """Raise the HLL ``registers`` in place by each key's rank (numpy); a mask of the keys
    that raise their register (a key left out changes no sketch)."""
    lg_k = int(len(registers)).bit_length() - 1
    slot, rank = key_slots_numpy(keys, lg_k)
    # Keys are compared with the registers as they were before their chunk, so every key
    # that raises a register on the way is kept, in order (and a few that do not).
    keep = np.empty(len(keys), dtype=bool)
    step = max(WARMUP_KEYS, len(registers))
    for lo in range(0, len(keys), step):
        s, r = slot[lo: lo + step], rank[lo: lo + step]
        keep[lo: lo + step] = r > registers[s]
        np.maximum.at(registers, s, r)
    return keep
