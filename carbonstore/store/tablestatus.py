"""The tablestatus log (DESIGN.md section 3): typed entries, snapshots, atomic updates.

``Metadata/tablestatus`` is a JSON array of load entries with CarbonData's keys. Every
change is a read-modify-write under ``LockFiles/tablestatus.lock``: the current file is
kept as ``tablestatus.backup``, the new one is written to a temp file, fsynced and renamed
over the old one, so a reader sees either version, never half of one. Entries that are
removed for good move to ``tablestatus.history``.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import xxhash

from carbonstore.errors import CorruptMetadataError, SegmentNotFoundError
from carbonstore.store.faults import crash_point
from carbonstore.store.locks import LockManager
from carbonstore.store.paths import TablePaths

__all__ = [
    "COMPACTED",
    "FAILURE",
    "IN_PROGRESS",
    "MARKED_FOR_DELETE",
    "OVERWRITE_IN_PROGRESS",
    "PARTIAL_SUCCESS",
    "READABLE_STATUSES",
    "SUCCESS",
    "LoadEntry",
    "TableStatus",
    "TableStatusSnapshot",
    "next_compacted_name",
    "now_ms",
]

SUCCESS = "Success"
PARTIAL_SUCCESS = "Partial Success"
FAILURE = "Failure"
IN_PROGRESS = "In Progress"
MARKED_FOR_DELETE = "Marked for Delete"
COMPACTED = "Compacted"
OVERWRITE_IN_PROGRESS = "Overwrite In Progress"
ALL_STATUSES = (
    SUCCESS, PARTIAL_SUCCESS, FAILURE, IN_PROGRESS, MARKED_FOR_DELETE, COMPACTED,
    OVERWRITE_IN_PROGRESS,
)
READABLE_STATUSES = frozenset({SUCCESS, PARTIAL_SUCCESS})

# Allowed status transitions; anything else is a bug in the caller.
_TRANSITIONS: dict[str, frozenset[str]] = {
    IN_PROGRESS: frozenset({SUCCESS, PARTIAL_SUCCESS, FAILURE, MARKED_FOR_DELETE}),
    OVERWRITE_IN_PROGRESS: frozenset({SUCCESS, PARTIAL_SUCCESS, FAILURE, MARKED_FOR_DELETE}),
    SUCCESS: frozenset({COMPACTED, MARKED_FOR_DELETE}),
    PARTIAL_SUCCESS: frozenset({COMPACTED, MARKED_FOR_DELETE}),
    COMPACTED: frozenset(),
    MARKED_FOR_DELETE: frozenset(),
    FAILURE: frozenset({MARKED_FOR_DELETE}),
}


_LOAD_NAME_RE = re.compile(r"[0-9]+(\.[0-9]+)?")
_KNOWN_KEYS = frozenset({
    "loadName", "loadStatus", "loadStartTime", "timestamp", "dataSize", "indexSize",
    "rowCount", "badRecordCount", "mergedLoadName", "modificationOrDeletionTimestamp",
    "visibility", "majorCompacted", "fileFormat", "segmentFile",
})
# tablestatus path -> (xxh64 of its bytes, the entries decoded from them): a re-read of an
# unchanged file (every plan reads it) skips decoding. Entries are immutable.
_DECODED: OrderedDict[str, tuple[str, tuple[LoadEntry, ...]]] = OrderedDict()
_DECODED_LIMIT = 64
_decoded_lock = threading.Lock()


def forget_decoded() -> None:
    """Drop the decoded tablestatus files this process keeps (as if it were a fresh one)."""
    with _decoded_lock:
        _DECODED.clear()


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadEntry:
    """One segment's entry in tablestatus (CarbonData's keys on disk)."""

    load_name: str
    status: str
    load_start_time: int
    timestamp: int | None = None
    data_size: int = 0
    index_size: int = 0
    row_count: int = 0
    bad_record_count: int = 0
    merged_load_name: str | None = None
    modification_or_deletion_timestamp: int | None = None
    visibility: bool = True
    major_compacted: bool = False
    file_format: str = "parquet"
    segment_file: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def readable(self) -> bool:
        return self.visibility and self.status in READABLE_STATUSES

    @property
    def time_taken_ms(self) -> int | None:
        return None if self.timestamp is None else self.timestamp - self.load_start_time

    def with_status(self, status: str, **changes: Any) -> LoadEntry:
        if status not in _TRANSITIONS.get(self.status, frozenset()) and status != self.status:
            raise ValueError(f"segment {self.load_name}: {self.status} -> {status} is not allowed")
        return replace(self, status=status, **changes)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "loadName": self.load_name,
            "loadStatus": self.status,
            "loadStartTime": self.load_start_time,
            "timestamp": self.timestamp,
            "dataSize": self.data_size,
            "indexSize": self.index_size,
            "rowCount": self.row_count,
            "badRecordCount": self.bad_record_count,
            "mergedLoadName": self.merged_load_name,
            "modificationOrDeletionTimestamp": self.modification_or_deletion_timestamp,
            "visibility": "true" if self.visibility else "false",
            "majorCompacted": "true" if self.major_compacted else "false",
            "fileFormat": self.file_format,
            "segmentFile": self.segment_file,
        }
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> LoadEntry:
        load_name = obj["loadName"]
        if isinstance(load_name, int) and not isinstance(load_name, bool):
            load_name = str(load_name)
        if not isinstance(load_name, str) or not _LOAD_NAME_RE.fullmatch(load_name):
            raise ValueError(f"invalid loadName {load_name!r}")
        status = obj["loadStatus"]
        if status not in ALL_STATUSES:
            raise ValueError(f"unknown loadStatus {status!r}")
        return cls(
            load_name=load_name,
            status=status,
            load_start_time=int(obj["loadStartTime"]),
            timestamp=None if obj.get("timestamp") is None else int(obj["timestamp"]),
            data_size=int(obj.get("dataSize") or 0),
            index_size=int(obj.get("indexSize") or 0),
            row_count=int(obj.get("rowCount") or 0),
            bad_record_count=int(obj.get("badRecordCount") or 0),
            merged_load_name=obj.get("mergedLoadName"),
            modification_or_deletion_timestamp=obj.get("modificationOrDeletionTimestamp"),
            visibility=str(obj.get("visibility", "true")).lower() == "true",
            major_compacted=str(obj.get("majorCompacted", "false")).lower() == "true",
            file_format=obj.get("fileFormat") or "parquet",
            segment_file=obj.get("segmentFile"),
            extra={k: v for k, v in obj.items() if k not in _KNOWN_KEYS},
        )


def segment_sort_key(load_name: str) -> tuple[int, int]:
    major, _, minor = load_name.partition(".")
    return int(major), int(minor or 0)


def next_compacted_name(first_source: str) -> str:
    """``N`` -> ``N.1``; ``N.k`` -> ``N.(k+1)``."""
    major, _, minor = first_source.partition(".")
    return f"{major}.{int(minor or 0) + 1}"


@dataclass(frozen=True, slots=True)
class TableStatusSnapshot:
    """One consistent read of tablestatus. ``version`` changes with every write.

    ``id_floor`` is the smallest id a new segment may take because of entries already moved
    to tablestatus.history; ``TableStatus.update`` fills it in so an id is never reused.
    """

    entries: tuple[LoadEntry, ...]
    version: str
    id_floor: int = 0

    def get(self, load_name: str) -> LoadEntry:
        for e in self.entries:
            if e.load_name == load_name:
                return e
        raise SegmentNotFoundError(f"segment {load_name} does not exist")

    def find(self, load_name: str) -> LoadEntry | None:
        for e in self.entries:
            if e.load_name == load_name:
                return e
        return None

    @property
    def readable(self) -> list[LoadEntry]:
        return [e for e in self.entries if e.readable]

    def next_segment_id(self) -> str:
        ids = [segment_sort_key(e.load_name)[0] + 1 for e in self.entries]
        return str(max([self.id_floor, *ids]))


def _decode(data: bytes, path: str, backup: str) -> tuple[LoadEntry, ...]:
    try:
        raw = orjson.loads(data)
        if not isinstance(raw, list):
            raise ValueError("expected a JSON array of load entries")
        return tuple(LoadEntry.from_json(o) for o in raw)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise CorruptMetadataError(
            f"tablestatus file {path} is corrupt or truncated ({err}); the previous version "
            f"is kept at {backup}: check it and copy it over {path} to recover"
        ) from err


def _encode(entries: Iterable[LoadEntry]) -> bytes:
    return orjson.dumps([e.to_json() for e in entries], option=orjson.OPT_INDENT_2)


@dataclass(frozen=True, slots=True)
class TableStatus:
    """Reads and updates one table's tablestatus."""

    paths: TablePaths
    locks: LockManager

    def read(self) -> TableStatusSnapshot:
        """A consistent snapshot (the file is only ever replaced whole)."""
        sfs = self.paths.sfs
        path = self.paths.tablestatus
        if not sfs.exists(path):
            backup = self.paths.tablestatus_backup
            if sfs.exists(backup):  # only ever written next to a tablestatus: it was lost
                raise CorruptMetadataError(
                    f"tablestatus file {path} is missing but its previous version {backup} "
                    f"exists; check the backup and copy it over {path} to recover"
                )
            return TableStatusSnapshot((), "empty")
        data = sfs.read_bytes(path)
        digest = xxhash.xxh64_hexdigest(data)
        with _decoded_lock:
            hit = _DECODED.get(path)
        if hit is not None and hit[0] == digest:
            return TableStatusSnapshot(hit[1], digest)
        entries = _decode(data, path, self.paths.tablestatus_backup)
        with _decoded_lock:
            _DECODED[path] = (digest, entries)
            _DECODED.move_to_end(path)
            while len(_DECODED) > _DECODED_LIMIT:
                _DECODED.popitem(last=False)
        return TableStatusSnapshot(entries, digest)

    def read_history(self) -> list[LoadEntry]:
        sfs = self.paths.sfs
        path = self.paths.tablestatus_history
        if not sfs.exists(path):
            return []
        return list(_decode(sfs.read_bytes(path), path, path))

    def update(
        self,
        fn: Callable[[TableStatusSnapshot], list[LoadEntry]],
        *,
        remove: Callable[[LoadEntry], bool] | None = None,
    ) -> TableStatusSnapshot:
        """Apply ``fn`` to the current entries under the lock and write the result.

        ``fn`` returns the new list of entries. Entries for which ``remove`` is true are
        dropped from the new list and appended to tablestatus.history.
        """
        with self.locks.hold("tablestatus.lock"):
            current = self.read()
            history = self.read_history()
            if history:
                floor = max(segment_sort_key(e.load_name)[0] for e in history) + 1
                current = replace(current, id_floor=floor)
            new_entries = fn(current)
            removed: list[LoadEntry] = []
            if remove is not None:
                removed = [e for e in new_entries if remove(e)]
                new_entries = [e for e in new_entries if not remove(e)]
            self._write(current, new_entries, removed)
            return self.read()

    def _write(
        self, current: TableStatusSnapshot, entries: list[LoadEntry], removed: list[LoadEntry]
    ) -> None:
        sfs = self.paths.sfs
        sfs.makedirs(self.paths.metadata)
        if removed:
            # A crash after the history write but before the tablestatus write leaves the
            # entries in both; the retry must not record them twice.
            history = self.read_history()
            known = {e.load_name for e in history}
            history += [e for e in removed if e.load_name not in known]
            sfs.write_atomic(self.paths.tablestatus_history, _encode(history))
        if current.version != "empty":
            sfs.write_atomic(self.paths.tablestatus_backup, sfs.read_bytes(self.paths.tablestatus))
        crash_point("tablestatus.before_write")
        sfs.write_atomic(self.paths.tablestatus, _encode(entries))

    # ---- common transitions --------------------------------------------------------------
    def allocate(self, *, status: str = IN_PROGRESS, **fields: Any) -> LoadEntry:
        """Allocate the next segment id and append an entry for it, atomically."""
        holder: list[LoadEntry] = []

        def add(snap: TableStatusSnapshot) -> list[LoadEntry]:
            entry = LoadEntry(
                load_name=snap.next_segment_id(), status=status, load_start_time=now_ms(),
                **fields,
            )
            holder.append(entry)
            return [*snap.entries, entry]

        self.update(add)
        return holder[0]

    def set_status(self, load_name: str, status: str, **changes: Any) -> LoadEntry:
        """Move one entry to ``status`` (checked against the allowed transitions)."""
        holder: list[LoadEntry] = []

        def change(snap: TableStatusSnapshot) -> list[LoadEntry]:
            out = []
            for e in snap.entries:
                if e.load_name == load_name:
                    e = e.with_status(status, **changes)
                    holder.append(e)
                out.append(e)
            if not holder:
                raise SegmentNotFoundError(f"segment {load_name} does not exist")
            return out

        self.update(change)
        return holder[0]
