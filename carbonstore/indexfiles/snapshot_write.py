"""Writing the index snapshot (format: carbonstore.indexfiles.snapshot): segments' index
arrays as snapshot rows, and the file of rows and segment bounds in checksummed sections."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa

from carbonstore.indexfiles._gen.carbonindex.ttypes import ValueKind
from carbonstore.indexfiles.segment_bounds import SegmentBounds
from carbonstore.indexfiles.snapshot import (
    BOUNDS_TYPES,
    COL_COLUMNS,
    DESC_FIELDS,
    FILE_STRUCT,
    FLAG_BITS,
    PAGE_COLUMNS,
    RG_COLUMNS,
    SNAPSHOT_VERSION,
    VALUE_TYPES,
    slot_key,
)
from carbonstore.indexfiles.snapshot_file import (
    CHUNKS_META,
    CORE,
    chunk_section,
    frame_pieces,
    ipc_bytes,
    narrow_ints,
    section_of,
    split_files,
)

__all__ = ["CHUNK_SEGMENTS", "encode_chunk_pieces", "encode_chunks", "encode_snapshot", "index_rows", "new_chunk"]

_NP = npt.NDArray[Any]


def _flags(stats: Any) -> _NP:
    out = np.zeros(len(stats.null_count), dtype=np.uint8)
    for name, bit in FLAG_BITS:
        out |= np.asarray(getattr(stats, name), dtype=bool).astype(np.uint8) * np.uint8(bit)
    return out


def _kind_values(kind: int, values: _NP) -> pa.Array:
    if kind == ValueKind.BIGINT:
        return pa.array([int(v).to_bytes((int(v).bit_length() + 8) // 8, "big", signed=True) for v in values.tolist()],
                        pa.binary())
    if kind == ValueKind.BYTES:
        return pa.array(values.tolist(), pa.binary())
    return pa.array(np.asarray(values), VALUE_TYPES[kind])


def _list(pieces: Sequence[Any], values: pa.Array) -> pa.ListArray:
    offsets = np.zeros(len(pieces) + 1, dtype=np.int32)
    np.cumsum([len(p) for p in pieces], out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)


def _fixed(pieces: Sequence[_NP], typ: pa.DataType) -> pa.ListArray:
    dtype = typ.to_pandas_dtype()
    filled = [np.asarray(p).astype(dtype, copy=False) for p in pieces if len(p)]  # no float detour
    flat = np.concatenate(filled) if filled else np.zeros(0, dtype=dtype)
    return _list(pieces, pa.array(flat, typ))


def index_rows(segments: Sequence[tuple[str, str, int, Any]]) -> tuple[pa.Table, dict[str, dict[str, Any]]]:
    """Snapshot rows (without bounds) of segments loaded from their merge indexes.

    Args:
        segments: per segment (id, merge index file name, bloom region offset or -1, arrays).

    Returns:
        The rows and the slots they use (key -> column description fields).
    """
    slots: dict[str, dict[str, Any]] = {}
    layouts: list[str] = []
    per_slot: dict[str, dict[str, list[_NP]]] = {}
    kinds: dict[str, int] = {}
    for k, (_, _, _, arrays) in enumerate(segments):
        keys: list[str] = []
        for c in arrays.columns:
            key = slot_key(c.desc)
            if key in keys:  # the same column twice: the index would only see one of them
                continue
            keys.append(key)
            if key not in slots:
                slots[key] = {f: getattr(c.desc, f) for f in DESC_FIELDS}
                kinds[key] = c.kind
                per_slot[key] = {s: [np.zeros(0)] * k for s in (*COL_COLUMNS, *PAGE_COLUMNS)}
            got = per_slot[key]
            for suffix, (attr, _) in COL_COLUMNS.items():
                got[suffix].append(_flags(c) if attr == "flags" else getattr(c, attr))
            for suffix, (attr, _) in PAGE_COLUMNS.items():
                got[suffix].append(_flags(c.pages) if attr == "flags" else getattr(c.pages, attr))
        for key in per_slot:
            for lists in per_slot[key].values():
                if len(lists) == k:
                    lists.append(np.zeros(0))
        layouts.append(",".join(keys))
    data: dict[str, Any] = {
        "segment": pa.array([s[0] for s in segments], pa.string()),
        "merge": pa.array([s[1] for s in segments], pa.string()),
        "bloom_base": pa.array([s[2] for s in segments], pa.int64()),
        "bloom_len": pa.array([int(getattr(s[3], "bloom_region_length", 0) or 0) for s in segments], pa.int64()),
        "layout": pa.array(layouts, pa.string()),
        "files": pa.array([[{f: getattr(d, f) for f in FILE_STRUCT.names} for d in s[3].files] for s in segments],
                          pa.list_(FILE_STRUCT)),
    }
    for name, (attr, typ) in RG_COLUMNS.items():
        data[name] = _fixed([getattr(s[3], attr) for s in segments], typ)
    for key, got in per_slot.items():
        kind = kinds[key]
        for suffix, (_, typ) in (*COL_COLUMNS.items(), *PAGE_COLUMNS.items()):
            pieces = got[suffix]
            if typ is not None:
                data[f"{key}:{suffix}"] = _fixed(pieces, typ)
            elif kind in VALUE_TYPES:
                flat = [np.asarray(p) for p in pieces if len(p)]
                values = np.concatenate(flat) if flat else np.zeros(0, np.int64)
                if kind in (ValueKind.BYTES, ValueKind.BIGINT) and values.dtype != object:
                    values = values.astype(object)
                data[f"{key}:{suffix}"] = _list(pieces, _kind_values(kind, values))
    return pa.table(data), slots


#: Segments per chunk: a plan reads the chunks of the segments it keeps, a writer encodes
#: only chunks that changed (the open tail chunk and new ones) and copies the others.
CHUNK_SEGMENTS = 1024


def _column_types(tables: Sequence[pa.Table]) -> dict[str, pa.DataType]:
    """Every column name of ``tables``, in first-seen order, with its first type."""
    types: dict[str, pa.DataType] = {}
    for t in tables:
        for f in t.schema:
            types.setdefault(f.name, f.type)
    return types


def _aligned(pieces: Sequence[pa.Table]) -> pa.Table:
    """``pieces`` (snapshot rows) as one table; a slot some piece lacks: empty lists there."""
    types = _column_types(pieces)
    aligned = []
    for p in pieces:
        cols = []
        for name, typ in types.items():
            if name in p.column_names:
                cols.append(p.column(name))
            else:  # a slot these segments do not have: empty lists
                cols.append(pa.ListArray.from_arrays(pa.array(np.zeros(p.num_rows + 1, np.int32)),
                                                     pa.array([], typ.value_type)))
        aligned.append(pa.table(cols, names=list(types)))
    return pa.concat_tables(aligned).combine_chunks()


def _summary(t: pa.Table) -> pa.Table:
    """Snapshot rows ``t`` with their summary columns: per slot ``npages.<slot>`` (pages of
    each segment) and ``blooms.<slot>`` (some row group has a bitset)."""
    for name in [n for n in t.column_names if n.endswith(":p_rg")]:
        key = name.split(":", 1)[0]
        offs = np.frombuffer(t.column(name).chunk(0).buffers()[1], dtype=np.int32, count=t.num_rows + 1,
                             offset=4 * t.column(name).chunk(0).offset)
        t = t.append_column(f"npages.{key}", pa.array(np.diff(offs).astype(np.int32), pa.int32()))
        bo = t.column(f"{key}:bloom_off").chunk(0)
        b_offs = np.frombuffer(bo.buffers()[1], dtype=np.int32, count=t.num_rows + 1, offset=4 * bo.offset)
        seen = np.concatenate([[0], np.cumsum(bo.values.to_numpy(zero_copy_only=False) >= 0)])
        t = t.append_column(f"blooms.{key}", pa.array(seen[b_offs[1:] - b_offs[0]] > seen[b_offs[:-1] - b_offs[0]]))
    return t


def new_chunk(pieces: Sequence[pa.Table]) -> tuple[pa.Table, list[tuple[str, bytes, None]]]:
    """A chunk to encode from snapshot rows ``pieces`` (``index_rows`` or
    ``Snapshot.rows_tables``): its summary rows and its sections (base name, IPC bytes)."""
    t = split_files(_summary(_aligned(pieces)))
    used = {k for lay in t.column("layout").to_pylist() for k in lay.split(",") if k}
    groups: dict[str, list[str]] = {}
    for name in t.column_names:
        key = name.split(".", 1)[1] if name.startswith(("npages.", "blooms.")) else name.split(":", 1)[0]
        if (":" in name or name.startswith(("npages.", "blooms."))) and key not in used:
            continue  # a slot none of these segments has
        groups.setdefault(section_of(name), []).append(name)
    core = t.select(groups.pop(CORE))
    return core, [(base, ipc_bytes(narrow_ints(t.select(cols))), None) for base, cols in sorted(groups.items())]


def encode_chunks(chunks: Sequence[tuple[pa.Table, Sequence[tuple[str, Any, int | None]]]],
                  bounds: SegmentBounds, slots: dict[str, dict[str, Any]]) -> bytes:
    """The snapshot file of ``chunks`` in segment order, each (summary rows without bounds,
    sections: (base name, IPC bytes, checksum or None)) - new ones from :func:`new_chunk`,
    unchanged ones copied as they are (``Snapshot.core_rows`` / ``chunk_raw``) - and the
    segment bounds of all their segments."""
    return b"".join(encode_chunk_pieces(chunks, bounds, slots))


def encode_chunk_pieces(chunks: Sequence[tuple[pa.Table, Sequence[tuple[str, Any, int | None]]]],
                        bounds: SegmentBounds, slots: dict[str, dict[str, Any]]) -> list[Any]:
    """:func:`encode_chunks` as the file's pieces in order (a copied chunk's sections as
    the buffers they were read in: written one after another, the file never in memory)."""
    cores = [c for c, _ in chunks]
    names = _column_types(cores)
    filled = []
    for c in cores:
        cols = [c.column(n) if n in c.column_names else pa.array(
            np.zeros(c.num_rows, np.int32) if n.startswith("npages.") else np.zeros(c.num_rows, bool), typ)
            for n, typ in names.items()]
        filled.append(pa.table(cols, names=list(names)))
    t = pa.concat_tables(filled).combine_chunks() if filled else pa.table({})
    used = {k for lay in t.column("layout").to_pylist() for k in lay.split(",") if k}
    kinds = {}
    for c, cb in bounds.columns.items():
        kinds[c] = cb.kind
        lo, hi = cb.lo.tolist(), cb.hi.tolist()
        if cb.kind == "BYTES":  # a missing bound is null (bounds read from a snapshot as
            # fixed-width bytes hold b"" there: snapshot_bounds.py)
            lo = [v if ok else None for v, ok in zip(lo, cb.lo_ok.tolist(), strict=True)]
            hi = [v if ok else None for v, ok in zip(hi, cb.hi_ok.tolist(), strict=True)]
        if cb.kind == "BIGINT":
            lo = [None if v is None else str(v) for v in lo]
            hi = [None if v is None else str(v) for v in hi]
        for name, arr in ((f"lo:{c}", pa.array(lo, BOUNDS_TYPES[cb.kind])),
                          (f"hi:{c}", pa.array(hi, BOUNDS_TYPES[cb.kind])),
                          (f"lo_ok:{c}", pa.array(cb.lo_ok, pa.bool_())),
                          (f"hi_ok:{c}", pa.array(cb.hi_ok, pa.bool_())),
                          (f"nulls:{c}", pa.array(cb.null_count, pa.int64())),
                          (f"nans:{c}", pa.array(cb.nan_count, pa.int64()))):
            t = t.append_column(f"bounds.{name}", arr)
    for name in ("num_rows", "num_files", "num_row_groups"):
        t = t.append_column(f"bounds.{name}", pa.array(getattr(bounds, name), pa.int64()))
    # the layout dictionary-encoded: a reader takes its indices as they are
    t = t.set_column(t.schema.get_field_index("layout"), "layout",
                     t.column("layout").combine_chunks().dictionary_encode())
    starts = np.concatenate([[0], np.cumsum([c.num_rows for c in cores])])[:-1].tolist() or [0]
    meta = {
        "carbonstore.snapshot.version": SNAPSHOT_VERSION,
        "carbonstore.kinds": orjson.dumps(kinds).decode(),
        "carbonstore.slots": orjson.dumps({k: v for k, v in slots.items() if k in used}).decode(),
        CHUNKS_META: orjson.dumps(starts).decode(),
    }
    sections: list[tuple[str, Any, int | None]] = [(CORE, ipc_bytes(t), None)]
    for k, (_, secs) in enumerate(chunks):
        sections.extend((chunk_section(base, k), blob, checksum) for base, blob, checksum in secs)
    return frame_pieces(meta, sections)


def encode_snapshot(pieces: Sequence[pa.Table], bounds: SegmentBounds, slots: dict[str, dict[str, Any]]) -> bytes:
    """The snapshot file of snapshot rows ``pieces`` (in segment order) and their bounds, in
    chunks of CHUNK_SEGMENTS segments."""
    t = _aligned(pieces)
    chunks = [new_chunk([t.slice(r, CHUNK_SEGMENTS)]) for r in range(0, t.num_rows, CHUNK_SEGMENTS)]
    return encode_chunks(chunks, bounds, slots)
