"""The on-disk format of tablestatus versions (docs/tablestatus.md): records, deltas, checkpoints.

One version file is a JSON object: ``formatVersion``, ``tableId``, ``version``, ``parent``,
``operation``, ``timestamp``, ``writer``, ``segmentIdFloor``, ``checkpoint`` and either all
``entries`` (version 0, and every ``CHECKPOINT_INTERVAL``-th version of tables written
before Arrow checkpoints, checkpoint_arrow.py) or the ``upserts`` and ``removes`` it makes, plus ``readableAdded`` / ``readableRemoved`` / ``readableRows`` for the
history, and ``filesRemoved`` on a clean-files version that deletes files older versions
name (superseded delete deltas, replaced merge indexes: their paths relative to the table
folder; written before any of them is deleted, so a restore committing later sees it).
Lists of ``COLUMNS_FROM`` entries or more are written as one array per key
(``entryColumns`` / ``upsertColumns``, ``formatVersion`` 2); both formats are read.
Decoding checks that a file is the version its name says, of the table it belongs to, with
the right parent; every entry is checked (``carbonstore.store.entries``).

Every version written carries ``checksum`` as its first key: the xxh64 of the file's bytes
without that key (``{"checksum":"<16 hex>",`` + the rest). A file whose checksum fails, or
with a key no writer writes (one flipped bit in ``"upserts"`` used to read as "no upserts":
a committed load vanished), is damage. Files written before checksums read as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

from carbonstore.errors import (
    CarbonStoreError,
    CorruptMetadataError,
    VersionNotFoundError,
)
from carbonstore.store.checksums import checked_object, with_checksum
from carbonstore.store.entries import (
    LoadEntry,
    decode_entries,
    decode_entry_columns,
    encode_entry_columns,
    now_ms,
    segment_sort_key,
)
from carbonstore.store.entry_extras import EXTRA_COLUMNS
from carbonstore.store.entry_view import EntryView
from carbonstore.store.leases import writer_identity
from carbonstore.store.records import Frozen
from carbonstore.store.status_snapshot import StatusChange, TableStatusSnapshot

__all__ = [
    "CHECKPOINT_INTERVAL",
    "COLUMNS_FORMAT_VERSION",
    "COLUMNS_FROM",
    "FORMAT_VERSION",
    "State",
    "StatusChange",
    "TableStatusSnapshot",
    "VersionInfo",
    "VersionHeader",
    "VersionRecord",
    "apply_record",
    "corrupt_version",
    "decode_header",
    "decode_info",
    "decode_legacy",
    "decode_record",
    "encode_record",
    "encode_version",
    "floor_of",
    "next_version",
    "version_at",
    "version_time",
    "writer_id",
]

CHECKPOINT_INTERVAL = 50
FORMAT_VERSION = 1
#: a version file whose entries (or upserts) are written as columns (``entryColumns`` /
#: ``upsertColumns``); readers take both formats, so tables written before still open
COLUMNS_FORMAT_VERSION = 2
#: lists of at least this many entries are written as columns (parsed and checked about
#: three times faster: one array per key instead of an object per entry); shorter ones,
#: the common delta, stay one object per entry
COLUMNS_FROM = 128
#: entry columns that also hold the keys beyond CarbonData's (``extraColumns``,
#: store/entry_extras.py): a reader that knows only 1 and 2 refuses such a file
EXTRAS_FORMAT_VERSION = 3
#: a version at a checkpoint's number that is a delta: its checkpoint is an Arrow file
#: written after it (checkpoint_arrow.py); a reader that knows only 1 to 3 refuses it
#: rather than take it for a checkpoint
ARROW_CHECKPOINTS_FORMAT_VERSION = 4
_FORMAT_VERSIONS = (FORMAT_VERSION, COLUMNS_FORMAT_VERSION, EXTRAS_FORMAT_VERSION,
                    ARROW_CHECKPOINTS_FORMAT_VERSION)


class State(Frozen):
    entries: EntryView
    floor: int
    timestamp: int
    dropped: bool = False
    #: readable rows of the version (its ``readableRows``); None: not recorded
    rows: int | None = None


class VersionInfo(Frozen, kw_only=True):
    """One version of the history (``carbonstore history``)."""

    version: int
    parent: int | None
    operation: str
    timestamp: int
    writer: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    rows: int = 0
    checkpoint: bool = False
    #: files (relative to the table folder) clean files deletes after this version
    files_removed: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "parent": self.parent,
            "operation": self.operation,
            "timestamp": self.timestamp,
            "writer": self.writer,
            "segmentsAdded": list(self.added),
            "segmentsRemoved": list(self.removed),
            "rows": self.rows,
            **({"filesRemoved": list(self.files_removed)} if self.files_removed else {}),
        }


def floor_of(entries: Iterable[LoadEntry], floor: int) -> int:
    return max([floor, *(segment_sort_key(e.load_name)[0] + 1 for e in entries)])


def corrupt_version(path: str, err: Exception) -> CorruptMetadataError:
    return CorruptMetadataError(
        f"tablestatus version file {path} is corrupt ({err}); it is part of the table's "
        "version chain and cannot be skipped: restore it from a backup of the table"
    )


class VersionRecord(Frozen):
    """A decoded version file."""

    version: int
    parent: int | None
    operation: str
    timestamp: int
    writer: str
    floor: int
    dropped: bool
    entries: EntryView | None  # a checkpoint
    upserts: tuple[LoadEntry, ...]
    removes: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    rows: int
    files_removed: tuple[str, ...] = ()
    rows_recorded: bool = True  # readableRows is in the file (files of the first format lack it)

    def info(self) -> VersionInfo:
        return VersionInfo(
            version=self.version, parent=self.parent, operation=self.operation,
            timestamp=self.timestamp, writer=self.writer, added=self.added,
            removed=self.removed, rows=self.rows, checkpoint=self.entries is not None,
            files_removed=self.files_removed,
        )


class VersionHeader(Frozen):
    """What a version says about itself, without decoding its entries."""

    version: int
    timestamp: int
    dropped: bool


#: every top-level key a writer of version files writes
_RECORD_KEYS = frozenset({
    "checksum", "formatVersion", "tableId", "version", "parent", "operation", "timestamp",
    "writer", "segmentIdFloor", "checkpoint", "readableAdded", "readableRemoved",
    "readableRows", "dropped", "entries", "entryColumns", "upserts", "upsertColumns", "removes",
    "filesRemoved",
})


def _checked_object(data: bytes, *, version: int, table_id: str) -> dict[str, Any]:
    """The version file's JSON object, checked to be ``version`` of table ``table_id``."""
    obj, _ = checked_object(data, _RECORD_KEYS)
    if obj.get("formatVersion") not in _FORMAT_VERSIONS:
        raise ValueError(f"unknown formatVersion {obj.get('formatVersion')!r}")
    if obj.get("version") != version:
        raise ValueError(f"it says version {obj.get('version')!r}")
    if obj.get("tableId") != table_id:
        raise ValueError(f"it belongs to table id {obj.get('tableId')!r}, not {table_id}")
    parent = obj.get("parent")
    if parent != (version - 1 if version > 0 else None):
        raise ValueError(f"parent {parent!r} is not version {version - 1}")
    for key in ("timestamp", "segmentIdFloor", "readableRows"):
        if not isinstance(obj.get(key, 0), int) or isinstance(obj.get(key), bool):
            raise ValueError(f"{key} {obj.get(key)!r} is not a number")
    return obj


def decode_header(data: bytes, path: str, *, version: int, table_id: str) -> VersionHeader:
    """A version's time and whether it is a DROP, checked like ``decode_record`` minus its
    entries (a checkpoint's entries are not decoded)."""
    try:
        obj = _checked_object(data, version=version, table_id=table_id)
        return VersionHeader(version, int(obj.get("timestamp", 0)), bool(obj.get("dropped", False)))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise corrupt_version(path, err) from err


def decode_record(data: bytes, path: str, *, version: int, table_id: str) -> VersionRecord:
    try:
        obj = _checked_object(data, version=version, table_id=table_id)
        parent = obj.get("parent")
        entries = None
        columns = obj.get("formatVersion") in (COLUMNS_FORMAT_VERSION, EXTRAS_FORMAT_VERSION,
                                               ARROW_CHECKPOINTS_FORMAT_VERSION)
        if obj.get("checkpoint"):
            entries = EntryView(decode_entry_columns(obj["entryColumns"])
                                if columns and "entryColumns" in obj else decode_entries(obj["entries"]))
        if columns and "upsertColumns" in obj:
            upserts = decode_entry_columns(obj["upsertColumns"])
        else:
            upserts = decode_entries(obj.get("upserts") or [])
        removes = _strs(obj.get("removes") or [])
        return VersionRecord(
            version=version,
            parent=parent,
            operation=str(obj.get("operation", "")),
            timestamp=int(obj.get("timestamp", 0)),
            writer=str(obj.get("writer", "")),
            floor=int(obj.get("segmentIdFloor", 0)),
            dropped=bool(obj.get("dropped", False)),
            entries=entries,
            upserts=upserts,
            removes=removes,
            added=_strs(obj.get("readableAdded") or []),
            removed=_strs(obj.get("readableRemoved") or []),
            rows=int(obj.get("readableRows", 0)),
            files_removed=_strs(obj.get("filesRemoved") or []),
            rows_recorded="readableRows" in obj,
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise corrupt_version(path, err) from err


def decode_info(data: bytes, path: str, *, version: int, table_id: str) -> VersionInfo:
    """What ``history`` shows of a version, checked like ``decode_record`` minus its
    entries (a checkpoint's entries are not decoded)."""
    try:
        obj = _checked_object(data, version=version, table_id=table_id)
        return VersionInfo(
            version=version, parent=obj.get("parent"), operation=str(obj.get("operation", "")),
            timestamp=int(obj.get("timestamp", 0)), writer=str(obj.get("writer", "")),
            added=_strs(obj.get("readableAdded") or []), removed=_strs(obj.get("readableRemoved") or []),
            rows=int(obj.get("readableRows", 0)), checkpoint=bool(obj.get("checkpoint")),
            files_removed=_strs(obj.get("filesRemoved") or []),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise corrupt_version(path, err) from err


def _strs(items: Iterable[Any]) -> tuple[str, ...]:
    """``tuple(map(str, items))``; a list of strings (what writers write) is taken as it is."""
    if type(items) is list and set(map(type, items)) <= {str}:
        return tuple(items)
    return tuple(map(str, items))


def apply_record(base: dict[str, LoadEntry], rec: VersionRecord, path: str) -> None:
    for name in rec.removes:
        if base.pop(name, None) is None:
            raise corrupt_version(path, ValueError(f"it removes segment {name}, which does not exist"))
    for e in rec.upserts:
        base[e.load_name] = e


def decode_legacy(data: bytes, path: str, backup: str) -> tuple[LoadEntry, ...]:
    try:
        raw = orjson.loads(data)
        if not isinstance(raw, list):
            raise ValueError("expected a JSON array of load entries")
        return decode_entries(raw)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise CorruptMetadataError(
            f"tablestatus file {path} is corrupt or truncated ({err}); the previous version "
            f"is kept at {backup}: check it and copy it over {path} to recover"
        ) from err


def writer_id() -> str:
    return writer_identity()


def next_version(
    base: TableStatusSnapshot, wanted: list[LoadEntry] | StatusChange, operation: str, *,
    force: bool = False, files_removed: tuple[str, ...] = (),
) -> tuple[State, bytes | None]:
    """The state after ``base`` -> ``wanted`` and the bytes of its version (None: no change,
    unless ``force`` or ``files_removed``: a version that changes no entry, such as ALTER
    TABLE's or the one clean files commits before deleting files older versions name).

    ``wanted`` is the new list of entries, or a ``StatusChange``: then nothing of the table
    but the entries it names is looked at, and a checkpoint's columns are spliced, not
    rebuilt from entries."""
    view = base.view
    if isinstance(wanted, StatusChange):
        upserts, removes = _change_of(view, wanted)
    else:
        old = {e.load_name: e for e in base.entries}
        new_names = [e.load_name for e in wanted]
        if len(set(new_names)) != len(new_names):
            raise CarbonStoreError(f"a tablestatus change names a segment twice: {new_names}")
        by_name = {e.load_name: e for e in wanted}
        removes = tuple(n for n in old if n not in by_name)
        upserts = tuple(e for e in wanted if (o := old.get(e.load_name)) is not e and o != e)
    if not removes and not upserts and not force and not files_removed:
        return State(view, base.id_floor, base.timestamp, rows=base._rows), None
    added, removed, rows = _readable_change(view, upserts, removes, base._rows)
    try:
        final = view.apply(upserts, removes)
    except ValueError as err:
        raise CarbonStoreError(f"a tablestatus change is wrong: {err}") from err
    if rows is None:
        rows = final.readable_stats()[1]
    floor = max([base.id_floor, *(segment_sort_key(e.load_name)[0] + 1 for e in upserts)])
    version = base.version + 1
    ts = version_time(base.timestamp)
    data = encode_record(
        version=version, table_id=base.table_id, operation=operation, floor=floor,
        timestamp=ts, added=added, removed=removed, rows=rows, checkpoint=None,
        upserts=upserts, removes=removes, files_removed=files_removed,
    )
    return State(final, floor, ts, rows=rows), data


def _change_of(view: EntryView, change: StatusChange) -> tuple[tuple[LoadEntry, ...], tuple[str, ...]]:
    """The upserts that change something, and the removes, of ``change`` on ``view``."""
    names = [e.load_name for e in change.upserts]
    if len(set(names)) != len(names) or set(names) & set(change.removes):
        raise CarbonStoreError(f"a tablestatus change names a segment twice: {names}, "
                               f"removes {list(change.removes)}")
    upserts = tuple(e for e in change.upserts if (o := view.find(e.load_name)) is not e and o != e)
    missing = [n for n in change.removes if view.find(n) is None]
    if missing:
        raise CarbonStoreError(f"a tablestatus change removes segments that do not exist: {missing}")
    return upserts, tuple(change.removes)


def _readable_change(
    view: EntryView, upserts: tuple[LoadEntry, ...], removes: tuple[str, ...], rows: int | None,
) -> tuple[list[str], list[str], int | None]:
    """(segments made readable, segments no longer readable, readable rows after) of a
    change, from the entries it names (rows: None when the base's are not known)."""
    added: list[str] = []
    removed: list[str] = []
    delta = 0
    for name in removes:
        old = view.find(name)
        if old is not None and old.readable:
            removed.append(name)
            delta -= old.row_count - old.deleted_rows
    for e in upserts:
        old = view.find(e.load_name)
        was = old is not None and old.readable
        if was:
            assert old is not None
            delta -= old.row_count - old.deleted_rows
        if e.readable:
            delta += e.row_count - e.deleted_rows
        if was and not e.readable:
            removed.append(e.load_name)
        elif e.readable and not was:
            added.append(e.load_name)
    return (sorted(added, key=segment_sort_key), sorted(removed, key=segment_sort_key),
            None if rows is None else rows + delta)


def version_time(parent_timestamp: int) -> int:
    """A new version's time: now, but never before its parent's (a clock stepped back, or
    a writer on a machine whose clock is behind), so times never decrease along the chain
    and ``version_as_of`` can search it."""
    return max(now_ms(), parent_timestamp)


def version_at(latest: int, time_of: Callable[[int], int], timestamp_ms: int, name: str) -> int:
    """The newest of versions 0..``latest`` whose ``time_of`` is at or before
    ``timestamp_ms`` (time travel ``as of`` a time).

    A binary search over version numbers: version times never decrease along the chain
    (each is at least its parent's, :func:`version_time`), so O(log n) times are read.

    Raises:
        VersionNotFoundError: table ``name`` has no version that old.
    """
    first = time_of(0)
    if first > timestamp_ms:
        raise VersionNotFoundError(
            f"table {name} has no version as of {timestamp_ms} ms; its first "
            f"version was written at {first} ms"
        )
    lo, hi = 0, latest + 1  # time(lo) <= timestamp_ms; hi: the first known to be later
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid % CHECKPOINT_INTERVAL == 0 and mid + 1 < hi:
            mid += 1  # any version between lo and hi will do: a delta is a smaller file
        if time_of(mid) <= timestamp_ms:
            lo = mid
        else:
            hi = mid
    return lo


def encode_version(
    *,
    version: int,
    table_id: str,
    operation: str,
    floor: int,
    checkpoint: tuple[LoadEntry, ...] | None,
    upserts: tuple[LoadEntry, ...],
    removes: tuple[str, ...],
    base: tuple[LoadEntry, ...],
    timestamp: int,
    dropped: bool = False,
    new: tuple[LoadEntry, ...] | None = None,
    files_removed: tuple[str, ...] = (),
) -> bytes:
    """A version's bytes from the entries before (``base``) and after (``new``, or the
    ``checkpoint``'s); ``encode_record`` is the same from what changed."""
    final = checkpoint if new is None else new
    before = {e.load_name for e in base if e.readable}
    after = {e.load_name for e in final or () if e.readable}
    return encode_record(
        version=version, table_id=table_id, operation=operation, floor=floor, timestamp=timestamp,
        added=sorted(after - before, key=segment_sort_key),
        removed=sorted(before - after, key=segment_sort_key),
        rows=sum(e.row_count - e.deleted_rows for e in final or () if e.readable),
        checkpoint=None if checkpoint is None else EntryView(checkpoint), upserts=upserts,
        removes=removes, dropped=dropped, files_removed=files_removed,
    )


def encode_record(
    *,
    version: int,
    table_id: str,
    operation: str,
    floor: int,
    timestamp: int,
    added: list[str],
    removed: list[str],
    rows: int,
    checkpoint: EntryView | None,
    upserts: tuple[LoadEntry, ...],
    removes: tuple[str, ...],
    dropped: bool = False,
    files_removed: tuple[str, ...] = (),
) -> bytes:
    """A version's bytes. ``checkpoint``: every entry, as version 0 holds them; any other
    version is a delta, and at a checkpoint's number it says ``formatVersion`` 4 (its
    checkpoint is an Arrow file written after it)."""
    obj: dict[str, Any] = {
        "formatVersion": FORMAT_VERSION,
        "tableId": table_id,
        "version": version,
        "parent": version - 1 if version > 0 else None,
        "operation": operation,
        "timestamp": timestamp,
        "writer": writer_id(),
        "segmentIdFloor": floor,
        "checkpoint": checkpoint is not None,
        "readableAdded": added,
        "readableRemoved": removed,
        "readableRows": rows,
    }
    if dropped:
        obj["dropped"] = True
    if files_removed:  # only then: versions without it read as before
        obj["filesRemoved"] = list(files_removed)
    if checkpoint is not None:
        columns = encode_entry_columns(checkpoint) if len(checkpoint) >= COLUMNS_FROM else None
    else:
        columns = encode_entry_columns(upserts) if len(upserts) >= COLUMNS_FROM else None
    if columns is not None:
        obj["formatVersion"] = EXTRAS_FORMAT_VERSION if EXTRA_COLUMNS in columns else COLUMNS_FORMAT_VERSION
    if checkpoint is None and version > 0 and version % CHECKPOINT_INTERVAL == 0:
        obj["formatVersion"] = ARROW_CHECKPOINTS_FORMAT_VERSION
    if checkpoint is not None:
        if columns is not None:
            obj["entryColumns"] = columns
        else:
            obj["entries"] = [e.to_json() for e in checkpoint]
    else:
        if columns is not None:
            obj["upsertColumns"] = columns
        else:
            obj["upserts"] = [e.to_json() for e in upserts]
        obj["removes"] = list(removes)
    return with_checksum(orjson.dumps(obj))
