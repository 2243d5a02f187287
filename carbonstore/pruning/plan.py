"""Table-level planning: tablestatus -> segments -> files -> row groups -> page row ranges.

:func:`prune` reads one tablestatus snapshot, chooses the readable segments (optionally a
subset), drops whole segments on their bounds (one vectorised pass over all segments,
SegmentBounds), takes the surviving segments' row-group and page arrays from the
table-level index snapshot (segments committed since it: their merge indexes, through the
driver cache) as one concatenated index and hands it to
:func:`carbonstore.pruning.planner.prune_row_groups` for one vectorised pass. The result, :class:`TablePlan`,
serialises to the JSON contract of ``carbonstore prune --json``::

    {"table", "where", "planning_ms",
     "levels": {"segments"|"files"|"row_groups"|"pages"|"rows":
                {"total", "kept", "dropped_by_<reason>": n, ...}},
     "files": [{"segment", "path", "row_groups": [{"index", "num_rows", "row_ranges"}]}]}

For every level ``total == kept + sum(dropped_by_*)``. Reasons: ``counts`` (null / NaN
counts), ``minmax``, ``bloom``, ``pages`` (a row group whose every page was dropped),
``segment`` (inside a dropped segment), ``row_groups`` (every row group dropped),
``row_group`` (inside a dropped row group). Pages are those of the columns the filter
references (every column without a filter), counted over the segments that survive segment
pruning: pages of dropped segments are never loaded.
"""

from __future__ import annotations

import datetime as dt
import functools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.errors import SegmentNotFoundError
from carbonstore.expressions.bind import bind
from carbonstore.expressions.expr import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundRef,
    Expr,
    Or,
    nodes,
)
from carbonstore.expressions.parser import parse_where
from carbonstore.pruning import planner as planner_mod
from carbonstore.pruning.cache import driver_cache
from carbonstore.pruning.dictionary_rewrite import dictionary_safe
from carbonstore.pruning.page_counts import page_counts
from carbonstore.pruning.partition_prune import partition_masks
from carbonstore.pruning.plan_files import SegDirs, file_json, file_plans, marked, rg_at
from carbonstore.pruning.plan_types import (
    LEVELS,
    DeferredFiles,
    Dropped,
    FilePlan,
    LevelSummary,
    RowGroupPlan,
    TablePlan,
)
from carbonstore.pruning.segment_blooms import SegmentBlooms
from carbonstore.pruning.table_index import readable_segments, table_index
from carbonstore.store.partitioning import REMOVED_KEY, live_deleted_rows, removed_rows
from carbonstore.store.paths import check_segment_id
from carbonstore.store.readable import EntryExtra, ReadableEntries
from carbonstore.store.table import Table

__all__ = ["LEVELS", "FilePlan", "LevelSummary", "RowGroupPlan", "TablePlan", "bind_where", "prune"]


def bind_where(table: Table, where: str | Expr | None, *, time_zone: dt.tzinfo = dt.UTC) -> Expr:
    """Parse (if a string) and bind a filter to the table schema; None is AlwaysTrue.

    ``time_zone``: the zone timestamps without an offset are read in (Spark's session zone
    when the filter is also given to Spark).

    Raises:
        ExpressionError: bad syntax, unknown column or an incomparable literal.
    """
    if where is None or (isinstance(where, str) and not where.strip()):
        return AlwaysTrue()
    if isinstance(where, str):
        schema = table.schema
        key = (where, id(schema), time_zone)
        hit = _BOUND.get(key)
        if hit is not None and hit[0] is schema:
            return hit[1]
        bound = bind(parse_where(where), schema, time_zone=time_zone)
        if len(_BOUND) >= 256:  # a few tables and filters are live at a time: start over
            _BOUND.clear()
        _BOUND[key] = (schema, bound)  # holding the schema keeps its id unique
        return bound
    return where if _is_bound(where) else bind(where, table.schema, time_zone=time_zone)


#: (filter text, id of the schema, time zone) -> (schema, bound expression): a handle's
#: schema is one immutable object, and binding is a pure function of the three
_BOUND: dict[tuple[str, int, dt.tzinfo], tuple[Any, Expr]] = {}


def _is_bound(expr: Expr) -> bool:
    """True for an expression that :func:`bind` produced (its terms are BoundRefs)."""
    return all(
        isinstance(e, (And, Or, AlwaysTrue, AlwaysFalse))
        or isinstance(getattr(e, "term", None), BoundRef)
        for e in nodes(expr)
    )


def _choose(
    table: Table, segments: str | Sequence[str] | None, snapshot: Any = None
) -> tuple[list[Any], bool]:
    # a fresh read; unchanged bytes are not decoded again (TableStatus.read)
    snapshot = snapshot if snapshot is not None else table.status.read()
    entries = readable_segments(snapshot)
    if segments is None or (isinstance(segments, str) and segments.strip() in ("", "*")):
        return entries, True
    parts = segments.split(",") if isinstance(segments, str) else list(segments)
    wanted = {check_segment_id(p.strip()) for p in parts if p.strip()}
    if not wanted:
        raise SegmentNotFoundError("Segment ids should not be empty")
    chosen = [entries[i] for i, name in enumerate(entries.names) if name in wanted]
    if len(chosen) < len(wanted):  # an unknown or unreadable id is an input error
        snapshot.refuse_unreadable(wanted, str(table.name))
    return chosen, False


def prune(
    table: Table,
    where: str | Expr | None = None,
    *,
    segments: str | Sequence[str] | None = None,
    explain: bool = False,
    started: float | None = None,
    time_zone: dt.tzinfo = dt.UTC,
) -> TablePlan:
    """Plan a scan of ``table`` for ``where`` from the indexes alone.

    Args:
        table: the table (its tablestatus is read now: new loads and deletes are seen).
        where: a SQL condition, an expression (bound or not) or None for a full scan.
        segments: only these segment ids (``"1,3"`` or a list); each must be readable.
        explain: also record why each dropped unit was dropped (costs a second pass).
        started: ``time.perf_counter()`` when the table was opened (default: now).
        time_zone: the zone a ``where`` string's timestamps without an offset are read in
            (Spark reads them in ``spark.sql.session.timeZone``).

    Raises:
        ExpressionError: the filter does not parse or does not bind to the schema.
        SegmentNotFoundError: a given segment id is unknown or not readable.
    """
    t0 = time.perf_counter() if started is None else started
    expr = bind_where(table, where, time_zone=time_zone)
    snapshot = table.status.read()
    entries, all_readable = _choose(table, segments, snapshot)
    view = table_index(table, entries)
    values_expr = expr  # partitions hold values, not dictionary surrogates
    expr = dictionary_safe(expr, table, bounds=view.bounds)  # after the tablestatus read
    memo_key = _memo_key(where, values_expr, expr, segments, explain, table, snapshot.version)
    hit = view.plans.get(memo_key) if memo_key is not None else None
    if hit is not None and hit[0] is snapshot.view:
        return hit[1].reissued((time.perf_counter() - t0) * 1000.0)  # type: ignore[no-any-return]
    n = view.size
    if n:
        s0, s1, s2 = planner_mod.level_masks(expr, n, view.segment_stats, bloom=SegmentBlooms(view))
    else:
        s0 = s1 = s2 = np.zeros(0, dtype=bool)
    surv = np.flatnonzero(s2)
    parts, rg_seg = _units(view, surv)
    pm = partition_masks(view, parts, rg_seg, values_expr) if parts else None
    keep = pm.masks if pm is not None else None
    plan = (planner_mod.prune_row_groups(expr, parts, keep=keep)
            if parts and not isinstance(expr, AlwaysFalse) else None)
    result = _assemble(table, view, expr, where, (s0, s1, s2), rg_seg, parts, plan, explain, t0,
                       files_by_partition=pm.files_dropped if pm is not None and plan else 0,
                       keep=keep, entries=entries, version=snapshot.version,
                       all_entries=snapshot.view if all_readable else None)
    if memo_key is not None:  # a copy of its own: the caller may change its levels dict
        _remember(view, memo_key, snapshot.view, result.reissued(result.planning_ms))
    return result


_PLANS_PER_VIEW = 32


def _memo_key(
    where: str | Expr | None, values_expr: Expr, expr: Expr, segments: str | Sequence[str] | None,
    explain: bool, table: Table, version: int,
) -> Any:
    """What a plan over one view depends on besides the tablestatus entries (None: do not
    memoize). The filter text is part of it: equal expressions may be written differently,
    and the plan reports the text it was given."""
    segs = segments if segments is None or isinstance(segments, str) else tuple(segments)
    key = _MemoKey((where, values_expr, expr, segs, explain, str(table.name), version))
    try:
        hash(key)
    except (TypeError, RecursionError):  # an unhashable literal; a filter too deep to hash
        return None
    return key


class _MemoKey(tuple):  # type: ignore[type-arg]
    """A plan memo key that hashes once (looked up, then stored: the expressions in it
    would be hashed node by node each time); equal to, and hashing as, the plain tuple."""

    def __hash__(self) -> int:
        h = self.__dict__.get("hash")
        if h is None:
            h = self.__dict__["hash"] = tuple.__hash__(self)
        return h  # type: ignore[no-any-return]


def _remember(view: Any, key: Any, entries: Any, plan: TablePlan) -> None:
    """Keep ``plan`` with its view for later plans of the same filter over the same
    tablestatus entries (the view's memo goes with the view when the driver cache drops it).

    Nothing is kept while the driver cache is over its budget (the kept plan holds its
    units' arrays, which the LRU does not count), and at most a few plans per view.
    """
    if driver_cache().evictions != view.evictions_seen:
        return
    plans = view.plans
    if len(plans) >= _PLANS_PER_VIEW:
        try:  # the oldest out (another thread planning over the view may have taken it)
            del plans[next(iter(plans))]
        except (KeyError, RuntimeError, StopIteration):
            pass
    plans[key] = (entries, plan)


def _units(view: Any, surv: npt.NDArray[np.intp]) -> tuple[list[Any], list[npt.NDArray[np.intp]]]:
    """What the planner evaluates, and for each unit's row groups the view's segment index.

    Surviving segments with one column layout are one unit (snapshot segments: one
    SnapshotArrays over the table-level arrays; others concatenated), so row groups and
    pages of all of them are evaluated in one vectorised pass (table_index.TableIndex.units).
    """
    return view.units(surv)  # type: ignore[no-any-return]


def _assemble(
    table: Table, view: Any, expr: Expr, where: str | Expr | None,
    masks: tuple[npt.NDArray[np.bool_], ...], rg_seg: list[npt.NDArray[np.intp]], parts: list[Any],
    plan: planner_mod.PrunePlan | None, explain: bool, t0: float, *,
    files_by_partition: int = 0, keep: Sequence[Any] | None = None,
    entries: Sequence[Any] = (), version: int | None = None, all_entries: Any = None,
) -> TablePlan:
    s0, s1, s2 = masks
    paths = table.paths
    seg_dir = SegDirs(paths)
    dropped_seg = ~s2
    kept_files = kept_rgs = 0
    pages_total = pages_kept = pages_rg = 0
    rg_lc = plan.row_groups if plan is not None else None
    pg_lc = plan.pages if plan is not None else None
    file_segs: list[npt.NDArray[np.intp]] = []  # view index of each kept file, in plan order
    if plan is not None:
        for pi, arrays in enumerate(parts):
            lo, hi = np.searchsorted(plan.part, [pi, pi + 1])
            kept = np.flatnonzero(plan.kept[lo:hi])
            if len(kept):  # files in ascending order; a file's row groups share its segment
                first = _first_of_each(rg_at(arrays, "rg_file", kept))
                file_segs.append(rg_seg[pi][kept[first]])
                kept_files += len(first)
                kept_rgs += len(kept)
            t, k, d = page_counts(arrays, plan, int(lo), int(hi), expr)
            pages_total, pages_kept, pages_rg = pages_total + t, pages_kept + k, pages_rg + d
    segs = np.concatenate(file_segs) if file_segs else np.zeros(0, np.intp)
    if len(segs):
        segs = segs[np.concatenate([[True], segs[1:] != segs[:-1]])]
    kept_seg = _names_at(view, segs)
    in_dropped = dropped_seg
    # s2 within s1 within s0 (level_masks): each level's drops are differences of counts
    c0, c1, seg_bounds_pass = (int(np.count_nonzero(m)) for m in (s0, s1, s2))
    totals, in_dropped_sums = view.bound_sums(in_dropped)  # rows, files, row groups
    levels = {
        "segments": LevelSummary(total=view.size, kept=len(kept_seg), dropped=(
            ("counts", view.size - c0), ("minmax", c0 - c1),
            ("bloom", c1 - seg_bounds_pass), ("row_groups", seg_bounds_pass - len(kept_seg)),
        )),
        "files": _level(totals[1], kept_files, in_dropped_sums[1],
                        "row_groups", by_partition=files_by_partition),
        "row_groups": LevelSummary(total=totals[2], kept=kept_rgs, dropped=(
            ("segment", in_dropped_sums[2]),
            *((("partition", rg_lc.dropped_by_partition),)
              if rg_lc and rg_lc.dropped_by_partition else ()),
            ("counts", rg_lc.dropped_by_counts if rg_lc else 0),
            ("minmax", rg_lc.dropped_by_minmax if rg_lc else 0),
            ("bloom", rg_lc.dropped_by_bloom if rg_lc else 0),
            ("pages", (rg_lc.kept - kept_rgs) if rg_lc else 0),
        )),
        "pages": LevelSummary(total=pages_total, kept=pages_kept, dropped=(
            ("row_group", pages_rg), ("stats", pages_total - pages_kept - pages_rg),
        )),
        "rows": _rows_level((totals[0], in_dropped_sums[0]), in_dropped, parts, pg_lc,
                            removed=_removed_rows(view)),
    }
    dropped: tuple[Dropped, ...] = ()
    if explain:
        dropped = _explain(view, expr, masks, rg_seg, parts, plan, seg_dir, keep=keep)
    where_text = where if isinstance(where, str) or where is None else str(where)
    return TablePlan(
        table=str(table.name), where=where_text, expr=expr,
        planning_ms=(time.perf_counter() - t0) * 1000.0, root=paths.root,
        segments=tuple(kept_seg), levels=levels, dropped=dropped,
        files=DeferredFiles(functools.partial(file_plans, view, rg_seg, parts, plan, seg_dir, entries),
                            json=functools.partial(file_json, view, rg_seg, parts, plan, seg_dir, entries)),
        version=version,
        deleted_rows=_deleted_rows(entries, all_entries),
    )


def _names_at(view: Any, at: npt.NDArray[np.intp]) -> list[str]:
    """The load names of view indexes ``at`` (in one pass when the view can: ViewColumn.take)."""
    names = view.names
    take = getattr(names, "take", None)
    return take(at) if take is not None else [names[i] for i in at.tolist()]


_DELETED: dict[int, tuple[Any, int]] = {}


def _deleted_rows(entries: Sequence[Any], all_entries: Any = None) -> int:
    """Rows of ``entries`` deleted by row-level DML; remembered per tablestatus version when
    ``entries`` are its readable entries (``all_entries``: the version's immutable entries
    tuple), so a plan does not walk every entry again."""
    if all_entries is not None:
        hit = _DELETED.get(id(all_entries))
        if hit is not None and hit[0] is all_entries:
            return hit[1]
    n = sum(live_deleted_rows(e) for e in marked(entries) if e.delete_deltas or REMOVED_KEY in e.extra)
    if all_entries is not None:
        if len(_DELETED) >= 16:  # a few versions are live at a time: start over
            _DELETED.clear()
        _DELETED[id(all_entries)] = (all_entries, n)  # holding the tuple keeps its id unique
    return n


def _first_of_each(values: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """Where each distinct value first occurs, in value order (``np.unique``'s
    ``return_index``), without sorting when the values ascend already (they do: row groups
    are in file order)."""
    if len(values) < 2 or bool((values[1:] >= values[:-1]).all()):
        return np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]])) if len(values) else \
            np.zeros(0, np.intp)
    return np.unique(values, return_index=True)[1]  # type: ignore[no-any-return]


def _level(total: int, kept: int, by_segment: int, rest: str, *, by_partition: int = 0) -> LevelSummary:
    if by_partition:  # only partitioned tables show the reason (the JSON stays as it was)
        return LevelSummary(total=total, kept=kept, dropped=(
            ("segment", by_segment), ("partition", by_partition),
            (rest, total - kept - by_segment - by_partition)))
    return LevelSummary(total=total, kept=kept, dropped=(("segment", by_segment), (rest, total - kept - by_segment)))


def _removed_rows(view: Any) -> npt.NDArray[np.int64] | None:
    """Rows per planned segment in partitions a dynamic overwrite replaced (None: none)."""
    if not view.partitioned:
        return None
    entries = view.entries
    if not isinstance(entries, ReadableEntries):
        return np.array([removed_rows(e) for e in entries], dtype=np.int64)
    codes, extras = entries.extra_codes()  # one check per distinct extra
    per = np.zeros(len(extras) + 1, dtype=np.int64)  # the last: entries without an extra
    if len(extras) <= _FEW_EXTRAS:  # (a table's entries share a handful: no sort of them)
        used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(extras)))
        firsts = [int(np.argmax(codes == c)) for c in used.tolist()]
        pairs = zip(used.tolist(), firsts, strict=True)
    else:
        got, first = np.unique(codes, return_index=True)
        pairs = ((c, at) for c, at in zip(got.tolist(), first.tolist(), strict=True) if c >= 0)
    for c, at in pairs:
        per[c] = removed_rows(EntryExtra(entries.name_at(at), extras[c]))
    return per[codes]


_FEW_EXTRAS = 64



def _rows_level(rows: tuple[int, int], in_dropped: Any, parts: list[Any], pg: Any, *,
                removed: npt.NDArray[np.int64] | None = None) -> LevelSummary:
    """``rows``: the planned segments' rows, and those of the dropped segments."""
    total, by_seg = rows
    loaded = sum(int(p.rg_num_rows.sum()) for p in parts)
    if removed is not None:  # replaced rows are not rows of this version at all
        total -= int(removed.sum())
        by_seg -= int(removed[in_dropped].sum())
        loaded -= int(removed[~in_dropped].sum())
    reached = pg.total if pg is not None else 0
    return LevelSummary(total=total, kept=pg.kept if pg is not None else 0, dropped=(
        ("segment", by_seg), ("row_group", loaded - reached),
        ("counts", pg.dropped_by_counts if pg is not None else 0),
        ("minmax", pg.dropped_by_minmax if pg is not None else 0),
    ))


def _explain(
    view: Any, expr: Expr, masks: tuple[Any, ...], rg_seg: list[npt.NDArray[np.intp]], parts: list[Any],
    plan: planner_mod.PrunePlan | None, seg_dir: SegDirs, *, keep: Sequence[Any] | None = None,
) -> tuple[Dropped, ...]:
    s0, s1, s2 = masks
    out: list[Dropped] = []
    for i in np.flatnonzero(~s2).tolist():
        reason = "counts" if not s0[i] else "minmax" if not s1[i] else "bloom"
        out.append(Dropped(level="segment", segment=view.names[i], reason=reason))
    if plan is None or not parts:
        return tuple(out)
    g = planner_mod.RowGroupUnits(parts)
    m0, m1, m2 = planner_mod.level_masks(expr, g.size, g.stats, bloom=g.bloom_probe)
    kp = np.concatenate([np.asarray(k, dtype=bool) for k in keep]) if keep else np.ones(g.size, bool)
    for gi in range(g.size):
        pi, local = int(g.part[gi]), int(g.local[gi])
        arrays = parts[pi]
        sid = view.names[int(rg_seg[pi][local])]
        path = f"{seg_dir[sid]}/{arrays.files[int(arrays.rg_file[local])].path}"
        rg = int(arrays.rg_index[local])
        why = ("partition" if not kp[gi] else "counts" if not m0[gi] else "minmax" if not m1[gi] else "bloom" if not m2[gi]
               else "pages" if not plan.kept[gi] else None)
        if why is not None:
            out.append(Dropped(level="row_group", segment=sid, path=path, row_group=rg, reason=why))
            continue
        rr = plan.row_ranges[gi]
        gaps: list[tuple[int, int]] = []
        pos = 0
        for a, c in rr.tolist():
            if a > pos:
                gaps.append((pos, int(a)))
            pos = int(c)
        if pos < int(arrays.rg_num_rows[local]):
            gaps.append((pos, int(arrays.rg_num_rows[local])))
        if gaps:
            out.append(Dropped(level="rows", segment=sid, path=path, row_group=rg,
                               reason="statistics", rows=tuple(gaps)))
    return tuple(out)
