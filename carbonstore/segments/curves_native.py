"""Compiled curve kernels: grid cells, Z-order and Hilbert keys, one loop per value.

The numpy versions in :mod:`carbonstore.segments.curves` are the reference (and what the
property tests check the definitions on); these compute the same keys without the numpy
temporaries (the Hilbert transform is about a dozen whole-array passes per bit there).
numba compiles them on first use and caches the machine code on disk.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = ["cells_of", "hilbert_keys", "zorder_keys"]

_OPTS: dict[str, Any] = {"cache": True, "nogil": True, "boundscheck": False}
_0 = np.uint64(0)
_1 = np.uint64(1)


@njit(**_OPTS)
def _interleave(x: Any, n: int, bits: int) -> Any:
    key = _0
    for b in range(bits):
        for d in range(n):
            bit = (x[d] >> np.uint64(b)) & _1
            key |= bit << np.uint64(b * n + (n - 1 - d))
    return key


@njit(**_OPTS)
def zorder_keys(cells: Any, bits: int) -> Any:
    """Z-order key of every column of ``cells`` (shape: dimensions x points, uint64)."""
    n, m = cells.shape
    out = np.empty(m, np.uint64)
    x = np.empty(n, np.uint64)
    for j in range(m):
        for i in range(n):
            x[i] = cells[i, j]
        out[j] = _interleave(x, n, bits)
    return out


@njit(**_OPTS)
def hilbert_keys(cells: Any, bits: int) -> Any:
    """Hilbert key of every column of ``cells`` (Skilling's axes-to-transpose, then the
    transpose's bits interleaved, as :func:`carbonstore.segments.curves.hilbert`)."""
    n, m = cells.shape
    out = np.empty(m, np.uint64)
    x = np.empty(n, np.uint64)
    top = _1 << np.uint64(bits - 1)
    for j in range(m):
        for i in range(n):
            x[i] = cells[i, j]
        q = top
        while q > _1:  # undo excess work
            p = q - _1
            for i in range(n):
                if x[i] & q:
                    x[0] ^= p
                else:
                    t = (x[0] ^ x[i]) & p
                    x[0] ^= t
                    x[i] ^= t
            q >>= _1
        for i in range(1, n):  # Gray encode
            x[i] ^= x[i - 1]
        t = _0
        q = top
        while q > _1:
            if x[n - 1] & q:
                t ^= q - _1
            q >>= _1
        for i in range(n):
            x[i] ^= t
        out[j] = _interleave(x, n, bits)
    return out


@njit(**_OPTS)
def cells_of(values: Any, nulls: Any, bounds: Any, codes: Any) -> Any:
    """``codes[1 + number of bounds <= value]`` for each value, ``codes[0]`` for a null (the
    grid cell of :func:`carbonstore.segments.curves.grid_cells`, as its code)."""
    m = values.shape[0]
    k = bounds.shape[0]
    out = np.empty(m, np.uint64)
    for j in range(m):
        if nulls[j]:
            out[j] = codes[0]
            continue
        v = values[j]
        lo, hi = 0, k
        while lo < hi:  # first bound > v
            mid = (lo + hi) >> 1
            if bounds[mid] <= v:
                lo = mid + 1
            else:
                hi = mid
        out[j] = codes[lo + 1]
    return out
