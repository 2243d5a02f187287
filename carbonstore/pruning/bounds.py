"""Segment bounds: per segment and column, the bounds of all its row groups.

Computed once when a segment index is loaded (and stored in the index snapshot): the min
of the row-group minimums, the max of the maximums, the summed null / NaN counts. Whole
segments then drop with one vectorised evaluator pass over all segments. Inclusive like
every bound: a row group without a bound makes the segment's bound unknown, NaN-only row
groups never bound the non-NaN range, an unknown count stays unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.indexfiles.arrays import IndexArrays
from carbonstore.pruning.evaluator import UnitStats
from carbonstore.expressions.expr import BoundRef
from carbonstore.pruning.planner import _usable, find_column
from carbonstore.store.schema import Column, TableSchema, parse_type

__all__ = ["ColumnBounds", "SegmentBounds", "segment_bounds"]

_NP = npt.NDArray[Any]
_FILLER = {"INT64": 0, "FLOAT64": 0.0, "BYTES": None, "BIGINT": None}
_DTYPE = {"INT64": np.int64, "FLOAT64": np.float64, "BYTES": object, "BIGINT": object}


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnBounds:
    """One column's bounds over ``n`` segments (kinds as in arrays.py)."""

    kind: str
    lo: _NP
    hi: _NP
    lo_ok: npt.NDArray[np.bool_]
    hi_ok: npt.NDArray[np.bool_]
    null_count: npt.NDArray[np.int64]
    nan_count: npt.NDArray[np.int64]

    @classmethod
    def unknown(cls, kind: str, n: int) -> ColumnBounds:
        lo = np.full(n, _FILLER[kind], dtype=_DTYPE[kind])
        none = np.zeros(n, dtype=bool)
        minus = np.full(n, -1, dtype=np.int64)
        return cls(kind=kind, lo=lo, hi=lo, lo_ok=none, hi_ok=none, null_count=minus, nan_count=minus)

    def take(self, idx: npt.NDArray[np.intp]) -> ColumnBounds:
        return ColumnBounds(
            kind=self.kind, lo=self.lo[idx], hi=self.hi[idx], lo_ok=self.lo_ok[idx],
            hi_ok=self.hi_ok[idx], null_count=self.null_count[idx], nan_count=self.nan_count[idx],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentBounds:
    """Per-segment sizes and column bounds, column-oriented over ``n`` segments."""

    num_rows: npt.NDArray[np.int64]
    num_files: npt.NDArray[np.int64]
    num_row_groups: npt.NDArray[np.int64]
    columns: dict[str, ColumnBounds] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.num_rows)

    def take(self, idx: npt.NDArray[np.intp]) -> SegmentBounds:
        return SegmentBounds(
            num_rows=self.num_rows[idx], num_files=self.num_files[idx],
            num_row_groups=self.num_row_groups[idx],
            columns={k: v.take(idx) for k, v in self.columns.items()},
        )

    @staticmethod
    def concat(parts: Sequence[SegmentBounds]) -> SegmentBounds:
        """Concatenate; a column missing in (or of another kind than) a part is unknown there."""
        if len(parts) == 1:
            return parts[0]
        kinds: dict[str, str] = {}
        for p in parts:
            for name, cb in p.columns.items():
                kinds.setdefault(name, cb.kind)
        cols: dict[str, ColumnBounds] = {}
        for name, kind in kinds.items():
            pieces = []
            for p in parts:
                got = p.columns.get(name)
                pieces.append(got if got is not None and got.kind == kind else ColumnBounds.unknown(kind, p.size))
            cols[name] = ColumnBounds(
                kind=kind, lo=_cat([c.lo for c in pieces]), hi=_cat([c.hi for c in pieces]),
                lo_ok=np.concatenate([c.lo_ok for c in pieces]),
                hi_ok=np.concatenate([c.hi_ok for c in pieces]),
                null_count=np.concatenate([c.null_count for c in pieces]),
                nan_count=np.concatenate([c.nan_count for c in pieces]),
            )
        return SegmentBounds(
            num_rows=np.concatenate([p.num_rows for p in parts]),
            num_files=np.concatenate([p.num_files for p in parts]),
            num_row_groups=np.concatenate([p.num_row_groups for p in parts]),
            columns=cols,
        )

    def unit_stats(self, ref: BoundRef) -> UnitStats | None:
        """Segments as evaluator units (the schema column ``ref``), or None if not prunable."""
        # keyed by column id: a column dropped and added again under its name is another
        # column, and a renamed one keeps its bounds (docs/schema-evolution.md)
        cb = self.columns.get(ref.column.column_id)
        if cb is None:
            return None
        n = self.size
        none = np.zeros(n, dtype=bool)
        floating = cb.kind == "FLOAT64"
        return UnitStats(
            floating=floating, lo=cb.lo, hi=cb.hi, lo_ok=cb.lo_ok, hi_ok=cb.hi_ok, hi_strict=none,
            null_count=cb.null_count, nan_count=cb.nan_count if floating else np.zeros(n, np.int64),
            num_rows=self.num_rows, null_unit=none,
        )


def _cat(arrays: list[_NP]) -> _NP:
    if any(a.dtype == object for a in arrays):
        out = np.empty(sum(len(a) for a in arrays), dtype=object)
        out[:] = [v for a in arrays for v in a.tolist()]
        return out
    return np.concatenate(arrays)


def _aggregate(s: UnitStats, kind: str) -> ColumnBounds:
    """Row-group statistics of one column -> one segment-level bound (inclusive, safe)."""
    contrib = ~((s.null_count == s.num_rows) | s.null_unit)
    nan_only = np.zeros(len(contrib), dtype=bool)
    if s.floating:  # min = max = NaN: only NaN values; they never bound the non-NaN range
        lo_f = np.asarray(s.lo, dtype=np.float64)
        hi_f = np.asarray(s.hi, dtype=np.float64)
        nan_only = (s.lo_ok & np.isnan(lo_f)) | (s.hi_ok & np.isnan(hi_f))
        contrib = contrib & ~nan_only
    any_values = bool(contrib.any())
    lo_ok = any_values and bool(s.lo_ok[contrib].all())
    hi_ok = any_values and bool(s.hi_ok[contrib].all())
    lo: Any = _FILLER[kind]
    hi: Any = _FILLER[kind]
    if lo_ok:
        vals = s.lo[contrib]
        lo = min(vals.tolist()) if vals.dtype == object else vals.min()
    if hi_ok:
        vals = s.hi[contrib]
        hi = max(vals.tolist()) if vals.dtype == object else vals.max()
    nulls = int(s.null_count.sum()) if bool((s.null_count >= 0).all()) else -1
    nans = 0
    if s.floating:
        nans = int(s.nan_count.sum()) if bool((s.nan_count >= 0).all()) else -1
        if nans == 0 and nan_only.any():
            nans = -1
    lo_a = np.empty(1, dtype=_DTYPE[kind])
    hi_a = np.empty(1, dtype=_DTYPE[kind])
    lo_a[0], hi_a[0] = lo, hi
    return ColumnBounds(
        kind=kind, lo=lo_a, hi=hi_a, lo_ok=np.array([lo_ok]), hi_ok=np.array([hi_ok]),
        null_count=np.array([nulls], np.int64), nan_count=np.array([nans], np.int64),
    )


def segment_bounds(
    arrays: IndexArrays, schema: TableSchema, *, names: dict[str, str] | None = None
) -> SegmentBounds:
    """The bounds of one segment (all its row groups) for every prunable schema column,
    keyed by column id. ``names``: column id -> the name the segment's files use (the schema
    version it was written with, docs/schema-evolution.md); a column without one there was
    added later and has no bounds in this segment."""
    rows = arrays.rg_num_rows
    cols: dict[str, ColumnBounds] = {}
    dict_cols = set(schema.dictionary_columns)
    for c in schema.columns:
        if c.name in dict_cols:  # the files hold INT32 surrogates (docs/dictionary.md)
            c = Column(name=c.name, type=parse_type("int"), nullable=c.nullable, column_id=c.column_id)
        ref = BoundRef(c)
        if names is not None:
            physical = names.get(c.column_id)
            col = arrays.column(physical) if physical and arrays.has_column(physical) else None
        else:
            col = find_column(arrays, ref)
        kind = None if col is None else _usable(col, ref)
        if col is None or kind is None or kind == "NONE":
            continue
        cols[c.column_id] = _aggregate(UnitStats.from_arrays(col, rows, kind=kind), kind)
    return SegmentBounds(
        num_rows=np.array([int(rows.sum())], np.int64),
        num_files=np.array([len(arrays.files)], np.int64),
        num_row_groups=np.array([arrays.num_row_groups], np.int64),
        columns=cols,
    )
