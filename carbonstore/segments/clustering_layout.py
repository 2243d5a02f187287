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

__all__ = ["CUT_SPREAD", "box_order", "cut_at", "group_rows", "layout_batches"]

#: How far from the middle a set is cut at most, in shares of its rows (``cut_at``).
CUT_SPREAD = 0.08
_PHI = (5 ** 0.5 - 1) / 2


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
