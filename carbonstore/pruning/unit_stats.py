"""The statistics of the units one column is evaluated over (row groups or pages): counts,
min/max as arrays, and values derived once per unit set (``evaluator.py`` reads them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.store.ordering import prefix_successor
from carbonstore.store.records import Frozen, field, replace

Mask = npt.NDArray[np.bool_]
NP = npt.NDArray[Any]
SOURCE = "source"  # key in UnitStats.derived: (the UnitStats taken from, positions)

__all__ = ["NP", "SOURCE", "Mask", "UnitStats", "comparable", "exact_bytes", "successors"]


def exact_bytes(literal: Any) -> bool:
    """Whether numpy compares fixed-width bytes (``S``, without NUL bytes) with ``literal``
    exactly: bytes without a NUL byte (numpy drops a bytes value's trailing NULs)."""
    return type(literal) is bytes and b"\x00" not in literal


def comparable(values: NP, literal: Any) -> tuple[NP, Any]:
    """``values`` (bounds) and ``literal`` as numpy compares them exactly.

    Fixed-width bytes (dtype ``S``: arrow_numpy.fixed_bytes, never holding a NUL byte)
    compare exactly with a bytes literal without NUL bytes; numpy would drop a literal's
    trailing NULs (``b"a\\x00"`` would equal ``b"a"``), so any other literal compares with
    the values as Python bytes. Against an object array the literal is boxed in a 0-d
    object array: a bare bytes literal would become numpy ``S`` too."""
    if values.dtype.kind == "S":
        if exact_bytes(literal):
            return values, literal
        values = values.astype(object)
    if values.dtype == object:
        boxed = np.empty((), dtype=object)
        boxed[()] = literal
        return values, boxed
    return values, literal


class UnitStats(Frozen, kw_only=True):
    """Statistics of one column over ``n`` units, column-oriented.

    ``lo`` / ``hi`` are usable lower / upper bounds where ``lo_ok`` / ``hi_ok``; ``hi_strict``
    marks upper bounds that no value reaches (the successor of a truncated string max).
    ``null_count`` / ``nan_count`` are -1 when unknown; ``null_unit`` marks units known to
    hold only nulls (Parquet null_pages).
    """

    floating: bool
    lo: NP
    hi: NP
    lo_ok: Mask
    hi_ok: Mask
    hi_strict: Mask
    null_count: npt.NDArray[np.int64]
    nan_count: npt.NDArray[np.int64]
    num_rows: npt.NDArray[np.int64]
    null_unit: Mask
    # masks derived from these statistics alone (not from a literal), computed once per
    # object: a cached UnitStats serves many plans (read-only arrays, see StatsEvaluator)
    derived: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def size(self) -> int:
        return len(self.num_rows)

    @classmethod
    def from_arrays(cls, stats: Any, num_rows: NP, *, kind: str) -> UnitStats:
        """Build from a ColumnArrays / PageArrays (arrays.py) of kind INT64/FLOAT64/BYTES/BIGINT.

        Inexact minimums are valid lower bounds (a truncated prefix sorts before the value).
        An inexact string maximum is replaced by the successor of its prefix, a strict upper
        bound whether the writer rounded it up (Parquet) or only truncated it. The result is
        kept on ``stats`` (index arrays are immutable once loaded), so a later plan over the
        same cached arrays does not compute the successors again. Arrays that are a selection
        of larger ones (``stats.selection``: larger arrays, positions, their row counts; see
        indexfiles/snapshot.py) take their units from the larger arrays' statistics, which
        are built once: every value here is computed unit by unit, so taking commutes.
        """
        memo = getattr(stats, "_unit_stats_memo", None)
        hit = memo.get(kind) if isinstance(memo, dict) else None
        if hit is not None and hit[0] is num_rows:
            return hit[1]  # type: ignore[no-any-return]
        selected = getattr(stats, "selection", None)
        if selected is not None:  # units of larger arrays: their statistics (kept), taken
            source, positions, source_rows = selected
            out = cls.from_arrays(source, source_rows, kind=kind).take(positions)
        else:
            out = cls._from_arrays(stats, num_rows, kind=kind)
        try:
            if not isinstance(memo, dict):
                memo = {}
                stats._unit_stats_memo = memo
            memo[kind] = (num_rows, out)  # holds num_rows: its identity is the key
        except AttributeError:  # an object that takes no attributes: no memo
            pass
        return out

    @classmethod
    def _from_arrays(cls, stats: Any, num_rows: NP, *, kind: str) -> UnitStats:
        n = len(num_rows)
        lo, hi = stats.min, stats.max
        lo_ok = np.asarray(stats.has_min, dtype=bool)  # (read only: the arrays' own)
        hi_ok = np.asarray(stats.has_max, dtype=bool)
        hi_strict = np.broadcast_to(np.False_, (n,))
        floating = kind == "FLOAT64"
        if kind == "BYTES":
            hi_ok = hi_ok.copy()  # (inexact maxima without a successor are dropped below)
            inexact = hi_ok & ~np.asarray(stats.max_exact, dtype=bool)
            if inexact.any():
                every = bool(inexact.all())
                idx = None if every else np.flatnonzero(inexact)
                put, none = successors(hi if idx is None else hi[idx])
                if none is not None:  # no successor: no usable bound
                    idx = np.flatnonzero(inexact) if idx is None else idx
                    hi_ok[idx[none]] = False
                    idx, put = idx[~none], put[~none]
                if idx is None:
                    hi = put  # every max replaced: a new array
                else:
                    hi = hi.copy()
                    hi[idx] = put
                hi_strict = inexact & hi_ok
        null_unit = getattr(stats, "null_page", None)
        if null_unit is None:  # (statistics are read only: one value seen as every unit's)
            null_unit = np.broadcast_to(np.False_, (n,))
        return cls(
            floating=floating, lo=lo, hi=hi, lo_ok=lo_ok, hi_ok=hi_ok, hi_strict=hi_strict,
            null_count=np.asarray(stats.null_count, dtype=np.int64),
            nan_count=(np.asarray(stats.nan_count, dtype=np.int64) if floating
                       else np.broadcast_to(np.int64(0), (n,))),
            num_rows=np.asarray(num_rows, dtype=np.int64), null_unit=np.asarray(null_unit, dtype=bool),
        )

    def take(self, idx: npt.NDArray[np.intp], known: Mask | None = None) -> UnitStats:
        """Gather units ``idx``; where ``known`` is False the gathered unit has no statistics."""
        out = UnitStats(
            floating=self.floating, lo=self.lo[idx], hi=self.hi[idx], lo_ok=self.lo_ok[idx],
            hi_ok=self.hi_ok[idx], hi_strict=self.hi_strict[idx], null_count=self.null_count[idx],
            nan_count=self.nan_count[idx], num_rows=self.num_rows[idx], null_unit=self.null_unit[idx],
        )
        if known is None or known.all():
            out.derived[SOURCE] = (self, idx)  # derived masks: taken from ours (see _derived)
            return out
        unknown = ~known
        minus = np.where(unknown, -1, 0)
        return replace(
            out, lo_ok=out.lo_ok & known, hi_ok=out.hi_ok & known, null_unit=out.null_unit & known,
            null_count=np.where(unknown, minus, out.null_count),
            nan_count=np.where(unknown, minus, out.nan_count),
        )


def successors(values: NP) -> tuple[NP, Mask | None]:
    """``prefix_successor`` of each byte string of ``values``, and where it has none (None:
    everywhere it has one), computed once per distinct value: pages repeat their maxima
    (16,000 page maxima of 100 distinct strings at 1,600 segments), so the values are
    numbered by a dict (``dict.fromkeys`` and ``map``: no Python step per value) and the
    distinct values' successors gathered by number. Not Arrow's ``dictionary_encode``: a
    first ``pa.array`` imports pandas and the kernel pyarrow.compute, 0.2-0.4 s of a fresh
    process against some 0.06 s per million values."""
    items = values.tolist()
    try:
        number = {v: i for i, v in enumerate(dict.fromkeys(items))}
    except TypeError:  # an unhashable value: value by value
        out = np.empty(len(values), dtype=object)
        out[:] = [prefix_successor(v) for v in items]
        missing = np.array([v is None for v in out.tolist()], dtype=bool)
        return out, missing if missing.any() else None
    succs = np.empty(len(number), dtype=object)
    succs[:] = [None if v is None else prefix_successor(v if isinstance(v, bytes) else v.encode())
                for v in number]  # (a str as its UTF-8 bytes, as Arrow's binary took it)
    codes = np.fromiter(map(number.__getitem__, items), dtype=np.intp, count=len(items))
    missing = np.array([v is None for v in succs.tolist()], dtype=bool)
    return succs[codes], missing[codes] if missing.any() else None
