"""The driver index cache: least-recently-used, in one byte budget per process.

:class:`DriverIndexCache` holds loaded segment indexes (segment_index.py) in an LRU bounded
by ``carbon.driver.index.cache.size.mb`` (bytes estimated from the arrays; the tables'
decoded index snapshots, table_index.py, count in the same budget), keyed by (table folder,
segment id, merge file name), and the last table views planned with. The readable set
always comes from a fresh tablestatus snapshot, so a new load, a compaction or a delete is
seen at once; a rewritten segment has a new merge file name and so a new key. Bloom bitsets
read for = / IN probes are kept in their own LRU within a quarter of the budget, and so are
the packed tables of a column's bitsets over a view's segments (the segment-level probe).

I/O is counted in :data:`COUNTERS` so tests and benchmarks can assert how many files a
plan opened and how much it decoded: ``merge_index_reads``, ``snapshot_reads``,
``snapshot_errors``, ``snapshot_writes``, ``bloom_reads`` (reads of bloom bitsets: one per
bitset, or one per segment's contiguous bitsets of a column), ``bloom_bitsets`` (bitsets
read and verified), ``header_decodes`` (snapshot
segments whose row-group and page arrays were handed to the planner) and
``snapshot_array_decodes`` (table-level snapshot arrays decoded: a constant number per
filter, whatever the number of segments) and ``snapshot_part_decodes`` (the few values of a
large chunk a plan keeps, decoded alone: Snapshot.chunk_ranges).
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from carbonstore.indexfiles.indexfile import read_bitset, read_bitsets
from carbonstore.indexfiles.snapshot import Snapshot
from carbonstore.store.fs import AnyFS
from carbonstore.store.tablestatus import forget_decoded

__all__ = ["COUNTERS", "BitsetReader", "DriverIndexCache", "bloom_source", "clear_cache", "driver_cache",
           "keep_packed", "latest_packed", "open_bloom_pack", "packed_bitsets", "view_bloom_pack"]

#: I/O counters of this process (see the module docstring).
COUNTERS: Counter[str] = Counter()


class _BloomCache:
    """Bitsets read for = / IN probes (and packed bitset tables, see :func:`keep_packed`),
    LRU within a quarter of the index cache budget."""

    def __init__(self) -> None:
        self.items: OrderedDict[tuple[Any, ...], tuple[Any, int]] = OrderedDict()
        self.used = 0

    def get(self, key: tuple[Any, ...]) -> Any:
        got = self.items.get(key)
        if got is None:
            return None
        self.items.move_to_end(key)
        return got[0]

    def put(self, key: tuple[Any, ...], data: Any, budget: int, size: int | None = None) -> None:
        size = len(data) if size is None else size
        old = self.items.pop(key, None)
        if old is not None:
            self.used -= old[1]
        self.items[key] = (data, size)
        self.used += size
        while self.used > budget and len(self.items) > 1:
            _, (_, dropped) = self.items.popitem(last=False)
            self.used -= dropped

    def drop(self, key: tuple[Any, ...]) -> None:
        old = self.items.pop(key, None)
        if old is not None:
            self.used -= old[1]

    def clear(self) -> None:
        self.items.clear()
        self.used = 0


_BLOOMS = _BloomCache()


class BitsetReader:
    """Reads the bloom bitsets of one index file's bloom region (at ``base``), verified.

    Called as ``reader(offset, length)`` (an ``arrays.BloomSource``): one bitset, through
    the bitset cache. :meth:`block` reads several contiguous bitsets in one read.
    """

    __slots__ = ("base", "fs", "path")

    def __init__(self, fs: AnyFS, path: str, base: int) -> None:
        self.fs, self.path, self.base = fs, path, base

    def __call__(self, off: int, ln: int) -> bytes:
        key = (self.path, self.base + off, ln)
        cached = _BLOOMS.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        COUNTERS["bloom_reads"] += 1
        COUNTERS["bloom_bitsets"] += 1
        data = read_bitset(self.fs, self.path, self.base + off, ln)  # verified against its checksum
        _BLOOMS.put(key, data, _CACHE.capacity // 4)
        return data

    def remember(self, off: int, ln: int, data: Any) -> None:
        """Keep the bitset at ``off`` (``data``: its bytes, read and verified by
        :meth:`block`) for later calls."""
        key = (self.path, self.base + off, ln)
        if _BLOOMS.get(key) is None:
            _BLOOMS.put(key, bytes(data), _CACHE.capacity // 4)

    def block(self, offsets: Sequence[int], lengths: Sequence[int],
              into: memoryview | None = None) -> tuple[memoryview, int]:
        """The bitsets at ``offsets`` (one contiguous range of the region) in one read (into
        ``into`` when given), each verified against its checksum: the bytes from the first
        offset, and that offset (indexfile.read_bitsets)."""
        COUNTERS["bloom_reads"] += 1
        COUNTERS["bloom_bitsets"] += len(offsets)
        return read_bitsets(self.fs, self.path, self.base, offsets, lengths, into)


def bloom_source(fs: AnyFS, path: str, base: int) -> BitsetReader:
    """The bitset reader of the bloom region at ``base`` of index file ``path``."""
    return BitsetReader(fs, path, base)


# Packed bitset tables (pruning/segment_blooms.py) of a table view and column, counted in
# the bitset budget. Keyed by a number given once to each view object (never reused); a
# view's tables are dropped when the view is.
_VIEW_TOKENS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_NEXT_TOKEN = itertools.count()


def _token(view: Any) -> int:
    with _CACHE.lock:
        got = _VIEW_TOKENS.get(view)
        if got is None:
            got = _VIEW_TOKENS[view] = next(_NEXT_TOKEN)
            weakref.finalize(view, _forget_view, got)  # its tables go with it
        return got


def _forget_view(token: int) -> None:
    with _CACHE.lock:
        for key in [k for k in _BLOOMS.items if k[0] == "packed" and k[1] == token]:
            _BLOOMS.drop(key)


def packed_bitsets(view: Any, name: str) -> Any:
    """The packed bitset table kept for ``view`` and column ``name`` (see :func:`keep_packed`)."""
    with _CACHE.lock:
        return _BLOOMS.get(("packed", _token(view), name))


# (table folder, column) -> token of the view whose packed table was kept last.
_LATEST: dict[tuple[str, str], int] = {}


def latest_packed(view: Any, name: str) -> Any:
    """The packed table of column ``name`` kept last for another view of ``view``'s table
    (still in the budget), or None: a new view copies the bitsets it read."""
    with _CACHE.lock:
        token = _LATEST.get((getattr(view, "root", ""), name))
        return None if token is None else _BLOOMS.get(("packed", token, name))


def keep_packed(view: Any, name: str, packed: Any, nbytes: int) -> bool:
    """Keep (or re-count, after it grew) the packed bitset table of ``view`` and column
    ``name``: ``nbytes`` count in the bitset budget. One larger than the whole budget is
    not kept (False): it serves the plan that built it only."""
    budget = _CACHE.capacity // 4
    key = ("packed", _token(view), name)
    with _CACHE.lock:
        if nbytes > budget:
            _BLOOMS.drop(key)
            return False
        _BLOOMS.put(key, packed, budget, nbytes)
        _LATEST[(getattr(view, "root", ""), name)] = key[1]
        return True


# Opened bloom packs (indexfiles/bloom_pack.py) by path, and the pack each view probes with
# (and where its segments are in it). A pack maps its file: only its directory and the
# chunks probes verified are held, so packs do not count in the budget; a few are kept.
_PACKS: OrderedDict[str, Any] = OrderedDict()
_VIEW_PACKS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def open_bloom_pack(path: str, opener: Callable[[], Any]) -> Any:
    """The pack at ``path``, opened by ``opener`` the first time (it raises on damage: not kept)."""
    with _CACHE.lock:
        got = _PACKS.get(path)
        if got is not None:
            _PACKS.move_to_end(path)
            return got
    got = opener()
    with _CACHE.lock:
        _PACKS[path] = got
        while len(_PACKS) > 4:
            _PACKS.popitem(last=False)
    return got


def view_bloom_pack(view: Any, find: Callable[[], Any]) -> Any:
    """What ``find`` returned for ``view`` (the pack it probes with, or None), once per view."""
    with _CACHE.lock:
        if view in _VIEW_PACKS:
            return _VIEW_PACKS[view]
    got = find()
    with _CACHE.lock:
        _VIEW_PACKS[view] = got
    return got


# ---- the LRU ----------------------------------------------------------------------------------
class DriverIndexCache:
    """Loaded segment indexes, least recently used dropped first beyond ``capacity`` bytes."""

    def __init__(self, capacity: int = 512 << 20) -> None:
        self.capacity = capacity
        self.used = 0
        # segment_index.SegmentIndex and table_index.TableIndex: named, not imported (they
        # use this cache; the cache reads only a segment index's ``nbytes``)
        self._items: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
        self._views: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        # Table folder -> (its index snapshot, the bytes counted for it in ``used``).
        self._snapshots: OrderedDict[str, tuple[Snapshot, int]] = OrderedDict()
        self.evictions = 0  # entries dropped over budget, ever
        self.lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple[str, str, str]) -> Any:
        """The cached SegmentIndex under ``key`` (most recently used now), or None."""
        with self.lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: tuple[str, str, str], item: Any) -> None:
        with self.lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.used -= old.nbytes
            self._items[key] = item
            self.used += item.nbytes
            self._evict(keep_items=1)

    def get_view(self, key: tuple[Any, ...]) -> Any:
        """The cached table view under ``key`` (most recently used now), or None."""
        with self.lock:
            view = self._views.get(key)
            if view is not None:
                self._views.move_to_end(key)
            return view

    def put_view(self, key: tuple[Any, ...], view: Any, *, evictions_before: int) -> None:
        """Keep ``view`` unless entries were evicted since ``evictions_before`` (a view built
        over the budget is not worth keeping); at most 16 views."""
        with self.lock:
            if self.evictions == evictions_before:  # built within the budget: worth keeping
                self._views[key] = view
                while len(self._views) > 16:
                    self._views.popitem(last=False)

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
        _LATEST.clear()
        _PACKS.clear()
        _VIEW_PACKS.clear()
        forget_decoded()


_CACHE = DriverIndexCache()


def driver_cache() -> DriverIndexCache:
    """The process-wide driver index cache."""
    return _CACHE


def clear_cache() -> None:
    """Forget every cached index, view and snapshot of this process."""
    _CACHE.clear()
