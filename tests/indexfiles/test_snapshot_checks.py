"""The page order check of a snapshot chunk (pages name row groups of their segment, in
ascending order) in one pass over the pages numbered across segments: it accepts and
refuses exactly what the check segment by segment did (kept below as the oracle)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.indexfiles.snapshot_checks import pages_in_row_group_order


def _per_segment(p_rg: Any, page_lens: Any, num_row_groups: Any) -> bool:
    """The check before, verbatim: each page below its segment's row-group count, none
    negative, no decrease inside a segment."""
    p_rg = p_rg.astype(np.int64)
    if not len(p_rg):
        return True
    seg_rgs = np.repeat(num_row_groups, page_lens)
    first = np.zeros(len(p_rg), dtype=bool)
    first[(np.cumsum(page_lens) - page_lens)[page_lens > 0]] = True
    return not (p_rg.min() < 0 or bool((p_rg >= seg_rgs).any())
                or bool((np.diff(p_rg) < 0)[~first[1:]].any()))


@st.composite
def _chunks(draw: Any) -> tuple[Any, Any, Any]:
    """Segments of 0-4 row groups and 0-6 pages each; page row groups mostly valid (sorted
    draws below the count), sometimes out of range, negative or out of order."""
    segs = draw(st.integers(0, 8))
    nrg = np.array(draw(st.lists(st.integers(0, 4), min_size=segs, max_size=segs)), dtype=np.int64)
    lens, values = [], []
    for n in nrg.tolist():
        pages = draw(st.lists(st.integers(-1, max(n, 1)), max_size=6))
        if draw(st.booleans()):
            pages = sorted(pages)
        lens.append(len(pages))
        values += pages
    dtype = draw(st.sampled_from([np.int8, np.int16, np.int32, np.int64]))
    return np.array(values, dtype=dtype), np.array(lens, dtype=np.int64), nrg


@settings(max_examples=500, deadline=None)
@given(_chunks(), st.integers(0, 1000))
def test_the_one_pass_check_is_the_per_segment_check(chunk: tuple[Any, Any, Any], base: int) -> None:
    p_rg, page_lens, nrg = chunk
    offsets = base + np.concatenate([[0], np.cumsum(nrg)])  # (a chunk's offsets need not start at 0)
    assert pages_in_row_group_order(p_rg, page_lens, offsets) == _per_segment(p_rg, page_lens, nrg)


def test_both_answers_occur() -> None:
    lens, nrg = np.array([2, 0, 3]), np.array([2, 1, 3])
    offsets = np.concatenate([[0], np.cumsum(nrg)])
    assert pages_in_row_group_order(np.array([0, 1, 0, 0, 2], np.int8), lens, offsets)
    for bad in ([1, 0, 0, 0, 2], [0, 2, 0, 0, 2], [0, 1, 0, 0, 3], [-1, 1, 0, 0, 2], [0, 1, 2, 0, 2]):
        assert not pages_in_row_group_order(np.array(bad, np.int8), lens, offsets), bad
