"""The table index: a table's view over its readable segments, and its index snapshot.

The table-level index snapshot (like a Delta checkpoint) under
``table.paths.index_snapshot_dir``: ONE file of checksummed Arrow IPC sections holding, for
every readable segment it covers, its segment bounds and its whole index column-oriented
(all min/max/count arrays of row groups and pages, concatenated over the segments with
segment offsets - see indexfiles/snapshot.py; NOT the bloom bitsets: they stay in the merge
file and are read lazily for = / IN candidates only). A fresh process reads the
tablestatus, the newest snapshot's directory and core section (the sections of a column
when a plan first filters on it) and the merge indexes of segments committed since, and
decodes each array a filter touches once for all segments. :func:`refresh_index_snapshot` rewrites it
(atomically, under a lock). Planning only reads: it never writes a snapshot or a bloom
pack. The writers keep it fresh: after a commit that changes the readable segments (a load,
a compaction, a DML statement, add segment, an index rebuild) they call
:func:`refresh_if_lagging`, which rewrites it, best effort, when it lags by more than
``carbon.index.snapshot.max.lag`` segments. A snapshot of another format version, or a
damaged one, is ignored (planning reads the merge indexes) and rewritten by the next
writer (or ``refresh_index_snapshot``).

:class:`TableIndex` plans segments the snapshot covers from its table-level arrays, the
others from their merge indexes loaded through the driver cache (cache.py).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from carbonstore.errors import CarbonStoreError, CorruptIndexError
from carbonstore.indexfiles.arrays import IndexArrays
from carbonstore.indexfiles.concat import ConcatArrays, merge_runs
from carbonstore.indexfiles.segment_bounds import SegmentBounds
from carbonstore.indexfiles.snapshot import (
    SNAPSHOT_VERSION,
    Snapshot,
)
from carbonstore.indexfiles.snapshot_arrays import SnapshotArrays
from carbonstore.indexfiles.snapshot_write import encode_chunk_pieces
from carbonstore.pruning.bloom_pack_write import write_bloom_pack
from carbonstore.pruning.bounds import segment_unit_stats
from carbonstore.pruning.cache import COUNTERS, driver_cache
from carbonstore.pruning.partition_prune import applies as partition_applies
from carbonstore.pruning.segment_index import (
    SegmentIndex,
    bloom_directory,
    load_segment,
)
from carbonstore.pruning.snapshot_chunks import SnapshotSource, snapshot_chunks
from carbonstore.pruning.snapshot_files import (
    DAMAGED_SNAPSHOTS,
    SNAPSHOT_LOCK,
    SNAPSHOT_PREFIX,
    SNAPSHOT_SUFFIX,
    all_snapshot_files,
    read_snapshot,
    snapshot_names,
)
from carbonstore.pruning.view_keys import (
    ViewColumn,
    ViewRows,
    conf_int,
    entries_key,
    first_keys,
    key_bytes_of,
    names_files_of,
    snapshot_holds,
)
from carbonstore.store.readable import ReadableEntries
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry, TableStatusSnapshot, now_ms

__all__ = [
    "SNAPSHOT_LOCK", "SNAPSHOT_PREFIX", "SNAPSHOT_SUFFIX", "SNAPSHOT_VERSION", "TableIndex", "read_snapshot",
    "readable_segments", "refresh_if_lagging", "refresh_index_snapshot", "snapshot_names",
    "table_index", "write_snapshot",
]

def write_snapshot(table: Table, view: TableIndex | SnapshotSource) -> str:
    """Write a snapshot covering ``view``'s segments: chunks of the current one whose
    segments are unchanged are copied as they are (bytes and checksums), the open tail chunk
    and new segments are encoded (new segments from their merge indexes, in bounded batches)."""
    sfs = table.store.sfs
    folder = table.paths.index_snapshot_dir
    try:
        chunks, slots, bounds = snapshot_chunks(view)
    except CorruptIndexError:  # a section of the snapshot copied from is damaged
        if view.snapshot is not None:
            DAMAGED_SNAPSHOTS.add((table.paths.root, view.snapshot.name))
        chunks, slots, bounds = snapshot_chunks(SnapshotSource(table, view.entries, None))
    data = encode_chunk_pieces(chunks, bounds, slots)  # (copied sections: views of the previous file)
    sfs.makedirs(folder)
    covered = ",".join(f"{n}:{f}" for n, f in zip(*names_files_of(view.entries), strict=True))
    import hashlib  # here: loading OpenSSL is not a plan's cost (a writer names files)

    digest = hashlib.sha1(covered.encode()).hexdigest()[:12]
    name = f"{SNAPSHOT_PREFIX}{now_ms():015d}_{len(view.entries)}_{digest}{SNAPSHOT_SUFFIX}"
    sfs.write_atomic(f"{folder}/{name}", data)
    COUNTERS["snapshot_writes"] += 1
    current = snapshot_names(table)
    # keep the previous one for readers mid-switch; other formats' snapshots go
    for old in [*current[:-2], *(n for n in all_snapshot_files(table) if not n.startswith(SNAPSHOT_PREFIX))]:
        try:
            sfs.delete_file(f"{folder}/{old}")
        except OSError:
            pass
    try:  # the bloom pack over the same segments (segment_blooms.py); without it only speed is lost
        fresh = read_snapshot(table)[0]  # bloom references from the new snapshot, not reloaded
        write_bloom_pack(table, TableIndex(table, view.entries, fresh) if fresh is not None and fresh.name == name
                         else view)
    except (OSError, CorruptIndexError, ValueError):
        COUNTERS["bloom_pack_errors"] += 1
    return name


# ---- a table's view over its readable segments ----------------------------------------------
class TableIndex:
    """The indexes of an ordered list of segments: bounds for all, arrays on demand.

    A segment the snapshot covers is planned from the snapshot's table-level arrays; the
    others (committed since) from their merge indexes, loaded through the LRU.
    """

    def __init__(self, table: Table, entries: Sequence[LoadEntry], snapshot: Snapshot | None, *,
                 names_files: tuple[Sequence[str], Sequence[str]] | None = None) -> None:
        self.table = table
        self.entries: Sequence[LoadEntry] = entries if isinstance(entries, ReadableEntries) else list(entries)
        self._names_files = names_files  # (names_files_of: built when asked)
        self.name_reads = 0  # names read one at a time (view_keys.ViewColumn)
        self.root = table.paths.root
        self.snapshot = snapshot
        self._snap_row: dict[int, int] | ViewRows = {}
        self._snap_rows_np: npt.NDArray[np.intp] | None = None
        self._seg_stats: dict[str, Any] = {}
        pieces: list[SegmentBounds] = []
        snap_rows: list[int] = []
        order: list[int] = []  # >= 0: index into pieces, < 0: -1 - index into snap_rows
        self.disagrees = False  # a snapshot row that does not match its entry was ignored
        self._bloom_dirs: dict[tuple[int, str], dict[str, Any] | None] = {}
        self._bloom_segs: dict[str, npt.NDArray[np.bool_]] = {}
        self.evictions_seen = driver_cache().evictions
        self._units: OrderedDict[tuple[int, ...], tuple[list[Any], list[npt.NDArray[np.intp]]]] = OrderedDict()
        self.plans: dict[Any, Any] = {}  # whole plans over this view (plan.py), gone with it
        #: per layout group: every segment of the view in it as one SnapshotArrays (its
        #: statistics built once), and those segments' view indices
        self._groups: dict[int, tuple[SnapshotArrays, npt.NDArray[np.intp]]] = {}
        self._group_asks: dict[int, int] = {}  # plans of part of a group before it is built
        if snapshot is not None and self.entries and self._all_in_snapshot(snapshot):
            return
        snap_rows_count = [] if snapshot is None else snapshot.bounds.num_rows.tolist()
        # by the entries' names and row counts: only a segment the snapshot does not cover
        # builds its entry (100,000 lazy entries would cost seconds)
        counts = (self.entries.row_counts.tolist() if isinstance(self.entries, ReadableEntries)
                  else [e.row_count for e in self.entries])
        get = None if snapshot is None else snapshot.rows.get
        for i, pair in enumerate(zip(self.names, self.files, strict=True)):
            row = None if get is None else get(pair)
            if row is not None and counts[i] and snap_rows_count[row] != counts[i]:
                # Not this segment's index (a snapshot is verified whole, not against the
                # tablestatus): plan the segment from its merge index, and write a new one.
                row = None
                self.disagrees = True
            if row is not None:
                self._snap_row[i] = row
                order.append(-1 - len(snap_rows))
                snap_rows.append(row)
                continue
            key = (self.root, *pair)
            item = driver_cache().get(key)
            if item is None:
                item = load_segment(table, self.entries[i])
                driver_cache().put(key, item)
            order.append(len(pieces))
            pieces.append(item.bounds)
        self.uncovered = len(pieces)
        parts = list(pieces)
        if snap_rows and snapshot is not None:
            rows = np.array(snap_rows, dtype=np.intp)
            whole = len(rows) == snapshot.size and bool((rows == np.arange(len(rows))).all())
            parts.append(snapshot.bounds if whole else snapshot.bounds.take(rows))
        n_own = len(pieces)
        take = np.array([o if o >= 0 else n_own + (-1 - o) for o in order], dtype=np.intp)
        if not parts:
            self.bounds = SegmentBounds(num_rows=np.zeros(0, np.int64), num_files=np.zeros(0, np.int64),
                                        num_row_groups=np.zeros(0, np.int64))
        else:
            merged = SegmentBounds.concat(parts)
            self.bounds = merged if np.array_equal(take, np.arange(len(take))) else merged.take(take)

    @property
    def names(self) -> Sequence[str]:
        """Each segment's load name, by view index (one asked for alone is read alone: a
        plan names the few segments it keeps)."""
        return ViewColumn(self, 0)

    @property
    def files(self) -> Sequence[str]:
        """Each segment's merge index name ("" for none), by view index (as :attr:`names`)."""
        return ViewColumn(self, 1)

    def _names_and_files(self) -> tuple[Sequence[str], Sequence[str]]:
        if self._names_files is None:
            self._names_files = names_files_of(self.entries)
        return self._names_files

    def _all_in_snapshot(self, snapshot: Snapshot) -> bool:
        """The common case at once: every entry is a snapshot row whose row count agrees
        (what the loop in __init__ finds then, without a Python step per segment); False,
        with nothing set, otherwise. The view equal to the snapshot's rows is found from the
        bytes of both (no string per segment)."""
        if len(self.entries) == snapshot.size and snapshot_holds(snapshot, key_bytes_of(self.entries)):
            rows = np.arange(len(self.entries), dtype=np.intp)  # the snapshot's rows, in order
        else:
            ids, merges = self._names_and_files()
            get = snapshot.rows.get
            got = [get(pair) for pair in zip(ids, merges, strict=True)]
            if None in got:
                return False
            rows = np.array(cast(list[int], got), dtype=np.intp)
        counts = (self.entries.row_counts if isinstance(self.entries, ReadableEntries)
                  else np.array([e.row_count for e in self.entries], dtype=np.int64))
        if bool(((counts != 0) & (snapshot.bounds.num_rows[rows] != counts)).any()):
            return False  # the loop plans those from their merge indexes
        self._snap_row = ViewRows(rows)  # no dict of 100,000 ints
        self._snap_rows_np = rows
        self.uncovered = 0
        whole = len(rows) == snapshot.size and bool((rows == np.arange(len(rows))).all())
        self.bounds = SegmentBounds.concat([snapshot.bounds if whole else snapshot.bounds.take(rows)])
        return True

    @property
    def size(self) -> int:
        return len(self.entries)

    def segment_stats(self, ref: Any) -> Any:
        """The segments as evaluator units for column ``ref`` (bounds.segment_unit_stats,
        which depends on the column id only), built once per view: its derived masks are
        kept with it (evaluator.UnitStats.derived)."""
        key = ref.column.column_id
        got = self._seg_stats.get(key, self)
        if got is self:
            got = self._seg_stats[key] = segment_unit_stats(self.bounds, ref)
        return got

    def bound_sums(self, segments: npt.NDArray[np.bool_]) -> tuple[list[int], list[int]]:
        """(rows, files, row groups) over every segment of the view, and over ``segments``
        (a mask): the level totals of a plan, from one matrix built once per view."""
        got = self.__dict__.get("_bound_sums")
        if got is None:
            b = self.bounds
            cols = [np.asarray(c, np.int64) for c in (b.num_rows, b.num_files, b.num_row_groups)]
            got = self.__dict__["_bound_sums"] = (cols, [int(c.sum()) for c in cols])
        cols, totals = got
        picked = int(np.count_nonzero(segments))
        if 2 * picked <= len(segments):
            at = np.flatnonzero(segments)
            return totals, [int(c[at].sum()) for c in cols]
        at = np.flatnonzero(~segments)  # most segments (a lookup's dropped ones): the rest
        return totals, [t - int(c[at].sum()) for t, c in zip(totals, cols, strict=True)]

    @functools.cached_property
    def partitioned(self) -> bool:
        """Some entry is partitioned, bucketed or lost partitions to an overwrite
        (partition_prune.applies; asked once per view, not per plan)."""
        return partition_applies(self.entries)

    def snapshot_row(self, i: int) -> int | None:
        """Segment ``i``'s row in the snapshot, or None when it is planned from its merge index."""
        return self._snap_row.get(i)

    def segment(self, i: int) -> SegmentIndex:
        """Segment ``i``'s index: a one-segment view of the snapshot, else loaded (LRU)."""
        e = self.entries[i]
        row = self._snap_row.get(i)
        if row is not None and self.snapshot is not None:
            snap = self.snapshot
            COUNTERS["header_decodes"] += 1
            return SegmentIndex(
                segment_id=e.load_name, merge_name=e.segment_file or "",
                arrays=SnapshotArrays(snap, np.array([row], dtype=np.intp),  # type: ignore[arg-type]
                                      lambda: self._loaded(i).arrays),
                bounds=snap.bounds.take(np.array([row], dtype=np.intp)),
                bloom_base=int(snap.bloom_base[row]), nbytes=0,
            )
        return self._loaded(i)

    def _loaded(self, i: int) -> SegmentIndex:
        """Segment ``i``'s index read from its merge index (through the LRU)."""
        e = self.entries[i]
        key = (self.root, e.load_name, e.segment_file or "")
        item = driver_cache().get(key)
        if item is None:
            item = load_segment(self.table, e)
            driver_cache().put(key, item)
        return item

    def units(self, surv: npt.NDArray[np.intp]) -> tuple[list[Any], list[npt.NDArray[np.intp]]]:
        """What the planner evaluates for surviving segments ``surv`` (view indices, in order).

        Returns the parts and, per part, the view index of each of its row groups. A run of
        snapshot segments with one column layout is one :class:`SnapshotArrays` (its arrays
        gathered from the table-level ones, no per-segment decoding); neighbouring parts with
        one layout become one ConcatArrays, so the planner runs one vectorised pass. Cached
        per surviving set.
        """
        key = tuple(surv.tolist())
        got = self._units.get(key)
        if got is not None:
            return got
        snap = self.snapshot
        pieces: list[tuple[Any, npt.NDArray[np.intp]]] = []
        if snap is not None and len(surv) and len(self._snap_row) == self.size:
            rows = self._snap_rows_array()[surv]  # every segment is a snapshot row: one
            groups = snap.group[rows]           # layout is one run (what the loop below gives)
            if not (groups != groups[0]).any():
                arrays: Any = self._group_run(snap, int(groups[0]), surv, rows)
                COUNTERS["header_decodes"] += len(rows)
                pieces.append((arrays, np.asarray(surv, dtype=np.intp)[arrays.rg_part]))
                return self._keep_units(key, merge_runs(pieces))
        run: list[int] = []
        run_rows: list[int] = []

        def flush() -> None:
            if run and snap is not None:
                arrays = SnapshotArrays(snap, np.array(run_rows, dtype=np.intp), self._fallback(list(run)))
                COUNTERS["header_decodes"] += len(run_rows)
                pieces.append((arrays, np.array(run, dtype=np.intp)[arrays.rg_part]))
                run.clear()
                run_rows.clear()

        for i in key:
            row = self._snap_row.get(i)
            if row is not None and snap is not None:
                if run_rows and snap.group[run_rows[-1]] != snap.group[row]:
                    flush()
                run.append(i)
                run_rows.append(row)
                continue
            flush()
            arrays = self.segment(i).arrays
            pieces.append((arrays, np.full(arrays.num_row_groups, i, dtype=np.intp)))
        flush()
        return self._keep_units(key, merge_runs(pieces))

    def _group_run(self, snap: Snapshot, group: int, surv: npt.NDArray[np.intp],
                   rows: npt.NDArray[np.intp]) -> SnapshotArrays:
        """Surviving segments ``surv`` (snapshot ``rows``, all of layout ``group``) as one
        SnapshotArrays selected from the view's arrays of the whole group: the statistics
        of the group are built once per view and each plan takes its units from them by
        index (a new literal gives a new surviving set each plan).

        The group's arrays are built from the second plan of a part of the group on: a view
        planned once (a fresh process) gathers only its survivors, because building the
        statistics of every segment of the group for a few survivors (a key the bloom
        filters find in 3 segments of 1,600) costs more than that whole plan."""
        got = self._groups.get(group)
        if got is None:
            if driver_cache().evictions != self.evictions_seen:  # the budget is short
                return SnapshotArrays(snap, rows, self._fallback(surv))
            mine = self._snap_rows_array()
            members = np.flatnonzero(snap.group[mine] == group)
            asks = self._group_asks.get(group, 0)
            if asks == 0 and len(surv) < len(members):
                self._group_asks[group] = 1
                return SnapshotArrays(snap, rows, self._fallback(surv))
            got = self._groups[group] = (
                SnapshotArrays(snap, mine[members], self._fallback(members)), members)
        whole, members = got
        if len(surv) == len(members) and np.array_equal(surv, members):
            return whole  # every segment of the group
        positions = np.minimum(np.searchsorted(members, surv), len(members) - 1)
        if not np.array_equal(members[positions], surv):  # not a subset in order
            return SnapshotArrays(snap, rows, self._fallback(surv))
        return SnapshotArrays(snap, rows, self._fallback(surv), within=(whole, positions))

    def _fallback(self, segments: Any) -> Any:
        """The arrays of view segments ``segments`` from their merge indexes, when asked for (a
        damaged snapshot section: SnapshotArrays takes the arrays from there)."""
        todo = np.array(segments, dtype=np.intp)  # a copy; made Python ints only if asked for
        # (a plan keeping every segment of 1,600 would otherwise convert 1,600 numpy scalars)

        def load() -> Any:
            parts = [self._loaded(i).arrays for i in todo.tolist()]
            return parts[0] if len(parts) == 1 else ConcatArrays(parts)

        return load

    def _keep_units(
        self, key: tuple[int, ...], got: tuple[list[Any], list[npt.NDArray[np.intp]]]
    ) -> tuple[list[Any], list[npt.NDArray[np.intp]]]:
        if driver_cache().evictions != self.evictions_seen:
            return got  # the budget is short: keep nothing the LRU does not count
        if len(self._units) >= 4:
            self._units.popitem(last=False)
        self._units[key] = got
        return got

    def _snap_rows_array(self) -> npt.NDArray[np.intp]:
        """Each segment's snapshot row (-1: planned from its merge index), built once."""
        got = self._snap_rows_np
        if got is None:
            got = np.full(self.size, -1, dtype=np.intp)
            if self._snap_row:
                got[np.fromiter(self._snap_row.keys(), np.intp)] = np.fromiter(self._snap_row.values(), np.intp)
            self._snap_rows_np = got
        return got

    def bloom_segments(self, name: str) -> npt.NDArray[np.bool_]:
        """Per segment of the view: False where the index snapshot shows that :meth:`bloom_dir`
        finds no bitset of column ``name`` (cached; segments planned from their merge index
        are True: nothing of theirs is loaded here)."""
        got = self._bloom_segs.get(name)
        if got is None:
            snap = self.snapshot
            rows = self._snap_rows_array()
            got = np.ones(self.size, dtype=bool)  # merge-index segments: True
            every = self.uncovered == 0  # (every segment a snapshot row: no gather and scatter)
            mine: Any = slice(None) if every else np.flatnonzero(rows >= 0)
            if snap is not None and (every or len(mine)):
                try:
                    got[mine] = snap.bloom_rows(rows[mine], name)
                except CorruptIndexError:
                    pass  # a damaged section: every segment is asked (bloom_dir falls back)
            self._bloom_segs[name] = got
        return got

    def bloom_dir(self, i: int, name: str) -> tuple[dict[str, Any], Any] | None:
        """Segment ``i``'s bloom directory entry of column ``name`` and a bitset reader.

        From the snapshot (no row-group arrays are built), else from the loaded index.
        """
        row = self._snap_row.get(i)
        if row is not None and self.snapshot is not None and not self.snapshot.damaged:
            try:
                if (i, name) not in self._bloom_dirs:
                    self._bloom_dirs[(i, name)] = self.snapshot.bloom_dir(row, name)
            except CorruptIndexError:
                row = None  # a damaged section: from the merge index below
            else:
                d = self._bloom_dirs[(i, name)]
                source = None if d is None else self.snapshot.bloom_source(row)
                if d is None or source is None:
                    return None
                return d, source
        item = self._loaded(i)  # not a snapshot row, or its snapshot is damaged
        if not item.arrays.has_column(name):
            return None
        d = bloom_directory(item.arrays).get(name)
        if d is None:
            return None
        col = item.arrays.column(name)
        offsets = col.bloom_offset

        def read(off: int, ln: int, arrays: IndexArrays = item.arrays) -> bytes | None:
            rg = int(np.flatnonzero(offsets == off)[0])
            return arrays.bloom_bitset(rg, name)

        return d, read


def readable_segments(snapshot: TableStatusSnapshot) -> ReadableEntries:
    """Readable segments of one tablestatus snapshot, in segment order (an entry is built
    when it is used: a plan builds those of the segments it keeps)."""
    return snapshot.readable_segments()


def _lag_limit(table: Table) -> int:
    return table.conf.get_int("carbon.index.snapshot.max.lag")


def table_index(table: Table, entries: Sequence[LoadEntry]) -> TableIndex:
    """The (cached) view over ``entries``, read-only: a lagging, missing or damaged snapshot
    is planned around (the segments it does not cover from their merge indexes), never
    rewritten here (:func:`refresh_if_lagging` is the writers' step)."""
    cache = driver_cache()
    cache.capacity = max(1, conf_int(table, "carbon.driver.index.cache.size.mb")) << 20
    root = table.paths.root
    key = (root, entries_key(entries))
    cached = cache.get_view(key)
    if cached is not None and not (cached.snapshot is not None and cached.snapshot.damaged):
        return cached
    before = cache.evictions
    snapshot, _ = read_snapshot(table) if entries else (None, False)
    view = TableIndex(table, entries, snapshot)
    cache.put_view(key, view, evictions_before=before)
    return view


def _lags(snapshot: Snapshot, entries: Sequence[LoadEntry], limit: int) -> bool:
    """Whether a view over ``entries`` would leave more than ``limit`` segments uncovered by
    ``snapshot`` or find a row count that disagrees (what TableIndex finds, without reading
    the uncovered segments' merge indexes or building an entry)."""
    size = snapshot.size
    if size <= len(entries) and snapshot_holds(snapshot, first_keys(key_bytes_of(entries), size)):
        head = (entries.row_counts[:size] if isinstance(entries, ReadableEntries)
                else np.asarray([e.row_count or 0 for e in entries[:size]], dtype=np.int64))
        if bool(((head != 0) & (snapshot.bounds.num_rows != head)).any()):
            return True
        return len(entries) - size > limit
    names, files = names_files_of(entries)
    counts = (entries.row_counts.tolist() if isinstance(entries, ReadableEntries)
              else [e.row_count for e in entries])
    snap_counts = snapshot.bounds.num_rows.tolist()
    get = snapshot.rows.get
    uncovered = 0
    for pair, count in zip(zip(names, files, strict=True), counts, strict=True):
        row = get(pair)
        if row is None:
            uncovered += 1
        elif count and snap_counts[row] != count:
            return True
    return uncovered > limit


def refresh_if_lagging(table: Table) -> str | None:
    """The writers' step after a commit that changes the readable segments: write a new
    snapshot when the current one lags by more than ``carbon.index.snapshot.max.lag``
    readable segments, or is damaged, of another format version or disagrees with the
    tablestatus. Best effort: it never raises for an I/O, Arrow or index problem and gives
    up at once when another process holds the snapshot lock (only speed is lost; the next
    writer retries). Planning never calls it.

    Returns:
        The new snapshot's file name, or None when none was written.
    """
    try:
        entries = readable_segments(table.status.read())
        if not entries:
            return None
        snapshot, refused = read_snapshot(table)
        limit = _lag_limit(table)
        if not refused and (len(entries) <= limit if snapshot is None
                            else not _lags(snapshot, entries, limit)):
            return None  # the common case, decided from names and row counts alone
        view = TableIndex(table, entries, snapshot)
        if not (view.uncovered > limit or refused or view.disagrees):
            return None
        lock = table.locks.lock(SNAPSHOT_LOCK)
        lock.acquire(timeout=0)
    except (TimeoutError, OSError, pa.ArrowException, CarbonStoreError):
        return None  # another process is writing one, or the store is read-only for us
    try:
        return write_snapshot(table, view)
    except (OSError, pa.ArrowException, CarbonStoreError):
        COUNTERS["snapshot_errors"] += 1  # only speed is lost; the next writer retries
        return None
    finally:
        lock.release()


def refresh_index_snapshot(table: Table) -> str | None:
    """Write a new index snapshot covering every readable segment (atomic, under a lock).

    Call it after a commit that changes the readable set (load, compaction, delete). The
    merge indexes of segments the previous snapshot covers are not re-read.

    Returns:
        The new snapshot's file name, or None when the table has no readable segment.
    """
    with table.locks.hold(SNAPSHOT_LOCK):
        entries = readable_segments(table.status.read())
        if not entries:
            return None
        return write_snapshot(table, SnapshotSource(table, entries, read_snapshot(table)[0]))
