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
    frame_snapshot,
    slot_key,
)

__all__ = ["encode_snapshot", "index_rows"]

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


def encode_snapshot(pieces: Sequence[pa.Table], bounds: SegmentBounds, slots: dict[str, dict[str, Any]]) -> bytes:
    """The snapshot file: rows (``index_rows`` or ``Snapshot.rows_table``, in segment order) and bounds."""
    types: dict[str, pa.DataType] = {}
    for p in pieces:
        for f in p.schema:
            types.setdefault(f.name, f.type)
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
    t = pa.concat_tables(aligned).combine_chunks()
    used = {k for lay in t.column("layout").to_pylist() for k in lay.split(",") if k}
    t = t.select([n for n in t.column_names if ":" not in n or n.split(":", 1)[0] in used])
    kinds = {}
    for c, cb in bounds.columns.items():
        kinds[c] = cb.kind
        lo, hi = cb.lo.tolist(), cb.hi.tolist()
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
    t = t.replace_schema_metadata({
        "carbonstore.snapshot.version": SNAPSHOT_VERSION,
        "carbonstore.kinds": orjson.dumps(kinds).decode(),
        "carbonstore.slots": orjson.dumps({k: v for k, v in slots.items() if k in used}).decode(),
    })
    # the layout dictionary-encoded: a reader takes its indices as they are
    t = t.set_column(t.schema.get_field_index("layout"), "layout",
                     t.column("layout").combine_chunks().dictionary_encode())
    return frame_snapshot(t)

