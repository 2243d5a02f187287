"""Page counts of a plan (the ``pages`` level of ``prune --json``): how many pages of the
columns a filter references there are, are kept, and lie in dropped row groups.

Page layouts (each page's row group and row span in a plan unit's row space) are built
once per index column object and remembered; a column selected from a larger one (a run
of snapshot segments, snapshot_arrays.py) takes its layout from the larger column's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.expressions.expr import Expr, references
from carbonstore.pruning import planner as planner_mod

__all__ = ["page_counts"]


def page_counts(
    arrays: Any, plan: planner_mod.PrunePlan, lo: int, hi: int, expr: Expr
) -> tuple[int, int, int]:
    """(pages, kept pages, pages in dropped row groups) of one part.

    Pages of the columns the filter references (of every column when it has none).
    """
    n = arrays.num_row_groups
    kept = plan.kept[lo:hi]
    rows = np.asarray(arrays.rg_num_rows, dtype=np.int64)
    r0, r1 = np.searchsorted(plan.range_group, [lo, hi])
    local = plan.range_group[r0:r1] - lo
    ranges = plan.range_rows[r0:r1]
    # every kept row group read whole (one range [0, rows)): asked once, and only when the
    # page level dropped no rows of any part (else a range filter's plans pay for asking)
    whole_read = None if not (plan.pages.dropped_by_counts or plan.pages.dropped_by_minmax) else False
    total = kept_n = in_dropped = 0
    vstart = rs = re_ = None
    kept_idx: npt.NDArray[np.intp] | None = None
    for col in _counted_columns(arrays, expr):
        subset = getattr(col, "page_subset", None)
        if subset is not None:  # few kept row groups of a large snapshot run: their pages
            kept_idx = np.flatnonzero(kept) if kept_idx is None else kept_idx  # alone, the
            sub = subset(kept_idx)  # others counted from the page list (no page layout of
            if sub is not None:  # every row group is built)
                has, counts = np.asarray(col.has_pages, dtype=bool), col.rg_page_counts()
                of_all = int(np.add.reduce(counts, where=has))  # (pages of row groups with pages)
                of_kept = int(counts[kept_idx[has[kept_idx]]].sum())
                total += of_all
                in_dropped += of_all - of_kept
                if vstart is None:
                    vstart = np.concatenate([[0], np.cumsum(rows)])
                    rs = vstart[local] + ranges[:, 0]
                    re_ = vstart[local] + ranges[:, 1]
                pages = sub.pages
                has = sub.has_pages[pages.row_group] if len(pages.row_group) else np.zeros(0, dtype=bool)
                a = vstart[kept_idx[pages.row_group[has]]] + pages.first_row_index[has]
                kept_n += _overlapping(a, a + pages.row_count[has], rs, re_)
                continue
        selected = getattr(col, "selection", None)
        if selected is not None and whole_read is None:  # (the page level dropped nothing)
            whole_read = len(local) == int(np.count_nonzero(kept)) and bool(
                (local == np.flatnonzero(kept)).all() and not ranges[:, 0].any()
                and (ranges[:, 1] == rows[local]).all())
        if whole_read and selected is not None:  # pages of a kept row group: all kept, when
            counts, sound = _selected_counts(selected)  # each lies inside its row group
            if sound.all():
                total += int(counts.sum())
                in_dropped += int(counts[~kept].sum())
                kept_n += int(counts[kept].sum())
                continue
        if vstart is None:
            vstart = np.concatenate([[0], np.cumsum(rows)])
            rs = vstart[local] + ranges[:, 0]
            re_ = vstart[local] + ranges[:, 1]
        counts, page_rg, page_start, page_end = _page_layout(col, vstart, n)
        total += int(counts.sum())
        if not len(page_rg):
            continue
        in_dropped += int(counts[~kept].sum())
        sel = kept[page_rg]
        a = page_start[sel]
        e = page_end[sel]
        kept_n += _overlapping(a, e, rs, re_)
    return total, kept_n, in_dropped


def _overlapping(a: npt.NDArray[Any], e: npt.NDArray[Any], rs: Any, re_: Any) -> int:
    """How many pages ``[a, e)`` overlap a range ``[rs, re_)`` (ascending, disjoint)."""
    if not len(rs) or not len(a):
        return 0
    idx = np.searchsorted(rs, e, side="left") - 1
    return int(((idx >= 0) & (re_[np.clip(idx, 0, None)] > a)).sum())


def _selected_counts(selected: tuple[Any, npt.NDArray[np.intp], npt.NDArray[Any]]) -> tuple[
        npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Of a column selected from a larger one (``selection``): per row group its number of
    pages, and whether each of its pages holds rows and lies inside it (then a row group
    read whole keeps every page) - taken from the larger column's layout."""
    source, rg_take, source_rows = selected
    layout = _source_layout(source, source_rows)
    return layout[0][rg_take], layout[4][rg_take]


def _counted_columns(arrays: Any, expr: Expr) -> list[Any]:
    """The columns whose pages a plan counts: those ``expr`` references (by name or column
    id; every column when it references none). For a run selected from a larger one (its
    columns in the same order) the positions are found once, in the larger run."""
    refs = frozenset(references(expr))

    def counted(col: Any) -> bool:
        return not refs or col.name.lower() in refs or (col.desc.column_id or "") in refs

    whole = getattr(arrays, "whole", None)
    if whole is None or not hasattr(whole, "__dict__"):
        return [c for c in arrays.columns if counted(c)]
    memo = whole.__dict__.setdefault("_counted_columns", {})
    at = memo.get(refs)
    if at is None:
        if len(memo) >= 64:
            memo.clear()
        at = memo[refs] = [i for i, c in enumerate(whole.columns) if counted(c)]
    cols = arrays.columns
    return [cols[i] for i in at]


_LAYOUTS: dict[int, tuple[Any, npt.NDArray[np.int64], tuple[npt.NDArray[Any], ...]]] = {}


def _page_layout(col: Any, vstart: npt.NDArray[np.int64], n: int) -> tuple[npt.NDArray[Any], ...]:
    """A column's pages per row group, and (of row groups with pages) each page's row
    group and ``[start, end)`` in the part's row space - remembered per column object
    (index arrays are immutable once loaded, and a cached plan unit keeps its columns)."""
    selected = getattr(col, "selection", None)
    if selected is not None:  # units of larger arrays (indexfiles/snapshot.py): from their layout
        return _selected_layout(selected, vstart, n)
    hit = _LAYOUTS.get(id(col))
    if hit is not None and hit[0] is col and np.array_equal(hit[1], vstart):
        return hit[2]
    pages = col.pages
    counts = np.where(col.has_pages, np.diff(pages.rg_start), 0) if n else np.zeros(0, np.int64)
    sel = col.has_pages[pages.row_group] if len(pages.row_group) else np.zeros(0, dtype=bool)
    page_rg = pages.row_group[sel]
    start = vstart[page_rg] + pages.first_row_index[sel]
    got = (counts, page_rg, start, start + pages.row_count[sel])
    if len(_LAYOUTS) >= 32:  # a few live plan units; their arrays stay alive meanwhile
        _LAYOUTS.clear()
    _LAYOUTS[id(col)] = (col, vstart, got)  # holding the column keeps its id unique
    return got


_SOURCE_LAYOUTS: dict[int, tuple[Any, Any, tuple[npt.NDArray[Any], ...]]] = {}


def _selected_layout(
    selected: tuple[Any, npt.NDArray[np.intp], npt.NDArray[Any]], vstart: npt.NDArray[np.int64], n: int,
) -> tuple[npt.NDArray[Any], ...]:
    """:func:`_page_layout` of a column selected from a larger one (``selection``: the larger
    column, the positions of our row groups there, its row counts): the larger column's
    layout is built once, ours is taken from it by index."""
    source, rg_take, source_rows = selected
    w_counts, offsets, rel_start, rel_end, _ = _source_layout(source, source_rows)
    counts = w_counts[rg_take]
    starts = offsets[rg_take]
    before = np.cumsum(counts) - counts
    idx = (np.repeat(starts - before, counts) + np.arange(int(counts.sum()), dtype=np.int64)).astype(np.intp)
    page_rg = np.repeat(np.arange(n, dtype=np.intp), counts)
    base = vstart[page_rg]
    return counts, page_rg, rel_start[idx] + base, rel_end[idx] + base


def _source_layout(source: Any, source_rows: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], ...]:
    """The larger column's layout for :func:`_selected_layout`: per row group its pages and
    first page's place among them, per page its rows relative to its row group; and per
    row group whether every page of it holds rows and lies inside it (built once)."""
    hit = _SOURCE_LAYOUTS.get(id(source))
    if hit is None or hit[0] is not source or hit[1] is not source_rows:
        rows = np.asarray(source_rows, np.int64)
        w_vstart = np.concatenate([[0], np.cumsum(rows)])
        w_counts, w_page_rg, w_start, w_end = _page_layout(source, w_vstart, len(source_rows))
        offsets = np.concatenate([[0], np.cumsum(w_counts)]).astype(np.int64)
        local = w_vstart[w_page_rg]  # page rows relative to their row group
        rel_start, rel_end = w_start - local, w_end - local
        bad = (rel_start < 0) | (rel_end <= rel_start) | (rel_end > rows[w_page_rg])
        before = np.concatenate([[0], np.cumsum(bad)])  # bad pages before each page
        sound = before[offsets[1:]] == before[offsets[:-1]]
        hit = (source, source_rows, (w_counts, offsets, rel_start, rel_end, sound))
        if len(_SOURCE_LAYOUTS) >= 32:
            _SOURCE_LAYOUTS.clear()
        _SOURCE_LAYOUTS[id(source)] = hit  # holding the column keeps its id unique
    return hit[2]
