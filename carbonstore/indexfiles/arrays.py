"""Column-oriented numpy arrays over a carbonindex / carbonindexmerge: the pruning contract.

Array contract (what the vectorised evaluator may rely on)
==========================================================

:class:`IndexArrays` covers ``R`` row groups ("blocklets") of one or more data files, in
file order. Row-group level arrays, all of length ``R``:

* ``rg_file`` int32 - index into ``files`` (list of ``DataFile``: path relative to the
  segment, size, num_rows, footer offset/length, created_by, first_row_group, num_row_groups)
* ``rg_index`` int32 - row group ordinal inside its file
* ``rg_num_rows`` int64, ``rg_offset`` int64 / ``rg_length`` int64 - byte range in the file

Per column (``IndexArrays.column(name)`` -> :class:`ColumnArrays`, name = leaf path joined
with ``.``), arrays of length ``R``:

* ``min``, ``max`` - comparable representation chosen by ``kind`` (``ValueKind``):

  - ``INT64``: int64 array. Integers (signed and UINT8/16/32), booleans (0/1), DATE as days
    since epoch, TIME and TIMESTAMP in microseconds (millis scaled; nanos rounded outwards,
    then flagged inexact), decimals with precision <= 18 as the unscaled integer
    (``desc.scale`` gives the scale).
  - ``FLOAT64``: float64 array (FLOAT, DOUBLE, FLOAT16). A zero min is always -0.0 and a
    zero max +0.0. NaN is never a bound, except min = max = NaN for a chunk/page whose
    non-null values are all NaN.
  - ``BYTES``: object array of ``bytes`` (UTF-8 strings and binary), compared bytewise
    unsigned (Python ``bytes`` order). Never numpy 'S' (it strips trailing NULs).
  - ``BIGINT``: object array of Python ``int`` (decimals with precision > 18, UINT64).
  - ``NONE``: not prunable (INT96, nested/repeated leaves, unknown logical types):
    object arrays of None and every has_* flag False.

* ``has_min``, ``has_max`` bool - the bound is present. Where False the value in
  ``min``/``max`` is filler and MUST be ignored: missing means "might match".
* ``min_exact``, ``max_exact`` bool - the bound is an actual value (False: truncated or
  rounded outwards, still a valid bound).
* ``null_count``, ``nan_count`` int64, -1 = unknown (nan_count only for FLOAT64 kinds).
* ``has_pages`` bool - an OffsetIndex was read for the chunk; ``boundary_order`` int8,
  -1 = no usable ColumnIndex, else 0 UNORDERED / 1 ASCENDING / 2 DESCENDING.
* ``bloom_offset`` int64 (-1 = no bloom), ``bloom_length`` int32; fetch the bitset with
  ``IndexArrays.bloom_bitset(rg, name)`` (read lazily from the index file) and test it with
  ``bloom.might_contain(bitset, bloom.hash_value(literal, desc physical type name))``.
  In the file each bitset is followed by ``BLOOM_CHECKSUM_SIZE`` bytes of checksum, which
  the bloom source verifies (so ``offset + length + BLOOM_CHECKSUM_SIZE`` lies in the region).

Pages (``ColumnArrays.pages`` -> :class:`PageArrays`), arrays of length ``P`` in row-group
order; pages of row group ``i`` are ``rg_start[i]:rg_start[i+1]`` (``rg_start`` has R+1
entries): ``row_group`` int32, ``first_row_index`` int64, ``row_count`` int64, ``offset``
int64, ``compressed_size`` int32, ``min``/``max`` (same kinds), ``has_min``, ``has_max``,
``min_exact``, ``max_exact``, ``null_page`` bool, ``null_count``/``nan_count`` int64 (-1
unknown). Pages of a chunk without a valid ColumnIndex have every flag False (might match).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles._gen.carbonindex.ttypes import (
    ChunkStats,
    ColumnDesc,
    DataFile,
    IndexHeader,
    PackedValues,
    ValueKind,
)

__all__ = ["BLOOM_CHECKSUM_SIZE", "BloomSource", "ColumnArrays", "IndexArrays", "PageArrays", "load_arrays"]

BloomSource = Callable[[int, int], bytes]
#: Bytes of the u64 xxh64 that follows every bloom bitset in an index file's bloom region.
BLOOM_CHECKSUM_SIZE = 8
_NP = npt.NDArray[Any]


def _arr(buf: bytes | None, dtype: str, n: int, what: str) -> _NP:
    b = buf or b""
    size = np.dtype(dtype).itemsize
    if len(b) != n * size:
        raise CorruptIndexError(f"index array {what} holds {len(b)} bytes, expected {n * size}")
    return np.frombuffer(b, dtype=dtype)


def _values(kind: int, pv: PackedValues | None, n: int, what: str) -> _NP:
    if kind == ValueKind.INT64:
        return _arr(pv.data if pv else None, "<i8", n, what)
    if kind == ValueKind.FLOAT64:
        return _arr(pv.data if pv else None, "<f8", n, what)
    out = np.empty(n, dtype=object)
    if kind not in (ValueKind.BYTES, ValueKind.BIGINT):
        return out
    data = (pv.data if pv else None) or b""
    offs = _arr(pv.offsets if pv else None, "<i8", n + 1, what + " offsets")
    if n and (offs[0] != 0 or offs[-1] != len(data) or np.any(np.diff(offs) < 0)):
        raise CorruptIndexError(f"index array {what} has inconsistent offsets")
    ol = offs.tolist()
    parts = [data[ol[i] : ol[i + 1]] for i in range(n)]
    if kind == ValueKind.BIGINT:
        out[:] = [int.from_bytes(p, "big", signed=True) for p in parts]
    else:
        out[:] = parts
    return out


class _Stats:
    """min/max/flags/null/nan arrays shared by chunks and pages."""

    def __init__(self, kind: int, cs: ChunkStats | None, n: int, what: str) -> None:
        cs = cs or ChunkStats()
        flags = _arr(cs.flags, "u1", n, what + " flags")
        self.has_min: _NP = (flags & 1) != 0
        self.has_max: _NP = (flags & 2) != 0
        self.min_exact: _NP = (flags & 4) != 0
        self.max_exact: _NP = (flags & 8) != 0
        self.null_page: _NP = (flags & 16) != 0
        self.null_count: _NP = _arr(cs.null_count, "<i8", n, what + " null_count")
        self.nan_count: _NP = _arr(cs.nan_count, "<i8", n, what + " nan_count")
        self._kind, self._cs, self._n, self._what = kind, cs, n, what
        self._min: _NP | None = None
        self._max: _NP | None = None

    @property
    def min(self) -> _NP:
        if self._min is None:  # variable-width values decode on first use only
            self._min = _values(self._kind, self._cs.min, self._n, self._what + " min")
        return self._min

    @property
    def max(self) -> _NP:
        if self._max is None:
            self._max = _values(self._kind, self._cs.max, self._n, self._what + " max")
        return self._max


class PageArrays(_Stats):
    """Page-level arrays of one column (see the module docstring)."""

    def __init__(self, kind: int, header_pages: Any, n_rg: int, what: str) -> None:
        hp = header_pages
        p = len(hp.first_row_index or b"") // 8
        super().__init__(kind, hp.stats, p, what + " pages")
        self.row_group: _NP = _arr(hp.row_group, "<i4", p, what + " page row_group")
        self.first_row_index: _NP = _arr(hp.first_row_index, "<i8", p, what + " first_row_index")
        self.row_count: _NP = _arr(hp.row_count, "<i8", p, what + " row_count")
        self.offset: _NP = _arr(hp.offset, "<i8", p, what + " page offset")
        self.compressed_size: _NP = _arr(hp.compressed_size, "<i4", p, what + " compressed_size")
        if p and (
            np.any(np.diff(self.row_group) < 0)
            or self.row_group[0] < 0
            or self.row_group[-1] >= n_rg
        ):
            raise CorruptIndexError(f"index pages of {what} are not in row-group order")
        self.rg_start: _NP = np.searchsorted(self.row_group, np.arange(n_rg + 1)).astype(np.int64)


class ColumnArrays(_Stats):
    """Row-group level arrays of one column (see the module docstring)."""

    def __init__(self, desc: ColumnDesc, data: Any, n_rg: int) -> None:
        name = desc.name or "?"
        self.desc = desc
        self.name = name
        self.kind: int = desc.kind if desc.kind is not None else ValueKind.NONE
        super().__init__(self.kind, data.chunks, n_rg, name)
        pages = data.pages
        self.has_pages: _NP = (
            _arr(pages.has_pages if pages else None, "u1", n_rg, name + " has_pages") != 0
        )
        self.boundary_order: _NP = _arr(
            pages.boundary_order if pages else None, "i1", n_rg, name + " boundary"
        )
        self.pages = PageArrays(self.kind, pages, n_rg, name)
        blooms = data.blooms
        self.bloom_offset: _NP = _arr(
            blooms.offset if blooms else None, "<i8", n_rg, name + " bloom offset"
        )
        self.bloom_length: _NP = _arr(
            blooms.length if blooms else None, "<i4", n_rg, name + " bloom length"
        )


class IndexArrays:
    """All arrays of one index (task or merge). See the module docstring."""

    def __init__(self, header: IndexHeader, bloom_source: BloomSource | None = None) -> None:
        self.header = header
        self.files: list[DataFile] = list(header.files or [])
        rgs = header.row_groups
        n = len((rgs.num_rows if rgs else None) or b"") // 8
        self.num_row_groups = n
        self.rg_file: _NP = _arr(rgs.file_index if rgs else None, "<i4", n, "rg_file")
        self.rg_index: _NP = _arr(rgs.row_group_index if rgs else None, "<i4", n, "rg_index")
        self.rg_num_rows: _NP = _arr(rgs.num_rows if rgs else None, "<i8", n, "rg_num_rows")
        self.rg_offset: _NP = _arr(rgs.offset if rgs else None, "<i8", n, "rg_offset")
        self.rg_length: _NP = _arr(rgs.length if rgs else None, "<i8", n, "rg_length")
        if n and (self.rg_file.min() < 0 or self.rg_file.max() >= len(self.files)):
            raise CorruptIndexError("index row groups point at files that are not in the index")
        cols = header.columns or []
        data = header.column_data or []
        if len(cols) != len(data):
            raise CorruptIndexError(
                "index has column descriptions and column data of different lengths"
            )
        self.columns = [ColumnArrays(c, d, n) for c, d in zip(cols, data, strict=True)]
        self._by_name = {c.name: c for c in self.columns}
        self._bloom_source = bloom_source
        self.bloom_region_length = header.bloom_region_length or 0

    def column(self, name: str) -> ColumnArrays:
        """The arrays of the column ``name`` (leaf path joined with '.').

        Raises:
            KeyError: no such column in the index.
        """
        return self._by_name[name]

    def has_column(self, name: str) -> bool:
        return name in self._by_name

    def bloom_bitset(self, rg: int, name: str) -> bytes | None:
        """The bloom bitset of row group ``rg`` (global index) and column, or None."""
        col = self._by_name[name]
        off = int(col.bloom_offset[rg])
        if off < 0 or self._bloom_source is None:
            return None
        ln = int(col.bloom_length[rg])
        if ln <= 0 or off + ln + BLOOM_CHECKSUM_SIZE > self.bloom_region_length:
            raise CorruptIndexError(
                f"bloom of column {name} row group {rg} lies outside the bloom region"
            )
        return self._bloom_source(off, ln)


def load_arrays(header: IndexHeader, bloom_source: BloomSource | None = None) -> IndexArrays:
    """Turn a decoded index header into arrays (no bloom bytes are touched)."""
    return IndexArrays(header, bloom_source)
