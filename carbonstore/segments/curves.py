"""Space-filling curves over order-preserving column encodings (docs/clustering.md).

Three steps turn rows into one sortable curve key, all vectorised with numpy:

1. :func:`encode` maps a column to ``uint64`` so that ``a < b`` implies
   ``encode(a) <= encode(b)`` (monotone; strict for integers, dates, timestamps, doubles and
   decimals of precision <= 18). Integers, dates and timestamps flip the sign bit; doubles
   use the IEEE trick (negative: all bits inverted, else the sign bit set) after ``-0.0``
   becomes ``0.0``, with every NaN after every number (as Spark orders them); decimals of
   precision <= 18 are their unscaled value, wider ones go through their (rounded, so still
   monotone) double; strings and binaries are their first 8 bytes, big-endian (byte order is
   the order Parquet statistics and the pruner use); dictionary columns are their stored
   surrogates (what the index holds min/max of). Nulls are reported apart.
2. :func:`grid_cells` maps encoded values to grid cells ``0 .. 2**bits - 1`` (at most
   ``MAX_CELLS`` of them) through sorted boundaries sampled on the driver (equal-frequency
   quantiles, so skewed columns still use the whole grid); nulls are cell 0, values start at 1.
   Monotone: a cell never decreases when the value grows. :func:`grid_codes` gives each cell
   the code ``2**bits * (share of the sample below the cell)``: every bit of a column then
   halves its rows, whatever the column's cardinality (a column of 1,100 dates used to fill
   only the lower half of a 12-bit axis, so its top bit split nothing).
3. :func:`zorder` interleaves the cells' bits (first column most significant);
   :func:`hilbert` applies Skilling's transform ("Programming the Hilbert curve", 2004)
   before interleaving, so consecutive keys are neighbouring cells. Both are bijections of
   the grid onto ``0 .. 2**(bits*n) - 1``; ``bits * n <= 63`` so keys fit a signed long.
   :func:`curve_keys` computes them with the compiled kernels of ``curves_native`` (the
   same keys: a test holds them to these numpy definitions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from carbonstore.errors import CompactionError
from carbonstore.segments.cluster_spec import CURVES, MAX_COLUMNS, Curve
from carbonstore.segments.curves_native import cells_of, hilbert_keys, zorder_keys

__all__ = [
    "CURVES",
    "Grid",
    "MAX_CELLS",
    "MAX_COLUMNS",
    "Curve",
    "bits_per_column",
    "cell_codes",
    "curve_keys",
    "encode",
    "grid_bounds",
    "grid_cells",
    "grid_codes",
    "grid_of",
    "keys_of",
    "hilbert",
    "order_keys",
    "shared_prefix",
    "zorder",
]

#: Cells per column at most: finer grids than this order rows no better into pages of
#: thousands of rows, and a small boundary array keeps the cell lookup in cache.
MAX_CELLS = 1 << 12
_SIGN = np.uint64(1 << 63)
_U64 = npt.NDArray[np.uint64]


def bits_per_column(n: int) -> int:
    """Grid bits per column for ``n`` columns: enough for ``MAX_CELLS`` cells, and keys of at
    most 63 bits (a signed long)."""
    if not 1 <= n <= MAX_COLUMNS:
        raise CompactionError(f"clustering takes 1 to {MAX_COLUMNS} columns, got {n}")
    return min(63 // n, MAX_CELLS.bit_length() - 1)


# ---- 1. order-preserving encodings ----------------------------------------------------------
def _ints(values: npt.NDArray[np.signedinteger]) -> _U64:
    return values.astype(np.int64).view(np.uint64) ^ _SIGN


def _doubles(values: npt.NDArray[np.floating]) -> _U64:
    v = values.astype(np.float64) + 0.0  # -0.0 + 0.0 == 0.0: one encoding for both zeros
    bits = v.view(np.uint64)
    out = np.where(bits & _SIGN, ~bits, bits | _SIGN)
    out[np.isnan(v)] = np.uint64(0xFFFFFFFFFFFFFFFF)  # every NaN after every number
    return out


def _prefix(arr: pa.Array) -> _U64:
    """The first 8 bytes of each string / binary, big-endian, zero-padded."""
    data = pc.binary_slice(arr.cast(pa.binary()) if pa.types.is_string(arr.type) else arr, 0, 8)
    data = pc.fill_null(data, b"")
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks()
    n = len(data)
    bufs = data.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[data.offset: data.offset + n + 1] \
        if n else np.zeros(1, np.int32)
    flat = np.frombuffer(bufs[2], dtype=np.uint8)[offsets[0]: offsets[-1]] \
        if n and bufs[2] is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    starts = offsets[:-1].astype(np.int64) - offsets[0]
    out = np.zeros(n, dtype=np.uint64)
    if not len(flat):
        return out
    for k in range(8):  # byte k of every value at once (0 past its end)
        byte = np.where(lengths > k, flat[np.minimum(starts + k, len(flat) - 1)], 0)
        out |= byte.astype(np.uint64) << np.uint64(56 - 8 * k)
    return out


def _decimals(arr: pa.Array) -> _U64:
    t = arr.type
    if t.precision > 18:  # rounding to the nearest double is monotone
        return _doubles(pc.fill_null(arr.cast(pa.float64(), safe=False), 0.0).to_numpy())
    filled = pc.fill_null(arr, pa.scalar(0, t)) if arr.null_count else arr
    words = np.frombuffer(filled.buffers()[1], dtype=np.int64)
    lo = words[2 * filled.offset: 2 * (filled.offset + len(filled)): 2]
    return _ints(lo)


def _after_prefix(arr: pa.Array, prefix: bytes) -> _U64:
    """The 8 bytes after ``prefix`` of the values that start with it; 0 for values below
    every such value, all ones above (the values starting with ``prefix`` are one run of the
    byte order, so this stays monotone)."""
    inside = pc.fill_null(pc.starts_with(arr, pattern=prefix), False).to_numpy(
        zero_copy_only=False)
    rest = _prefix(pc.binary_slice(arr, len(prefix), len(prefix) + 8))
    below = pc.fill_null(pc.less(arr, pa.scalar(prefix, pa.binary())), False).to_numpy(
        zero_copy_only=False)
    return np.where(inside, rest, np.where(below, np.uint64(0),
                                           np.uint64(0xFFFFFFFFFFFFFFFF))).astype(np.uint64)


def encode(
    arr: pa.Array | pa.ChunkedArray, prefix: bytes = b""
) -> tuple[_U64, npt.NDArray[np.bool_]]:
    """The order-preserving ``uint64`` encoding of a column and its null mask (strings and
    binaries: the 8 bytes after ``prefix``, see :func:`_after_prefix`).

    Raises:
        CompactionError: a type no curve orders (nested types).
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    nulls = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else \
        np.zeros(len(arr), dtype=bool)
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = arr.type
    if pa.types.is_boolean(t):
        out = pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(np.uint64)
    elif pa.types.is_integer(t):
        out = _ints(pc.fill_null(arr, 0).to_numpy(zero_copy_only=False))
    elif pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t):
        ints = arr.cast(pa.int64() if t.bit_width == 64 else pa.int32())
        out = _ints(pc.fill_null(ints, 0).to_numpy(zero_copy_only=False))
    elif pa.types.is_floating(t):
        out = _doubles(pc.fill_null(arr, 0.0).to_numpy(zero_copy_only=False))
    elif pa.types.is_decimal(t):
        out = _decimals(arr)
    elif pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) \
            or pa.types.is_large_binary(t):
        out = _after_prefix(arr.cast(pa.binary()), prefix) if prefix else \
            _prefix(arr.cast(pa.binary()))
    else:
        raise CompactionError(f"cannot cluster on a column of type {t}: use a column of a "
                              "plain type (number, decimal, date, timestamp, string)")
    return np.ascontiguousarray(out, dtype=np.uint64), nulls


# ---- 2. the grid ----------------------------------------------------------------------------
def _distinct(ordered: _U64) -> _U64:
    """The distinct values of a sorted array (numpy's hash-based unique is slower)."""
    if not len(ordered):
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def grid_bounds(sample: _U64, bits: int) -> _U64:
    """Sorted, distinct cell boundaries of ``sample`` (encoded non-null values): at most
    ``min(2**bits, MAX_CELLS) - 2`` of them (cell 0 is null), at equal-frequency quantiles of
    the sample (so a skewed column still spreads over the grid)."""
    ordered = np.sort(sample)
    values = _distinct(ordered)
    room = min(1 << bits, MAX_CELLS) - 2
    if len(values) <= room + 1:
        return values[1:]  # every sampled value starts a cell of its own
    picks = np.linspace(0, len(ordered) - 1, room + 2)[1:-1].astype(np.int64)
    return _distinct(ordered[picks])


def grid_cells(values: _U64, nulls: npt.NDArray[np.bool_], bounds: _U64) -> _U64:
    """Each value's cell: 0 for null, else 1 + the number of boundaries <= it."""
    cells = np.searchsorted(bounds, values, side="right").astype(np.uint64) + np.uint64(1)
    cells[nulls] = 0
    return cells


def grid_codes(ordered: _U64, nulls: int, bounds: _U64, bits: int) -> _U64:
    """The code of each cell (index = cell): ``2**bits`` times the share of the sample
    (``ordered``: its sorted non-null values; ``nulls``: how many were null) below the cell.

    Non-decreasing in the cell, so codes keep the order; cell 0 (null) is code 0. The top bit
    of a column's codes splits its rows at the median, the next at the quartiles, and so on,
    for a column of 3 values as for one of millions (raw cells would leave the upper bits of
    a low-cardinality column constant, and the curve would not split on it there).
    """
    total = nulls + len(ordered)
    starts = np.concatenate(([0], np.searchsorted(ordered, bounds, side="left"))).astype(np.float64)
    scale = float(1 << bits) / max(1, total)
    codes = np.minimum(np.floor((nulls + starts) * scale), (1 << bits) - 1).astype(np.uint64)
    return np.concatenate((np.zeros(1, np.uint64), codes))


@dataclass(frozen=True, slots=True)
class Grid:
    """One column's grid: sorted cell ``bounds`` and each cell's ``code`` (cell 0: null),
    over the encoding :func:`encode` gives with ``prefix`` (strings: the sample's shared
    prefix, skipped so the 8 encoded bytes are the ones that differ)."""

    bounds: _U64
    codes: _U64
    prefix: bytes = b""


def grid_of(column: pa.Array | pa.ChunkedArray, bits: int) -> Grid:
    """The grid of a sample of one column's values."""
    prefix = shared_prefix(column)
    values, nulls = encode(column, prefix)
    ordered = np.sort(values[~nulls])
    bounds = grid_bounds(ordered, bits)
    return Grid(bounds=bounds, codes=grid_codes(ordered, int(nulls.sum()), bounds, bits),
                prefix=prefix)


def shared_prefix(column: pa.Array | pa.ChunkedArray) -> bytes:
    """The bytes every non-null string / binary value of ``column`` starts with (b"" for
    other types): ``customer-000123`` and ``customer-004242`` differ after 9 bytes."""
    t = column.type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if not (pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t)
            or pa.types.is_large_binary(t)):
        return b""
    live = pc.drop_null(column.cast(t) if t != column.type else column)
    if not len(live):
        return b""
    lo, hi = pc.min(live).as_py(), pc.max(live).as_py()
    lo = lo.encode() if isinstance(lo, str) else lo
    hi = hi.encode() if isinstance(hi, str) else hi
    n = 0  # the shared prefix of the least and the greatest is every value's
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return bytes(lo[:n])


def order_keys(column: pa.Array | pa.ChunkedArray, grid: Grid) -> _U64:
    """The column's encoding under ``grid`` with nulls as 0: sorts the rows as the column
    (nulls first), up to values sharing an encoding."""
    values, nulls = encode(column, grid.prefix)
    values[nulls] = 0
    return values


# ---- 3. the curves --------------------------------------------------------------------------
def zorder(cells: Sequence[_U64], bits: int) -> _U64:
    """Interleave the cells' ``bits`` low bits; column 0 holds the top bit of each group."""
    n = len(cells)
    out = np.zeros(len(cells[0]), dtype=np.uint64)
    one = np.uint64(1)
    for b in range(bits):
        for d, c in enumerate(cells):
            out |= ((c >> np.uint64(b)) & one) << np.uint64(b * n + (n - 1 - d))
    return out


def hilbert(cells: Sequence[_U64], bits: int) -> _U64:
    """The Hilbert index of each point (Skilling's axes-to-transpose, then interleave)."""
    x = [np.array(c, dtype=np.uint64, copy=True) for c in cells]
    n = len(x)
    q = np.uint64(1 << (bits - 1))
    while q > 1:  # undo excess work
        p = q - np.uint64(1)
        for i in range(n):
            high = (x[i] & q) != 0
            t = (x[0] ^ x[i]) & p
            x0 = np.where(high, x[0] ^ p, x[0] ^ t)
            if i:
                x[i] = np.where(high, x[i], x[i] ^ t)
            x[0] = x0
        q >>= np.uint64(1)
    for i in range(1, n):  # Gray encode
        x[i] ^= x[i - 1]
    t = np.zeros_like(x[0])
    q = np.uint64(1 << (bits - 1))
    while q > 1:
        t = np.where((x[n - 1] & q) != 0, t ^ (q - np.uint64(1)), t)
        q >>= np.uint64(1)
    return zorder([xi ^ t for xi in x], bits)


_KERNELS = {"zorder": zorder_keys, "hilbert": hilbert_keys}


def cell_codes(column: pa.Array | pa.ChunkedArray, grid: Grid) -> _U64:
    """Each row's cell code (``grid.codes[grid_cells(...)]``, compiled)."""
    values, nulls = encode(column, grid.prefix)
    return cells_of(values, nulls, np.ascontiguousarray(grid.bounds, dtype=np.uint64),
                    np.ascontiguousarray(grid.codes, dtype=np.uint64))


def curve_keys(
    columns: Sequence[pa.Array | pa.ChunkedArray], grids: Sequence[Grid], curve: Curve
) -> npt.NDArray[np.int64]:
    """The curve key of every row (a non-negative int64) given each column's grid."""
    if curve not in _KERNELS:
        raise CompactionError(f"unknown curve {curve!r}; use one of {', '.join(CURVES)}")
    bits_per_column(len(columns))
    cells = [cell_codes(c, g) for c, g in zip(columns, grids, strict=True)]
    return keys_of(cells, curve)


def keys_of(cells: Sequence[_U64], curve: Curve) -> npt.NDArray[np.int64]:
    """The curve keys of cell codes (one array per column)."""
    bits = bits_per_column(len(cells))
    if len(cells) == 1:
        return cells[0].astype(np.int64)
    return _KERNELS[curve](np.stack(cells), bits).astype(np.int64)
