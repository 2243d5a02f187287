"""Segment bounds: per segment and column, the bounds of all its row groups.

Computed once when a segment index is loaded (and stored in the index snapshot): the min
of the row-group minimums, the max of the maximums, the summed null / NaN counts. Whole
segments then drop with one vectorised evaluator pass over all segments. Inclusive like
every bound: a row group without a bound makes the segment's bound unknown, NaN-only row
groups never bound the non-NaN range, an unknown count stays unknown.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from carbonstore.expressions.expr import BoundRef
from carbonstore.indexfiles.arrays import IndexArrays
from carbonstore.indexfiles.segment_bounds import (
    KIND_DTYPE,
    KIND_FILLER,
    ColumnBounds,
    SegmentBounds,
)
from carbonstore.pruning.evaluator import UnitStats
from carbonstore.pruning.units import find_column, value_kind
from carbonstore.store.schema import Column, TableSchema, parse_type

__all__ = ["segment_bounds", "segment_unit_stats"]


def segment_unit_stats(bounds: SegmentBounds, ref: BoundRef) -> UnitStats | None:
    """Segments as evaluator units (the schema column ``ref``), or None if not prunable."""
    # keyed by column id: a column dropped and added again under its name is another
    # column, and a renamed one keeps its bounds (docs/schema-evolution.md)
    cb = bounds.columns.get(ref.column.column_id)
    if cb is None:
        return None
    n = bounds.size
    none = np.zeros(n, dtype=bool)
    floating = cb.kind == "FLOAT64"
    return UnitStats(
        floating=floating, lo=cb.lo, hi=cb.hi, lo_ok=cb.lo_ok, hi_ok=cb.hi_ok, hi_strict=none,
        null_count=cb.null_count, nan_count=cb.nan_count if floating else np.zeros(n, np.int64),
        num_rows=bounds.num_rows, null_unit=none,
    )


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
    lo: Any = KIND_FILLER[kind]
    hi: Any = KIND_FILLER[kind]
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
    lo_a = np.empty(1, dtype=KIND_DTYPE[kind])
    hi_a = np.empty(1, dtype=KIND_DTYPE[kind])
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
        kind = None if col is None else value_kind(col, ref)
        if col is None or kind is None or kind == "NONE":
            continue
        cols[c.column_id] = _aggregate(UnitStats.from_arrays(col, rows, kind=kind), kind)
    return SegmentBounds(
        num_rows=np.array([int(rows.sum())], np.int64),
        num_files=np.array([len(arrays.files)], np.int64),
        num_row_groups=np.array([arrays.num_row_groups], np.int64),
        columns=cols,
    )
