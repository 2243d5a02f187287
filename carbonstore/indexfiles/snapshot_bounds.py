"""Decoding the segment bounds of an index snapshot's summary (``core`` section): the
``bounds.<array>:<column id>`` columns as :class:`SegmentBounds`, each column decoded on
first use (a plan needs the columns it filters on)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from carbonstore.indexfiles.segment_bounds import ColumnBounds, SegmentBounds
from carbonstore.store.arrow_numpy import fixed_bytes, to_numpy

__all__ = ["decode_bounds", "numpy_of"]

_NP = npt.NDArray[Any]
_BOUNDS_ARRAYS = ("lo", "hi", "lo_ok", "hi_ok", "nulls", "nans")


def numpy_of(col: pa.ChunkedArray) -> _NP:
    """``col.to_numpy()``, the same values, from the buffers where it can (arrow_numpy.py:
    pyarrow's own conversion imports pandas)."""
    return to_numpy(col)


def _column_bounds(t: pa.Table, c: str, kind: str) -> ColumnBounds:
    def arr(suffix: str) -> _NP:
        return numpy_of(t.column(f"bounds.{suffix}:{c}"))

    if kind == "BYTES":  # fixed-width bytes where exact (no NUL byte), else Python bytes
        lo, hi = (fixed_bytes(t.column(f"bounds.{s}:{c}")) for s in ("lo", "hi"))
        if lo is None or hi is None:
            lo, hi = arr("lo").astype(object), arr("hi").astype(object)
    else:
        lo, hi = arr("lo"), arr("hi")
    if kind == "BIGINT":
        lo = np.array([None if v is None else int(v) for v in lo], dtype=object)
        hi = np.array([None if v is None else int(v) for v in hi], dtype=object)
    return ColumnBounds(
        kind=kind, lo=lo, hi=hi, lo_ok=arr("lo_ok").astype(bool, copy=False),
        hi_ok=arr("hi_ok").astype(bool, copy=False), null_count=arr("nulls").astype(np.int64, copy=False),
        nan_count=arr("nans").astype(np.int64, copy=False),
    )


class _LazyBounds(Mapping[str, ColumnBounds]):
    """Segment bounds by column id, each column decoded on first use (a plan needs the
    columns it filters on). Every column's arrays are looked up now (KeyError: not a
    snapshot)."""

    def __init__(self, t: pa.Table, kinds: dict[str, str]) -> None:
        names = set(t.column_names)
        for c in kinds:
            for suffix in _BOUNDS_ARRAYS:
                if f"bounds.{suffix}:{c}" not in names:
                    raise KeyError(f"snapshot column bounds.{suffix}:{c} is missing")
        self._t = t
        self._kinds = kinds
        self._done: dict[str, ColumnBounds] = {}

    def __getitem__(self, c: str) -> ColumnBounds:
        got = self._done.get(c)
        if got is None:
            got = self._done[c] = _column_bounds(self._t, c, self._kinds[c])
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds)

    def __len__(self) -> int:
        return len(self._kinds)


def decode_bounds(t: pa.Table, kinds: dict[str, str]) -> SegmentBounds:
    return SegmentBounds(
        num_rows=numpy_of(t.column("bounds.num_rows")).astype(np.int64, copy=False),
        num_files=numpy_of(t.column("bounds.num_files")).astype(np.int64, copy=False),
        num_row_groups=numpy_of(t.column("bounds.num_row_groups")).astype(np.int64, copy=False),
        columns=_LazyBounds(t, kinds),  # type: ignore[arg-type]
    )
