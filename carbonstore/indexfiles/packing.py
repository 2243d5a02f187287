"""Pack :class:`FileIndex` objects into the column-oriented carbonindex header and back.

Packing is done once per task or segment; unpacking to objects is for merging and tests.
Pruning never unpacks: it loads the packed buffers straight into numpy (arrays.py).
"""

from __future__ import annotations

import numpy as np
import xxhash

from carbonstore.indexfiles._gen.carbonindex.ttypes import (
    BloomRefs,
    ChunkStats,
    ColumnDesc,
    ColumnIndexData,
    DataFile,
    IndexHeader,
    PackedValues,
    PageStats,
    RowGroups,
    ValueKind,
)
from carbonstore.indexfiles.arrays import load_arrays

TYPE_CHECKING = False
if TYPE_CHECKING:
    from carbonstore.indexfiles.footer import FileIndex, RowGroupIndex

__all__ = [
    "F_HAS_MAX",
    "F_HAS_MIN",
    "F_MAX_EXACT",
    "F_MIN_EXACT",
    "F_NULL_PAGE",
    "FORMAT_VERSION",
    "pack",
    "unpack",
]

#: Format 2: header and bloom checksums (indexfile.py); format 1 files are refused.
FORMAT_VERSION = 2
F_HAS_MIN, F_HAS_MAX, F_MIN_EXACT, F_MAX_EXACT, F_NULL_PAGE = 1, 2, 4, 8, 16
WRITER = "carbonstore indexfiles 2"


def _bigint_bytes(v: int) -> bytes:
    return v.to_bytes(max(1, (v.bit_length() + 8) // 8), "big", signed=True)


def pack_values(kind: int, values: list[object]) -> PackedValues:
    """Pack one column's bound values (None where absent) by the column's kind."""
    if kind == ValueKind.INT64:
        return PackedValues(
            data=np.array([0 if v is None else v for v in values], dtype="<i8").tobytes()
        )
    if kind == ValueKind.FLOAT64:
        return PackedValues(
            data=np.array([0.0 if v is None else v for v in values], dtype="<f8").tobytes()
        )
    if kind in (ValueKind.BYTES, ValueKind.BIGINT):
        parts: list[bytes] = [
            b"" if v is None else (_bigint_bytes(v) if kind == ValueKind.BIGINT else v)  # type: ignore[misc, arg-type]
            for v in values
        ]
        offsets = np.zeros(len(parts) + 1, dtype="<i8")
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        return PackedValues(data=b"".join(parts), offsets=offsets.tobytes())
    return PackedValues(data=b"")


def unpack_values(kind: int, pv: PackedValues | None, n: int) -> list[object]:
    """Inverse of :func:`pack_values` (absent entries decode to the fill value)."""
    if pv is None or kind == ValueKind.NONE:
        return [None] * n
    data = pv.data or b""
    if kind == ValueKind.INT64:
        return [int(x) for x in np.frombuffer(data, dtype="<i8", count=n)]
    if kind == ValueKind.FLOAT64:
        return [float(x) for x in np.frombuffer(data, dtype="<f8", count=n)]
    offs = np.frombuffer(pv.offsets or b"", dtype="<i8", count=n + 1).tolist()
    parts = [data[offs[i] : offs[i + 1]] for i in range(n)]
    if kind == ValueKind.BIGINT:
        return [int.from_bytes(p, "big", signed=True) for p in parts]
    return parts


def _flags(
    has_min: bool, has_max: bool, min_exact: bool, max_exact: bool, null_page: bool = False
) -> int:
    return (
        (F_HAS_MIN if has_min else 0)
        | (F_HAS_MAX if has_max else 0)
        | (F_MIN_EXACT if min_exact else 0)
        | (F_MAX_EXACT if max_exact else 0)
        | (F_NULL_PAGE if null_page else 0)
    )


def _i64(xs: list[int]) -> bytes:
    return np.array(xs, dtype="<i8").tobytes()


def _i32(xs: list[int]) -> bytes:
    return np.array(xs, dtype="<i4").tobytes()


def _u8(xs: list[int]) -> bytes:
    return np.array(xs, dtype="u1").tobytes()


def _merge_columns(files: list[FileIndex], column_ids: dict[str, str] | None) -> list[ColumnDesc]:
    cols: dict[str, ColumnDesc] = {}
    for f in files:
        for c in f.columns:
            prev = cols.get(c.name)
            if prev is None:
                cd = ColumnDesc(**{k: getattr(c, k) for k in c.__slots__})
                if column_ids and c.name in column_ids:
                    cd.column_id = column_ids[c.name]
                cols[c.name] = cd
            elif prev.physical_type != c.physical_type or prev.kind != c.kind:
                raise ValueError(
                    f"column {c.name!r} has different types in {files[0].path} and {f.path}"
                )
    return list(cols.values())


def pack(
    files: list[FileIndex],
    *,
    segment_id: str = "",
    task_id: str = "",
    column_ids: dict[str, str] | None = None,
) -> tuple[IndexHeader, bytes]:
    """Build the index header and the bloom region for ``files``.

    The bloom region holds each bitset followed by the u64 little-endian xxh64 of it
    (``arrays.BLOOM_CHECKSUM_SIZE``); ``BloomRefs`` address the bitset bytes.
    """
    from carbonstore.indexfiles.footer import ChunkIndex

    columns = _merge_columns(files, column_ids)
    rg_file: list[int] = []
    rg_idx: list[int] = []
    rg_rows: list[int] = []
    rg_off: list[int] = []
    rg_len: list[int] = []
    data_files: list[DataFile] = []
    flat: list[tuple[FileIndex, RowGroupIndex]] = []
    for fi, f in enumerate(files):
        data_files.append(
            DataFile(
                path=f.path,
                size=f.size,
                num_rows=f.num_rows,
                footer_offset=f.footer_offset,
                footer_length=f.footer_length,
                created_by=f.created_by,
                first_row_group=len(flat),
                num_row_groups=len(f.row_groups),
            )
        )
        for gi, rg in enumerate(f.row_groups):
            rg_file.append(fi)
            rg_idx.append(gi)
            rg_rows.append(rg.num_rows)
            rg_off.append(rg.offset)
            rg_len.append(rg.length)
            flat.append((f, rg))
    bloom_parts: list[bytes] = []
    bloom_pos = 0
    column_data: list[ColumnIndexData] = []
    # each file's column positions by name, looked up once per column (not a scan of the
    # file's columns per column: quadratic in the column count of a wide table)
    positions = {id(f): {c.name: i for i, c in reversed(list(enumerate(f.columns)))}
                 for f in files}
    for col in columns:
        chunks: list[ChunkIndex] = []
        for f, rg in flat:
            pos = positions[id(f)].get(col.name, -1)
            chunks.append(rg.chunks[pos] if pos >= 0 else ChunkIndex())
        kind = col.kind
        mins = [c.min for c in chunks]
        maxs = [c.max for c in chunks]
        stats = ChunkStats(
            min=pack_values(kind, mins),
            max=pack_values(kind, maxs),
            flags=_u8(
                [
                    _flags(c.min is not None, c.max is not None, c.min_exact, c.max_exact)
                    for c in chunks
                ]
            ),
            null_count=_i64([c.null_count for c in chunks]),
            nan_count=_i64([c.nan_count for c in chunks]),
        )
        p_rg: list[int] = []
        p_first: list[int] = []
        p_count: list[int] = []
        p_off: list[int] = []
        p_size: list[int] = []
        p_min: list[object] = []
        p_max: list[object] = []
        p_flags: list[int] = []
        p_nulls: list[int] = []
        p_nans: list[int] = []
        border: list[int] = []
        has_pages: list[int] = []
        b_off: list[int] = []
        b_len: list[int] = []
        for ri, c in enumerate(chunks):
            pi = c.pages
            has_pages.append(1 if pi is not None else 0)
            border.append(pi.boundary_order if pi is not None and pi.has_column_index else -1)
            if c.bloom is not None:
                b_off.append(bloom_pos)
                b_len.append(len(c.bloom))
                bloom_parts.append(c.bloom)
                bloom_parts.append(xxhash.xxh64_intdigest(c.bloom).to_bytes(8, "little"))
                bloom_pos += len(c.bloom) + 8
            else:
                b_off.append(-1)
                b_len.append(0)
            if pi is None:
                continue
            n = len(pi.offset)
            p_rg.extend([ri] * n)
            p_first.extend(pi.first_row_index)
            p_count.extend(pi.row_count)
            p_off.extend(pi.offset)
            p_size.extend(pi.compressed_size)
            if pi.has_column_index:
                p_min.extend(pi.min)
                p_max.extend(pi.max)
                p_flags.extend(
                    _flags(
                        pi.min[i] is not None,
                        pi.max[i] is not None,
                        pi.min_exact[i],
                        pi.max_exact[i],
                        pi.null_pages[i],
                    )
                    for i in range(n)
                )
                p_nulls.extend(pi.null_counts)
                p_nans.extend(pi.nan_counts)
            else:
                p_min.extend([None] * n)
                p_max.extend([None] * n)
                p_flags.extend([0] * n)
                p_nulls.extend([-1] * n)
                p_nans.extend([-1] * n)
        pages = PageStats(
            row_group=_i32(p_rg),
            first_row_index=_i64(p_first),
            row_count=_i64(p_count),
            offset=_i64(p_off),
            compressed_size=_i32(p_size),
            stats=ChunkStats(
                min=pack_values(kind, p_min),
                max=pack_values(kind, p_max),
                flags=_u8(p_flags),
                null_count=_i64(p_nulls),
                nan_count=_i64(p_nans),
            ),
            boundary_order=np.array(border, dtype="i1").tobytes(),
            has_pages=_u8(has_pages),
        )
        column_data.append(
            ColumnIndexData(
                chunks=stats, pages=pages, blooms=BloomRefs(offset=_i64(b_off), length=_i32(b_len))
            )
        )
    header = IndexHeader(
        format_version=FORMAT_VERSION,
        writer=WRITER,
        segment_id=segment_id,
        task_id=task_id,
        columns=columns,
        files=data_files,
        row_groups=RowGroups(
            file_index=_i32(rg_file),
            row_group_index=_i32(rg_idx),
            num_rows=_i64(rg_rows),
            offset=_i64(rg_off),
            length=_i64(rg_len),
        ),
        column_data=column_data,
        bloom_region_length=bloom_pos,
    )
    return header, b"".join(bloom_parts)


def unpack(header: IndexHeader, bloom_region: bytes | None) -> list[FileIndex]:
    """Rebuild :class:`FileIndex` objects (blooms included when the region is given)."""
    from carbonstore.indexfiles.footer import ChunkIndex, FileIndex, PageIndex, RowGroupIndex

    arrs = load_arrays(header)
    files = [
        FileIndex(
            path=df.path,
            size=df.size,
            num_rows=df.num_rows,
            footer_offset=df.footer_offset,
            footer_length=df.footer_length,
            created_by=df.created_by,
            columns=list(header.columns),
            row_groups=[],
        )
        for df in header.files
    ]
    nrg = arrs.num_row_groups
    per_col_chunks: list[list[ChunkIndex]] = []
    for ca in arrs.columns:
        kind = ca.desc.kind
        chunks = []
        mins = ca.min.tolist()
        maxs = ca.max.tolist()
        for i in range(nrg):
            chunks.append(
                ChunkIndex(
                    min=mins[i] if ca.has_min[i] else None,
                    max=maxs[i] if ca.has_max[i] else None,
                    min_exact=bool(ca.min_exact[i]),
                    max_exact=bool(ca.max_exact[i]),
                    null_count=int(ca.null_count[i]),
                    nan_count=int(ca.nan_count[i]),
                )
            )
            if bloom_region is not None and ca.bloom_offset[i] >= 0:
                o, n = int(ca.bloom_offset[i]), int(ca.bloom_length[i])
                chunks[i].bloom = bloom_region[o : o + n]
        pg = ca.pages
        pmin, pmax = pg.min.tolist(), pg.max.tolist()
        for i in range(nrg):
            if not ca.has_pages[i]:
                continue
            lo, hi = int(pg.rg_start[i]), int(pg.rg_start[i + 1])
            idx = range(lo, hi)
            pi = PageIndex(
                offset=pg.offset[lo:hi].tolist(),
                compressed_size=pg.compressed_size[lo:hi].tolist(),
                first_row_index=pg.first_row_index[lo:hi].tolist(),
                row_count=pg.row_count[lo:hi].tolist(),
            )
            if ca.boundary_order[i] >= 0:
                pi.has_column_index = True
                pi.boundary_order = int(ca.boundary_order[i])
                pi.null_pages = [bool(pg.null_page[j]) for j in idx]
                pi.min = [pmin[j] if pg.has_min[j] else None for j in idx]
                pi.max = [pmax[j] if pg.has_max[j] else None for j in idx]
                pi.min_exact = [bool(pg.min_exact[j]) for j in idx]
                pi.max_exact = [bool(pg.max_exact[j]) for j in idx]
                pi.null_counts = pg.null_count[lo:hi].tolist()
                pi.nan_counts = pg.nan_count[lo:hi].tolist()
            chunks[i].pages = pi
        del kind
        per_col_chunks.append(chunks)
    for i in range(nrg):
        f = files[int(arrs.rg_file[i])]
        f.row_groups.append(
            RowGroupIndex(
                num_rows=int(arrs.rg_num_rows[i]),
                offset=int(arrs.rg_offset[i]),
                length=int(arrs.rg_length[i]),
                chunks=[cols[i] for cols in per_col_chunks],
            )
        )
    return files
