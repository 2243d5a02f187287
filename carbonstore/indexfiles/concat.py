"""Several indexes' arrays seen as one, so the planner runs one vectorised pass.

:func:`planner.prune_row_groups` evaluates row groups of all parts at once but cuts pages part by part;
with hundreds of surviving segments that per-part loop dominates planning. A
:class:`ConcatArrays` presents the arrays of several indexes with the same column layout
(:class:`IndexArrays`, or the snapshot's :class:`~carbonstore.indexfiles.snapshot.SnapshotArrays`)
as a single index (the attributes the array contract in arrays.py names): row groups and
files are renumbered globally, pages point at global row groups, and bloom bitsets are
fetched from the owning part. ``rg_part`` says which part each row group came from.

Every array is concatenated on first use only (:class:`Lazy`): a filter on one column never
touches the other columns' arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "COLUMN_ARRAYS", "PAGE_ARRAYS", "RG_ARRAYS", "STATS_ARRAYS", "ConcatArrays", "Lazy",
    "concat_arrays", "layout",
]

_NP = npt.NDArray[Any]
#: Statistics arrays shared by row-group (column) and page level, see arrays.py.
STATS_ARRAYS = ("min", "max", "has_min", "has_max", "min_exact", "max_exact", "null_page",
                "null_count", "nan_count")
COLUMN_ARRAYS = (*STATS_ARRAYS, "has_pages", "boundary_order", "bloom_offset", "bloom_length", "pages")
PAGE_ARRAYS = (*STATS_ARRAYS, "row_group", "first_row_index", "row_count", "offset", "compressed_size",
               "rg_start")
RG_ARRAYS = ("files", "rg_file", "rg_index", "rg_num_rows", "rg_offset", "rg_length")


class Lazy:
    """Attributes named in ``LAZY`` are computed by ``_compute(name)`` on first access, then kept."""

    LAZY: frozenset[str] = frozenset()

    def __getattr__(self, name: str) -> Any:
        if name not in type(self).LAZY:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        value = self._compute(name)
        setattr(self, name, value)
        return value

    def _compute(self, name: str) -> Any:
        raise NotImplementedError


def cat(arrays: Sequence[_NP]) -> _NP:
    """Concatenate, keeping object arrays object (bytes / Python ints never become numpy 'S')."""
    if any(a.dtype == object for a in arrays):
        out = np.empty(sum(len(a) for a in arrays), dtype=object)
        out[:] = [v for a in arrays for v in a.tolist()]
        return out
    return np.concatenate(arrays) if len(arrays) else np.zeros(0)


class _Pages(Lazy):
    LAZY = frozenset(PAGE_ARRAYS)

    def __init__(self, owner: _Column) -> None:
        self._owner = owner

    def _compute(self, name: str) -> Any:
        pieces = [p.pages for p in self._owner.pieces]
        arrays = self._owner.arrays
        if name == "row_group":
            shifted = [p.row_group.astype(np.int64) + int(off)
                       for p, off in zip(pieces, arrays.rg_offsets[:-1], strict=True)]
            return (np.concatenate(shifted) if shifted else np.zeros(0, np.int64)).astype(np.int32)
        if name == "rg_start":
            return np.searchsorted(self.row_group, np.arange(arrays.num_row_groups + 1)).astype(np.int64)
        return cat([getattr(p, name) for p in pieces])


class _Column(Lazy):
    LAZY = frozenset(COLUMN_ARRAYS)

    def __init__(self, arrays: ConcatArrays, index: int) -> None:
        self.arrays = arrays
        self.pieces = [p.columns[index] for p in arrays.parts]
        first = self.pieces[0]
        self.desc = first.desc
        self.name = first.name
        self.kind = first.kind

    def _compute(self, name: str) -> Any:
        if name == "pages":
            return _Pages(self)
        return cat([getattr(p, name) for p in self.pieces])


class ConcatArrays(Lazy):
    """Duck-typed :class:`IndexArrays` over ``parts`` (same columns, same kinds)."""

    LAZY = frozenset(RG_ARRAYS)

    def __init__(self, parts: Sequence[Any]) -> None:
        self.parts = list(parts)
        sizes = np.array([p.num_row_groups for p in self.parts], dtype=np.int64)
        self.rg_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.num_row_groups = int(self.rg_offsets[-1])
        self.rg_part = np.repeat(np.arange(len(self.parts), dtype=np.int32), sizes)
        self.columns = [_Column(self, i) for i in range(len(self.parts[0].columns))]
        self._by_name = {c.name: c for c in self.columns}

    def _compute(self, name: str) -> Any:
        if name == "files":
            return [f for p in self.parts for f in p.files]
        if name == "rg_file":
            file_offsets = np.cumsum([0] + [len(p.files) for p in self.parts])
            return np.concatenate(
                [p.rg_file.astype(np.int64) + int(off) for p, off in zip(self.parts, file_offsets, strict=False)]
            ).astype(np.int32)
        return np.concatenate([getattr(p, name) for p in self.parts])

    def column(self, name: str) -> Any:
        return self._by_name[name]

    def has_column(self, name: str) -> bool:
        return name in self._by_name

    def bloom_bitset(self, rg: int, name: str) -> bytes | None:
        part = int(self.rg_part[rg])
        return self.parts[part].bloom_bitset(rg - int(self.rg_offsets[part]), name)


def layout(p: Any) -> tuple[Any, ...]:
    """What must agree for two indexes to be concatenated: every column's description."""
    return tuple(
        (c.name, c.kind, c.desc.column_id, c.desc.physical_type, c.desc.logical_type, c.desc.unit,
         c.desc.scale, c.desc.type_length, c.desc.nested)
        for c in p.columns
    )


def concat_arrays(parts: Sequence[Any]) -> ConcatArrays | None:
    """One index over ``parts``, or None when their column layouts differ."""
    if len(parts) < 2:
        return None
    first = layout(parts[0])
    if any(layout(p) != first for p in parts[1:]):
        return None
    return ConcatArrays(parts)


def merge_runs(pieces: Sequence[tuple[Any, _NP]], key: Callable[[Any], Any] = layout) -> tuple[list[Any], list[_NP]]:
    """Merge neighbouring pieces ``(arrays, per-row-group tag)`` whose layouts agree.

    Returns the parts the planner evaluates and, per part, the tags of its row groups (order
    kept: the parts' row groups in sequence are the pieces' row groups in sequence).
    """
    if len(pieces) == 1:  # a plan's usual unit: nothing to merge, no layout compared
        arrays, tag = pieces[0]
        return [arrays], [np.array(tag, copy=True)]
    parts: list[Any] = []
    tags: list[_NP] = []
    run: list[tuple[Any, _NP]] = []
    run_key: Any = None

    def flush() -> None:
        if not run:
            return
        if len(run) == 1:
            parts.append(run[0][0])
        else:
            parts.append(ConcatArrays([a for a, _ in run]))
        tags.append(np.concatenate([t for _, t in run]))
        run.clear()

    for arrays, tag in pieces:
        k = key(arrays)
        if run and k != run_key:
            flush()
        run.append((arrays, tag))
        run_key = k
    flush()
    return parts, tags
