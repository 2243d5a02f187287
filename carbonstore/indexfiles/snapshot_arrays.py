"""A run of snapshot segments with one layout as one index (the IndexArrays contract of
arrays.py), and a snapshot's data files as a list built on use.

:class:`SnapshotArrays` presents any run of segments of an opened :class:`Snapshot`
(snapshot.py) whose index columns are the same as one index, for a single vectorised
planner pass; its columns and pages decode the snapshot's flat arrays on first use, and
answer from the segments' merge indexes when a section turns out damaged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles._gen.carbonindex.ttypes import ColumnDesc, DataFile, ValueKind
from carbonstore.indexfiles.arrays import BLOOM_CHECKSUM_SIZE
from carbonstore.indexfiles.concat import COLUMN_ARRAYS, PAGE_ARRAYS, RG_ARRAYS, Lazy
from carbonstore.indexfiles.snapshot import (
    COL_COLUMNS,
    FLAG_BITS,
    PAGE_COLUMNS,
    RG_COLUMNS,
    VALUE_TYPES,
    Snapshot,
    SnapshotSectionError,
    flat_ranges,
)

__all__ = ["SnapshotArrays", "SnapshotFiles"]

_NP = npt.NDArray[Any]

#: take_flat hands up to _FEW_VALUES positions in up to _FEW_RUNS runs to Snapshot.chunk_ranges
_FEW_VALUES = 1024
_FEW_RUNS = 64


def take_flat(snap: Snapshot, column: str, idx: npt.NDArray[np.intp]) -> _NP:
    """``column``'s flat values at positions ``idx`` (ascending) of the table-wide flat
    array, taken chunk by chunk: no chunk is concatenated, only those of ``idx`` read."""
    idx = np.asarray(idx, dtype=np.int64)
    if not len(idx):
        got = snap.chunk_values(column, 0) if snap.chunks else None
        return snap.widen(column, got[:0]) if got is not None else np.zeros(0, dtype=np.int64)
    parts = []
    for k, local, runs in _by_chunk(snap, column, idx):
        if runs is not None:  # a few runs (the pages of a lookup's row groups): they may be
            vals = snap.chunk_ranges(column, k, *runs)  # decoded alone (as stored: widened once taken)
        else:
            whole = snap.chunk_values(column, k)
            vals = None if whole is None else whole[local]
        if vals is None:
            raise SnapshotSectionError(f"{snap.source.what}: chunk {k} has no {column}")
        parts.append(vals)
    return snap.widen(column, parts[0] if len(parts) == 1 else np.concatenate(parts))


def _by_chunk(snap: Snapshot, column: str, idx: npt.NDArray[np.int64]) -> list[tuple[int, _NP, Any]]:
    """Flat positions ``idx`` of ``column`` by chunk: (chunk, positions in it, its runs as
    ``(starts, ends)`` when they are a few). The last split is kept per list length: the
    statistics of a plan's pages are several columns taken at the same positions."""
    offs = snap.offsets(column)
    memo = snap.__dict__.setdefault("_flat_splits", {})
    last = memo.get(id(offs))
    if last is not None and last[0] is idx and last[1] is offs:
        return last[2]  # type: ignore[no-any-return]
    firsts = offs[snap.chunk_starts]
    chunk = np.searchsorted(firsts, idx, side="right") - 1
    cut = np.flatnonzero(np.diff(chunk)) + 1
    few = len(idx) <= _FEW_VALUES  # (a scan's many positions: each chunk's array, no runs)
    out = []
    for first, part in zip([0, *cut.tolist()], np.split(idx, cut), strict=True):
        k = int(chunk[first])
        local = part - firsts[k]
        runs = None
        breaks = np.flatnonzero(np.diff(local) != 1) + 1 if few else None
        if breaks is not None and len(breaks) < _FEW_RUNS:
            runs = (local[np.concatenate([[0], breaks])], local[np.concatenate([breaks - 1, [len(local) - 1]])] + 1)
        out.append((k, local, runs))
    memo[id(offs)] = (idx, offs, out)
    return out


# ---- a run of segments as one index ---------------------------------------------------------
class SnapshotFiles(Sequence[DataFile]):
    """DataFiles ``indices`` of a snapshot as a list, each built when first used.

    ``fallback``: the same files from the segments' merge indexes (numbered the same way),
    taken when the snapshot's chunk of them turns out damaged; without it the damage is
    raised (:class:`SnapshotSectionError`)."""

    def __init__(self, snapshot: Snapshot, indices: npt.NDArray[np.intp],
                 fallback: Callable[[], Sequence[DataFile]] | None = None) -> None:
        self._snap = snapshot
        self._indices = np.asarray(indices, dtype=np.intp)  # (an array: no Python int per file)
        self._fallback_fn = fallback
        self._fallback: Sequence[DataFile] | None = None
        self._last_paths: tuple[npt.NDArray[np.intp], list[str]] | None = None

    def _merged(self) -> Sequence[DataFile] | None:
        if self._fallback is None and self._fallback_fn is not None:
            self._fallback = self._fallback_fn()
        return self._fallback

    def __len__(self) -> int:
        return len(self._indices)

    @overload
    def __getitem__(self, i: int) -> DataFile: ...

    @overload
    def __getitem__(self, i: slice) -> list[DataFile]: ...

    def __getitem__(self, i: int | slice) -> DataFile | list[DataFile]:
        if self._fallback is None:
            try:
                if isinstance(i, slice):
                    picked = self._indices[i].tolist()
                    self._snap.prefetch_files(picked)
                    return [self._snap.file(k) for k in picked]
                return self._snap.file(int(self._indices[i]))
            except SnapshotSectionError:
                if self._merged() is None:
                    raise
        merged = self._merged()
        assert merged is not None
        return list(merged[i]) if isinstance(i, slice) else merged[i]

    def prefetch(self, positions: Sequence[int]) -> None:
        """Build the DataFiles at ``positions`` in one batch (see Snapshot.prefetch_files)."""
        if self._fallback is None:
            try:
                self._snap.prefetch_files(self._indices[np.asarray(positions, dtype=np.intp)].tolist())
            except SnapshotSectionError:
                if self._merged() is None:
                    raise

    def paths(self, positions: Sequence[int]) -> list[str]:
        """The paths of the files at ``positions`` (no DataFile built). The last answer is
        kept: a partitioned table's plan asks for its files' paths, then for the kept ones'
        (the same files when its partitions drop none of them)."""
        if self._fallback is None:
            at = np.asarray(positions, dtype=np.intp)
            last = self._last_paths
            if last is not None and np.array_equal(last[0], at):
                return list(last[1])
            try:
                got = self._snap.file_paths(self._indices[at].tolist())
            except SnapshotSectionError:
                if self._merged() is None:
                    raise
            else:
                self._last_paths = (at, got)
                return list(got)
        merged = self._merged()
        assert merged is not None
        return [merged[p].path for p in positions]


class _Guarded(Lazy):
    """A lazy attribute whose snapshot section turns out damaged is taken from the same
    segments' merge indexes (``SnapshotArrays.fallback``): the arrays are equal."""

    def __getattr__(self, name: str) -> Any:
        if name not in type(self).LAZY:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        try:
            value = self._compute(name)
        except SnapshotSectionError:
            value = self._fallback(name)
        setattr(self, name, value)
        return value

    def _fallback(self, name: str) -> Any:
        raise NotImplementedError


class _SnapPages(_Guarded):
    LAZY = frozenset(PAGE_ARRAYS)

    def __init__(self, col: _SnapColumn) -> None:
        self._col = col

    def _fallback(self, name: str) -> Any:
        return getattr(self._col.owner.fallback_arrays().column(self._col.name).pages, name)

    @property
    def selection(self) -> tuple[Any, npt.NDArray[np.intp], _NP] | None:
        """``(pages, positions, row counts)``: these pages are ``pages`` (the same column's
        pages over a larger run of segments) at ``positions`` - None unless the run was
        selected from a larger one (SnapshotArrays ``within``). Statistics derived from the
        larger run once can then be taken by index instead of gathered again."""
        whole = self._col.whole_column()
        if whole is None:
            return None
        got = self.__dict__.get("_selection")
        if got is None:
            pages = whole.pages
            rg = self._col.owner.rg_take
            got = self.__dict__["_selection"] = (
                pages, flat_ranges(pages.rg_start[rg], pages.rg_start[rg + 1]), pages.row_count)
        return got  # type: ignore[no-any-return]

    def _compute(self, name: str) -> Any:
        col = self._col
        owner = col.owner
        if name == "row_group":  # local row group + the segment's first row group in the run
            snap, rows = owner.snapshot, owner.rows
            offs = snap.offsets(f"{col.key}:p_rg")
            lens = offs[rows + 1] - offs[rows]
            local = owner.gather(f"{col.key}:p_rg").astype(np.int64)
            return (local + np.repeat(owner.seg_rg[:-1], lens)).astype(np.int32)
        if name == "rg_start":
            return np.searchsorted(self.row_group, np.arange(owner.num_row_groups + 1)).astype(np.int64)
        return col.stat(name, page=True)


#: a plan's surviving row groups of a large run take their pages alone (page_subset) when
#: they are at most this share of the run's row groups, and the run has at least
#: _SUBSET_MIN_RGS: the page arrays and layouts of every row group are not built
_SUBSET_SHARE = 8
_SUBSET_MIN_RGS = 4096


class _SubsetPages(Lazy):
    """The pages of some row groups of a snapshot column (``_SnapColumn.page_subset``),
    each array taken at those pages' flat positions: no array of every page is built."""

    LAZY = frozenset(PAGE_ARRAYS)

    def __init__(self, col: _SnapColumn, counts: _NP, flat: npt.NDArray[np.intp]) -> None:
        self._col = col
        self._counts = counts
        self._flat = flat

    def _compute(self, name: str) -> Any:
        if name == "row_group":
            return np.repeat(np.arange(len(self._counts), dtype=np.int32), self._counts)
        if name == "rg_start":
            return np.concatenate([[0], np.cumsum(self._counts)]).astype(np.int64)
        col = self._col
        snap = col.owner.snapshot
        bits = dict(FLAG_BITS)
        if name in bits:
            flags = self.__dict__.get("_flags")
            if flags is None:
                flags = self.__dict__["_flags"] = take_flat(snap, f"{col.key}:p_flags", self._flat)
            return (flags & bits[name]) != 0
        if name in ("min", "max") and col.kind not in VALUE_TYPES:
            return np.empty(len(self._flat), dtype=object)
        suffix = f"p_{name}" if name in ("min", "max") else next(
            s for s, (attr, _) in PAGE_COLUMNS.items() if attr == name)
        return take_flat(snap, f"{col.key}:{suffix}", self._flat)


class _SubsetColumn:
    """Row groups ``rgs`` of a snapshot column with their pages (ColumnArrays as far as page
    pruning and page counts read it)."""

    def __init__(self, col: _SnapColumn, rgs: npt.NDArray[np.intp], counts: _NP,
                 flat: npt.NDArray[np.intp]) -> None:
        self.name, self.desc, self.kind, self.key = col.name, col.desc, col.kind, col.key
        self.has_pages = np.asarray(col.has_pages, dtype=bool)[rgs]
        self.pages = _SubsetPages(col, counts, flat)


class _SnapColumn(_Guarded):
    LAZY = frozenset(COLUMN_ARRAYS)

    def __init__(self, owner: SnapshotArrays, key: str, desc: ColumnDesc, position: int) -> None:
        self.owner = owner
        self.key = key
        self.position = position  # in the layout (the same in every run of its group)
        self.desc = desc
        self.name = desc.name or "?"
        self.kind: int = desc.kind if desc.kind is not None else ValueKind.NONE

    def _fallback(self, name: str) -> Any:
        if name == "pages":
            return _SnapPages(self)
        return getattr(self.owner.fallback_arrays().column(self.name), name)

    def whole_column(self) -> _SnapColumn | None:
        """This column in the larger run the owner was selected from (None: not selected)."""
        whole = self.owner.whole
        return None if whole is None else whole.columns[self.position]  # type: ignore[no-any-return]

    @property
    def selection(self) -> tuple[Any, npt.NDArray[np.intp], _NP] | None:
        """``(column, positions, row counts)`` of the larger run this one was selected from
        (see _SnapPages.selection), or None."""
        whole = self.owner.whole
        if whole is None:
            return None
        return whole.columns[self.position], self.owner.rg_take, whole.rg_num_rows

    def rg_page_counts(self) -> _NP:
        """Pages of each row group of the run (of the page list; kept)."""
        got = self.__dict__.get("_rg_page_counts")
        if got is None:
            owner = self.owner
            snap, rows, seg_rg = owner.snapshot, owner.rows, owner.seg_rg
            column = f"{self.key}:p_rg"
            offs = snap.offsets(column)
            got = np.zeros(owner.num_row_groups, dtype=np.int64)
            # a chunk's segments at a time: each page's row group numbered within them, then
            # counted (no array over every page of the run, and small temporaries)
            chunk = snap.chunk_of(rows)
            cuts = [0, *(np.flatnonzero(np.diff(chunk)) + 1).tolist(), len(rows)]
            for a, b in zip(cuts, cuts[1:], strict=False):
                part = rows[a:b]
                r0, r1 = int(seg_rg[a]), int(seg_rg[b])
                lo, hi = offs[part], offs[part + 1]
                if r1 == r0 or int(hi[-1]) == int(lo[0]):
                    continue  # (no row group, or no page: none counted)
                k = int(chunk[a])
                vals = snap.chunk_values(column, k)  # each page's row group in its segment
                if vals is None:
                    raise SnapshotSectionError(f"{snap.source.what}: chunk {k} has no {column}")
                base = int(offs[snap.chunk_starts[k]])
                if int(part[-1]) - int(part[0]) == b - a - 1:  # a run of the chunk's segments
                    vals = vals[int(lo[0]) - base:int(hi[-1]) - base]
                else:
                    vals = vals[flat_ranges(lo - base, hi - base)]
                glob = np.repeat(seg_rg[a:b] - r0, hi - lo)
                glob += vals
                got[r0:r1] = np.bincount(glob, minlength=r1 - r0)[:r1 - r0]
            self.__dict__["_rg_page_counts"] = got
        return got  # type: ignore[no-any-return]

    def page_subset(self, rgs: npt.NDArray[np.intp]) -> _SubsetColumn | None:
        """Row groups ``rgs`` (ascending) of the run with their pages alone, when they are few
        of a large run (else None: the run's page arrays serve, built once and kept); None
        also when a section turns out damaged (the run's arrays then come from the merge
        indexes)."""
        owner = self.owner
        n = owner.num_row_groups
        if n < _SUBSET_MIN_RGS or len(rgs) * _SUBSET_SHARE > n:
            return None
        last = self.__dict__.get("_last_subset")  # the plan's row groups, then its page counts:
        if last is not None and np.array_equal(last[0], rgs):  # often the same ones (none
            return last[1]  # dropped by the page level), read once
        try:
            counts = self.rg_page_counts()
            c = counts[rgs]
            first = np.cumsum(counts)[rgs] - c  # in the run's flat page list
            idx = flat_ranges(first, first + c)
            offs = owner.snapshot.offsets(f"{self.key}:p_rg")
            lens = offs[owner.rows + 1] - offs[owner.rows]
            run_first = np.concatenate([[0], np.cumsum(lens)])
            seg = np.searchsorted(run_first, idx, side="right") - 1
            flat = (offs[owner.rows][seg] + (idx - run_first[seg])).astype(np.intp)
            sub = _SubsetColumn(self, np.asarray(rgs, dtype=np.intp), c, flat)
            for name in ("first_row_index", "row_count", "has_min", "null_count", "nan_count", "min", "max"):
                getattr(sub.pages, name)  # read now: damage is seen here, not mid-plan
            self.__dict__["_last_subset"] = (np.array(rgs, dtype=np.intp), sub)
            return sub
        except SnapshotSectionError:
            return None

    def stat(self, name: str, *, page: bool) -> Any:
        prefix = "p_" if page else ""
        bits = dict(FLAG_BITS)
        if name in bits:
            cache = "_p_flags" if page else "_flags"
            flags = self.__dict__.get(cache)
            if flags is None:
                flags = self.owner.gather(f"{self.key}:{prefix}flags")
                self.__dict__[cache] = flags
            return (flags & bits[name]) != 0
        if name in ("min", "max"):
            if self.kind not in VALUE_TYPES:
                n = self.owner.num_row_groups if not page else len(self.pages.row_group)
                return np.empty(n, dtype=object)
            return self.owner.gather(f"{self.key}:{prefix}{name}")
        table = PAGE_COLUMNS if page else COL_COLUMNS
        suffix = next(s for s, (attr, _) in table.items() if attr == name)
        return self.owner.gather(f"{self.key}:{suffix}")

    def _compute(self, name: str) -> Any:
        if name == "pages":
            return _SnapPages(self)
        if name in ("bloom_offset", "bloom_length"):
            owner = self.owner
            if not owner.snapshot.segments_with_bloom(self.key)[owner.rows].any():
                # the summary: no row group of the run has a bitset (the bloom references,
                # a section of their own since format 8, are not read); one value seen as
                # the run's array (read-only: a scan's million row groups hold no memory)
                return np.broadcast_to(np.int64(-1) if name == "bloom_offset" else np.int32(0),
                                       (owner.num_row_groups,))
        if name in ("has_pages", "boundary_order", "bloom_offset", "bloom_length"):
            suffix = next(s for s, (attr, _) in COL_COLUMNS.items() if attr == name)
            values = self.owner.gather(f"{self.key}:{suffix}")
            return values != 0 if name == "has_pages" else values
        return self.stat(name, page=False)


class SnapshotArrays(_Guarded):
    """Duck-typed :class:`IndexArrays` over snapshot segments ``rows`` (one layout group).

    Row groups and files are numbered over the run in order; ``rg_part`` gives each row
    group's position in ``rows``. ``fallback`` gives the same segments' arrays from their
    merge indexes (IndexArrays or ConcatArrays, numbered the same way): an array whose
    snapshot section is damaged comes from there. Without it, the damage is raised
    (:class:`SnapshotSectionError`).

    ``within``: ``(larger, positions)`` - this run is segments ``positions`` of ``larger``, a
    SnapshotArrays of the same group kept across plans (``larger.rows[positions] == rows``):
    its columns then name their row groups and pages there (``selection``), so statistics
    computed once over ``larger`` serve every run selected from it.
    """

    LAZY = frozenset(RG_ARRAYS)
    rg_lens: _NP  # row groups per segment of the run

    def __init__(self, snapshot: Snapshot, rows: npt.NDArray[np.intp],
                 fallback: Callable[[], Any] | None = None, *,
                 within: tuple[SnapshotArrays, npt.NDArray[np.intp]] | None = None) -> None:
        self.snapshot = snapshot
        self.rows = np.asarray(rows, dtype=np.intp)
        self.whole: SnapshotArrays | None = None if within is None else within[0]
        self._positions = None if within is None else np.asarray(within[1], dtype=np.intp)
        self._fallback_fn = fallback
        self._fallback_arrays: Any = None
        groups = snapshot.group[self.rows]
        if not len(self.rows) or bool((groups != groups[0]).any()):
            raise ValueError("SnapshotArrays needs a non-empty run of segments with one layout")
        if self.whole is not None and self._positions is not None:
            self.rg_lens = self.whole.rg_lens[self._positions]
        else:
            offs = snapshot.offsets("rg_rows")
            self.rg_lens = offs[self.rows + 1] - offs[self.rows]
        self.seg_rg = np.concatenate([[0], np.cumsum(self.rg_lens)]).astype(np.int64)
        self.num_row_groups = int(self.seg_rg[-1])
        self.rg_part = np.repeat(np.arange(len(self.rows), dtype=np.int32), self.rg_lens)
        self.columns = [_SnapColumn(self, k, snapshot.slots[k], i)
                        for i, k in enumerate(snapshot.group_slots[int(groups[0])])]
        self._by_name = {c.name: c for c in self.columns}

    @property
    def rg_take(self) -> npt.NDArray[np.intp]:
        """This run's row groups as positions in ``whole``'s (only with ``within``)."""
        got = self.__dict__.get("_rg_take")
        if got is None:
            whole, pos = self.whole, self._positions
            if whole is None or pos is None:
                raise ValueError("rg_take needs a run selected from a larger one (within=)")
            got = self.__dict__["_rg_take"] = flat_ranges(whole.seg_rg[pos], whole.seg_rg[pos + 1])
        return got  # type: ignore[no-any-return]

    def file_runs(self) -> tuple[_NP, _NP]:
        """Per segment of the run: its number of files and the run's index of its first one
        (kept: runs selected from this one number their files from these)."""
        got = self.__dict__.get("_file_runs")
        if got is None:
            offs = self.snapshot.offsets("files")
            lens = offs[self.rows + 1] - offs[self.rows]
            got = self.__dict__["_file_runs"] = (lens, np.cumsum(lens) - lens)
        return got  # type: ignore[no-any-return]

    def gather(self, column: str) -> _NP:
        return self.snapshot.gather(column, self.rows)  # (a run of rows in one chunk: a view)

    def rg_at(self, name: str, idx: npt.NDArray[np.intp]) -> _NP:
        """``getattr(self, name)[idx]`` for ``rg_file`` / ``rg_index``: of a few row groups
        of a large run (a scan's kept ones) taken at their flat positions alone, not
        built for every row group of the run."""
        idx = np.asarray(idx, dtype=np.intp)
        if (name not in ("rg_file", "rg_index") or name in self.__dict__
                or len(idx) * _SUBSET_SHARE > self.num_row_groups or self._fallback_arrays is not None):
            return getattr(self, name)[idx]  # type: ignore[no-any-return]
        last = self.__dict__.setdefault("_rg_at", {}).get(name)  # (a plan counts its kept
        if last is not None and np.array_equal(last[0], idx):  # row groups' files, then
            return last[1]  # reports them: the same ones)
        try:
            seg = self.rg_part[idx]
            flat = self.snapshot.offsets(name)[self.rows[seg]] + (idx - self.seg_rg[seg])
            got = take_flat(self.snapshot, name, flat)
        except SnapshotSectionError:
            return getattr(self, name)[idx]  # type: ignore[no-any-return]
        if name == "rg_file":  # a file's index in the run: from its segment's first file's
            got = (got.astype(np.int64) + self.file_runs()[1][seg]).astype(np.int32)
        got.flags.writeable = False  # (kept: the next caller gets the same array)
        self.__dict__["_rg_at"][name] = (idx.copy(), got)
        return got

    def fallback_arrays(self) -> Any:
        """The same segments' arrays from their merge indexes (loaded once).

        Raises:
            SnapshotSectionError: there is no fallback.
        """
        if self._fallback_arrays is None:
            if self._fallback_fn is None:
                raise SnapshotSectionError(f"index snapshot {self.snapshot.name}: damaged section, no fallback")
            self._fallback_arrays = self._fallback_fn()
        return self._fallback_arrays

    def _fallback(self, name: str) -> Any:
        return getattr(self.fallback_arrays(), name)

    def _compute(self, name: str) -> Any:
        snap = self.snapshot
        if name == "files":
            offs = snap.offsets("files")
            fallback = None if self._fallback_fn is None else (lambda: self.fallback_arrays().files)
            return SnapshotFiles(snap, flat_ranges(offs[self.rows], offs[self.rows + 1]), fallback)
        if name == "rg_file":
            whole, pos = self.whole, self._positions
            if whole is not None and pos is not None:  # the larger run's (kept), renumbered
                w_lens, w_first = whole.file_runs()
                lens = w_lens[pos]
                shift = w_first[pos] - (np.cumsum(lens) - lens)
                return (whole.rg_file[self.rg_take] - np.repeat(shift, self.rg_lens)).astype(np.int32)
            offs = snap.offsets("files")
            lens = offs[self.rows + 1] - offs[self.rows]
            first = np.cumsum(lens) - lens
            return (self.gather("rg_file").astype(np.int64) + np.repeat(first, self.rg_lens)).astype(np.int32)
        column = next(c for c, (attr, _) in RG_COLUMNS.items() if attr == name)
        return self.gather(column)

    def column(self, name: str) -> Any:
        return self._by_name[name]

    def has_column(self, name: str) -> bool:
        return name in self._by_name

    def bloom_bitset(self, rg: int, name: str) -> bytes | None:
        """The bloom bitset of row group ``rg`` (of this run) and column ``name``, or None."""
        col = self._by_name[name]
        off = int(col.bloom_offset[rg])
        if off < 0:
            return None
        row = int(self.rows[int(self.rg_part[rg])])
        source = self.snapshot.bloom_source(row)
        if source is None:
            return None
        ln = int(col.bloom_length[rg])
        if ln <= 0 or off + ln + BLOOM_CHECKSUM_SIZE > int(self.snapshot.bloom_len[row]):
            raise CorruptIndexError(
                f"index snapshot {self.snapshot.name}: bloom of column {name} of segment "
                f"{self.snapshot.segments[row]} lies outside its bloom region"
            )
        return source(off, ln)
