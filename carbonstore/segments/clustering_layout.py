"""How a cluster task lays its rows out: every page and every row group a box
(docs/clustering.md, "Pages and row groups are boxes").

Rows sorted along a curve and cut every ``page_rows`` rows give pages that straddle the
curve's cells: a page that ends in one cell and starts the next spans both, and along
Z-order the next can be far away, so its min/max cover much of the columns' space. Here the
task instead cuts its rows the way a k-d tree does, with cut points on the writer's own
boundaries: a set of more than ``group_rows`` rows is split, on the clustering column whose
values it spreads widest (in grid codes: shares of the rows), at a multiple of
``group_rows``; a smaller set at a multiple of ``page_rows``; down to single pages. Every
row group and every page is then the rows of one box of the clustering columns (its
min/max on each column are the box's sides, up to ties at a cut value), and the boxes are
as near cubes (in shares of rows) as the page count allows, so a filter on any one column
keeps about ``pages ** (-1 / columns)`` of them.

Cuts are staggered: a set of ``k`` quanta is cut at ``j`` quanta with ``j / k`` spread over
``1/2 +- CUT_SPREAD`` (a golden-ratio sequence over the cuts, started at the task's
``salt``), not at the middle. A large set's median is the column's median in every unit
and every sibling box (the rows are a random share of the column), so middle cuts land on
the same value everywhere, and rounded to whole row groups they all moved the same way:
at 5M rows the first cut on ``b`` fell at 50,130 and 50,295 in the two tasks, inside
``b between 50000 and 50999``, and that range kept the boxes on both sides of it in every
task (4.1x fewer rows than unclustered where a point kept 8.5x). Staggered, a range can
still cross a cut, but only the cut of some boxes, not of all.

Units are boxes too: the tasks of a merge are the top of the same k-d tree
(:func:`unit_tree`, cut on the driver's sample), not ranges of the curve key. With 4 units
over 4 columns the curve's quarter boundaries are the medians of the first two columns,
one value of ``b`` at the edge of every unit, and a 1% range on ``b`` there kept the boxes
on both sides in every unit (4.8x fewer rows than unclustered at 20M rows, where a point
kept 9.5x fewer). Sibling sets of units cut a column shifted opposite ways from the middle,
so a range crosses a unit cut in some units only (about 1.5x what a point keeps, against
2x). The root cut (on the leading column) is one value for every unit, as any tree's.

The writer cuts row groups and pages at exactly these boundaries: each batch handed to it
is one row group (the flush threshold is the smallest batch's size) and pages hold
``page_rows`` rows from the row group's start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from carbonstore.segments.writer import WriteSettings

__all__ = [
    "CUT_SPREAD", "Node", "box_order", "cut_at", "group_rows", "layout_batches", "unit_of_rows",
    "unit_tree",
]

#: How far from the middle a set is cut at most, in shares of its rows (``cut_at``).
CUT_SPREAD = 0.08
_PHI = (5 ** 0.5 - 1) / 2

#: A cut of the unit tree: (column, threshold, below, above). Rows whose order key on
#: ``column`` is below ``threshold`` go to ``below``, the others to ``above``; a child
#: ``>= 0`` is a node of the tree, ``< 0`` the unit ``-child - 1``.
Node = tuple[int, int, int, int]


def unit_tree(
    codes: Sequence[npt.NDArray[np.uint64]], keys: Sequence[npt.NDArray[np.uint64]], units: int
) -> tuple[tuple[Node, ...], int]:
    """Cut a sample's rows into ``units`` boxes of about equal row counts: the top of the
    k-d tree that :func:`box_order` continues inside each unit (see the module docstring,
    "Units are boxes too"). A set of ``k`` units is cut on the column its rows spread
    widest (in codes) into ``k // 2`` and ``k - k // 2`` units, at that share of its rows
    shifted by the golden-ratio sequence of :func:`cut_at` (the root is not shifted: it is
    the only cut of its kind), so sibling sets cut a column at different values.
    Returns the nodes (root first; empty: one unit) and the number of units (fewer than
    asked when the rows are all alike)."""
    n = len(keys[0]) if keys else 0
    nodes: list[Node] = []
    count = 0

    def build(rows: npt.NDArray[np.int64], k: int, node: int) -> int:
        nonlocal count
        if k > 1 and len(rows) > 1:
            spans = [int(c[rows].max()) - int(c[rows].min()) for c in codes]
            if max(spans) == 0:
                spans = [int(x[rows].max()) - int(x[rows].min()) for x in keys]
            d = int(np.argmax(spans))
            if spans[d] > 0 and int(keys[d][rows].max()) == int(keys[d][rows].min()):
                # codes that differ where the order keys tie (a null and b''): cut where
                # the keys spread, or not at all
                spans = [int(x[rows].max()) - int(x[rows].min()) for x in keys]
                d = int(np.argmax(spans))
            if spans[d] > 0:
                values = np.sort(keys[d][rows])
                share = k // 2 / k
                if node:  # siblings shift opposite ways, by 1/2 to 1 of the spread
                    side = -1 if node % 2 else 1
                    share += side * (0.5 + 0.5 * ((node * _PHI) % 1.0)) * CUT_SPREAD / k
                at = min(len(values) - 1, max(1, round(len(values) * share)))
                threshold = int(values[at])
                if threshold == int(values[0]):  # ties at the bottom: cut above them
                    threshold = int(values[np.searchsorted(values, threshold, side="right")])
                here = len(nodes)
                nodes.append((d, threshold, 0, 0))
                below = keys[d][rows] < threshold
                low = build(rows[below], k // 2, 2 * node + 1)
                high = build(rows[~below], k - k // 2, 2 * node + 2)
                nodes[here] = (d, threshold, low, high)
                return here
        count += 1
        return -count

    if units > 1 and n:
        build(np.arange(n, dtype=np.int64), units, 0)
    return tuple(nodes), max(1, count)


def unit_of_rows(
    keys: Sequence[npt.NDArray[np.uint64]], tree: Sequence[Node]
) -> npt.NDArray[np.int64]:
    """The unit of every row (its order keys per column) under ``tree``: every row lands in
    exactly one unit, the one whose thresholds it passes (half-open: ``<`` goes below)."""
    n = len(keys[0]) if keys else 0
    out = np.zeros(n, dtype=np.int64)
    if not tree:
        return out
    stack = [(0, np.arange(n, dtype=np.int64))]
    while stack:
        ref, rows = stack.pop()
        if ref < 0:
            out[rows] = -ref - 1
            continue
        d, threshold, low, high = tree[ref]
        below = keys[d][rows] < np.uint64(threshold)
        stack.append((low, rows[below]))
        stack.append((high, rows[~below]))
    return out


def box_order(
    codes: Sequence[npt.NDArray[np.uint64]], keys: Sequence[npt.NDArray[np.uint64]],
    group: int, page: int, salt: int = 0,
) -> npt.NDArray[np.int64]:
    """The permutation that lays the rows out in boxes (see the module docstring).

    ``codes``: each clustering column's grid code per row (how far the rows spread on it);
    ``keys``: its exact order key per row (what the cut partitions by). ``group`` is a
    multiple of ``page``; ``salt`` (the task's unit) starts the sequence of cut positions
    (:func:`cut_at`), so two tasks do not cut at the same shares.
    """
    n = len(keys[0]) if keys else 0
    order = np.arange(n, dtype=np.int64)
    stack = [(0, n)]
    node = salt
    while stack:
        lo, hi = stack.pop()
        m = hi - lo
        if m <= page:
            continue
        quantum = group if m > group else page
        cut = cut_at(m, quantum, node)
        node += 1
        seg = order[lo:hi]
        spans = [int(c[seg].max()) - int(c[seg].min()) for c in codes]
        d = int(np.argmax(spans))
        if spans[d] == 0:  # one cell on every column: split by the exact keys' spread
            spans = [int(k[seg].max()) - int(k[seg].min()) for k in keys]
            d = int(np.argmax(spans))
            if spans[d] == 0:
                continue  # every row alike: any cut is a box
        order[lo:hi] = seg[np.argpartition(keys[d][seg], cut)]
        stack.append((lo + cut, hi))
        stack.append((lo, lo + cut))
    return order


def cut_at(rows: int, quantum: int, node: int) -> int:
    """Where the ``node``-th cut splits a set of ``rows`` rows: a multiple of ``quantum``
    (the writer's row-group or page rows) within ``1/2 +- CUT_SPREAD`` of the rows, the
    offset following the golden-ratio sequence (evenly spread over any run of cuts), and
    leaving at least one quantum on each side."""
    k = -(-rows // quantum)
    if k < 3:
        return (k // 2) * quantum
    offset = ((node * _PHI) % 1.0 - 0.5) * 2 * CUT_SPREAD
    return max(1, min(k - 1, round(k * (0.5 + offset)))) * quantum


def group_rows(data: pa.Table, settings: WriteSettings) -> int:
    """Rows per row group: the blocklet size's worth of rows, a multiple of the page rows."""
    per_row = max(1.0, data.nbytes / max(1, data.num_rows))
    pages = int(settings.blocklet_bytes / per_row) // max(1, settings.page_rows)
    return max(1, pages) * settings.page_rows


def layout_batches(
    data: pa.Table, order: npt.NDArray[np.int64], rows: int, settings: WriteSettings
) -> tuple[list[pa.RecordBatch], WriteSettings]:
    """``data`` in ``order``, one batch per row group of ``rows`` rows, and the settings
    that make the writer flush every batch as its own row group."""
    laid = data.take(order) if len(order) else data
    batches = [b for start in range(0, laid.num_rows, rows)
               for b in laid.slice(start, rows).combine_chunks().to_batches()]
    full = [b.nbytes for b in batches[:-1]] or [b.nbytes for b in batches]
    threshold = max(1, min(full)) if full else settings.blocklet_bytes
    return batches, replace(settings, blocklet_bytes=min(settings.blocklet_bytes, threshold))
