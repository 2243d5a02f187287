"""Read a Parquet file's footer, page indexes and bloom filters into a :class:`FileIndex`.

Reads go through the store's file layer (``StoreFS``): one read of the file tail (footer, and usually the page
indexes and blooms which writers put just before it), a larger tail only when needed.
All statistics rules of docs/index-format.md are applied here, so everything downstream
can trust a bound that is present; anything missing means "might match".
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

import pyarrow as pa

from carbonstore.errors import CorruptIndexError, UnsupportedParquetError
from carbonstore.indexfiles import tio
from carbonstore.indexfiles._gen.carbonindex.ttypes import ColumnDesc, ValueKind
from carbonstore.indexfiles._gen.parquet.ttypes import (
    ColumnChunk,
    ColumnIndex,
    ColumnOrder,
    FileMetaData,
    OffsetIndex,
    Statistics,
)
from carbonstore.indexfiles.bloom import parse_bloom_header
from carbonstore.indexfiles.coltypes import Leaf, decode_bound, leaves_from_schema
from carbonstore.store.fs import AnyFS, as_store_fs

__all__ = ["ChunkIndex", "FileIndex", "PageIndex", "RowGroupIndex", "read_file_index"]

MAGIC = b"PAR1"
ENCRYPTED_MAGIC = b"PARE"
TAIL_BYTES = 64 * 1024
_MAX_FOOTER = 512 * 1024 * 1024
_MAX_BLOOM = 128 * 1024 * 1024
_ORDER_TYPE, _ORDER_IEEE, _ORDER_UNKNOWN, _ORDER_ABSENT = 0, 1, 2, 3


@dataclass(slots=True)
class PageIndex:
    """Pages of one column chunk: OffsetIndex always, ColumnIndex lists when valid."""

    offset: list[int]
    compressed_size: list[int]
    first_row_index: list[int]
    row_count: list[int]
    has_column_index: bool = False
    boundary_order: int = -1
    null_pages: list[bool] = field(default_factory=list)
    min: list[object] = field(default_factory=list)  # None = no bound
    max: list[object] = field(default_factory=list)
    min_exact: list[bool] = field(default_factory=list)
    max_exact: list[bool] = field(default_factory=list)
    null_counts: list[int] = field(default_factory=list)  # -1 unknown
    nan_counts: list[int] = field(default_factory=list)  # -1 unknown


@dataclass(slots=True)
class ChunkIndex:
    """Statistics of one column chunk (one column of one row group)."""

    min: object = None
    max: object = None
    min_exact: bool = False
    max_exact: bool = False
    null_count: int = -1
    nan_count: int = -1
    pages: PageIndex | None = None
    bloom: bytes | None = None


@dataclass(slots=True)
class RowGroupIndex:
    num_rows: int
    offset: int
    length: int
    chunks: list[ChunkIndex]


@dataclass(slots=True)
class FileIndex:
    """Everything the side index keeps about one Parquet file."""

    path: str
    size: int
    num_rows: int
    footer_offset: int
    footer_length: int
    created_by: str | None
    columns: list[ColumnDesc]
    row_groups: list[RowGroupIndex]


class _Reader:
    """Serves byte ranges from a cached tail, reading further only when needed."""

    def __init__(self, f: pa.NativeFile, size: int, name: str) -> None:
        self.f, self.size, self.name = f, size, name
        self.start = max(0, size - TAIL_BYTES)
        self.buf = f.read_at(size - self.start, self.start)

    def ensure_from(self, start: int) -> None:
        if start < self.start:
            more = self.f.read_at(self.start - start, start)
            self.buf = more + self.buf
            self.start = start

    def get(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise CorruptIndexError(
                f"{self.name}: range {offset}+{length} lies outside the file ({self.size} bytes)"
            )
        if offset >= self.start:
            return self.buf[offset - self.start : offset - self.start + length]
        return self.f.read_at(length, offset)


def _decode(obj: object, data: bytes, what: str, name: str) -> object:
    try:
        return tio.decode(obj, data)
    except tio.DECODE_ERRORS as err:
        raise CorruptIndexError(f"{name}: cannot decode {what}: {err}") from err


def _orders(fm: FileMetaData, n: int) -> list[int]:
    co: list[ColumnOrder] | None = fm.column_orders
    if not co or len(co) != n:
        return [_ORDER_ABSENT] * n
    out = []
    for o in co:
        if o is not None and o.TYPE_ORDER is not None:
            out.append(_ORDER_TYPE)
        elif o is not None and o.IEEE_754_TOTAL_ORDER is not None:
            out.append(_ORDER_IEEE)
        else:
            out.append(_ORDER_UNKNOWN)
    return out


def _is_nan(v: object) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _float_bounds(
    lo: object, hi: object, nan_count: int, non_null: int | None
) -> tuple[object, object]:
    """NaN is never a bound, except min=max=NaN when every non-null value is NaN."""
    if not (_is_nan(lo) or _is_nan(hi)):
        return lo, hi
    if nan_count > 0 and non_null is not None and nan_count >= non_null:
        return math.nan, math.nan
    return (None if _is_nan(lo) else lo), (None if _is_nan(hi) else hi)


def _chunk_stats(
    leaf: Leaf, order: int, st: Statistics | None, num_values: int | None
) -> ChunkIndex:
    ci = ChunkIndex()
    if st is None:
        return ci
    if st.null_count is not None and st.null_count >= 0:
        ci.null_count = st.null_count
    if st.nan_count is not None and st.nan_count >= 0 and leaf.desc.kind == ValueKind.FLOAT64:
        ci.nan_count = st.nan_count
    if leaf.desc.kind == ValueKind.NONE or order == _ORDER_UNKNOWN:
        return ci
    fixed = leaf.desc.kind != ValueKind.BYTES  # only byte arrays are ever truncated
    if st.min_value is not None or st.max_value is not None:
        raw_lo, raw_hi = st.min_value, st.max_value
        lo_exact = st.is_min_value_exact if st.is_min_value_exact is not None else fixed
        hi_exact = st.is_max_value_exact if st.is_max_value_exact is not None else fixed
    elif leaf.legacy_ok:
        raw_lo, raw_hi, lo_exact, hi_exact = st.min, st.max, True, True
    else:
        return ci
    lo = decode_bound(leaf, raw_lo, is_max=False) if raw_lo is not None else None
    hi = decode_bound(leaf, raw_hi, is_max=True) if raw_hi is not None else None
    if lo is None or hi is None:
        return ci  # one-sided bounds from a writer we cannot read are not worth the risk
    (lv, l_ok), (hv, h_ok) = lo, hi
    if leaf.desc.kind == ValueKind.FLOAT64:
        non_null = None
        if num_values is not None and ci.null_count >= 0:
            non_null = num_values - ci.null_count
        lv, hv = _float_bounds(lv, hv, ci.nan_count, non_null)
        if lv is not None and hv is not None and not _is_nan(lv) and lv > hv:  # type: ignore[operator]
            return ci
    elif lv > hv:  # type: ignore[operator]
        return ci  # contradictory statistics: treat as absent
    ci.min, ci.max = lv, hv
    ci.min_exact = bool(lo_exact and l_ok) and lv is not None
    ci.max_exact = bool(hi_exact and h_ok) and hv is not None
    return ci


def _page_index(
    leaf: Leaf, order: int, oi: OffsetIndex | None, cidx: ColumnIndex | None, rg_rows: int
) -> PageIndex | None:
    if oi is None or not oi.page_locations:
        return None
    locs = oi.page_locations
    firsts = [loc.first_row_index if loc.first_row_index is not None else -1 for loc in locs]
    if (
        any(f < 0 for f in firsts)
        or firsts != sorted(firsts)
        or firsts[0] != 0
        or firsts[-1] > rg_rows
    ):
        return None
    counts = [b - a for a, b in zip(firsts, [*firsts[1:], rg_rows], strict=True)]
    pi = PageIndex(
        offset=[loc.offset if loc.offset is not None else -1 for loc in locs],
        compressed_size=[
            loc.compressed_page_size if loc.compressed_page_size is not None else -1 for loc in locs
        ],
        first_row_index=firsts,
        row_count=counts,
    )
    if cidx is not None and leaf.desc.kind != ValueKind.NONE and order != _ORDER_UNKNOWN:
        _apply_column_index(pi, leaf, cidx)
    return pi


def _apply_column_index(pi: PageIndex, leaf: Leaf, c: ColumnIndex) -> None:
    n = len(pi.offset)
    lists = [c.null_pages, c.min_values, c.max_values]
    if any(x is None or len(x) != n for x in lists):
        return
    for opt in (c.null_counts, c.nan_counts):
        if opt is not None and len(opt) not in (0, n):
            return
    if c.boundary_order not in (0, 1, 2):
        return
    null_counts = list(c.null_counts) if c.null_counts else [-1] * n
    nan_counts = list(c.nan_counts) if c.nan_counts else [-1] * n
    if any(x < 0 for x in null_counts if x != -1) or any(x < -1 for x in nan_counts):
        return
    if any(c.null_pages) and leaf.max_def == 0:
        return  # a required column cannot have a null page
    if leaf.desc.kind != ValueKind.FLOAT64:
        nan_counts = [-1] * n
    fixed = leaf.desc.kind != ValueKind.BYTES  # only byte arrays are ever truncated
    mins: list[object] = []
    maxs: list[object] = []
    mex: list[bool] = []
    xex: list[bool] = []
    for i in range(n):
        if c.null_pages[i]:
            mins.append(None)
            maxs.append(None)
            mex.append(False)
            xex.append(False)
            continue
        lo = decode_bound(leaf, c.min_values[i], is_max=False)
        hi = decode_bound(leaf, c.max_values[i], is_max=True)
        if lo is None or hi is None:
            return
        lv, hv = lo[0], hi[0]
        if leaf.desc.kind == ValueKind.FLOAT64:
            non_null = pi.row_count[i] - null_counts[i] if null_counts[i] >= 0 else None
            lv, hv = _float_bounds(lv, hv, nan_counts[i], non_null)
            if lv is not None and hv is not None and not _is_nan(lv) and lv > hv:  # type: ignore[operator]
                return
        elif lv > hv:  # type: ignore[operator]
            return
        mins.append(lv)
        maxs.append(hv)
        mex.append(fixed and lo[1] and lv is not None)
        xex.append(fixed and hi[1] and hv is not None)
    pi.has_column_index = True
    pi.boundary_order = c.boundary_order
    pi.null_pages = [bool(x) for x in c.null_pages]
    pi.min, pi.max, pi.min_exact, pi.max_exact = mins, maxs, mex, xex
    pi.null_counts, pi.nan_counts = null_counts, nan_counts


def _read_footer(r: _Reader) -> tuple[FileMetaData, int, int]:
    name = r.name
    if r.size < 12:
        raise CorruptIndexError(f"{name}: {r.size} bytes is too small to be a Parquet file")
    tail = r.get(r.size - 8, 8)
    if tail[4:] == ENCRYPTED_MAGIC:
        raise UnsupportedParquetError(
            f"{name}: encrypted Parquet footer; cannot index without keys"
        )
    if tail[4:] != MAGIC or r.get(0, 4) not in (MAGIC, ENCRYPTED_MAGIC):
        raise CorruptIndexError(f"{name}: not a Parquet file (magic bytes missing)")
    flen = struct.unpack("<I", tail[:4])[0]
    if flen <= 0 or flen > r.size - 12 or flen > _MAX_FOOTER:
        raise CorruptIndexError(f"{name}: footer length {flen} does not fit a {r.size}-byte file")
    foff = r.size - 8 - flen
    r.ensure_from(foff)
    fm = _decode(FileMetaData(), r.get(foff, flen), "the footer", name)
    assert isinstance(fm, FileMetaData)
    if fm.encryption_algorithm is not None:
        raise UnsupportedParquetError(
            f"{name}: encrypted columns (plaintext footer); cannot index without keys"
        )
    if fm.schema is None or fm.row_groups is None or fm.num_rows is None:
        raise CorruptIndexError(f"{name}: footer lacks schema, row groups or row count")
    return fm, foff, flen


def _prefetch(r: _Reader, chunks: list[ColumnChunk], foff: int) -> None:
    """Fetch the region holding all page indexes and blooms in one read when compact."""
    starts: list[int] = []
    total = 0
    for cc in chunks:
        for off, ln in (
            (cc.column_index_offset, cc.column_index_length),
            (cc.offset_index_offset, cc.offset_index_length),
        ):
            if off is not None and ln is not None and 0 <= off < foff:
                starts.append(off)
                total += max(ln, 0)
        md = cc.meta_data
        if (
            md is not None
            and md.bloom_filter_offset is not None
            and 0 <= md.bloom_filter_offset < foff
        ):
            starts.append(md.bloom_filter_offset)
            total += md.bloom_filter_length or 4096
    if starts:
        lo = min(starts)
        if foff - lo <= 4 * total + (1 << 20):
            r.ensure_from(lo)


def _read_bloom(r: _Reader, cc: ColumnChunk) -> bytes | None:
    md = cc.meta_data
    if md is None or md.bloom_filter_offset is None or md.bloom_filter_offset < 0:
        return None
    off = md.bloom_filter_offset
    head = r.get(off, min(64, r.size - off))
    parsed = parse_bloom_header(head, name=r.name, where=f" at {off}")
    if parsed is None:
        return None  # an algorithm we do not know: no bloom, never a wrong answer
    used, n = parsed
    if n is None or n < 32 or n % 32 or n > _MAX_BLOOM:
        raise CorruptIndexError(f"{r.name}: bloom filter at {off} has invalid size {n}")
    if md.bloom_filter_length is not None and md.bloom_filter_length < used + n:
        raise CorruptIndexError(
            f"{r.name}: bloom filter at {off} is longer than bloom_filter_length"
        )
    return r.get(off + used, n)


def _read_struct(
    r: _Reader, obj: object, off: int | None, ln: int | None, what: str
) -> object | None:
    if off is None or ln is None:
        return None
    if ln <= 0 or off < 0:
        raise CorruptIndexError(f"{r.name}: {what} has invalid location {off}+{ln}")
    return _decode(obj, r.get(off, ln), what, r.name)


def read_file_index(
    fs: AnyFS, path: str, *, rel_path: str | None = None, with_blooms: bool = True
) -> FileIndex:
    """Read one Parquet file's footer, page indexes and blooms.

    Args:
        fs: filesystem holding the file.
        path: path of the file on ``fs``.
        rel_path: path recorded in the index (default: ``path``).
        with_blooms: also read bloom filter bitsets.

    Raises:
        CorruptIndexError: the file is not Parquet or its metadata is corrupt.
        UnsupportedParquetError: the file is encrypted.
    """
    try:
        with as_store_fs(fs).open_input_file(path) as f:
            size = f.size()
            r = _Reader(f, size, path)
            return _build(r, fs, path, rel_path, with_blooms)
    except (CorruptIndexError, UnsupportedParquetError):
        raise
    except (
        OSError,
        ValueError,
        IndexError,
        struct.error,
        RecursionError,
        MemoryError,
        OverflowError,
    ) as err:
        raise CorruptIndexError(f"{path}: cannot read Parquet metadata: {err}") from err


def _build(
    r: _Reader, fs: AnyFS, path: str, rel_path: str | None, with_blooms: bool
) -> FileIndex:
    fm, foff, flen = _read_footer(r)
    try:
        leaves = leaves_from_schema(fm.schema)
    except ValueError as err:
        raise CorruptIndexError(f"{path}: malformed schema: {err}") from err
    bad = [leaf.desc.name for leaf in leaves if leaf.desc.physical_type not in range(8)]
    if bad:
        raise CorruptIndexError(f"{path}: invalid physical type in the schema for column(s) {bad}")
    orders = _orders(fm, len(leaves))
    all_chunks = [cc for rg in fm.row_groups for cc in (rg.columns or [])]
    if any(
        cc.crypto_metadata is not None or cc.encrypted_column_metadata is not None
        for cc in all_chunks
    ):
        raise UnsupportedParquetError(f"{path}: encrypted column chunks; cannot index without keys")
    _prefetch(r, all_chunks, foff)
    rgs: list[RowGroupIndex] = []
    for gi, rg in enumerate(fm.row_groups):
        cols = rg.columns or []
        if len(cols) != len(leaves) or rg.num_rows is None or rg.num_rows < 0:
            raise CorruptIndexError(f"{path}: row group {gi} does not match the schema")
        chunks: list[ChunkIndex] = []
        starts: list[int] = []
        ends: list[int] = []
        for ci_, (leaf, cc) in enumerate(zip(leaves, cols, strict=True)):
            md = cc.meta_data
            if md is None:
                raise CorruptIndexError(f"{path}: row group {gi} column {ci_} has no metadata")
            if md.path_in_schema is not None and ".".join(md.path_in_schema) != leaf.desc.name:
                raise CorruptIndexError(
                    f"{path}: row group {gi} column {ci_} is {'.'.join(md.path_in_schema)!r} "
                    f"but the schema says {leaf.desc.name!r}"
                )
            if md.type != leaf.desc.physical_type:
                raise CorruptIndexError(
                    f"{path}: row group {gi} column {leaf.desc.name} has a physical type unlike the schema"
                )
            ch = _chunk_stats(leaf, orders[ci_], md.statistics, md.num_values)
            oi = _read_struct(
                r, OffsetIndex(), cc.offset_index_offset, cc.offset_index_length, "offset index"
            )
            cx = _read_struct(
                r, ColumnIndex(), cc.column_index_offset, cc.column_index_length, "column index"
            )
            ch.pages = _page_index(leaf, orders[ci_], oi, cx, rg.num_rows)  # type: ignore[arg-type]
            if with_blooms:
                ch.bloom = _read_bloom(r, cc)
            chunks.append(ch)
            start = md.dictionary_page_offset if md.dictionary_page_offset else md.data_page_offset
            if start is not None and md.total_compressed_size is not None:
                starts.append(start)
                ends.append(start + md.total_compressed_size)
        lo = min(starts) if starts else 0
        rgs.append(
            RowGroupIndex(
                num_rows=rg.num_rows,
                offset=lo,
                length=(max(ends) - lo) if ends else 0,
                chunks=chunks,
            )
        )
    return FileIndex(
        path=rel_path if rel_path is not None else path,
        size=r.size,
        num_rows=fm.num_rows,
        footer_offset=foff,
        footer_length=flen,
        created_by=fm.created_by,
        columns=[leaf.desc for leaf in leaves],
        row_groups=rgs,
    )
