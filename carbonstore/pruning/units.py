"""The units a filter is evaluated over: the index column of a bound reference, the kind of
value its statistics hold, bloom encodings of literals, and the row-group units (whole row
groups or pages) the planner evaluates level by level (``planner.py``)."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.expressions.expr import (
    BoundRef,
    Eq,
    Expr,
    In,
)
from carbonstore.indexfiles import bloom as bloom_mod
from carbonstore.indexfiles.arrays import ColumnArrays, IndexArrays
from carbonstore.indexfiles.bloom_probe import has_verdicts, known_verdict, might_contain_any
from carbonstore.indexfiles.physical import physical_name
from carbonstore.pruning.evaluator import (
    Mask,
    UnitStats,
)

_KIND_NAMES = {0: "NONE", 1: "INT64", 2: "FLOAT64", 3: "BYTES", 4: "BIGINT"}

__all__ = ["RowGroupUnits", "any_bitset", "bloom_encodings", "find_column", "literal_hashes",
           "value_kind"]


def find_column(arrays: IndexArrays, ref: BoundRef) -> ColumnArrays | None:
    """The index column of a bound schema column (by column id, then name), or None."""
    cid = ref.column.column_id
    for c in arrays.columns:
        if c.desc.column_id and c.desc.column_id == cid:
            return c
    # By name only for an index column without a column id of its own (its id is its
    # name): one with another id is another column (dropped, or renamed away) of that name.
    for c in arrays.columns:
        if c.name.lower() == ref.name and (c.desc.column_id or c.name) == c.name:
            return c
    return None


def value_kind(col: ColumnArrays, ref: BoundRef) -> str | None:
    """The value kind name (arrays.py) if the index column compares like the schema type, else None."""
    kind = _KIND_NAMES.get(col.kind, "NONE")
    if col.desc.nested:
        return None
    t = ref.type
    if t.is_floating:
        return kind if kind == "FLOAT64" else None
    if t.name in ("string", "binary"):
        return kind if kind == "BYTES" else None
    if t.name == "decimal":
        return kind if kind in ("INT64", "BIGINT") and (col.desc.scale or 0) == t.scale else None
    if t.name == "date":
        return kind if kind == "INT64" and col.desc.unit == "days" else None
    if t.name == "timestamp":
        ok = kind == "INT64" and col.desc.unit == "micros" and "TIMESTAMP" in (col.desc.logical_type or "")
        return kind if ok else None
    if t.is_integral or t.name == "boolean":
        return kind if kind == "INT64" and not col.desc.unit else None
    return None


def bloom_encodings(value: Any, col: ColumnArrays, ref: BoundRef) -> list[bytes] | None:
    """PLAIN encodings a matching value may have in the file, or None (do not use bloom)."""
    phys = physical_name(col.desc.physical_type)
    t = ref.type
    try:
        if t.is_floating:
            if math.isnan(value):
                return None
            fmt = "<f" if phys == "FLOAT" else "<d" if phys == "DOUBLE" else None
            if fmt is None:
                return None
            if value == 0.0:  # -0.0 = 0.0
                return [struct.pack(fmt, 0.0), struct.pack(fmt, -0.0)]
            return [struct.pack(fmt, value)]
        if t.name == "timestamp":
            logical = col.desc.logical_type or ""
            if "MILLIS" in logical:
                if value % 1000:
                    return []
                value //= 1000
            elif "NANOS" in logical:
                value *= 1000
            elif "MICROS" not in logical:
                return None
        if t.name == "boolean":
            return None
        if t.name == "decimal" and phys == "FIXED_LEN_BYTE_ARRAY":
            return [int(value).to_bytes(int(col.desc.type_length or 0), "big", signed=True)]
        if phys in ("INT32", "INT64", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"):
            if phys.endswith("BYTE_ARRAY") and not isinstance(value, bytes):
                return None
            return [bloom_mod.plain_encode(value, phys)]
    except (OverflowError, struct.error, TypeError, ValueError):
        return None
    return None


class RowGroupUnits:
    """Row groups of several IndexArrays addressed by one global index."""

    def __init__(self, parts: Sequence[IndexArrays]) -> None:
        self.parts = list(parts)
        self._cache: dict[str, UnitStats | None] = {}
        if len(self.parts) == 1:  # one part (a plan's usual unit): its own numbering
            n = self.parts[0].num_row_groups
            self.start = np.array([0, n], dtype=np.int64)
            self.part = np.broadcast_to(np.int32(0), (n,))  # (read only: no array of zeros)
            self.local = np.arange(n, dtype=np.int32)
            self.num_rows = np.asarray(self.parts[0].rg_num_rows, dtype=np.int64)  # (no copy: read only)
            return
        sizes = [p.num_row_groups for p in self.parts]
        self.start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.part = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
        self.local = np.concatenate(
            [np.arange(s, dtype=np.int32) for s in sizes] or [np.zeros(0, np.int32)]
        )
        self.num_rows = np.concatenate(
            [p.rg_num_rows for p in self.parts] or [np.zeros(0, np.int64)]
        ).astype(np.int64)

    @property
    def size(self) -> int:
        return int(self.start[-1])

    def stats(self, ref: BoundRef) -> UnitStats | None:
        if ref.name in self._cache:
            return self._cache[ref.name]
        pieces: list[UnitStats | None] = []
        kinds: set[str] = set()
        for p in self.parts:
            col = find_column(p, ref)
            kind = None if col is None else value_kind(col, ref)
            if col is None or kind is None:
                pieces.append(None)
                continue
            kinds.add(kind)
            pieces.append(UnitStats.from_arrays(col, p.rg_num_rows, kind=kind))
        result = _concat_stats(pieces, [p.rg_num_rows for p in self.parts], ref, kinds)
        self._cache[ref.name] = result
        return result

    def may_probe(self, ref: BoundRef) -> bool:
        """False when :meth:`bloom_probe` keeps every candidate of a leaf on ``ref``: no part
        has a bitset of the column or a verdict of the segment level's pack probe."""
        for p in self.parts:
            col = find_column(p, ref)
            if col is not None and value_kind(col, ref) is not None and (
                    has_verdicts(p, col.name) or any_bitset(col)):
                return True
        return False

    def bloom_probe(self, expr: Expr, idx: npt.NDArray[np.intp]) -> Mask:
        """Keep a candidate unless its bloom filter proves every literal absent."""
        out = np.ones(len(idx), dtype=bool)
        if not isinstance(expr, (Eq, In)) or not isinstance(expr.term, BoundRef):
            return out  # only Eq / In leaves are probed
        ref = expr.term
        literals = (expr.literal,) if isinstance(expr, Eq) else expr.literals
        if not len(idx):
            return out
        idx_part = self.part[idx]
        single = len(self.parts) == 1 or not (idx_part != idx_part[0]).any()
        batches: dict[int, tuple[npt.NDArray[np.uint64], list[int], list[bytes]]] = {}
        for pi in ([int(idx_part[0])] if single else np.unique(idx_part).tolist()):
            p = self.parts[pi]
            col = find_column(p, ref)  # parts without a bitset of the column: skipped
            if col is None or value_kind(col, ref) is None:
                continue
            mine = np.arange(len(idx)) if single else np.flatnonzero(idx_part == pi)
            hashes = None
            unknown: list[tuple[int, int]] | None = None  # None: every candidate of the part
            if has_verdicts(p, col.name):  # the segment level's probe of the bloom pack saw
                hashes = literal_hashes(literals, col, ref)  # these bitsets (then the part's
                if hashes is None:  # bitset offsets are not looked at)
                    continue
                unknown = []
                for k, rg in zip(mine.tolist(), self.local[idx[mine]].tolist(), strict=True):
                    known = known_verdict(p, rg, col.name, hashes)
                    if known is None:
                        unknown.append((k, rg))
                    else:
                        out[k] = known
            if unknown == [] or not any_bitset(col):
                continue
            if hashes is None:
                hashes = literal_hashes(literals, col, ref)
                if hashes is None:
                    continue
            if unknown is None:
                unknown = list(zip(mine.tolist(), self.local[idx[mine]].tolist(), strict=True))
            for k, rg in unknown:
                bitset = p.bloom_bitset(rg, col.name)
                if bitset is None:
                    continue
                batch = batches.setdefault(id(hashes), (hashes, [], []))  # probed all at once below
                batch[1].append(k)
                batch[2].append(bitset)
        for hashes, ks, bitsets in batches.values():
            out[np.asarray(ks, dtype=np.intp)] = might_contain_any(bitsets, hashes)
        return out


def literal_hashes(literals: Sequence[Any], col: ColumnArrays, ref: BoundRef) -> npt.NDArray[np.uint64] | None:
    """The bloom hashes of every encoding ``literals`` may have in ``col``, or None (a literal
    the bitsets cannot answer for: do not probe)."""
    encoded: list[bytes] = []
    for v in literals:
        enc = bloom_encodings(v, col, ref)
        if enc is None:
            return None
        encoded.extend(enc)
    return np.array([bloom_mod.hash_plain(e) for e in encoded], dtype=np.uint64)


def any_bitset(col: ColumnArrays) -> bool:
    """Some row group of ``col`` has a bloom bitset. A column selected from larger arrays
    (``selection``) without any bitset there has none: asked of the larger arrays once."""
    selected = getattr(col, "selection", None)
    if selected is not None:
        source = selected[0]
        memo = getattr(source, "_any_bitset_memo", None)
        if memo is None:
            memo = bool((source.bloom_offset >= 0).any())
            try:
                source._any_bitset_memo = memo
            except AttributeError:  # an object that takes no attributes: no memo
                pass
        if not memo:
            return False
    return bool((col.bloom_offset >= 0).any())


def _concat_stats(
    pieces: list[UnitStats | None], num_rows: list[npt.NDArray[np.int64]], ref: BoundRef,
    kinds: set[str],
) -> UnitStats | None:
    if all(p is None for p in pieces):
        return None
    floating = ref.type.is_floating
    filled: list[UnitStats] = []
    for p, rows in zip(pieces, num_rows, strict=True):
        n = len(rows)
        if p is None:
            filler = np.empty(n, dtype=object) if kinds & {"BYTES", "BIGINT"} or len(kinds) > 1 else np.zeros(n)
            none = np.zeros(n, dtype=bool)
            p = UnitStats(
                floating=floating, lo=filler, hi=filler, lo_ok=none, hi_ok=none, hi_strict=none,
                null_count=np.full(n, -1, np.int64), nan_count=np.full(n, -1, np.int64),
                num_rows=np.asarray(rows, np.int64), null_unit=none,
            )
        filled.append(p)
    if len(filled) == 1:
        return filled[0]

    def cat(name: str) -> Any:
        arrs = [getattr(p, name) for p in filled]
        if any(a.dtype == object for a in arrs) and name in ("lo", "hi"):
            out = np.empty(sum(len(a) for a in arrs), dtype=object)
            out[:] = [v for a in arrs for v in a.tolist()]
            return out
        return np.concatenate(arrs)

    return UnitStats(
        floating=floating, lo=cat("lo"), hi=cat("hi"), lo_ok=cat("lo_ok"), hi_ok=cat("hi_ok"),
        hi_strict=cat("hi_strict"), null_count=cat("null_count"), nan_count=cat("nan_count"),
        num_rows=cat("num_rows"), null_unit=cat("null_unit"),
    )
