"""Driver index cache and the table-level index snapshot.

Three layers keep driver-side planning cheap:

1. :class:`SegmentBounds` - per segment and column the min of its row-group minimums, the
   max of its maximums and the summed null / NaN counts, computed once when a segment index
   is loaded. Whole segments drop with one vectorised comparison over all segments.
2. :class:`DriverIndexCache` - loaded segment indexes in an LRU bounded by
   ``carbon.driver.index.cache.size.mb`` (bytes estimated from the arrays; the tables'
   decoded snapshots count in the same budget), keyed by
   (table folder, segment id, merge file name). The readable set always comes from a fresh
   tablestatus snapshot, so a new load, a compaction or a delete is seen at once; a
   rewritten segment has a new merge file name and so a new key.
3. The table-level index snapshot (like a Delta checkpoint) under
   ``table.paths.index_snapshot_dir``: ONE Arrow IPC file holding, for every readable
   segment it covers, its segment bounds and its whole index column-oriented (all
   min/max/count arrays of row groups and pages, concatenated over the segments with
   segment offsets - see snapshot.py; NOT the bloom bitsets: they stay in the merge file
   and are read lazily for = / IN candidates only). A fresh process reads the tablestatus,
   the newest snapshot and the merge indexes of segments committed since, and decodes each
   array a filter touches once for all segments. :func:`refresh_index_snapshot` rewrites it
   (atomically, under a lock); planning also refreshes it lazily when it lags by more than
   ``carbon.index.snapshot.max.lag`` segments. A snapshot of another format version, or a
   damaged one, is ignored (planning reads the merge indexes) and rewritten.

I/O is counted in :data:`COUNTERS` so tests and benchmarks can assert how many files a
plan opened and how much it decoded: ``merge_index_reads``, ``snapshot_reads``,
``snapshot_errors``, ``snapshot_writes``, ``bloom_reads``, ``header_decodes`` (snapshot
segments whose row-group and page arrays were handed to the planner) and
``snapshot_array_decodes`` (table-level snapshot arrays decoded: a constant number per
filter, whatever the number of segments).
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.fs as pafs

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.arrays import BloomSource, IndexArrays, load_arrays
from carbonstore.indexfiles.concat import merge_runs
from carbonstore.indexfiles.indexfile import REBUILD_HINT, load_indexes, read_bitset, read_index
from carbonstore.indexfiles.segment_bounds import ColumnBounds, SegmentBounds
from carbonstore.indexfiles.snapshot import (
    DESC_FIELDS,
    SNAPSHOT_VERSION,
    Snapshot,
    SnapshotArrays,
    decode_snapshot,
    encode_snapshot,
    index_rows,
)
from carbonstore.pruning.bounds import segment_bounds
from carbonstore.store.entries import check_plain_file_name
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import (
    LoadEntry,
    TableStatusSnapshot,
    forget_decoded,
    now_ms,
    segment_sort_key,
)

__all__ = [
    "COUNTERS",
    "SNAPSHOT_VERSION",
    "ColumnBounds",
    "DriverIndexCache",
    "SegmentBounds",
    "SegmentIndex",
    "TableIndex",
    "bloom_directory",
    "clear_cache",
    "readable_segments",
    "driver_cache",
    "refresh_index_snapshot",
    "segment_bounds",
    "table_index",
]

#: I/O counters of this process (see the module docstring).
COUNTERS: Counter[str] = Counter()

SNAPSHOT_SUFFIX = ".carbonsnap"
SNAPSHOT_LOCK = "index_snapshot.lock"
# ---- one segment's index --------------------------------------------------------------------


class _BloomCache:
    """Bitsets read for = / IN probes, LRU within a quarter of the index cache budget."""

    def __init__(self) -> None:
        self.items: OrderedDict[tuple[str, int, int], bytes] = OrderedDict()
        self.used = 0

    def get(self, key: tuple[str, int, int]) -> bytes | None:
        data = self.items.get(key)
        if data is not None:
            self.items.move_to_end(key)
        return data

    def put(self, key: tuple[str, int, int], data: bytes, budget: int) -> None:
        if key not in self.items:
            self.items[key] = data
            self.used += len(data)
        while self.used > budget and len(self.items) > 1:
            _, old = self.items.popitem(last=False)
            self.used -= len(old)

    def clear(self) -> None:
        self.items.clear()
        self.used = 0


_BLOOMS = _BloomCache()


def _bloom_source(fs: pafs.FileSystem, path: str, base: int) -> Any:
    def read(off: int, ln: int) -> bytes:
        key = (path, base + off, ln)
        cached = _BLOOMS.get(key)
        if cached is not None:
            return cached
        data = _read_bloom(off, ln)
        _BLOOMS.put(key, data, _CACHE.capacity // 4)
        return data

    def _read_bloom(off: int, ln: int) -> bytes:
        COUNTERS["bloom_reads"] += 1
        return read_bitset(fs, path, base + off, ln)  # verified against its checksum

    return read


def _estimate_bytes(arrays: IndexArrays, header_len: int) -> int:
    """Rough resident size: the header bytes the arrays view plus decoded min/max values."""
    per_rg = 40 + 64 * len(arrays.columns)
    return 1024 + 2 * header_len + per_rg * arrays.num_row_groups


def bloom_directory(arrays: IndexArrays) -> dict[str, dict[str, Any]]:
    """Per bloom column: what hashing a literal needs, and each row group's bitset location.

    Kept in the index snapshot so a fresh process can drop whole segments on their blooms
    (every row group's bitset excludes the value) without decoding their index headers.
    """
    out: dict[str, dict[str, Any]] = {}
    for c in arrays.columns:
        if not len(c.bloom_offset) or not bool((c.bloom_offset >= 0).any()):
            continue
        d = c.desc
        out[c.name] = {
            "kind": c.kind, "column_id": d.column_id, "physical_type": d.physical_type,
            "type_length": d.type_length, "logical_type": d.logical_type, "unit": d.unit,
            "scale": d.scale, "nested": d.nested,
            "offset": c.bloom_offset.tolist(), "length": c.bloom_length.tolist(),
        }
    return out


@dataclass(slots=True, kw_only=True)
class SegmentIndex:
    """A segment's index: arrays (blooms lazy) and its bounds."""

    segment_id: str
    merge_name: str
    arrays: IndexArrays
    bounds: SegmentBounds
    bloom_base: int
    nbytes: int


def _merge_index_names(table: Table, load_name: str, segment_file: str | None) -> list[str]:
    sfs = table.store.sfs
    seg_dir = table.paths.segment_dir(load_name)
    if segment_file:
        return [f"{seg_dir}/{check_plain_file_name(segment_file)}"]  # never leaves the folder
    names = sorted(i.base_name for i in sfs.list_dir(seg_dir) if i.is_file)
    merged = [n for n in names if n.endswith(".carbonindexmerge")]
    picked = merged[-1:] or [n for n in names if n.endswith(".carbonindex")]
    if not picked:
        raise CorruptIndexError(
            f"segment {load_name} of {table.name} has no index file; rebuild it with "
            f"'carbonstore index rebuild {table.name} --segments {load_name}'"
        )
    return [f"{seg_dir}/{n}" for n in picked]


def _check_accounts_for(arrays: IndexArrays, entry: LoadEntry, paths: Sequence[str]) -> None:
    """The index must describe exactly the segment's rows: its files' row counts, its row
    groups' row counts and the tablestatus entry agree (a checksum proves a file whole, not
    that it is this segment's - e.g. another segment's index copied over it)."""
    owner = arrays.header.segment_id or ""
    if owner and owner != entry.load_name:
        raise CorruptIndexError(
            f"{' '.join(paths)}: holds the index of segment {owner}, not of segment "
            f"{entry.load_name} (a file of another segment was put in its place)"
        )
    file_rows = sum(int(f.num_rows or 0) for f in arrays.files)
    rg_rows = int(arrays.rg_num_rows.sum()) if arrays.num_row_groups else 0
    if file_rows != rg_rows or (entry.row_count and file_rows != entry.row_count):
        raise CorruptIndexError(
            f"{' '.join(paths)}: the index describes {file_rows} rows in its files and {rg_rows} "
            f"in its row groups, but tablestatus records {entry.row_count} for segment "
            f"{entry.load_name} (an index of other data)"
        )


def _written_names(table: Table, entry: LoadEntry) -> dict[str, str]:
    """Column id -> the name of that column in the segment's files (its schema version)."""
    from carbonstore.store.evolution import written_schema

    return {c.column_id: c.name for c in written_schema(table, entry).columns}


def _load_segment(table: Table, entry: LoadEntry) -> SegmentIndex:
    fs = table.store.sfs.fs
    paths = _merge_index_names(table, entry.load_name, entry.segment_file)
    COUNTERS["merge_index_reads"] += len(paths)
    try:
        if len(paths) == 1:
            loaded = read_index(fs, paths[0])
            arrays = load_arrays(loaded.header, _bloom_source(fs, paths[0], loaded.bloom_region_offset))
            base, hlen = loaded.bloom_region_offset, loaded.bloom_region_offset
        else:  # a segment without a merge index: its task indexes merged in memory
            arrays = load_indexes(fs, paths)
            base, hlen = -1, 64 * 1024 * len(paths)
        _check_accounts_for(arrays, entry, paths)
    except CorruptIndexError as err:
        msg = str(err).removesuffix(REBUILD_HINT)
        if not any(p.rsplit("/", 1)[-1] in msg for p in paths):
            msg = f"{' '.join(paths)}: {msg}"
        raise CorruptIndexError(
            f"{msg}; the index of segment {entry.load_name} of {table.name} is lost or damaged "
            f"(nothing was planned from it): rebuild it from the data files with "
            f"'carbonstore index rebuild {table.name} --segments {entry.load_name}'"
        ) from err
    return SegmentIndex(
        segment_id=entry.load_name, merge_name=entry.segment_file or "", arrays=arrays,
        bounds=segment_bounds(arrays, table.schema, names=_written_names(table, entry)),
        bloom_base=base,
        nbytes=_estimate_bytes(arrays, hlen),
    )


# ---- the LRU ----------------------------------------------------------------------------------
class DriverIndexCache:
    """Loaded segment indexes, least recently used dropped first beyond ``capacity`` bytes."""

    def __init__(self, capacity: int = 512 << 20) -> None:
        self.capacity = capacity
        self.used = 0
        self._items: OrderedDict[tuple[str, str, str], SegmentIndex] = OrderedDict()
        self._views: OrderedDict[tuple[Any, ...], TableIndex] = OrderedDict()
        # Table folder -> (its index snapshot, the bytes counted for it in ``used``).
        self._snapshots: OrderedDict[str, tuple[Snapshot, int]] = OrderedDict()
        self.evictions = 0  # entries dropped over budget, ever
        self.lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple[str, str, str]) -> SegmentIndex | None:
        with self.lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: tuple[str, str, str], item: SegmentIndex) -> None:
        with self.lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.used -= old.nbytes
            self._items[key] = item
            self.used += item.nbytes
            self._evict(keep_items=1)

    def get_snapshot(self, root: str, name: str) -> Snapshot | None:
        """The cached snapshot ``name`` of the table at ``root``; its bytes are counted again
        (flat arrays decoded since grow it), which may evict other entries."""
        with self.lock:
            got = self._snapshots.get(root)
            if got is None or got[0].name != name:
                return None
            self.put_snapshot(root, got[0])
            return got[0]

    def put_snapshot(self, root: str, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` as the table's, counted in the same budget as segment indexes:
        beyond it, segment indexes go first (least recently used), then other tables'
        snapshots; the table's own snapshot stays."""
        with self.lock:
            old = self._snapshots.pop(root, None)
            if old is not None:
                self.used -= old[1]
            size = snapshot.nbytes
            self._snapshots[root] = (snapshot, size)
            self.used += size
            self._evict(keep_items=0)

    def _evict(self, *, keep_items: int) -> None:
        """Drop least recently used entries while over capacity: segment indexes (all but the
        newest ``keep_items``), then the snapshots of tables other than the newest one.

        The cached table views go too when anything does: a view holds the arrays it
        planned with (segment indexes, a snapshot), which must not outlive the budget; and
        a view built or planned while entries were dropped is not kept (``evictions``).
        """
        dropped_any = False
        while self.used > self.capacity:
            if len(self._items) > keep_items:
                _, dropped = self._items.popitem(last=False)
                self.used -= dropped.nbytes
            elif len(self._snapshots) > 1:
                _, (_, size) = self._snapshots.popitem(last=False)
                self.used -= size
            else:
                break
            dropped_any = True
            self.evictions += 1
        if dropped_any:
            self._views.clear()

    def clear(self) -> None:
        with self.lock:
            self._items.clear()
            self._views.clear()
            self._snapshots.clear()
            self.used = 0
        _BLOOMS.clear()
        forget_decoded()


_CACHE = DriverIndexCache()


def driver_cache() -> DriverIndexCache:
    """The process-wide driver index cache."""
    return _CACHE


def clear_cache() -> None:
    """Forget every cached index, view and snapshot of this process."""
    _CACHE.clear()


# ---- the table-level snapshot ---------------------------------------------------------------
def _snapshot_names(table: Table) -> list[str]:
    infos = table.store.sfs.list_dir(table.paths.index_snapshot_dir)
    return sorted(i.base_name for i in infos if i.is_file and i.base_name.endswith(SNAPSHOT_SUFFIX))


def _snapshot_blooms(table: Table) -> Any:
    fs = table.store.sfs.fs

    def source(segment_id: str, merge: str, base: int) -> BloomSource:
        return _bloom_source(fs, _merge_index_names(table, segment_id, merge)[0], base)

    return source


def _read_snapshot(table: Table) -> tuple[Snapshot | None, bool]:
    """The table's newest snapshot, and whether a snapshot file was there but refused."""
    names = _snapshot_names(table)
    if not names:
        return None, False
    name = names[-1]
    cached = _CACHE.get_snapshot(table.paths.root, name)
    if cached is not None:
        return cached, False
    COUNTERS["snapshot_reads"] += 1
    path = f"{table.paths.index_snapshot_dir}/{name}"
    try:
        data = table.store.sfs.read_bytes(path)
        snap = decode_snapshot(name, data, bloom_source=_snapshot_blooms(table), counters=COUNTERS)
    except (OSError, pa.ArrowException, KeyError, ValueError, TypeError, CorruptIndexError):
        # A damaged (or older) snapshot only costs speed: plan from the merge indexes
        # instead, and write a new one.
        COUNTERS["snapshot_errors"] += 1
        return None, True
    _CACHE.put_snapshot(table.paths.root, snap)
    return snap, False


def _write_snapshot(table: Table, view: TableIndex) -> str:
    """Write a snapshot covering ``view``'s segments: rows of the current one are copied,
    the others encoded from their (loaded) merge indexes."""
    sfs = table.store.sfs
    folder = table.paths.index_snapshot_dir
    pieces: list[pa.Table] = []
    slots: dict[str, dict[str, Any]] = {}
    snap = view.snapshot
    if snap is not None:
        slots.update({k: {f: getattr(d, f) for f in DESC_FIELDS} for k, d in snap.slots.items()})
    copied: list[int] = []
    loaded: list[tuple[str, str, int, Any]] = []

    def flush() -> None:
        if copied and snap is not None:
            pieces.append(snap.rows_table(np.array(copied, dtype=np.intp)))
            copied.clear()
        if loaded:
            rows, used = index_rows(loaded)
            pieces.append(rows)
            slots.update(used)
            loaded.clear()

    for i, e in enumerate(view.entries):
        row = view.snapshot_row(i)
        if row is not None:
            if loaded:
                flush()
            copied.append(row)
        else:
            if copied:
                flush()
            item = view.segment(i)
            loaded.append((e.load_name, e.segment_file or "", item.bloom_base, item.arrays))
    flush()
    data = encode_snapshot(pieces, view.bounds, slots)
    sfs.makedirs(folder)
    covered = ",".join(f"{e.load_name}:{e.segment_file or ''}" for e in view.entries)
    digest = hashlib.sha1(covered.encode()).hexdigest()[:12]
    name = f"snapshot_{now_ms():015d}_{len(view.entries)}_{digest}{SNAPSHOT_SUFFIX}"
    sfs.write_atomic(f"{folder}/{name}", data)
    COUNTERS["snapshot_writes"] += 1
    for old in _snapshot_names(table)[:-2]:  # keep the previous one for readers mid-switch
        try:
            sfs.delete_file(f"{folder}/{old}")
        except OSError:
            pass
    return name


# ---- a table's view over its readable segments ----------------------------------------------
class TableIndex:
    """The indexes of an ordered list of segments: bounds for all, arrays on demand.

    A segment the snapshot covers is planned from the snapshot's table-level arrays; the
    others (committed since) from their merge indexes, loaded through the LRU.
    """

    def __init__(self, table: Table, entries: Sequence[LoadEntry], snapshot: Snapshot | None) -> None:
        self.table = table
        self.entries = list(entries)
        self.root = table.paths.root
        self.snapshot = snapshot
        self._snap_row: dict[int, int] = {}
        pieces: list[SegmentBounds] = []
        snap_rows: list[int] = []
        order: list[int] = []  # >= 0: index into pieces, < 0: -1 - index into snap_rows
        self.disagrees = False  # a snapshot row that does not match its entry was ignored
        snap_rows_count = [] if snapshot is None else snapshot.bounds.num_rows.tolist()
        for i, e in enumerate(self.entries):
            row = None if snapshot is None else snapshot.rows.get((e.load_name, e.segment_file or ""))
            if row is not None and e.row_count and snap_rows_count[row] != e.row_count:
                # Not this segment's index (a snapshot is verified whole, not against the
                # tablestatus): plan the segment from its merge index, and write a new one.
                row = None
                self.disagrees = True
            if row is not None:
                self._snap_row[i] = row
                order.append(-1 - len(snap_rows))
                snap_rows.append(row)
                continue
            key = (self.root, e.load_name, e.segment_file or "")
            item = _CACHE.get(key)
            if item is None:
                item = _load_segment(table, e)
                _CACHE.put(key, item)
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
        self._bloom_dirs: dict[tuple[int, str], dict[str, Any] | None] = {}
        self.evictions_seen = _CACHE.evictions
        self._units: OrderedDict[tuple[int, ...], tuple[list[Any], list[npt.NDArray[np.intp]]]] = OrderedDict()

    @property
    def size(self) -> int:
        return len(self.entries)

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
                arrays=SnapshotArrays(snap, np.array([row], dtype=np.intp)),  # type: ignore[arg-type]
                bounds=snap.bounds.take(np.array([row], dtype=np.intp)),
                bloom_base=int(snap.bloom_base[row]), nbytes=0,
            )
        key = (self.root, e.load_name, e.segment_file or "")
        item = _CACHE.get(key)
        if item is None:
            item = _load_segment(self.table, e)
            _CACHE.put(key, item)
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
        run: list[int] = []
        run_rows: list[int] = []

        def flush() -> None:
            if run and snap is not None:
                arrays = SnapshotArrays(snap, np.array(run_rows, dtype=np.intp))
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
        got = merge_runs(pieces)
        if _CACHE.evictions != self.evictions_seen:
            return got  # the budget is short: keep nothing the LRU does not count
        if len(self._units) >= 4:
            self._units.popitem(last=False)
        self._units[key] = got
        return got

    def bloom_dir(self, i: int, name: str) -> tuple[dict[str, Any], Any] | None:
        """Segment ``i``'s bloom directory entry of column ``name`` and a bitset reader.

        From the snapshot (no row-group arrays are built), else from the loaded index.
        """
        row = self._snap_row.get(i)
        if row is not None and self.snapshot is not None:
            if (i, name) not in self._bloom_dirs:
                self._bloom_dirs[(i, name)] = self.snapshot.bloom_dir(row, name)
            d = self._bloom_dirs[(i, name)]
            source = None if d is None else self.snapshot.bloom_source(row)
            if d is None or source is None:
                return None
            return d, source
        item = self.segment(i)
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


def readable_segments(snapshot: TableStatusSnapshot) -> list[LoadEntry]:
    """Readable segments of one tablestatus snapshot, in segment order."""
    return sorted(snapshot.readable, key=lambda e: segment_sort_key(e.load_name))


def _lag_limit(table: Table) -> int:
    return table.conf.get_int("carbon.index.snapshot.max.lag")


def table_index(table: Table, entries: Sequence[LoadEntry], *, all_readable: bool = False) -> TableIndex:
    """The (cached) view over ``entries``; refreshes a lagging snapshot when ``all_readable``."""
    _CACHE.capacity = max(1, table.conf.get_int("carbon.driver.index.cache.size.mb")) << 20
    root = table.paths.root
    key = (root, tuple((e.load_name, e.segment_file or "") for e in entries))
    with _CACHE.lock:
        view = _CACHE._views.get(key)
        if view is not None:
            _CACHE._views.move_to_end(key)
            return view
    before = _CACHE.evictions
    snapshot, refused = _read_snapshot(table) if entries else (None, False)
    view = TableIndex(table, entries, snapshot)
    if all_readable and (view.uncovered > _lag_limit(table) or refused or view.disagrees):
        _refresh_best_effort(table, view)
    with _CACHE.lock:
        if _CACHE.evictions == before:  # built within the budget: worth keeping
            _CACHE._views[key] = view
            while len(_CACHE._views) > 16:
                _CACHE._views.popitem(last=False)
    return view


def _refresh_best_effort(table: Table, view: TableIndex) -> None:
    try:
        lock = table.locks.lock(SNAPSHOT_LOCK)
        lock.acquire(timeout=0)
    except (TimeoutError, OSError):
        return  # another process is writing one, or the store is read-only for us
    try:
        _write_snapshot(table, view)
    except (OSError, pa.ArrowException):
        COUNTERS["snapshot_errors"] += 1  # only speed is lost; the next plan retries
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
        view = TableIndex(table, entries, _read_snapshot(table)[0])
        return _write_snapshot(table, view)
