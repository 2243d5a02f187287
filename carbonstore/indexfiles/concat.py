"""Several segments' index arrays seen as one, so the planner runs one vectorised pass.

:func:`planner.prune` evaluates row groups of all parts at once but cuts pages part by part;
with hundreds of surviving segments that per-part loop dominates planning. A
:class:`ConcatArrays` presents the arrays of many :class:`IndexArrays` with the same column
layout as a single index (the attributes the array contract in arrays.py names): row groups
and files are renumbered globally, pages point at global row groups, and bloom bitsets are
fetched from the owning part. ``rg_part`` says which part each row group came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.indexfiles.arrays import IndexArrays

__all__ = ["ConcatArrays", "concat_arrays"]

_NP = npt.NDArray[Any]
_STATS = ("has_min", "has_max", "min_exact", "max_exact", "null_page", "null_count", "nan_count")


def _cat(arrays: list[_NP]) -> _NP:
    if any(a.dtype == object for a in arrays):
        out = np.empty(sum(len(a) for a in arrays), dtype=object)
        out[:] = [v for a in arrays for v in a.tolist()]
        return out
    return np.concatenate(arrays) if arrays else np.zeros(0)


class _Stats:
    def __init__(self, pieces: list[Any]) -> None:
        for name in _STATS:
            setattr(self, name, _cat([getattr(p, name) for p in pieces]))
        self.min = _cat([p.min for p in pieces])
        self.max = _cat([p.max for p in pieces])


class _Pages(_Stats):
    def __init__(self, pieces: list[Any], rg_offsets: _NP, total_rg: int) -> None:
        super().__init__(pieces)
        self.row_group = np.concatenate(
            [p.row_group.astype(np.int64) + off for p, off in zip(pieces, rg_offsets, strict=True)]
        ).astype(np.int32)
        for name in ("first_row_index", "row_count", "offset", "compressed_size"):
            setattr(self, name, np.concatenate([getattr(p, name) for p in pieces]))
        self.rg_start = np.searchsorted(self.row_group, np.arange(total_rg + 1)).astype(np.int64)


class _Column(_Stats):
    def __init__(self, pieces: list[Any], rg_offsets: _NP, total_rg: int) -> None:
        super().__init__(pieces)
        first = pieces[0]
        self.desc = first.desc
        self.name = first.name
        self.kind = first.kind
        self.has_pages = np.concatenate([p.has_pages for p in pieces])
        self.boundary_order = np.concatenate([p.boundary_order for p in pieces])
        self.bloom_offset = np.concatenate([p.bloom_offset for p in pieces])
        self.bloom_length = np.concatenate([p.bloom_length for p in pieces])
        self.pages = _Pages([p.pages for p in pieces], rg_offsets, total_rg)


class ConcatArrays:
    """Duck-typed :class:`IndexArrays` over ``parts`` (same columns, same kinds)."""

    def __init__(self, parts: Sequence[IndexArrays]) -> None:
        self.parts = list(parts)
        sizes = np.array([p.num_row_groups for p in self.parts], dtype=np.int64)
        self.rg_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.num_row_groups = int(self.rg_offsets[-1])
        self.rg_part = np.repeat(np.arange(len(self.parts), dtype=np.int32), sizes)
        file_offsets = np.cumsum([0] + [len(p.files) for p in self.parts])
        self.files = [f for p in self.parts for f in p.files]
        self.rg_file = np.concatenate(
            [p.rg_file.astype(np.int64) + int(off) for p, off in zip(self.parts, file_offsets, strict=False)]
        ).astype(np.int32)
        for name in ("rg_index", "rg_num_rows", "rg_offset", "rg_length"):
            setattr(self, name, np.concatenate([getattr(p, name) for p in self.parts]))
        offs = self.rg_offsets[:-1]
        self.columns = [
            _Column([p.columns[i] for p in self.parts], offs, self.num_row_groups)
            for i in range(len(self.parts[0].columns))
        ]
        self._by_name = {c.name: c for c in self.columns}

    def column(self, name: str) -> Any:
        return self._by_name[name]

    def has_column(self, name: str) -> bool:
        return name in self._by_name

    def bloom_bitset(self, rg: int, name: str) -> bytes | None:
        part = int(self.rg_part[rg])
        return self.parts[part].bloom_bitset(rg - int(self.rg_offsets[part]), name)


def _layout(p: IndexArrays) -> tuple[Any, ...]:
    return tuple(
        (c.name, c.kind, c.desc.column_id, c.desc.physical_type, c.desc.logical_type, c.desc.unit,
         c.desc.scale, c.desc.type_length, c.desc.nested)
        for c in p.columns
    )


def concat_arrays(parts: Sequence[IndexArrays]) -> ConcatArrays | None:
    """One index over ``parts``, or None when their column layouts differ."""
    if len(parts) < 2:
        return None
    first = _layout(parts[0])
    if any(_layout(p) != first for p in parts[1:]):
        return None
    return ConcatArrays(parts)
