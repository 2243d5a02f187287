"""Compiled HLL kernels: MurmurHash3_x64_128 as DataSketches hashes a value, the slot and
rank of each key, and DataSketches' HLL_8 update (registers, HIP estimator, KxQ sums), as
loops over a batch's keys.

numba compiles them on first use in a process and caches the machine code on disk, so later
processes load it instead. Importing this module imports numba: import it only where
statistics are computed (:mod:`carbonstore.statistics.accumulator` does, and falls back to its numpy
implementation of the same hash when numba is missing). The tests hold both to DataSketches.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros as _ctlz

__all__ = ["slots_ranks_strings", "slots_ranks_words", "update_strings", "update_words"]

_U = np.uint64
_C1 = _U(0x87C37B91114253D5)
_C2 = _U(0x4CF5AD432745937F)
_F1 = _U(0xFF51AFD7ED558CCD)
_F2 = _U(0xC4CEB9FE1A85EC53)
_M1 = _U(0x52DCE729)
_M2 = _U(0x38495AB5)
_SEED = _U(9001)
_EMPTY = _U(0xFFFFFFFFFFFFFFFF)  # "" is hashed as the int64 -1 (see statistics/hll.py)
_3, _5, _8, _27, _31, _33 = _U(3), _U(5), _U(8), _U(27), _U(31), _U(33)
_1, _63, _64 = _U(1), _U(63), _U(64)
_ONES = _U(0xFFFFFFFFFFFFFFFF)
_ABS = _U(0x7FFFFFFFFFFFFFFF)
_INF = _U(0x7FF0000000000000)
_NAN = _U(0x7FF8000000000000)  # Java's Double.NaN, as DataSketches hashes NaN
_INV_POW2 = np.ldexp(1.0, -np.arange(64))  # 2**-i, exact
_OPTS: dict[str, Any] = {"cache": True, "nogil": True, "boundscheck": False,
                         "error_model": "numpy"}
_INLINE: dict[str, Any] = {**_OPTS, "inline": "always"}
leading_zeros: Any = _ctlz  # an LLVM intrinsic (ctlz), callable in compiled code only


@njit(**_INLINE)
def _rotl(x: Any, r: Any) -> Any:
    return (x << r) | (x >> (_64 - r))


@njit(**_INLINE)
def _fmix(k: Any) -> Any:
    k ^= k >> _33
    k *= _F1
    k ^= k >> _33
    k *= _F2
    k ^= k >> _33
    return k


@njit(**_INLINE)
def _mask(n: Any) -> Any:
    """The low ``n`` (0..8) bytes of a word set (two shifts: one by 64 is undefined)."""
    shift = _U(64 - 8 * n)
    half = shift >> _1
    return (_ONES >> half) >> (shift - half)


@njit(**_INLINE)
def _word(words: Any, p: Any) -> Any:
    """The 8 bytes at ``p`` as a little-endian word: two aligned loads and no branch
    (``words`` are the buffer's whole words; the one after ``p``'s must exist)."""
    q = p >> 3
    r = _U(p & 7) << _3
    return (words[q] >> r) | ((words[q + 1] << _1) << (_63 - r))


@njit(**_INLINE)
def _bytes(data: Any, p: Any, n: Any) -> Any:
    """The ``n`` (0..8) bytes at ``p`` as a little-endian word (the buffer's last bytes)."""
    k = _U(0)
    for i in range(n):
        k |= _U(data[p + i]) << _U(8 * i)
    return k


@njit(**_INLINE)
def _finish(h1: Any, h2: Any, length: Any) -> tuple[Any, Any]:
    h1 ^= length
    h2 ^= length
    h1 += h2
    h2 += h1
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 += h2
    h2 += h1
    return h1, h2


@njit(**_INLINE)
def _mix1(k: Any) -> Any:
    return _rotl(k * _C1, _31) * _C2


@njit(**_INLINE)
def _mix2(k: Any) -> Any:
    return _rotl(k * _C2, _33) * _C1


@njit(**_INLINE)
def _murmur_word(w: Any) -> tuple[Any, Any]:
    return _finish(_SEED ^ _mix1(w), _SEED, _8)


@njit(**_INLINE)
def _block(h1: Any, h2: Any, k1: Any, k2: Any) -> tuple[Any, Any]:
    """One 16-byte block of MurmurHash3_x64_128."""
    h1 = (_rotl(h1 ^ _mix1(k1), _27) + h2) * _5 + _M1
    h2 = (_rotl(h2 ^ _mix2(k2), _31) + h1) * _5 + _M2
    return h1, h2


@njit(**_INLINE)
def _tail(h1: Any, h2: Any, k1: Any, k2: Any, length: Any) -> tuple[Any, Any]:
    """The last bytes (as two words, zero past the end) and the finalization. A tail of no
    bytes gives zero words, which change nothing, so no branch is needed."""
    return _finish(h1 ^ _mix1(k1), h2 ^ _mix2(k2), _U(length))


@njit(**_INLINE)
def _murmur_bytes(data: Any, start: Any, length: Any) -> tuple[Any, Any]:
    """The hash of ``length`` bytes at ``start``, one byte at a time."""
    h1 = _SEED
    h2 = _SEED
    p = start
    for _ in range(length >> 4):
        h1, h2 = _block(h1, h2, _bytes(data, p, 8), _bytes(data, p + 8, 8))
        p += 16
    rest = length & 15
    low = min(rest, 8)
    return _tail(h1, h2, _bytes(data, p, low), _bytes(data, p + 8, rest - low), length)


@njit(**_INLINE)
def _slot_rank(h1: Any, h2: Any, mask: Any) -> tuple[Any, Any]:
    """Slot: low bits of h1; rank: leading zeros of h2 plus one, at most 63."""
    return np.intp(h1 & mask), np.uint8(min(leading_zeros(h2), 62) + 1)


@njit(**_INLINE)
def _lg(n: Any) -> Any:
    """log2 of a power of two."""
    return 63 - leading_zeros(np.uint64(n))


@njit(**_INLINE)
def _update(slots: Any, ranks: Any, registers: Any, state: Any) -> int:
    """DataSketches' HLL_8 coupon update for each (slot, rank), in order: a rank above its
    register raises it and moves the HIP estimator and the KxQ sums exactly as the sketch
    does (same floating-point steps, same order). ``state`` is [hipAccum, kxq0, kxq1];
    returns how many registers rose."""
    k = float(len(registers))
    hip, kxq0, kxq1 = state[0], state[1], state[2]
    raised = 0
    for i in range(len(slots)):
        new = ranks[i]
        old = registers[slots[i]]
        if new > old:
            registers[slots[i]] = new
            hip += k / (kxq0 + kxq1)
            if old < 32:
                kxq0 -= _INV_POW2[old]
            else:
                kxq1 -= _INV_POW2[old]
            if new < 32:
                kxq0 += _INV_POW2[new]
            else:
                kxq1 += _INV_POW2[new]
            raised += 1
    state[0], state[1], state[2] = hip, kxq0, kxq1
    return raised


@njit(**_INLINE)
def _canonical(w: Any) -> Any:
    """A double's bits as hashed: -0.0 as 0.0, every NaN as the canonical quiet NaN."""
    a = w & _ABS
    if a == 0:
        return _U(0)
    if a > _INF:
        return _NAN
    return w


@njit(**_OPTS)
def slots_ranks_words(words: Any, lg_k: int, doubles: bool) -> tuple[Any, Any]:
    """(slot, rank) of each key: uint64 words, int64 values or (``doubles``) float64 bits."""
    n = len(words)
    slots = np.empty(n, np.intp)
    ranks = np.empty(n, np.uint8)
    mask = _U((1 << lg_k) - 1)
    if doubles:
        for i in range(n):
            h1, h2 = _murmur_word(_canonical(words[i]))
            slots[i], ranks[i] = _slot_rank(h1, h2, mask)
    else:
        for i in range(n):
            h1, h2 = _murmur_word(words[i])
            slots[i], ranks[i] = _slot_rank(h1, h2, mask)
    return slots, ranks


@njit(**_OPTS)
def update_words(words: Any, registers: Any, state: Any, doubles: bool) -> int:
    """HLL_8 update by each uint64 key, in order (see ``_update``).

    Hashing first, then the registers, lets the hashing loop run on SIMD lanes.
    """
    slots, ranks = slots_ranks_words(words, _lg(len(registers)), doubles)
    return _update(slots, ranks, registers, state)


@njit(**_INLINE)
def _hash_string(offsets: Any, data: Any, words: Any, i: Any) -> tuple[Any, Any]:
    start = offsets[i]
    length = offsets[i + 1] - start
    if length == 0:
        return _murmur_word(_EMPTY)
    if ((start + length) >> 3) + 2 >= len(words):  # near the buffer's end
        return _murmur_bytes(data, start, length)
    h1 = _SEED
    h2 = _SEED
    p = start
    for _ in range(length >> 4):
        h1, h2 = _block(h1, h2, _word(words, p), _word(words, p + 8))
        p += 16
    rest = length & 15
    low = min(rest, 8)
    return _tail(h1, h2, _word(words, p) & _mask(low), _word(words, p + 8) & _mask(rest - low),
                 length)


@njit(**_OPTS)
def slots_ranks_strings(offsets: Any, data: Any, words: Any, lg_k: int) -> tuple[Any, Any]:
    """(slot, rank) of each string: ``offsets`` into the UTF-8 ``data``, whose whole 8-byte
    words are ``words``."""
    n = len(offsets) - 1
    slots = np.empty(n, np.intp)
    ranks = np.empty(n, np.uint8)
    mask = _U((1 << lg_k) - 1)
    for i in range(n):
        h1, h2 = _hash_string(offsets, data, words, i)
        slots[i], ranks[i] = _slot_rank(h1, h2, mask)
    return slots, ranks


@njit(**_OPTS)
def update_strings(offsets: Any, data: Any, words: Any, registers: Any, state: Any) -> int:
    """HLL_8 update by each string, in order (see ``_update``)."""
    slots, ranks = slots_ranks_strings(offsets, data, words, _lg(len(registers)))
    return _update(slots, ranks, registers, state)
