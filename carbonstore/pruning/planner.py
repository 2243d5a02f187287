"""Driver-side pruning plan: row groups, then page row ranges, over index arrays.

:func:`prune_row_groups` takes a bound expression (expressions.bind) and the :class:`IndexArrays` of one or
more segments. Row groups of all parts are evaluated in one vectorised pass per level
(null/NaN counts, min/max, bloom); surviving row groups are then cut into fragments at the
page boundaries of every referenced column, the fragments evaluated the same way, and the
kept fragments merged into ``[start, end)`` row ranges per row group.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.errors import ExpressionError
from carbonstore.expressions.expr import (
    BoundRef,
    Eq,
    Expr,
    In,
    Not,
    nodes,
    references,
)
from carbonstore.indexfiles.arrays import ColumnArrays, IndexArrays
from carbonstore.pruning.evaluator import (
    LEVEL_BLOOM,
    LEVEL_COUNTS,
    LEVEL_MINMAX,
    Mask,
    StatsEvaluator,
    UnitStats,
)
from carbonstore.pruning.units import (
    RowGroupUnits,
    bloom_encodings,
    find_column,
    value_kind,
)
from carbonstore.store.records import Frozen, field

__all__ = ["LevelCounts", "PrunePlan", "RowGroupSelection", "RowGroupUnits", "bloom_encodings",
           "find_column", "level_masks", "prune_row_groups", "row_group_might_match", "selections",
           "value_kind"]



class LevelCounts(Frozen, kw_only=True):
    """What one level kept and why it dropped the rest.

    ``unit`` is "row_groups" for the row-group level and "rows" for the page level (rows of
    the row groups that survived the row-group level).
    """

    unit: str
    total: int
    kept: int
    dropped_by_counts: int  # null_count / nan_count proved no match
    dropped_by_minmax: int
    dropped_by_bloom: int = 0
    dropped_by_partition: int = 0  # its file's partition proves no match (partition_prune.py)


class PrunePlan(Frozen, kw_only=True, slots=False):
    """Result of :func:`prune`.

    ``part`` / ``row_group`` (length R over all parts, in order) say where each global row
    group lives: ``parts[part[i]]`` and its row group ``row_group[i]`` (index into that
    part's arrays; ``rg_file`` / ``rg_index`` give file and ordinal). ``kept`` is the
    row-group mask after all levels including pages. ``row_ranges[i]`` is an int64 array of
    shape (k, 2) of ``[start, end)`` rows within row group ``i``, merged, for kept ``i``;
    the same as columns: ``range_rows[j]`` is a ``[start, end)`` of row group
    ``range_group[j]`` (ascending), so callers that count need no per-row-group objects.
    """

    part: npt.NDArray[np.int32]
    row_group: npt.NDArray[np.int32]
    kept: Mask
    range_group: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    range_rows: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    row_groups: LevelCounts
    pages: LevelCounts

    @functools.cached_property
    def row_ranges(self) -> dict[int, npt.NDArray[np.int64]]:
        if not len(self.range_group):
            return {}
        cuts = np.flatnonzero(self.range_group[1:] != self.range_group[:-1]) + 1
        firsts = self.range_group[np.concatenate([[0], cuts])].tolist()
        return dict(zip(firsts, np.split(self.range_rows, cuts), strict=True))


class RowGroupSelection(Frozen, kw_only=True):
    """One kept row group, for readers: where it is and which rows to read."""

    part: int  # index into the parts given to prune()
    file: str  # DataFile.path, relative to the segment
    row_group: int  # ordinal of the row group inside the file
    num_rows: int
    row_ranges: npt.NDArray[np.int64]  # (k, 2) [start, end) rows within the row group


def selections(plan: PrunePlan, parts: Sequence[IndexArrays]) -> list[RowGroupSelection]:
    """The kept row groups of ``plan`` in part / file order (objects for reporting and reading)."""
    out = []
    for gi in np.flatnonzero(plan.kept).tolist():
        p = parts[int(plan.part[gi])]
        local = int(plan.row_group[gi])
        out.append(RowGroupSelection(
            part=int(plan.part[gi]), file=p.files[int(p.rg_file[local])].path or "",
            row_group=int(p.rg_index[local]), num_rows=int(p.rg_num_rows[local]),
            row_ranges=plan.row_ranges[gi],
        ))
    return out


def level_masks(
    expr: Expr, size: int, stats_for: Any, *, bloom: Any = None, alive: Mask | None = None,
    whole: tuple[int, Any, npt.NDArray[np.intp]] | None = None,
) -> tuple[Mask, Mask, Mask]:
    """Masks after counts, after min/max, after bloom (each a subset of the previous);
    ``alive`` (partition pruning) is applied first, so blooms of dropped units are not read.

    ``whole``: ``(units, statistics, positions)`` - our units are those ``positions`` of
    larger units (their statistics kept across plans, see :func:`_whole_of`): the counts and
    min/max levels are evaluated over the larger units and taken at ``positions`` (every
    mask is computed unit by unit, so taking commutes), which for a few thousand units costs
    less than taking their statistics and derived masks anew each plan."""
    leaves: dict[int, Mask] = {}  # the bloom level reuses each leaf's min/max mask
    if whole is not None:
        w_size, w_stats, take = whole
        m0 = StatsEvaluator(w_size, w_stats, level=LEVEL_COUNTS).evaluate(expr)[take]
        if alive is not None:
            m0 &= alive
        m1 = StatsEvaluator(w_size, w_stats, level=LEVEL_MINMAX, leaves=leaves).evaluate(expr)[take] & m0
        if bloom is None or not _may_probe(expr, bloom, m1):
            return m0, m1, m1
        leaves = {k: v[take] for k, v in leaves.items()}
        m2 = StatsEvaluator(size, stats_for, level=LEVEL_BLOOM, bloom=bloom, alive=m1,
                            leaves=leaves).evaluate(expr) & m1
        return m0, m1, m2
    m0 = StatsEvaluator(size, stats_for, level=LEVEL_COUNTS).evaluate(expr)
    if alive is not None:
        m0 = m0 & alive
    m1 = StatsEvaluator(size, stats_for, level=LEVEL_MINMAX, leaves=leaves).evaluate(expr) & m0
    if bloom is None or not _may_probe(expr, bloom, m1):
        return m0, m1, m1  # only = and IN leaves are probed
    m2 = StatsEvaluator(size, stats_for, level=LEVEL_BLOOM, bloom=bloom, alive=m1,
                        leaves=leaves).evaluate(expr) & m1
    return m0, m1, m2


#: a level is evaluated over the larger units it was taken from (level_masks ``whole``) when
#: they are at most this many, or at most _WHOLE_RATIO times ours; with values compared as
#: Python objects (strings, big integers) only when they are at most _WHOLE_OBJECTS or twice ours
_WHOLE_UNITS = 4096
_WHOLE_RATIO = 8
_WHOLE_OBJECTS = 256


def _whole_pays(whole: int, ours: int, stats: UnitStats) -> bool:
    if stats.lo.dtype == object or stats.hi.dtype == object:
        return whole <= _WHOLE_OBJECTS or whole <= 2 * ours
    return whole <= _WHOLE_UNITS or whole <= _WHOLE_RATIO * ours


def _whole_of(expr: Expr, parts: Sequence[IndexArrays]) -> tuple[int, Any, npt.NDArray[np.intp]] | None:
    """level_masks' ``whole`` for the row groups of ``parts``: one part whose referenced
    columns are selections of one larger run's (``selection``, indexfiles/snapshot.py), or
    None."""
    if len(parts) != 1:
        return None
    p = parts[0]
    take: npt.NDArray[np.intp] | None = None
    size = 0
    stats: dict[str, UnitStats] = {}
    for name in references(expr):
        ref = _first_ref(expr, name)
        col = find_column(p, ref) if ref is not None else None
        kind = None if col is None or ref is None else value_kind(col, ref)
        if col is None or kind is None or ref is None:
            continue  # no statistics either way
        selected = getattr(col, "selection", None)
        if selected is None:
            return None
        source, positions, source_rows = selected
        if take is None:
            take, size = positions, len(source_rows)
        elif positions is not take and not np.array_equal(positions, take):
            return None
        got = stats[ref.name] = UnitStats.from_arrays(source, source_rows, kind=kind)
        if not _whole_pays(size, len(positions), got):
            return None
    if take is None:
        return None
    return size, (lambda ref: stats.get(ref.name)), take


def _may_probe(expr: Expr, bloom: Any, alive: Mask) -> bool:
    """Whether the bloom level may drop a unit of ``alive``: some ``=`` / ``IN`` leaf whose
    column the probe may hold a bitset of (``bloom.may_probe(ref)``, when the probe tells:
    a lookup on a column without bitsets skips the bloom pass, which would keep every unit)."""
    if not alive.any():
        return False  # nothing left to probe: the bloom level keeps what min/max kept
    may = getattr(bloom, "may_probe", None)
    if may is None:
        method_of = getattr(bloom, "__self__", None)  # RowGroupUnits.bloom_probe
        may = getattr(method_of, "may_probe", None)
    for e in nodes(expr):
        if isinstance(e, (Eq, In)) and (may is None or not isinstance(e.term, BoundRef) or may(e.term)):
            return True
    return False


def row_group_might_match(expr: Expr, parts: Sequence[IndexArrays]) -> tuple[Mask, RowGroupUnits]:
    """The row groups of ``parts`` that may hold a match (counts, min/max, bloom), and the
    row groups under one global index (``size``, ``start``, ``stats(ref)``)."""
    _check_bound(expr)
    g = RowGroupUnits(parts)
    return level_masks(expr, g.size, g.stats, bloom=g.bloom_probe)[2], g


def _check_bound(expr: Expr) -> None:
    if any(isinstance(e, Not) for e in nodes(expr)):
        raise ExpressionError("prune_row_groups() needs a bound expression: call expr.bind first")


def prune_row_groups(
    expr: Expr, parts: Sequence[IndexArrays], *, use_bloom: bool = True, use_pages: bool = True,
    keep: Sequence[Mask] | None = None,
) -> PrunePlan:
    """Plan which row groups and row ranges may hold rows matching the bound ``expr``.

    Inclusive: a row that matches always lies in a kept row group and inside one of its row
    ranges. Row groups are evaluated for all parts in one vectorised pass per level.
    ``keep`` (one mask per part) drops row groups before any statistics: those of files
    whose partition cannot match (``dropped_by_partition``).
    """
    _check_bound(expr)
    g = RowGroupUnits(parts)
    kp = None if keep is None else np.concatenate(
        [np.asarray(k, dtype=bool) for k in keep] or [np.zeros(0, bool)])
    m0, m1, m2 = level_masks(expr, g.size, g.stats, bloom=g.bloom_probe if use_bloom else None,
                             alive=kp, whole=_whole_of(expr, g.parts))
    by_partition = 0 if kp is None else g.size - int(np.count_nonzero(kp))
    c0, c1, c2 = (int(np.count_nonzero(m)) for m in (m0, m1, m2))  # m2 within m1 within m0
    rg_counts = LevelCounts(
        unit="row_groups", total=g.size, kept=c2, dropped_by_counts=g.size - c0 - by_partition,
        dropped_by_minmax=c0 - c1, dropped_by_bloom=c1 - c2, dropped_by_partition=by_partition,
    )
    kept = m2.copy()
    groups: list[npt.NDArray[np.int64]] = []
    pairs: list[npt.NDArray[np.int64]] = []
    totals = np.zeros(3, dtype=np.int64)  # rows: total, dropped by counts, dropped by min/max
    for pi, p in enumerate(g.parts):
        surv = np.flatnonzero(m2[g.start[pi] : g.start[pi + 1]])
        if len(surv) == 0:
            continue
        if use_pages:
            owners, part_pairs, dropped = _page_ranges(expr, p, surv)
        else:
            rows = p.rg_num_rows[surv].astype(np.int64)
            owners = surv.astype(np.int64)
            part_pairs = np.stack([np.zeros(len(rows), np.int64), rows], axis=1)
            dropped = np.zeros(2, dtype=np.int64)
        totals += np.concatenate([[int(p.rg_num_rows[surv].sum())], dropped])
        ranged = np.zeros(p.num_row_groups, dtype=bool)  # owners: a subset of surv
        ranged[owners] = True
        kept[int(g.start[pi]) + surv] = ranged[surv]  # no range left: dropped by pages
        groups.append(owners.astype(np.int64) + int(g.start[pi]))
        pairs.append(part_pairs)
    range_group = np.concatenate(groups) if groups else np.zeros(0, np.int64)
    range_rows = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)
    kept_rows = int((range_rows[:, 1] - range_rows[:, 0]).sum())
    page_counts = LevelCounts(
        unit="rows", total=int(totals[0]), kept=kept_rows, dropped_by_counts=int(totals[1]),
        dropped_by_minmax=int(totals[2]),
    )
    return PrunePlan(
        part=g.part, row_group=g.local, kept=kept, range_group=range_group, range_rows=range_rows,
        row_groups=rg_counts, pages=page_counts,
    )


def _page_ranges(
    expr: Expr, p: IndexArrays, surv: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Row ranges of surviving row groups ``surv`` of one part, from the page statistics:
    the row group of each range (ascending), the ``[start, end)`` pairs, rows dropped."""
    rows = p.rg_num_rows[surv].astype(np.int64)
    vstart = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)  # virtual row space
    total = int(vstart[-1])
    cols: dict[str, tuple[ColumnArrays, str, npt.NDArray[np.int64], npt.NDArray[np.intp], Mask]] = {}
    bounds = [vstart]
    frag_of_one: tuple[npt.NDArray[np.int64], npt.NDArray[np.intp]] | None = None
    for name in sorted(references(expr)):
        ref = _first_ref(expr, name)
        col = find_column(p, ref) if ref is not None else None
        kind = None if col is None or ref is None else value_kind(col, ref)
        if col is None or kind is None:
            continue
        source, where = _page_source(col, surv)  # page indices below are source's
        geometry = _page_geometry(source, where, vstart)
        if geometry is None:
            continue
        has, page_v, page_idx, owner, tiles = geometry
        cols[name] = (source, kind, page_v, page_idx, has)
        bounds.append(page_v)
        if len(bounds) == 2 and tiles:
            frag_of_one = (page_v, owner)
    if len(bounds) == 2 and frag_of_one is not None:
        # One column whose pages tile every surviving row group: its pages are the fragments
        # (what the merge below gives, without sorting and searching).
        frag, frag_rg = frag_of_one
    else:
        frag_of_one = None
        every = np.sort(np.concatenate(bounds), kind="stable")  # sorted runs: merged, not hashed
        frag = every[np.concatenate([[True], every[1:] != every[:-1]])] if len(every) else every
        frag = frag[frag < total]
        frag_rg = np.searchsorted(vstart, frag, side="right") - 1  # position in surv
    frag_end = np.append(frag[1:], total)
    stats_cache: dict[str, UnitStats | None] = {}

    def stats_for(ref: BoundRef) -> UnitStats | None:
        if ref.name not in cols:
            return None
        if ref.name not in stats_cache:
            col, kind, page_v, page_idx, has = cols[ref.name]
            page_stats = UnitStats.from_arrays(col.pages, col.pages.row_count, kind=kind)
            if frag_of_one is not None:  # fragment i is page page_idx[i]
                whole = len(page_idx) == page_stats.size and (
                    not len(page_idx) or (page_idx[0] == 0 and page_idx[-1] == len(page_idx) - 1))
                stats_cache[ref.name] = page_stats if whole else page_stats.take(page_idx)
            else:
                pos = np.clip(np.searchsorted(page_v, frag, side="right") - 1, 0, len(page_v) - 1)
                stats_cache[ref.name] = page_stats.take(page_idx[pos], has[frag_rg])
        return stats_cache[ref.name]

    whole = None
    if frag_of_one is not None:  # fragments: pages page_idx of one column
        (name, (col, kind, _, page_idx, _)), = cols.items()
        page_stats = UnitStats.from_arrays(col.pages, col.pages.row_count, kind=kind)
        if _whole_pays(page_stats.size, len(page_idx), page_stats):
            whole = (page_stats.size, lambda ref: page_stats if ref.name == name else None, page_idx)
    m0, m1, _ = level_masks(expr, len(frag), stats_for, whole=whole)
    if frag_of_one is not None and m1.all():  # pages tile every row group, all kept: each is
        rows_of = vstart[1:] - vstart[:-1]  # one range [0, rows) (what the runs below give)
        return (surv.astype(np.int64), np.stack([np.zeros(len(surv), np.int64), rows_of], axis=1),
                np.zeros(2, dtype=np.int64))
    length = frag_end - frag
    dropped = np.array([int(length[~m0].sum()), int(length[m0 & ~m1].sum())], dtype=np.int64)
    owners = np.zeros(0, np.int64)
    pairs = np.zeros((0, 2), np.int64)
    keep = np.flatnonzero(m1)
    if len(keep):
        k_rg, k_start, k_end = frag_rg[keep], frag[keep], frag_end[keep]
        new = np.ones(len(keep), dtype=bool)
        new[1:] = (k_rg[1:] != k_rg[:-1]) | (k_start[1:] != k_end[:-1])
        r_rg = k_rg[new]
        r_start = k_start[new] - vstart[r_rg]
        # fragments ascend and do not overlap: a run ends where its last fragment ends
        last = np.append(np.flatnonzero(new)[1:] - 1, len(keep) - 1)
        r_end = k_end[last] - vstart[r_rg]
        owners = surv[r_rg].astype(np.int64)  # ascending: runs are in row order
        pairs = np.stack([r_start, r_end], axis=1).astype(np.int64)
    return owners, pairs, dropped


def _page_source(col: ColumnArrays, rgs: npt.NDArray[np.intp]) -> tuple[ColumnArrays, npt.NDArray[np.intp]]:
    """Row groups ``rgs`` of ``col`` and the arrays their pages are taken from: a few row
    groups of a large snapshot run alone with their pages (``page_subset``: no array over
    every page of the run is built), else :func:`_selected_from`."""
    subset = getattr(col, "page_subset", None)
    sub = subset(rgs) if subset is not None else None
    if sub is not None:
        return sub, np.arange(len(rgs), dtype=np.intp)
    return _selected_from(col, rgs)


def _selected_from(col: ColumnArrays, rgs: npt.NDArray[np.intp]) -> tuple[ColumnArrays, npt.NDArray[np.intp]]:
    """Row groups ``rgs`` of ``col`` as row groups of the larger arrays ``col`` was selected
    from (``selection``, see indexfiles/snapshot.py: their page arrays and page statistics
    are built once and kept), else as they are."""
    selected = getattr(col, "selection", None)
    if selected is None:
        return col, rgs
    source, positions, _ = selected
    return source, positions[rgs]


def _page_geometry(
    col: ColumnArrays, surv: npt.NDArray[np.intp], vstart: npt.NDArray[np.int64],
) -> tuple[Mask, npt.NDArray[np.int64], npt.NDArray[np.intp], npt.NDArray[Any], bool] | None:
    """The pages of column ``col`` in surviving row groups ``surv`` (``vstart``: their row
    starts in the virtual row space): whether each row group has pages, each page's start
    there, its index, its position in ``surv``, and whether the pages tile every surviving
    row group; None without pages. Taken by index from the column's page layout
    (:func:`_column_pages`, built once per column: index arrays are immutable once loaded,
    and a reused handle's plans ask for other row groups of the same columns each plan);
    the last answer is kept on ``col`` too (plans that keep the same row groups ask again)."""
    key = surv.tobytes()
    memo = getattr(col, "_page_geometry_memo", None)
    if memo is not None and memo[0] == key:
        return memo[1]  # type: ignore[no-any-return]
    got = _geometry(col, surv, vstart)
    try:
        col._page_geometry_memo = (key, got)  # type: ignore[attr-defined]
    except AttributeError:  # an object that takes no attributes: no memo
        pass
    return got


def _geometry(
    col: ColumnArrays, surv: npt.NDArray[np.intp], vstart: npt.NDArray[np.int64],
) -> tuple[Mask, npt.NDArray[np.int64], npt.NDArray[np.intp], npt.NDArray[Any], bool] | None:
    counts_all, offsets, tile_ok, has_all = _column_pages(col)
    has = has_all[surv]
    counts = counts_all[surv]
    total = int(counts.sum())
    if not total:
        return None
    first_row = col.pages.first_row_index
    if len(surv) == 1:  # one row group (a lookup's usual survivor): its pages are one run
        a = int(offsets[int(surv[0])])
        page_idx = np.arange(a, a + total, dtype=np.intp)
        owner: npt.NDArray[Any] = np.zeros(total, dtype=np.intp)
        page_v = first_row[a : a + total] + vstart[0]
    else:
        owner = np.repeat(np.arange(len(surv)), counts)
        page_idx = (np.repeat(offsets[surv] - (np.cumsum(counts) - counts), counts)
                    + np.arange(total)).astype(np.intp)
        page_v = vstart[owner] + first_row[page_idx]
    # the pages tile every surviving row group: each has pages, the first at its row 0,
    # ascending strictly, the last starting before its end (so they ascend across groups)
    tiles = bool(tile_ok[0][surv].all() and (tile_ok[1][surv] < vstart[1:] - vstart[:-1]).all())
    return has, page_v, page_idx, owner, tiles


def _column_pages(col: ColumnArrays) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                                              tuple[Mask, npt.NDArray[np.int64]], Mask]:
    """Per row group of ``col``: its number of pages (0 where it has none), its first
    page's index, (whether its pages start at its row 0 and ascend strictly, the first row
    of its last page) and whether it has pages - kept on ``col``."""
    got = getattr(col, "_column_pages_memo", None)
    if got is not None:
        return got  # type: ignore[no-any-return]
    has = np.asarray(col.has_pages, dtype=bool)
    rg_start = np.asarray(col.pages.rg_start, dtype=np.int64)
    starts, ends = rg_start[:-1], rg_start[1:]
    counts = np.where(has, ends - starts, 0).astype(np.int64)
    first_row = np.asarray(col.pages.first_row_index, dtype=np.int64)
    n_pages = len(first_row)
    some = counts > 0
    ok = some.copy()
    if n_pages:
        safe_first = np.minimum(starts, n_pages - 1)
        safe_last = np.clip(starts + counts - 1, 0, n_pages - 1)
        ok &= first_row[safe_first] == 0
        step = np.ones(n_pages, dtype=bool)  # page i starts after page i - 1 (its row group's)
        step[1:] = first_row[1:] > first_row[:-1]
        bad = np.concatenate([[0], np.cumsum(~step)])  # non-ascending steps before each page
        inner = bad[np.minimum(starts + counts, n_pages)] - bad[np.minimum(starts + 1, n_pages)]
        ok &= np.where(some, inner == 0, False)
        last = np.where(some, first_row[safe_last], 0)
    else:
        last = np.zeros(len(counts), dtype=np.int64)
    got = (counts, starts, (ok, last), has)
    try:
        col._column_pages_memo = got  # type: ignore[attr-defined]
    except AttributeError:  # an object that takes no attributes: built each time
        pass
    return got


def _first_ref(expr: Expr, name: str) -> BoundRef | None:
    for e in nodes(expr):
        term = getattr(e, "term", None)
        if isinstance(term, BoundRef) and term.name == name:
            return term
    return None
