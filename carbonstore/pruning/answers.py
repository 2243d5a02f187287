"""Aggregates answered from the index alone: ``count(*)``, ``count(c)``, ``min(c)``, ``max(c)``.

:func:`answer` returns the exact values of a list of aggregates over the rows of a table's
readable segments that satisfy a filter, or None when the index cannot decide them exactly
(the caller then reads the data). Contract:

- **Exactly decided filter.** Every unit (segment, else row group) must be either proved to
  hold no matching row (the pruning evaluators, inclusive as always) or proved to hold only
  matching rows (:class:`AllRowsEvaluator`: bounds, null and NaN counts, Spark's NaN and
  ``-0.0 = 0.0`` semantics, SQL three-valued logic: a null row never satisfies a comparison).
  One unit that might hold both kinds of rows and the answer is None. ``count(*)`` is then
  the sum of the row counts of the units that match whole.
- **min / max** come from row-group statistics only where they are the actual values
  (``min_exact`` / ``max_exact``: not truncated strings, not rounded timestamps) of every
  row group holding a value. Floats: NaN is greater than every number (a NaN row makes
  ``max`` NaN, only-NaN values make ``min`` NaN), which needs every NaN count; a zero
  minimum or maximum is refused because Parquet writes a zero min as -0.0 and a zero max as
  +0.0 whatever the rows hold. Dictionary columns hold surrogates: the values of a row
  group lie among the surrogates ``[min, max]``, and the smallest value over those ranges
  (by the sort index) is the answer when it is the surrogate of a row-group bound, which
  is present in the rows; else None. Only nulls (or no row): NULL.
- **Row-level deletes.** :func:`deleted_row_counts` gives a segment's deleted rows per data
  file. ``count(*)`` subtracts them where every row group of the file matches whole; a file
  with deleted rows and row groups of both kinds, ``count(c)``, ``min`` and ``max`` over a
  file with deleted rows, give None.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from carbonstore.errors import CarbonStoreError
from carbonstore.expressions.expr import (
    BoundRef,
    Eq,
    Expr,
    In,
    nodes,
)
from carbonstore.pruning import planner as planner_mod
from carbonstore.pruning.all_rows import AllRowsEvaluator
from carbonstore.pruning.bounds import segment_unit_stats
from carbonstore.pruning.dictionary_rewrite import IN_SURROGATES, dictionary_safe
from carbonstore.pruning.evaluator import (
    LEVEL_COUNTS,
    LEVEL_MINMAX,
    StatsEvaluator,
)
from carbonstore.pruning.plan import bind_where
from carbonstore.pruning.table_index import readable_segments, table_index
from carbonstore.store.evolution import segment_projections
from carbonstore.store.partitioning import removed_partitions
from carbonstore.store.schema import Column, parse_type
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry

__all__ = ["Aggregate", "answer", "deleted_row_counts"]


Mask = npt.NDArray[np.bool_]
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH_TS = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_FIRST_SURROGATE = 2  # surrogate 1 is null (docs/dictionary.md)


@dataclass(frozen=True, slots=True, kw_only=True)
class Aggregate:
    """One aggregate: ``count`` with ``column`` None is ``count(*)``."""

    func: Literal["count", "min", "max"]
    column: str | None = None


def deleted_row_counts(table: Table, entry: LoadEntry) -> Mapping[str, int]:
    """Deleted rows per data file of one segment (paths relative to the segment folder).

    The one place metadata answers learn of row-level deletes: the entry's ``deleteDeltas``
    of the version read (docs/dml.md).
    """
    del table
    return {d.data_file: d.deleted_rows for d in entry.delete_deltas}


def _index_describes_reads(table: Table, entries: Sequence[LoadEntry]) -> bool:
    """Whether the index statistics of ``entries`` describe the rows as read: not for a
    segment written with an older schema version (its columns are read by id, renamed,
    defaulted, widened) or one whose partitions a dynamic overwrite replaced (the index
    still lists the replaced files)."""

    if any(removed_partitions(e) for e in entries):
        return False
    return not segment_projections(table, entries)


# ---- answers ----------------------------------------------------------------------------------


def _dictionary_ok(expr: Expr, table: Table) -> bool:
    """Whether dictionary_safe keeps ``expr`` exact: on a dictionary column only = and a
    short IN become surrogate leaves; every other leaf there is widened to AlwaysTrue."""
    dict_cols = set(table.schema.dictionary_columns)
    if not dict_cols:
        return True
    for e in nodes(expr):
        term = getattr(e, "term", None)
        if isinstance(term, BoundRef) and term.name in dict_cols:
            if isinstance(e, In) and len(e.literals) <= IN_SURROGATES:
                continue
            if not isinstance(e, Eq):
                return False
    return True


def _storage_ref(table: Table, name: str) -> BoundRef:
    """The column as the data files hold it (dictionary columns: INT32 surrogates)."""
    c = table.schema.column(name)
    if name in table.schema.dictionary_columns:
        c = Column(name=c.name, type=parse_type("int"), nullable=c.nullable, column_id=c.column_id)
    return BoundRef(c)


@dataclass(slots=True)
class _Units:
    """The row groups that match whole, over the parts of the kept segments."""

    parts: list[Any]
    tags: list[npt.NDArray[np.intp]]  # per part: the view segment index of each row group
    rgs: list[npt.NDArray[np.intp]]  # per part: local row-group indices that match whole


def answer(
    table: Table,
    aggregates: Sequence[Aggregate],
    where: str | Expr | None = None,
    *,
    time_zone: dt.tzinfo = dt.UTC,
) -> tuple[Any, ...] | None:
    """The values of ``aggregates`` over the rows of ``table`` that satisfy ``where``, from
    the index alone, or None when it cannot give them exactly (see the module contract).

    Values are Python values as Spark returns them (timestamps aware, in UTC; decimals with
    the column's scale); a ``min``/``max`` over no value is None.

    Raises:
        ExpressionError: the filter does not parse or does not bind to the schema.
        UserError: an aggregate names a column the table does not have.
    """
    expr = bind_where(table, where, time_zone=time_zone)
    for a in aggregates:
        if a.column is not None:
            table.schema.column(a.column)  # unknown column: a user error
    if not _dictionary_ok(expr, table):
        return None
    entries = readable_segments(table.status.read())
    if not _index_describes_reads(table, entries):
        return None
    view = table_index(table, entries)
    n = view.size
    if not n:
        return tuple(0 if a.func == "count" else None for a in aggregates)
    expr = dictionary_safe(expr, table, bounds=view.bounds)
    b = view.bounds
    seg_stats = functools.partial(segment_unit_stats, b)
    might = (StatsEvaluator(n, seg_stats, level=LEVEL_COUNTS).evaluate(expr)
             & StatsEvaluator(n, seg_stats, level=LEVEL_MINMAX).evaluate(expr))
    whole = AllRowsEvaluator(n, seg_stats).evaluate(expr) & might
    deleted = {i: deleted_row_counts(table, entries[i]) for i in np.flatnonzero(might).tolist()}
    if all(a.func == "count" and a.column is None for a in aggregates):
        # segments that match whole count without loading their row-group arrays
        rows = int(b.num_rows[whole].sum())
        rows -= sum(sum(deleted[i].values()) for i in np.flatnonzero(whole).tolist())
        units = _row_groups(view, expr, np.flatnonzero(might & ~whole))
        rest = _UNKNOWN if units is None else _count_star(view, units, deleted)
        if rest is _UNKNOWN:
            return None
        return tuple(rows + int(rest) for _ in aggregates)  # type: ignore[arg-type]
    units = _row_groups(view, expr, np.flatnonzero(might))
    if units is None:
        return None
    out: list[Any] = []
    for a in aggregates:
        if a.func == "count" and a.column is None:
            value = _count_star(view, units, deleted)
        elif a.func == "count":
            value = _count_column(table, units, deleted, str(a.column))
        else:
            value = _min_max(table, units, deleted, str(a.column), a.func)
        if value is _UNKNOWN:
            return None
        out.append(value)
    return tuple(out)


_UNKNOWN = object()


def _row_groups(view: Any, expr: Expr, segs: npt.NDArray[np.intp]) -> _Units | None:
    """Row groups of segments ``segs``: None unless each matches whole or cannot match."""
    if not len(segs):
        return _Units(parts=[], tags=[], rgs=[])
    parts, tags = view.units(segs)
    might, g = planner_mod.row_group_might_match(expr, parts)
    whole = AllRowsEvaluator(g.size, g.stats).evaluate(expr) & might
    if (might & ~whole).any():
        return None
    rgs = []
    for pi in range(len(parts)):
        lo, hi = int(g.start[pi]), int(g.start[pi + 1])
        rgs.append(np.flatnonzero(whole[lo:hi]))
    return _Units(parts=parts, tags=tags, rgs=rgs)


def _file_keys(view: Any, units: _Units, pi: int, local: npt.NDArray[np.intp]) -> list[tuple[int, str]]:
    """(view segment index, file path relative to the segment) of row groups ``local``."""
    p = units.parts[pi]
    tags = units.tags[pi]
    files = p.files
    return [(int(tags[i]), files[int(p.rg_file[i])].path or "") for i in local.tolist()]


def _count_star(view: Any, units: _Units, deleted: dict[int, Mapping[str, int]]) -> Any:
    rows = 0
    touched: dict[tuple[int, str], int] = {}  # files with deletes: row groups counted
    for pi, local in enumerate(units.rgs):
        p = units.parts[pi]
        rows += int(np.asarray(p.rg_num_rows)[local].sum())
        if any(deleted.get(int(t)) for t in np.unique(units.tags[pi]).tolist()):
            for key in _file_keys(view, units, pi, local):
                if deleted.get(key[0], {}).get(key[1]):
                    touched[key] = touched.get(key, 0) + 1
    for (seg, path), counted in touched.items():
        if counted != _row_groups_of_file(units, seg, path):
            return _UNKNOWN  # its deleted rows may lie in a row group that does not match
        rows -= int(deleted[seg][path])
    return rows


def _row_groups_of_file(units: _Units, seg: int, path: str) -> int:
    n = 0
    for pi, p in enumerate(units.parts):
        tags = units.tags[pi]
        for i in np.flatnonzero(tags == seg).tolist():
            if (p.files[int(p.rg_file[i])].path or "") == path:
                n += 1
    return n


def _has_deletes(units: _Units, deleted: dict[int, Mapping[str, int]]) -> bool:
    for pi, local in enumerate(units.rgs):
        tags = units.tags[pi]
        p = units.parts[pi]
        for i in local.tolist():
            d = deleted.get(int(tags[i]))
            if d and d.get(p.files[int(p.rg_file[i])].path or ""):
                return True
    return False


@dataclass(slots=True)
class _ColumnStats:
    """Raw statistics of one column over the whole-matching row groups (one part)."""

    kind: str
    rows: npt.NDArray[np.int64]
    nulls: npt.NDArray[np.int64]
    nans: npt.NDArray[np.int64]
    lo: Any
    hi: Any
    lo_ok: Mask
    hi_ok: Mask


def _column_stats(table: Table, units: _Units, name: str) -> list[_ColumnStats] | None:
    ref = _storage_ref(table, name)
    out = []
    for pi, local in enumerate(units.rgs):
        if not len(local):
            continue
        p = units.parts[pi]
        col = planner_mod.find_column(p, ref)
        kind = None if col is None else planner_mod.value_kind(col, ref)
        if col is None or kind is None or kind == "NONE":
            return None
        nans = (np.asarray(col.nan_count, np.int64)[local] if kind == "FLOAT64"
                else np.zeros(len(local), np.int64))
        out.append(_ColumnStats(
            kind=kind, rows=np.asarray(p.rg_num_rows, np.int64)[local],
            nulls=np.asarray(col.null_count, np.int64)[local], nans=nans,
            lo=col.min[local], hi=col.max[local],
            lo_ok=np.asarray(col.has_min, bool)[local] & np.asarray(col.min_exact, bool)[local],
            hi_ok=np.asarray(col.has_max, bool)[local] & np.asarray(col.max_exact, bool)[local],
        ))
    return out


def _count_column(table: Table, units: _Units, deleted: dict[int, Mapping[str, int]], name: str) -> Any:
    if _has_deletes(units, deleted):
        return _UNKNOWN  # a deleted row may or may not be null
    stats = _column_stats(table, units, name)
    if stats is None:
        return _UNKNOWN
    dictionary = name in table.schema.dictionary_columns
    total = 0
    for s in stats:
        if (s.nulls < 0).any():
            return _UNKNOWN
        if dictionary:  # nulls are surrogate 1, not Parquet nulls
            values = s.rows - s.nulls
            none = (values == 0) | (s.hi_ok & (np.asarray(s.hi) < _FIRST_SURROGATE))
            full = (s.nulls == 0) & s.lo_ok & (np.asarray(s.lo) >= _FIRST_SURROGATE)
            if not (none | full).all():
                return _UNKNOWN
            total += int(s.rows[full].sum())
        else:
            total += int((s.rows - s.nulls).sum())
    return total


def _min_max(table: Table, units: _Units, deleted: dict[int, Mapping[str, int]], name: str,
             func: str) -> Any:
    if _has_deletes(units, deleted):
        return _UNKNOWN  # the bound may be a deleted row's value
    stats = _column_stats(table, units, name)
    if stats is None:
        return _UNKNOWN
    column = table.schema.column(name)
    if name in table.schema.dictionary_columns:
        return _dictionary_min_max(table, column, stats, func)
    best: Any = None
    any_nan = False
    for s in stats:
        if (s.nulls < 0).any():
            return _UNKNOWN
        values = s.rows - s.nulls
        has = values > 0
        if s.kind == "FLOAT64":
            if (s.nans[has] < 0).any():
                return _UNKNOWN
            any_nan |= bool((s.nans > 0).any())
            has = values - s.nans > 0
        ok = s.lo_ok if func == "min" else s.hi_ok
        if not ok[has].all():
            return _UNKNOWN
        vals = (s.lo if func == "min" else s.hi)[has]
        if not len(vals):
            continue
        if s.kind == "FLOAT64" and np.isnan(np.asarray(vals, np.float64)).any():
            return _UNKNOWN
        part = min(vals.tolist()) if func == "min" else max(vals.tolist())
        best = part if best is None else (min(best, part) if func == "min" else max(best, part))
    if stats and stats[0].kind == "FLOAT64":
        if func == "max" and any_nan:
            return math.nan
        if best is None:
            return math.nan if any_nan else None
        if best == 0.0:
            return _UNKNOWN  # -0.0 or 0.0: the statistics do not say which
    return None if best is None else _python_value(column, stats[0].kind, best)


def _dictionary_min_max(table: Table, column: Column, stats: list[_ColumnStats], func: str) -> Any:
    """The smallest / largest value over the row groups' surrogate ranges, when it is the
    surrogate of a row-group bound (a bound is a surrogate some row holds)."""
    from carbonstore.dictionary import load_dictionary

    if column.type.is_floating:
        return _UNKNOWN  # NaN and -0.0 order apart from the sort index
    starts: list[int] = []
    ends: list[int] = []
    witnesses: set[int] = set()
    for s in stats:
        if (s.nulls < 0).any():
            return _UNKNOWN
        has = (s.rows - s.nulls) > 0
        if not (s.lo_ok[has] & s.hi_ok[has]).all():
            return _UNKNOWN
        lo = np.asarray(s.lo, np.int64)[has]
        hi = np.asarray(s.hi, np.int64)[has]
        keep = hi >= _FIRST_SURROGATE  # else only nulls
        lo, hi = np.maximum(lo[keep], _FIRST_SURROGATE), hi[keep]
        starts.extend(lo.tolist())
        ends.extend(hi.tolist())
        witnesses.update(hi.tolist())
        witnesses.update(x for x in np.asarray(s.lo, np.int64)[has][keep].tolist() if x >= _FIRST_SURROGATE)
    if not starts:
        return None
    try:
        d = load_dictionary(table, column)
        if max(ends) > d.max_surrogate:
            return _UNKNOWN
        order, ranks = d.sort_index()
    except CarbonStoreError:
        return _UNKNOWN  # a damaged dictionary: the read reports it
    best_rank: int | None = None
    for a, e in _merge_intervals(starts, ends):
        window = ranks[a - _FIRST_SURROGATE : e - _FIRST_SURROGATE + 1]
        r = int(window.min() if func == "min" else window.max())
        if best_rank is None or (r < best_rank if func == "min" else r > best_rank):
            best_rank = r
    if best_rank is None:
        return None
    surrogate = int(order[best_rank])
    if surrogate not in witnesses:
        return _UNKNOWN
    return d.value_of(surrogate)


def _merge_intervals(starts: list[int], ends: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, e in sorted(zip(starts, ends, strict=True)):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((a, e))
    return out


def _python_value(column: Column, kind: str, v: Any) -> Any:
    """A statistics value as the Python value Spark returns for the column type."""
    t = column.type
    if kind == "BYTES":
        return v.decode("utf-8") if t.name == "string" else bytes(v)
    if kind == "FLOAT64":
        return float(v)
    if t.name == "decimal":
        return decimal.Decimal(int(v)).scaleb(-t.scale, decimal.Context(prec=100))
    if t.name == "date":
        return _EPOCH_DATE + dt.timedelta(days=int(v))
    if t.name == "timestamp":
        return _EPOCH_TS + dt.timedelta(microseconds=int(v))
    if t.name == "boolean":
        return bool(v)
    return int(v)
