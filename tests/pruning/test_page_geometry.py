"""The page geometry of surviving row groups, taken from a per-column layout built once,
against a direct computation over the row groups asked for (any page layout, including
pages that do not tile their row group: a first page past row 0, pages out of order,
a row group without pages, a row group of no rows)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.pruning.planner import _geometry as geometry


def _direct(col: SimpleNamespace, surv: np.ndarray, vstart: np.ndarray) -> tuple | None:
    has = col.has_pages[surv]
    starts, ends = col.pages.rg_start[surv], col.pages.rg_start[surv + 1]
    counts = np.where(has, ends - starts, 0)
    if counts.sum() == 0:
        return None
    owner = np.repeat(np.arange(len(surv)), counts)
    page_idx = np.concatenate([np.arange(s, s + c) for s, c in zip(starts, counts, strict=True)]).astype(np.intp)
    page_v = vstart[owner] + col.pages.first_row_index[page_idx]
    first_row = col.pages.first_row_index
    total = int(vstart[-1])
    tiles = bool(len(page_v) and (counts > 0).all() and not first_row[starts].any()
                 and int(page_v[-1]) < total and (page_v[1:] > page_v[:-1]).all())
    return has, page_v, page_idx, owner, tiles


@st.composite
def _layouts(draw: st.DrawFn) -> tuple[SimpleNamespace, np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 6))
    rows = [draw(st.integers(0, 40)) for _ in range(n)]
    has = [draw(st.booleans()) for _ in range(n)]
    firsts: list[int] = []
    rg_start = [0]
    for r in rows:
        k = draw(st.integers(0, 4))
        if draw(st.booleans()):  # a tiling layout: ascending, from row 0, inside the row group
            cuts = sorted(set(draw(st.lists(st.integers(1, max(r - 1, 1)), max_size=k))) - {0})
            pages = [0, *[c for c in cuts if c < r]] if r else [0]
        else:  # anything
            pages = draw(st.lists(st.integers(0, 45), max_size=k))
        firsts.extend(pages)
        rg_start.append(rg_start[-1] + len(pages))
    col = SimpleNamespace(
        has_pages=np.array(has, dtype=bool),
        pages=SimpleNamespace(rg_start=np.array(rg_start, dtype=np.int64),
                              first_row_index=np.array(firsts, dtype=np.int64)))
    surv = np.array(sorted(draw(st.sets(st.integers(0, n - 1), min_size=1))), dtype=np.intp)
    picked = np.array(rows, dtype=np.int64)[surv]
    vstart = np.concatenate([[0], np.cumsum(picked)]).astype(np.int64)
    return col, surv, vstart


@settings(max_examples=300, deadline=None)
@given(_layouts())
def test_geometry_matches_the_direct_computation(layout: tuple[SimpleNamespace, np.ndarray, np.ndarray]) -> None:
    col, surv, vstart = layout
    want = _direct(col, surv, vstart)
    got = geometry(col, surv, vstart)
    assert (got is None) == (want is None)
    if want is not None:
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(np.asarray(a), np.asarray(b))
