"""The versioned tablestatus (DESIGN.md section 3; the format: docs/tablestatus.md).

Every change to a table's segments writes version ``N+1`` of its tablestatus once, with
the store's put-if-absent write (``StoreFS.put_if_absent``), as
``Metadata/tablestatus_log/<tableId>/<N as 20 digits>.json``. A version is never
rewritten. It holds the version, its parent, the operation, time and writer, and the
entries it changes (CarbonData's keys) plus the load names it removes; after every
``CHECKPOINT_INTERVAL``-th version its writer writes an Arrow checkpoint of all entries
(checkpoint_arrow.py), so a reader needs one checkpoint and at most
``CHECKPOINT_INTERVAL - 1`` small files (more when a checkpoint was never written).

Commits are optimistic: read the latest version ``N``, compute the new entries from it,
put ``N+1``; a writer that loses the race re-reads and runs its change again on the
fresh snapshot (where it may find a conflict and raise), a bounded number of times with
jittered backoff. No lock decides anything (a courtesy lock only makes local writers take
turns).

The latest version: ``_latest.json`` in the log folder is a hint, rewritten after
commits; readers start from it (or from the newest version this process knows) and
probe forward until a version does not exist, so a stale hint costs a probe, never a
wrong answer. Versions are gapless: ``N+1`` is only ever written by a writer that read
``N``. Decoded states are cached per process by version, so a warm ``read()`` is a hint
read and one existence probe.

The log folder is named by the table's id (a uuid in its schema), so a writer that
opened a table which was dropped and created again can never commit into the new table:
its folder is gone and the put fails. A table written by the earlier single-file format
(``Metadata/tablestatus``) reads as version 0 and is upgraded by its first write.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from carbonstore.errors import (
    CommitConflictError,
    CorruptMetadataError,
    TableNotFoundError,
    UserError,
    VersionNotFoundError,
)
from carbonstore.store.entries import (
    ALL_STATUSES,
    COMPACTED,
    FAILURE,
    IN_PROGRESS,
    MARKED_FOR_DELETE,
    OVERWRITE_IN_PROGRESS,
    PARTIAL_SUCCESS,
    READABLE_STATUSES,
    RUNNING_STATUSES,
    SUCCESS,
    LoadEntry,
    next_compacted_name,
    now_ms,
    segment_sort_key,
)
from carbonstore.store.entry_view import EntryView
from carbonstore.store.faults import crash_point
from carbonstore.store.locks import LockManager
from carbonstore.store.paths import TablePaths
from carbonstore.store.records import Frozen, replace
from carbonstore.store.status_checkpoints import checkpoint_name, replays_json
from carbonstore.store.status_latest import find_latest, version_path, write_hint
from carbonstore.store.status_leases import LeaseFiles
from carbonstore.store.status_legacy import LegacyStatus, StatusHistory
from carbonstore.store.versions import (
    CHECKPOINT_INTERVAL,
    State,
    StatusChange,
    TableStatusSnapshot,
    VersionInfo,
    VersionRecord,
    corrupt_version,
    decode_header,
    decode_info,
    decode_record,
    encode_record,
    encode_version,
    next_version,
    version_at,
    version_time,
)

__all__ = [
    "ALL_STATUSES",
    "CHECKPOINT_INTERVAL",
    "COMPACTED",
    "FAILURE",
    "IN_PROGRESS",
    "MARKED_FOR_DELETE",
    "OVERWRITE_IN_PROGRESS",
    "PARTIAL_SUCCESS",
    "READABLE_STATUSES",
    "RUNNING_STATUSES",
    "SUCCESS",
    "LoadEntry",
    "StatusChange",
    "TableStatus",
    "TableStatusSnapshot",
    "VersionInfo",
    "next_compacted_name",
    "now_ms",
    "segment_sort_key",
]

_COURTESY_WAIT = 0.5  # seconds a commit waits for the courtesy lock before going ahead

# (log folder, version) -> decoded state; states are immutable, so sharing them is safe.
_STATES: OrderedDict[tuple[str, int], State] = OrderedDict()
_STATES_LIMIT = 64
# log folder -> the newest version this process has seen (a lower bound of the latest).
_NEWEST: dict[str, int] = {}
# (log folder, version) -> a record dropped() decoded, taken by the next read of it.
_RECORDS: dict[tuple[str, int], VersionRecord] = {}
_HEADER_ONLY_BYTES = 16 * 1024  # dropped() of a smaller delta decodes its header only
_cache_lock = threading.Lock()


def forget_decoded() -> None:
    """Drop the decoded versions this process keeps (as if it were a fresh one)."""
    with _cache_lock:
        _STATES.clear()
        _RECORDS.clear()
        _NEWEST.clear()


class TableStatus(Frozen):
    """Reads and commits one table's tablestatus versions."""

    paths: TablePaths
    locks: LockManager
    table_id: str
    pinned: int | None = None  # a table opened as of a version reads only that version
    legacy_schema: bool = False  # its schema predates table ids: it may have no log yet

    # ---- paths -----------------------------------------------------------------------------
    @property
    def log_dir(self) -> str:
        return f"{self.paths.tablestatus_log}/{self.table_id}"

    @property
    def leases(self) -> LeaseFiles:
        """The heartbeat files of the table's running loads and statements."""
        return LeaseFiles(self.paths, self.log_dir)

    @property
    def history(self) -> StatusHistory:
        """``tablestatus.history``: the entries clean files removed for good."""
        return StatusHistory(self.paths)

    def _version_path(self, version: int) -> str:
        return version_path(self.log_dir, version)

    # ---- reading ---------------------------------------------------------------------------
    def _gone(self) -> TableNotFoundError:
        return TableNotFoundError(
            f"table {self.paths.name} was dropped (its tablestatus log "
            f"{self.paths.relative(self.log_dir)} is gone); open it again if it was re-created"
        )

    def _legacy(self) -> TableStatusSnapshot:
        """A table of the single-file format, read as version 0 (upgraded on first write)."""
        legacy = LegacyStatus(self.paths, self.table_id, self.legacy_schema, self.log_dir)
        if (snap := legacy.read()) is None:
            raise self._gone()
        return snap

    def _upgrade(self, legacy: TableStatusSnapshot) -> None:
        LegacyStatus(self.paths, self.table_id, self.legacy_schema, self.log_dir).upgrade(
            legacy, self._version_path(0))

    def _latest(self) -> int | None:
        """The latest version; None when the log does not exist (a legacy table)."""
        with _cache_lock:
            known = _NEWEST.get(self.log_dir)
        n = find_latest(self.paths.sfs, self.log_dir, known)
        if n is not None:
            with _cache_lock:
                if _NEWEST.get(self.log_dir, -1) < n:
                    _NEWEST[self.log_dir] = n
        return n

    def _write_hint(self, version: int) -> None:
        write_hint(self.paths.sfs, self.log_dir, version)

    def _version_bytes(self, version: int) -> tuple[str, bytes | None]:
        """A version file's path and bytes (None: no such file in a log that exists)."""
        path = self._version_path(version)
        try:
            return path, self.paths.sfs.read_bytes(path)
        except FileNotFoundError as err:
            if not self.paths.sfs.is_dir(self.log_dir):
                raise self._gone() from err
            return path, None

    def _read_record(self, version: int) -> VersionRecord:
        with _cache_lock:
            kept = _RECORDS.pop((self.log_dir, version), None)
        if kept is not None:  # decoded by dropped() for the read that follows an open
            return kept
        path, data = self._version_bytes(version)
        if data is None:
            raise VersionNotFoundError(
                f"table {self.paths.name} has no tablestatus version {version}")
        return decode_record(data, path, version=version, table_id=self.table_id)

    def record(self, version: int) -> VersionRecord:
        """Version ``version``'s own file decoded: what it changed, not the table's entries."""
        return self._read_record(version)

    def _state(self, version: int) -> State:
        key = (self.log_dir, version)
        with _cache_lock:
            hit = _STATES.get(key)
            if hit is not None:
                _STATES.move_to_end(key)
                return hit
            checkpoint = version - version % CHECKPOINT_INTERVAL
            base_version, base = checkpoint - 1, None
            for v in range(version - 1, checkpoint - 1, -1):
                base = _STATES.get((self.log_dir, v))
                if base is not None:
                    base_version = v
                    break
        # The entries as a view (entry_view.py): the checkpoint's columns, checked but built
        # only when used, plus the changes of the versions after it.
        view: EntryView
        last: VersionRecord | None = None
        if base is None:
            c = checkpoint
            replay = c > 0 and replays_json(self.paths.sfs, self.log_dir, c)
            while True:
                got = self._arrow_checkpoint(c) if c > 0 and not replay else None
                if got is not None:
                    view = got
                    last = self._read_record(c) if c == version else None
                    break
                rec = self._read_record(c)
                if rec.entries is not None:  # version 0, or a checkpoint of the JSON format
                    view, last = rec.entries, rec
                    break
                if rec.dropped and c == version:
                    # A DROP is written as a delta even at a checkpoint's number; nothing
                    # follows it and nothing reads its entries.
                    state = State(EntryView(()), rec.floor, rec.timestamp, dropped=True)
                    self._remember(version, state)
                    return state
                if c == 0:
                    raise corrupt_version(self._version_path(0), ValueError("version 0 holds no entries"))
                # Its checkpoint was never written (its writer was killed after the commit):
                # the one before it, and the versions in between.
                c -= CHECKPOINT_INTERVAL
            base_version = c
        else:
            view = base.entries
        for v in range(base_version + 1, version + 1):
            rec = last = self._read_record(v)
            if rec.entries is not None:
                view = rec.entries
                continue
            try:
                view = view.apply(rec.upserts, rec.removes)
            except ValueError as err:
                raise corrupt_version(self._version_path(v), err) from err
        if last is None:  # (no version after the cached one: not reached, the hit returned)
            assert base is not None
            state = base
        else:
            state = State(view, last.floor, last.timestamp, last.dropped,
                          last.rows if last.rows_recorded else None)
        self._remember(version, state)
        return state

    def _arrow_checkpoint(self, version: int) -> EntryView | None:
        """The entries of the Arrow checkpoint of ``version`` (None: it has none)."""
        path = f"{self.log_dir}/{checkpoint_name(version)}"
        sfs = self.paths.sfs
        try:  # a checkpoint is never rewritten in place: mapped on a local disk
            data = sfs.map_file(path) or sfs.read_bytes(path)
        except FileNotFoundError:
            return None
        from carbonstore.store.checkpoint_arrow import decode_checkpoint  # numpy, pyarrow
        try:
            return EntryView(decode_checkpoint(data, table_id=self.table_id, version=version))
        except ValueError as err:
            raise corrupt_version(path, err) from err

    def _write_checkpoint(self, version: int, state: State) -> State:
        """Write the Arrow checkpoint of ``version`` (just committed); the state then reads
        from it. A failure only leaves readers one checkpoint further back."""
        from carbonstore.store.checkpoint_arrow import encode_checkpoint  # numpy, pyarrow
        crash_point("tablestatus.before_checkpoint")
        try:
            data, arrow = encode_checkpoint(state.entries.to_table(), table_id=self.table_id,
                                            version=version)
            self.paths.sfs.put_if_absent(f"{self.log_dir}/{checkpoint_name(version)}", data)
        except (OSError, ValueError):
            import logging  # (only here: logging costs 3-10 ms of a fresh process's start)

            logging.getLogger(__name__).warning(
                "tablestatus checkpoint %s of %s not written", version, self.paths.name,
                exc_info=True)
            return state
        crash_point("tablestatus.after_checkpoint")
        return replace(state, entries=EntryView(arrow))

    def _remember(self, version: int, state: State) -> None:
        with _cache_lock:
            _STATES[(self.log_dir, version)] = state
            _STATES.move_to_end((self.log_dir, version))
            while len(_STATES) > _STATES_LIMIT:
                _STATES.popitem(last=False)
            if _NEWEST.get(self.log_dir, -1) < version:
                _NEWEST[self.log_dir] = version

    def read(self, version: int | None = None) -> TableStatusSnapshot:
        """The latest version (or ``version``): one immutable snapshot.

        Raises:
            TableNotFoundError: the table was dropped.
            VersionNotFoundError: ``version`` does not exist.
            CorruptMetadataError: a version file on the way is damaged.
        """
        if version is None:
            version = self.pinned
        latest = self._latest()
        if latest is None:
            if version not in (None, 0):
                raise VersionNotFoundError(
                    f"table {self.paths.name} has no tablestatus version {version}; "
                    "it has only version 0"
                )
            return self._legacy()
        if version is not None:
            if not 0 <= version <= latest:
                raise VersionNotFoundError(
                    f"table {self.paths.name} has no tablestatus version {version}; "
                    f"its versions are 0 to {latest} ('carbonstore history' lists them)"
                )
            latest = version
        state = self._state(latest)
        if state.dropped:
            raise self._gone()
        return TableStatusSnapshot(state.entries, latest, state.floor, self.table_id,
                                   state.timestamp, rows=state.rows)

    def log(self, limit: int | None = None) -> list[VersionInfo]:
        """Every version, oldest first; with ``limit``, only the newest ``limit`` of them
        (only their files are read: the chain is gapless, so no listing is needed)."""
        latest = self._latest()
        if latest is None:
            snap = self._legacy()
            return [VersionInfo(
                version=0, parent=None, operation="LEGACY", timestamp=0, writer="",
                added=tuple(e.load_name for e in snap.readable),
                rows=sum(e.row_count - e.deleted_rows for e in snap.readable),
            )]
        first = 0 if limit is None else max(0, latest - max(0, limit) + 1)
        return [self._info(v) for v in range(first, latest + 1)]

    def _info(self, version: int) -> VersionInfo:
        """One version's history line, from its file's header (entries not decoded)."""
        path, data = self._version_bytes(version)
        if data is None:  # the chain is gapless up to the latest
            raise corrupt_version(path, FileNotFoundError("the file is missing"))
        return decode_info(data, path, version=version, table_id=self.table_id)

    def _time_of(self, version: int) -> int:
        """A version's timestamp: from the decoded states, else its file's header."""
        with _cache_lock:
            hit = _STATES.get((self.log_dir, version))
        if hit is not None:
            return hit.timestamp
        path, data = self._version_bytes(version)
        if data is None:  # the chain is gapless up to the latest
            raise corrupt_version(path, FileNotFoundError("the file is missing"))
        return decode_header(data, path, version=version, table_id=self.table_id).timestamp

    def version_as_of(self, timestamp_ms: int) -> int:
        """The newest version written at or before ``timestamp_ms``: O(log n) version
        headers read (``versions.version_at``), no listing.

        Raises:
            VersionNotFoundError: the table has no version that old.
        """
        latest = self._latest()
        if latest is None:
            return 0
        return version_at(latest, self._time_of, timestamp_ms, self.paths.name)

    def dropped(self) -> bool:
        """True when the table's drop committed (its latest version is the DROP, or its log
        is gone) - whether or not its folder was removed yet. Reads the latest version's
        header only (a delta: a few hundred bytes; also at a checkpoint's number, whose
        entries are in the Arrow file beside it), or decodes a big one once, for the read that
        follows; a damaged log counts as not dropped (its readers report the damage)."""
        try:
            latest = self._latest()
            if latest is None:  # no log: a table of the single-file format, or removed
                return not self.legacy_schema
            with _cache_lock:
                hit = _STATES.get((self.log_dir, latest))
            if hit is not None:
                return hit.dropped
            path = self._version_path(latest)
            data = self.paths.sfs.read_bytes(path)
            if len(data) < _HEADER_ONLY_BYTES:
                return decode_header(data, path, version=latest, table_id=self.table_id).dropped
            rec = decode_record(data, path, version=latest, table_id=self.table_id)
            with _cache_lock:  # a big delta: decoded once, for the read that follows
                _RECORDS[(self.log_dir, latest)] = rec
                while len(_RECORDS) > 8:
                    _RECORDS.pop(next(iter(_RECORDS)))
            return rec.dropped
        except FileNotFoundError:  # the log went between the probe and the read
            return not self.paths.sfs.is_dir(self.log_dir)
        except CorruptMetadataError:
            return False

    # ---- writing ---------------------------------------------------------------------------
    def create(self, *, id_floor: int = 0) -> TableStatusSnapshot:
        """Write version 0 (no entries) of a new table; its segment ids start at ``id_floor``."""
        self.paths.sfs.makedirs(self.log_dir)
        ts = now_ms()
        return self._put(0, encode_version(
            version=0, table_id=self.table_id, operation="CREATE", floor=id_floor,
            checkpoint=(), upserts=(), removes=(), base=(), timestamp=ts,
        ), State(EntryView(()), id_floor, ts, rows=0))

    def _put(self, version: int, data: bytes, state: State) -> TableStatusSnapshot:
        try:
            won = self.paths.sfs.put_if_absent(self._version_path(version), data)
        except FileNotFoundError as err:
            raise self._gone() from err
        if not won:
            raise CommitConflictError(f"version {version} of {self.paths.name} exists")
        self._remember(version, state)
        self._write_hint(version)
        return TableStatusSnapshot(state.entries, version, state.floor, self.table_id,
                                   state.timestamp, rows=state.rows)

    def _retries(self) -> int:
        return max(1, self.locks.conf.get_int("carbon.tablestatus.commit.retries"))

    def update(
        self,
        fn: Callable[[TableStatusSnapshot], list[LoadEntry] | StatusChange],
        *,
        operation: str = "UPDATE",
        remove: Callable[[LoadEntry], bool] | None = None,
        force: bool = False,
        files_removed: Callable[[], tuple[str, ...]] | None = None,
    ) -> TableStatusSnapshot:
        """Commit a new version made by ``fn`` from the latest one (optimistically).

        ``fn`` returns the new list of entries, or a ``StatusChange`` (the entries it adds
        or replaces and the names it removes: the commit then never builds the other
        entries of the table; see docs/tablestatus.md); it runs again on the fresh snapshot after
        a lost race, so it must derive everything from its argument and raise on a
        conflict. Entries for which ``remove`` is true are left out of the new version
        and appended to ``tablestatus.history`` (of a ``StatusChange``: those it removes
        and those it upserts, as they were and as upserted; no other entry is looked at). When nothing changes, nothing is written
        and the snapshot ``fn`` saw is returned (``force``: a version is written anyway, as
        ALTER TABLE does to order its schema version among the tablestatus versions, or
        when ``files_removed``, called after ``fn``, names files clean files deletes next).

        Raises:
            CommitConflictError: still losing the race after
                ``carbon.tablestatus.commit.retries`` attempts.
            TableNotFoundError: the table was dropped.
        """
        self._writable()
        with self.locks.courtesy("tablestatus.lock", _COURTESY_WAIT):
            return self._commit(fn, operation, remove, force=force, files_removed=files_removed)

    def _commit(
        self,
        fn: Callable[[TableStatusSnapshot], list[LoadEntry] | StatusChange],
        operation: str,
        remove: Callable[[LoadEntry], bool] | None,
        *, force: bool = False, files_removed: Callable[[], tuple[str, ...]] | None = None,
    ) -> TableStatusSnapshot:
        retries = self._retries()
        for attempt in range(retries):
            base = self.read()
            if base.legacy:
                self._upgrade(base)
                continue
            wanted = fn(base)
            removed: list[LoadEntry] = []
            kept: list[LoadEntry] | StatusChange = wanted
            if isinstance(wanted, StatusChange):
                if remove is not None:
                    kept, removed = _archived(base, wanted, remove)
            elif remove is not None:
                removed = [e for e in wanted if remove(e)]
                kept = [e for e in wanted if not remove(e)]
            state, data = next_version(base, kept, operation, force=force, files_removed=(
                files_removed() if files_removed is not None else ()))
            if data is None:
                return base
            crash_point("tablestatus.before_write")
            try:
                won = self.paths.sfs.put_if_absent(self._version_path(base.version + 1), data)
            except FileNotFoundError as err:
                raise self._gone() from err
            if won:
                crash_point("tablestatus.after_write")
                version = base.version + 1
                if version % CHECKPOINT_INTERVAL == 0:
                    state = self._write_checkpoint(version, state)
                self._remember(version, state)
                self._write_hint(version)
                if removed:
                    self.history.append(removed)
                return TableStatusSnapshot(state.entries, version, state.floor, self.table_id,
                                           state.timestamp, rows=state.rows)
            import random  # (here: only a commit that lost a race waits; a read never does)
            time.sleep(min(1.0, 0.002 * 2 ** min(attempt, 10)) * random.uniform(0.5, 1.5))
        raise CommitConflictError(
            f"could not commit to {self.paths.name}: {retries} attempts lost the race to "
            "other writers; retry, or raise carbon.tablestatus.commit.retries"
        )

    def _writable(self) -> None:
        if self.pinned is not None:
            raise UserError(
                f"table {self.paths.name} is open as of version {self.pinned}: it is read-only "
                "(restore that version with 'carbonstore restore' to change it)"
            )

    def drop(self) -> None:
        """Commit the DROP version: from now on every read and commit says the table is gone."""
        self._writable()
        for _ in range(self._retries()):
            base = self.read()
            if base.legacy:
                self._upgrade(base)
                continue
            state = State(base.view, base.id_floor, version_time(base.timestamp), dropped=True)
            data = encode_record(
                version=base.version + 1, table_id=self.table_id, operation="DROP",
                floor=base.id_floor, timestamp=state.timestamp, added=[], removed=[],
                rows=base.readable_rows(), checkpoint=None, upserts=(), removes=(), dropped=True,
            )
            try:
                if self.paths.sfs.put_if_absent(self._version_path(base.version + 1), data):
                    self._remember(base.version + 1, state)
                    return
            except FileNotFoundError as err:
                raise self._gone() from err
            import random
            time.sleep(random.uniform(0.001, 0.02))
        raise CommitConflictError(f"could not commit the drop of {self.paths.name}; retry")

    # ---- common transitions --------------------------------------------------------------
    def allocate(self, *, status: str = IN_PROGRESS, **fields: Any) -> LoadEntry:
        """Allocate the next segment id and append an entry for it, atomically."""
        holder: list[LoadEntry] = []

        def add(snap: TableStatusSnapshot) -> list[LoadEntry]:
            holder.clear()
            entry = LoadEntry(
                load_name=snap.next_segment_id(), status=status, load_start_time=now_ms(),
                **fields,
            )
            holder.append(entry)
            return StatusChange(upserts=(entry,))

        self.update(add, operation="ALLOCATE")
        return holder[0]

    def set_status(self, load_name: str, status: str, **changes: Any) -> LoadEntry:
        """Move one entry to ``status`` (checked against the allowed transitions)."""
        holder: list[LoadEntry] = []

        def change(snap: TableStatusSnapshot) -> StatusChange:
            holder.clear()
            holder.append(snap.get(load_name).with_status(status, **changes))
            return StatusChange(upserts=(holder[0],))

        self.update(change, operation="SET STATUS")
        return holder[0]


def _archived(base: TableStatusSnapshot, change: StatusChange, remove: Callable[[LoadEntry], bool],
              ) -> tuple[StatusChange, list[LoadEntry]]:
    """``change`` with the entries ``remove`` picks taken out (removed from the table), and
    those entries (for ``tablestatus.history``): the base entries it removes, the upserts."""
    gone = [e for n in change.removes if (e := base.find(n)) is not None and remove(e)]
    dropped = [e for e in change.upserts if remove(e)]
    removes = [*change.removes, *(e.load_name for e in dropped if base.find(e.load_name) is not None)]
    upserts = tuple(e for e in change.upserts if not remove(e))
    return StatusChange(upserts=upserts, removes=tuple(removes)), [*gone, *dropped]
