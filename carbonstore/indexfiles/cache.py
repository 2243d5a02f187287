"""Driver index cache and the table-level index snapshot.

Three layers keep driver-side planning cheap:

1. :class:`SegmentBounds` - per segment and column the min of its row-group minimums, the
   max of its maximums and the summed null / NaN counts, computed once when a segment index
   is loaded. Whole segments drop with one vectorised comparison over all segments.
2. :class:`DriverIndexCache` - loaded segment indexes in an LRU bounded by
   ``carbon.driver.index.cache.size.mb`` (bytes estimated from the arrays), keyed by
   (table folder, segment id, merge file name). The readable set always comes from a fresh
   tablestatus snapshot, so a new load, a compaction or a delete is seen at once; a
   rewritten segment has a new merge file name and so a new key.
3. The table-level index snapshot (like a Delta checkpoint) under
   ``table.paths.index_snapshot_dir``: ONE Arrow IPC file holding, for every readable
   segment it covers, its segment bounds and the encoded header of its merge index (all
   min/max/count arrays of row groups and pages, NOT the bloom bitsets: they stay in the
   merge file and are read lazily for = / IN candidates only). A fresh process reads the
   tablestatus, the newest snapshot and the merge indexes of segments committed since.
   :func:`refresh_index_snapshot` rewrites it (atomically, under a lock); planning also
   refreshes it lazily when it lags by more than ``carbon.index.snapshot.max.lag``
   segments.

I/O is counted in :data:`COUNTERS` (``merge_index_reads``, ``snapshot_reads``,
``bloom_reads``, ``snapshot_writes``, ``header_decodes`` of snapshot entries) so tests and benchmarks can assert how many files a
plan opened.
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
import orjson
import pyarrow as pa
import pyarrow.fs as pafs
import xxhash

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles import tio
from carbonstore.indexfiles._gen.carbonindex.ttypes import IndexHeader
from carbonstore.indexfiles.arrays import IndexArrays, load_arrays
from carbonstore.indexfiles.bounds import ColumnBounds, SegmentBounds, segment_bounds
from carbonstore.indexfiles.indexfile import load_indexes, read_index
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry, TableStatusSnapshot, now_ms, segment_sort_key

__all__ = [
    "COUNTERS",
    "ColumnBounds",
    "DriverIndexCache",
    "SegmentBounds",
    "SegmentIndex",
    "TableIndex",
    "bloom_directory",
    "clear_cache",
    "read_status",
    "readable_segments",
    "driver_cache",
    "refresh_index_snapshot",
    "segment_bounds",
    "table_index",
]

#: I/O counters of this process (see the module docstring).
COUNTERS: Counter[str] = Counter()

_NP = npt.NDArray[Any]
SNAPSHOT_VERSION = "2"
SNAPSHOT_SUFFIX = ".carbonsnap"
SNAPSHOT_LOCK = "index_snapshot.lock"
# ---- one segment's index --------------------------------------------------------------------
_REBUILD = "; rebuild the segment's index with 'carbonstore index rebuild TABLE --segments ID'"


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
        try:
            with fs.open_input_file(path) as f:
                data = f.read_at(ln, base + off)
        except OSError as err:
            raise CorruptIndexError(f"{path}: cannot read bloom bitset: {err}{_REBUILD}") from err
        if len(data) != ln:
            raise CorruptIndexError(f"{path}: bloom bitset truncated{_REBUILD}")
        return bytes(data)

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
    """A loaded segment index: arrays (blooms lazy) and its bounds."""

    segment_id: str
    merge_name: str
    arrays: IndexArrays
    bounds: SegmentBounds
    bloom_base: int
    nbytes: int
    header_bytes: bytes | None = None  # kept when it came from a snapshot (re-encoding is slow)

    def encoded_header(self) -> bytes:
        if self.header_bytes is None:
            self.header_bytes = tio.encode(self.arrays.header)
        return self.header_bytes


def _merge_index_names(table: Table, entry: LoadEntry) -> list[str]:
    sfs = table.store.sfs
    seg_dir = table.paths.segment_dir(entry.load_name)
    if entry.segment_file:
        return [f"{seg_dir}/{entry.segment_file}"]
    names = sorted(i.base_name for i in sfs.list_dir(seg_dir) if i.is_file)
    merged = [n for n in names if n.endswith(".carbonindexmerge")]
    picked = merged[-1:] or [n for n in names if n.endswith(".carbonindex")]
    if not picked:
        raise CorruptIndexError(
            f"segment {entry.load_name} of {table.name} has no index file; rebuild it with "
            f"'carbonstore index rebuild {table.name} --segments {entry.load_name}'"
        )
    return [f"{seg_dir}/{n}" for n in picked]


def _load_segment(table: Table, entry: LoadEntry) -> SegmentIndex:
    fs = table.store.sfs.fs
    paths = _merge_index_names(table, entry)
    COUNTERS["merge_index_reads"] += len(paths)
    try:
        if len(paths) == 1:
            loaded = read_index(fs, paths[0])
            arrays = load_arrays(loaded.header, _bloom_source(fs, paths[0], loaded.bloom_region_offset))
            base, hlen = loaded.bloom_region_offset, loaded.bloom_region_offset
        else:  # a segment without a merge index: its task indexes merged in memory
            arrays = load_indexes(fs, paths)
            base, hlen = -1, 64 * 1024 * len(paths)
    except CorruptIndexError as err:
        raise CorruptIndexError(
            f"{err}; the index of segment {entry.load_name} of {table.name} is lost or damaged: "
            f"rebuild it from the data files with "
            f"'carbonstore index rebuild {table.name} --segments {entry.load_name}'"
        ) from err
    return SegmentIndex(
        segment_id=entry.load_name, merge_name=entry.segment_file or "", arrays=arrays,
        bounds=segment_bounds(arrays, table.schema), bloom_base=base,
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
        self._snapshots: dict[str, _Snapshot | None] = {}
        self._status: dict[str, TableStatusSnapshot] = {}
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
            while self.used > self.capacity and len(self._items) > 1:
                _, dropped = self._items.popitem(last=False)
                self.used -= dropped.nbytes

    def clear(self) -> None:
        with self.lock:
            self._items.clear()
            self._views.clear()
            self._snapshots.clear()
            self._status.clear()
            self.used = 0
        _BLOOMS.clear()


_CACHE = DriverIndexCache()


def driver_cache() -> DriverIndexCache:
    """The process-wide driver index cache."""
    return _CACHE


def clear_cache() -> None:
    """Forget every cached index, view and snapshot of this process."""
    _CACHE.clear()


# ---- the table-level snapshot ---------------------------------------------------------------
@dataclass(slots=True, kw_only=True)
class _Snapshot:
    name: str
    rows: dict[tuple[str, str], int]  # (segment id, merge name) -> row
    bounds: SegmentBounds
    headers: pa.Array
    bloom_base: npt.NDArray[np.int64]
    blooms: pa.Array


def _snapshot_names(table: Table) -> list[str]:
    infos = table.store.sfs.list_dir(table.paths.index_snapshot_dir)
    return sorted(i.base_name for i in infos if i.is_file and i.base_name.endswith(SNAPSHOT_SUFFIX))


def _read_snapshot(table: Table) -> _Snapshot | None:
    names = _snapshot_names(table)
    if not names:
        return None
    name = names[-1]
    cached = _CACHE._snapshots.get(table.paths.root)
    if cached is not None and cached.name == name:
        return cached
    COUNTERS["snapshot_reads"] += 1
    path = f"{table.paths.index_snapshot_dir}/{name}"
    try:
        data = table.store.sfs.read_bytes(path)
        t = pa.ipc.open_file(pa.py_buffer(data)).read_all()
        snap = _decode_snapshot(name, t)
    except (OSError, pa.ArrowInvalid, KeyError, ValueError) as err:
        # A broken snapshot only costs speed: plan from the merge indexes instead.
        COUNTERS["snapshot_errors"] += 1
        del err
        return None
    _CACHE._snapshots[table.paths.root] = snap
    return snap


def _decode_snapshot(name: str, t: pa.Table) -> _Snapshot:
    meta = t.schema.metadata or {}
    if meta.get(b"carbonstore.snapshot.version") != SNAPSHOT_VERSION.encode():
        raise ValueError("unsupported snapshot version")
    kinds: dict[str, str] = orjson.loads(meta[b"carbonstore.kinds"])
    segs = t.column("segment").to_pylist()
    merges = t.column("merge").to_pylist()
    cols: dict[str, ColumnBounds] = {}
    for c, kind in kinds.items():
        def arr(suffix: str, c: str = c) -> _NP:
            return t.column(f"{suffix}:{c}").to_numpy(zero_copy_only=False)

        lo, hi = arr("lo"), arr("hi")
        if kind == "BIGINT":
            lo = np.array([None if v is None else int(v) for v in lo], dtype=object)
            hi = np.array([None if v is None else int(v) for v in hi], dtype=object)
        elif kind == "BYTES":
            lo, hi = lo.astype(object), hi.astype(object)
        cols[c] = ColumnBounds(
            kind=kind, lo=lo, hi=hi, lo_ok=arr("lo_ok").astype(bool), hi_ok=arr("hi_ok").astype(bool),
            null_count=arr("nulls").astype(np.int64), nan_count=arr("nans").astype(np.int64),
        )
    bounds = SegmentBounds(
        num_rows=t.column("num_rows").to_numpy().astype(np.int64),
        num_files=t.column("num_files").to_numpy().astype(np.int64),
        num_row_groups=t.column("num_row_groups").to_numpy().astype(np.int64),
        columns=cols,
    )
    return _Snapshot(
        name=name, rows={(s, m): i for i, (s, m) in enumerate(zip(segs, merges, strict=True))},
        bounds=bounds, headers=t.column("header").combine_chunks(),
        bloom_base=t.column("bloom_base").to_numpy().astype(np.int64),
        blooms=t.column("blooms").combine_chunks(),
    )


_ARROW = {"INT64": pa.int64(), "FLOAT64": pa.float64(), "BYTES": pa.binary(), "BIGINT": pa.string()}


def _encode_snapshot(segments: Sequence[SegmentIndex]) -> bytes:
    bounds = SegmentBounds.concat([s.bounds for s in segments])
    data: dict[str, Any] = {
        "segment": pa.array([s.segment_id for s in segments], pa.string()),
        "merge": pa.array([s.merge_name for s in segments], pa.string()),
        "bloom_base": pa.array([s.bloom_base for s in segments], pa.int64()),
        "header": pa.array([s.encoded_header() for s in segments], pa.large_binary()),
        "blooms": pa.array([orjson.dumps(bloom_directory(s.arrays)) for s in segments], pa.binary()),
        "num_rows": pa.array(bounds.num_rows, pa.int64()),
        "num_files": pa.array(bounds.num_files, pa.int64()),
        "num_row_groups": pa.array(bounds.num_row_groups, pa.int64()),
    }
    kinds = {}
    for c, cb in bounds.columns.items():
        kinds[c] = cb.kind
        lo, hi = cb.lo.tolist(), cb.hi.tolist()
        if cb.kind == "BIGINT":
            lo = [None if v is None else str(v) for v in lo]
            hi = [None if v is None else str(v) for v in hi]
        data[f"lo:{c}"] = pa.array(lo, _ARROW[cb.kind])
        data[f"hi:{c}"] = pa.array(hi, _ARROW[cb.kind])
        data[f"lo_ok:{c}"] = pa.array(cb.lo_ok, pa.bool_())
        data[f"hi_ok:{c}"] = pa.array(cb.hi_ok, pa.bool_())
        data[f"nulls:{c}"] = pa.array(cb.null_count, pa.int64())
        data[f"nans:{c}"] = pa.array(cb.nan_count, pa.int64())
    t = pa.table(data).replace_schema_metadata({
        "carbonstore.snapshot.version": SNAPSHOT_VERSION,
        "carbonstore.kinds": orjson.dumps(kinds).decode(),
    })
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue().to_pybytes()


def _write_snapshot(table: Table, segments: Sequence[SegmentIndex]) -> str:
    sfs = table.store.sfs
    folder = table.paths.index_snapshot_dir
    sfs.makedirs(folder)
    covered = ",".join(f"{s.segment_id}:{s.merge_name}" for s in segments)
    digest = hashlib.sha1(covered.encode()).hexdigest()[:12]
    name = f"snapshot_{now_ms():015d}_{len(segments)}_{digest}{SNAPSHOT_SUFFIX}"
    sfs.write_atomic(f"{folder}/{name}", _encode_snapshot(segments))
    COUNTERS["snapshot_writes"] += 1
    for old in _snapshot_names(table)[:-2]:  # keep the previous one for readers mid-switch
        try:
            sfs.delete_file(f"{folder}/{old}")
        except OSError:
            pass
    return name


# ---- a table's view over its readable segments ----------------------------------------------
class TableIndex:
    """The indexes of an ordered list of segments: bounds for all, arrays on demand."""

    def __init__(self, table: Table, entries: Sequence[LoadEntry], snapshot: _Snapshot | None) -> None:
        self.table = table
        self.entries = list(entries)
        self.root = table.paths.root
        self._snapshot = snapshot
        self.loaded: dict[int, SegmentIndex] = {}
        snap_rows: list[int] = []
        pieces: list[SegmentBounds] = []
        order: list[int] = []
        self.uncovered = 0
        for e in self.entries:
            key = (self.root, e.load_name, e.segment_file or "")
            item = _CACHE.get(key)
            row = None if snapshot is None else snapshot.rows.get((e.load_name, e.segment_file or ""))
            if item is None and row is not None:
                order.append(-1 - len(snap_rows))
                snap_rows.append(row)
                continue
            if row is None:
                self.uncovered += 1
            if item is None:
                item = _load_segment(table, e)
                _CACHE.put(key, item)
            self.loaded[len(order)] = item
            order.append(len(pieces))
            pieces.append(item.bounds)
        parts = list(pieces)
        if snap_rows and snapshot is not None:
            parts.append(snapshot.bounds.take(np.array(snap_rows, dtype=np.intp)))
        n_own = len(pieces)
        take = np.array([o if o >= 0 else n_own + (-1 - o) for o in order], dtype=np.intp)
        if not parts:
            self.bounds = SegmentBounds(num_rows=np.zeros(0, np.int64), num_files=np.zeros(0, np.int64),
                                        num_row_groups=np.zeros(0, np.int64))
        else:
            merged = SegmentBounds.concat(parts)
            self.bounds = merged if np.array_equal(take, np.arange(len(take))) else merged.take(take)
        self._snap_row = {i: snap_rows[-1 - o] for i, o in enumerate(order) if o < 0}
        self._bloom_dirs: dict[int, dict[str, Any]] = {}

    @property
    def size(self) -> int:
        return len(self.entries)

    def segment(self, i: int) -> SegmentIndex:
        """Segment ``i``'s loaded index (LRU, else decoded from the snapshot, else its file)."""
        e = self.entries[i]
        key = (self.root, e.load_name, e.segment_file or "")
        item = _CACHE.get(key)
        if item is None:
            row = self._snap_row.get(i)
            if row is not None and self._snapshot is not None:
                item = self._from_snapshot(e, row)
            else:
                item = _load_segment(self.table, e)
            _CACHE.put(key, item)
        self.loaded[i] = item
        return item

    def _from_snapshot(self, e: LoadEntry, row: int) -> SegmentIndex:
        snap = self._snapshot
        assert snap is not None  # noqa: S101 - guarded by the caller
        raw = snap.headers[row].as_py()
        COUNTERS["header_decodes"] += 1
        try:
            header = tio.decode(IndexHeader(), raw)
        except tio.DECODE_ERRORS as err:
            raise CorruptIndexError(f"index snapshot {snap.name}: segment {e.load_name}: {err}") from err
        path = _merge_index_names(self.table, e)[0]
        base = int(snap.bloom_base[row])
        arrays = load_arrays(header, _bloom_source(self.table.store.sfs.fs, path, base) if base >= 0 else None)
        return SegmentIndex(
            segment_id=e.load_name, merge_name=e.segment_file or "", arrays=arrays,
            bounds=snap.bounds.take(np.array([row], dtype=np.intp)), bloom_base=base,
            nbytes=_estimate_bytes(arrays, len(raw)), header_bytes=raw,
        )

    def bloom_dir(self, i: int, name: str) -> tuple[dict[str, Any], Any] | None:
        """Segment ``i``'s bloom directory entry of column ``name`` and a bitset reader.

        From the loaded index when cached, else from the snapshot (no header decoding).
        """
        e = self.entries[i]
        item = _CACHE.get((self.root, e.load_name, e.segment_file or ""))
        row = self._snap_row.get(i)
        if item is None and row is not None and self._snapshot is not None:
            dirs = self._bloom_dirs.get(i)
            if dirs is None:
                dirs = orjson.loads(self._snapshot.blooms[row].as_py())
                self._bloom_dirs[i] = dirs
            d = dirs.get(name)
            base = int(self._snapshot.bloom_base[row])
            if d is None or base < 0:
                return None
            path = _merge_index_names(self.table, e)[0]
            return d, _bloom_source(self.table.store.sfs.fs, path, base)
        if item is None:
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

    def all_segments(self) -> list[SegmentIndex]:
        return [self.segment(i) for i in range(self.size)]


def read_status(table: Table) -> TableStatusSnapshot:
    """A fresh tablestatus snapshot; an unchanged file (same xxh64) is not parsed again."""
    paths = table.paths
    try:
        data = paths.sfs.read_bytes(paths.tablestatus)
    except OSError:
        return table.status.read()  # missing: let TableStatus say what that means
    cached = _CACHE._status.get(paths.root)
    if cached is not None and cached.version == xxhash.xxh64_hexdigest(data):
        return cached
    snap = table.status.read()
    _CACHE._status[paths.root] = snap
    return snap


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
    snapshot = _read_snapshot(table) if entries else None
    view = TableIndex(table, entries, snapshot)
    if all_readable and view.uncovered > _lag_limit(table):
        _refresh_best_effort(table, view)
    with _CACHE.lock:
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
        _write_snapshot(table, view.all_segments())
    except OSError:
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
        view = TableIndex(table, entries, _read_snapshot(table))
        return _write_snapshot(table, view.all_segments())
