"""What a chunk section of the index snapshot must hold beyond its checksum, checked when
it is read (snapshot.py ``Snapshot._check_chunk``): vectorised, once per section."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["pages_in_row_group_order"]

_NP = npt.NDArray[Any]


def pages_in_row_group_order(p_rg: _NP, page_lens: _NP, rg_offsets: _NP) -> bool:
    """Whether pages (``p_rg``: each page's row group in its segment; ``page_lens``: pages
    per segment, in order) name row groups of their segment (``rg_offsets``: the segments'
    row-group offsets, ``len(page_lens) + 1``) in ascending order. Numbered across the
    segments (each segment's first row group after the previous one's last), such pages
    ascend throughout: checked in one pass, with each segment's last page."""
    if not len(p_rg):
        return True
    first = rg_offsets[:-1] - rg_offsets[0]
    glob = np.repeat(first, page_lens)
    glob += p_rg
    some = page_lens > 0
    last = np.cumsum(page_lens)[some] - 1
    return not (int(p_rg.min()) < 0 or bool((glob[1:] < glob[:-1]).any())
                or bool((glob[last] >= (rg_offsets[1:] - rg_offsets[0])[some]).any()))
