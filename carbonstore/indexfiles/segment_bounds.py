"""Segment bounds as the table index snapshot stores them: per segment and column, the
bounds of all its row groups (computed by carbonstore.pruning.bounds).

Column-oriented over ``n`` segments: ``lo``/``hi`` with ``lo_ok``/``hi_ok`` (a missing bound
means "might match"), summed null and NaN counts (-1: unknown). Kinds as in arrays.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.store.records import Frozen

__all__ = ["KIND_DTYPE", "KIND_FILLER", "ColumnBounds", "SegmentBounds", "concat_values"]

_NP = npt.NDArray[Any]
KIND_FILLER = {"INT64": 0, "FLOAT64": 0.0, "BYTES": None, "BIGINT": None}
KIND_DTYPE = {"INT64": np.int64, "FLOAT64": np.float64, "BYTES": object, "BIGINT": object}


class ColumnBounds(Frozen):
    """One column's bounds over ``n`` segments (kinds as in arrays.py). A ``Frozen`` value,
    not a slotted dataclass: created on every plan's import path (see store/records.py)."""

    __slots__ = ("kind", "lo", "hi", "lo_ok", "hi_ok", "null_count", "nan_count")
    __match_args__ = __slots__
    kind: str
    lo: _NP
    hi: _NP
    lo_ok: npt.NDArray[np.bool_]
    hi_ok: npt.NDArray[np.bool_]
    null_count: npt.NDArray[np.int64]
    nan_count: npt.NDArray[np.int64]

    def __init__(self, kind: str, lo: _NP, hi: _NP, lo_ok: npt.NDArray[np.bool_],
                 hi_ok: npt.NDArray[np.bool_], null_count: npt.NDArray[np.int64],
                 nan_count: npt.NDArray[np.int64]) -> None:
        _set = object.__setattr__
        _set(self, "kind", kind)
        _set(self, "lo", lo)
        _set(self, "hi", hi)
        _set(self, "lo_ok", lo_ok)
        _set(self, "hi_ok", hi_ok)
        _set(self, "null_count", null_count)
        _set(self, "nan_count", nan_count)

    @classmethod
    def unknown(cls, kind: str, n: int) -> ColumnBounds:
        lo = np.full(n, KIND_FILLER[kind], dtype=KIND_DTYPE[kind])
        none = np.zeros(n, dtype=bool)
        minus = np.full(n, -1, dtype=np.int64)
        return cls(kind=kind, lo=lo, hi=lo, lo_ok=none, hi_ok=none, null_count=minus, nan_count=minus)

    def take(self, idx: npt.NDArray[np.intp]) -> ColumnBounds:
        return ColumnBounds(
            kind=self.kind, lo=self.lo[idx], hi=self.hi[idx], lo_ok=self.lo_ok[idx],
            hi_ok=self.hi_ok[idx], null_count=self.null_count[idx], nan_count=self.nan_count[idx],
        )


class SegmentBounds(Frozen):
    """Per-segment sizes and column bounds, column-oriented over ``n`` segments (a
    ``Frozen`` value, as ColumnBounds)."""

    __slots__ = ("num_rows", "num_files", "num_row_groups", "columns")
    __match_args__ = __slots__
    num_rows: npt.NDArray[np.int64]
    num_files: npt.NDArray[np.int64]
    num_row_groups: npt.NDArray[np.int64]
    columns: dict[str, ColumnBounds]

    def __init__(self, num_rows: npt.NDArray[np.int64], num_files: npt.NDArray[np.int64],
                 num_row_groups: npt.NDArray[np.int64],
                 columns: dict[str, ColumnBounds] | None = None) -> None:
        _set = object.__setattr__
        _set(self, "num_rows", num_rows)
        _set(self, "num_files", num_files)
        _set(self, "num_row_groups", num_row_groups)
        _set(self, "columns", {} if columns is None else columns)

    @property
    def size(self) -> int:
        return len(self.num_rows)

    def take(self, idx: npt.NDArray[np.intp]) -> SegmentBounds:
        return SegmentBounds(
            num_rows=self.num_rows[idx], num_files=self.num_files[idx],
            num_row_groups=self.num_row_groups[idx],
            columns={k: v.take(idx) for k, v in self.columns.items()},
        )

    @staticmethod
    def concat(parts: Sequence[SegmentBounds]) -> SegmentBounds:
        """Concatenate; a column missing in (or of another kind than) a part is unknown there."""
        if len(parts) == 1:
            return parts[0]
        kinds: dict[str, str] = {}
        for p in parts:
            for name, cb in p.columns.items():
                kinds.setdefault(name, cb.kind)
        cols: dict[str, ColumnBounds] = {}
        for name, kind in kinds.items():
            pieces = []
            for p in parts:
                got = p.columns.get(name)
                pieces.append(got if got is not None and got.kind == kind else ColumnBounds.unknown(kind, p.size))
            cols[name] = ColumnBounds(
                kind=kind, lo=concat_values([c.lo for c in pieces]), hi=concat_values([c.hi for c in pieces]),
                lo_ok=np.concatenate([c.lo_ok for c in pieces]),
                hi_ok=np.concatenate([c.hi_ok for c in pieces]),
                null_count=np.concatenate([c.null_count for c in pieces]),
                nan_count=np.concatenate([c.nan_count for c in pieces]),
            )
        return SegmentBounds(
            num_rows=np.concatenate([p.num_rows for p in parts]),
            num_files=np.concatenate([p.num_files for p in parts]),
            num_row_groups=np.concatenate([p.num_row_groups for p in parts]),
            columns=cols,
        )


def concat_values(arrays: list[_NP]) -> _NP:
    if any(a.dtype == object for a in arrays):
        out = np.empty(sum(len(a) for a in arrays), dtype=object)
        out[:] = [v for a in arrays for v in a.tolist()]
        return out
    return np.concatenate(arrays)
