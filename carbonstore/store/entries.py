"""tablestatus entries: CarbonData's keys and status strings, checked when decoded.

An entry decoded from disk is checked before anything builds a path from it: ``loadName``
and ``mergedLoadName`` look like ``3`` or ``3.1``, ``segmentFile`` is a plain file name
(no folder part, never ``..``), the status is one CarbonData knows and every size, count
and timestamp is an integer (CarbonData writes some of them as digit strings, which are
accepted). Anything else raises ``ValueError``; the reader turns it into a
``CorruptMetadataError`` naming the file.
"""

from __future__ import annotations

import operator
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any, cast

from carbonstore.store.entry_extras import EXTRA_COLUMNS, decode_extra_columns, encode_extra_columns
from carbonstore.store.records import Frozen, field, replace

__all__ = [
    "ALL_STATUSES",
    "COMPACTED",
    "DeleteDelta",
    "FAILURE",
    "IN_PROGRESS",
    "MARKED_FOR_DELETE",
    "OVERWRITE_IN_PROGRESS",
    "PARTIAL_SUCCESS",
    "READABLE_STATUSES",
    "RUNNING_STATUSES",
    "SUCCESS",
    "LoadEntry",
    "KNOWN_KEYS",
    "PLAIN_KEYS",
    "build_plain",
    "check_plain_columns",
    "check_plain_file_name",
    "check_relative_path",
    "decode_entries",
    "decode_entry_columns",
    "encode_entry_columns",
    "next_compacted_name",
    "now_ms",
    "segment_sort_key",
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
RUNNING_STATUSES = frozenset({IN_PROGRESS, OVERWRITE_IN_PROGRESS})

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

_LOAD_NAME_RE = re.compile(r"[0-9]+(\.[0-9]+)?", re.ASCII)
_INT_RE = re.compile(r"-?[0-9]{1,19}", re.ASCII)
_KNOWN_KEYS = frozenset({
    "loadName", "loadStatus", "loadStartTime", "timestamp", "dataSize", "indexSize",
    "rowCount", "badRecordCount", "mergedLoadName", "modificationOrDeletionTimestamp",
    "visibility", "majorCompacted", "fileFormat", "segmentFile", "deleteDeltas",
})


def now_ms() -> int:
    return int(time.time() * 1000)


def check_plain_file_name(name: str, what: str = "segmentFile") -> str:
    """``name`` must be one file name: no folder part, not ``.``/``..``, no NUL.

    Raises:
        ValueError: anything a path could be built from that leaves its folder.
    """
    if (
        not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name
        or "\x00" in name or ":" in name
    ):
        raise ValueError(f"{what} {name!r} is not a plain file name")
    return name


def check_relative_path(path: str, what: str = "data file path") -> str:
    """``path`` relative to a segment folder, never leaving it (no ``..``, not absolute).

    Raises:
        ValueError: a path built from it would leave the folder.
    """
    parts = path.split("/") if isinstance(path, str) else [""]
    if (
        not isinstance(path, str) or path.startswith("/") or "\\" in path or "\x00" in path
        or any(p in ("", ".", "..") for p in parts) or ":" in parts[0]
    ):
        raise ValueError(f"{what} {path!r} leaves its segment folder")
    return path


def _int(obj: dict[str, Any], key: str, *, required: bool = False) -> int | None:
    value = obj.get(key)
    if type(value) is int:  # the common case first: every plan decodes many entries
        return value
    if value is None or value == "":
        if required:
            raise ValueError(f"{key} is missing")
        return None
    if isinstance(value, bool):
        raise ValueError(f"{key} {value!r} is not a number")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INT_RE.fullmatch(value.strip()):
        return int(value)
    raise ValueError(f"{key} {value!r} is not a number")


def _bool(obj: dict[str, Any], key: str, default: bool) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if value == "true" or value == "false":
        return value == "true"
    text = str(value).lower()
    if text not in ("true", "false"):
        raise ValueError(f"{key} {value!r} is not true or false")
    return text == "true"


class DeleteDelta(Frozen, kw_only=True):
    """The live delete delta of one data file of a segment (row-level DELETE/UPDATE/MERGE).

    ``data_file`` and ``delta_file`` are relative to the segment folder; ``deleted_rows`` is
    the cardinality of the delta (every row of the file deleted so far: deltas are
    cumulative). Format: docs/format.md, "Delete deltas".
    """

    data_file: str
    delta_file: str
    deleted_rows: int

    def to_json(self) -> dict[str, Any]:
        return {"dataFile": self.data_file, "deltaFile": self.delta_file,
                "deletedRows": self.deleted_rows}

    @classmethod
    def from_json(cls, obj: Any) -> DeleteDelta:
        if not isinstance(obj, dict):
            raise ValueError("a deleteDeltas item must be a JSON object")
        rows = _int(obj, "deletedRows", required=True)
        if rows is None or rows < 0:
            raise ValueError(f"deletedRows {rows!r} is negative")
        data_file, delta_file = obj.get("dataFile"), obj.get("deltaFile")
        if not isinstance(data_file, str) or not isinstance(delta_file, str):
            raise ValueError("deleteDeltas items need dataFile and deltaFile names")
        return cls(
            data_file=check_relative_path(data_file, "deleteDeltas dataFile"),
            delta_file=check_relative_path(delta_file, "deleteDeltas deltaFile"),
            deleted_rows=rows,
        )


class LoadEntry(Frozen, kw_only=True):
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
    #: one live delete delta per data file that has deleted rows (sorted by data file)
    delete_deltas: tuple[DeleteDelta, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def readable(self) -> bool:
        return self.visibility and self.status in READABLE_STATUSES

    @property
    def running(self) -> bool:
        return self.status in RUNNING_STATUSES

    @property
    def deleted_rows(self) -> int:
        """Rows of the segment deleted by row-level DML (not counted as readable)."""
        return sum(d.deleted_rows for d in self.delete_deltas)

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
        if self.delete_deltas:  # omitted when empty: entries without deltas decode unchanged
            out["deleteDeltas"] = [d.to_json() for d in self.delete_deltas]
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> LoadEntry:
        """Decode and check one entry (see the module docstring).

        Raises:
            ValueError: the entry is malformed.
        """
        if type(obj) is dict and obj.keys() <= _KNOWN_KEYS:
            plain = _decode_plain(cls, obj)
            if plain is not None:
                return plain
        if not isinstance(obj, dict):
            raise ValueError("a load entry must be a JSON object")
        load_name = obj.get("loadName")
        if isinstance(load_name, int) and not isinstance(load_name, bool):
            load_name = str(load_name)
        if not isinstance(load_name, str) or not _LOAD_NAME_RE.fullmatch(load_name):
            raise ValueError(f"invalid loadName {load_name!r}")
        status = obj.get("loadStatus")
        if status not in ALL_STATUSES:
            raise ValueError(f"unknown loadStatus {status!r}")
        merged = obj.get("mergedLoadName")
        if merged is not None and (
            not isinstance(merged, str) or not _LOAD_NAME_RE.fullmatch(merged)
        ):
            raise ValueError(f"invalid mergedLoadName {merged!r}")
        segment_file = obj.get("segmentFile")
        if segment_file is not None:
            check_plain_file_name(segment_file)
        file_format = obj.get("fileFormat") or "parquet"
        if not isinstance(file_format, str):
            raise ValueError(f"invalid fileFormat {file_format!r}")
        start = _int(obj, "loadStartTime", required=True) or 0
        deltas = obj.get("deleteDeltas") or []
        if not isinstance(deltas, list):
            raise ValueError("deleteDeltas must be a list")
        return cls(
            load_name=load_name,
            status=status,
            load_start_time=start,
            timestamp=_int(obj, "timestamp"),
            data_size=_int(obj, "dataSize") or 0,
            index_size=_int(obj, "indexSize") or 0,
            row_count=_int(obj, "rowCount") or 0,
            bad_record_count=_int(obj, "badRecordCount") or 0,
            merged_load_name=merged,
            modification_or_deletion_timestamp=_int(obj, "modificationOrDeletionTimestamp"),
            visibility=_bool(obj, "visibility", True),
            major_compacted=_bool(obj, "majorCompacted", False),
            file_format=file_format,
            segment_file=segment_file,
            delete_deltas=tuple(DeleteDelta.from_json(d) for d in deltas),
            extra={k: v for k, v in obj.items() if k not in _KNOWN_KEYS},
        )


_STATUS_SET = frozenset(ALL_STATUSES)
_FLAG_TEXT = (None, "true", "false")


def _decode_plain(cls: type[LoadEntry], obj: dict[str, Any]) -> LoadEntry | None:
    """The entry as written by this product (known keys, numbers as JSON integers, no
    deltas), checked like ``LoadEntry.from_json``; None when anything differs, and the
    full decoder decides (every plan decodes every entry: this is the common case, fast).
    """
    get = obj.get
    load_name, status, merged, segment_file = get("loadName"), get("loadStatus"), get("mergedLoadName"), get(
        "segmentFile")
    file_format = get("fileFormat") or "parquet"
    visibility, major = get("visibility"), get("majorCompacted")
    start, timestamp, data_size, index_size = get("loadStartTime"), get("timestamp"), get("dataSize"), get("indexSize")
    row_count, bad, modified = get("rowCount"), get("badRecordCount"), get("modificationOrDeletionTimestamp")
    if not (
        type(load_name) is str and type(status) is str and status in _STATUS_SET and type(start) is int
        and type(timestamp) in _INT_OR_NONE and type(data_size) in _INT_OR_NONE and type(index_size) in _INT_OR_NONE
        and type(row_count) in _INT_OR_NONE and type(bad) in _INT_OR_NONE and type(modified) in _INT_OR_NONE
        and type(segment_file) in _STR_OR_NONE and type(file_format) is str and visibility in _FLAG_TEXT
        and major in _FLAG_TEXT and not get("deleteDeltas") and _LOAD_NAME_RE.fullmatch(load_name)
        and (merged is None or (type(merged) is str and _LOAD_NAME_RE.fullmatch(merged)))
    ):
        return None
    if segment_file is not None:
        check_plain_file_name(segment_file)
    return cls(
        load_name=load_name, status=status, load_start_time=start, timestamp=timestamp,
        data_size=data_size or 0, index_size=index_size or 0, row_count=row_count or 0,
        bad_record_count=bad or 0, merged_load_name=merged, modification_or_deletion_timestamp=modified,
        visibility=visibility != "false", major_compacted=major == "true",
        file_format=file_format, segment_file=segment_file,
    )


_INT_OR_NONE = frozenset({int, type(None)})
_STR_OR_NONE = frozenset({str, type(None)})


def decode_entries(raw: Iterable[Any]) -> tuple[LoadEntry, ...]:
    """Decode a list of entries; a loadName twice is damage.

    Raises:
        ValueError: an entry is malformed or a loadName appears twice.
    """
    if type(raw) is list:
        plain = _decode_plain_list(raw)
        if plain is not None:
            return plain
    out = tuple(LoadEntry.from_json(o) for o in raw)
    seen: set[str] = set()
    for e in out:
        if e.load_name in seen:
            raise ValueError(f"loadName {e.load_name} appears twice")
        seen.add(e.load_name)
    return out


def segment_sort_key(load_name: str) -> tuple[int, int]:
    major, _, minor = load_name.partition(".")
    return int(major), int(minor or 0)


def next_compacted_name(first_source: str) -> str:
    """``N`` -> ``N.1``; ``N.k`` -> ``N.(k+1)``."""
    major, _, minor = first_source.partition(".")
    return f"{major}.{int(minor or 0) + 1}"


_NAME_LIST_RE = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?\n)*", re.ASCII)
_BAD_FILE_CHARS = ("/", "\\", "\x00", ":")


def _names_ok(names: list[Any]) -> bool:
    """Every item a str matching ``_LOAD_NAME_RE`` (one regex over the joined list: a name
    holding the separator changes the separator count)."""
    if not set(map(type, names)) <= _STR_ONLY:
        return False
    joined = "\n".join(names) + "\n" if names else ""
    if joined.count("\n") != len(names):
        return False
    if joined.isascii() and joined.replace("\n", "").isdigit() and "\n\n" not in joined and (
            joined[0] != "\n"):
        return True  # plain segment numbers (no compaction suffix): no regex needed
    return _NAME_LIST_RE.fullmatch(joined) is not None


def _plain_files_ok(files: list[str]) -> bool:
    """``check_plain_file_name`` of every item, at once."""
    if not files:
        return True
    if set(files) & _NOT_FILE_NAMES:
        return False
    joined = "".join(files)
    return not any(c in joined for c in _BAD_FILE_CHARS)


_STR_ONLY = frozenset({str})
_DICT_ONLY = frozenset({dict})
_INT_ONLY = frozenset({int})
_NOT_FILE_NAMES = frozenset({"", ".", ".."})
_FLAG_SET = frozenset(_FLAG_TEXT)


def _decode_plain_list(raw: list[Any]) -> tuple[LoadEntry, ...] | None:
    """``decode_entries`` of a list every item of which ``_decode_plain`` accepts, with
    distinct load names, checked key by key over the whole list; None when anything
    differs (the per-entry decoder then decides, and raises its errors)."""
    try:
        if not set(map(type, raw)) <= _DICT_ONLY:
            return None
        if set(map(len, raw)) == _PLAIN_LEN:
            # What this product writes: every entry has exactly the plain keys (no
            # deleteDeltas). One C-level lookup per entry takes all of them (a KeyError:
            # some entry has another key), and zip turns the rows into columns.
            try:
                rows = list(map(_PLAIN_GETTER, raw))
            except KeyError:
                pass
            else:
                return _decode_plain_columns(list(zip(*rows, strict=True)) if rows else [()] * len(_PLAIN_KEYS))
        if not set().union(*raw) <= _KNOWN_KEYS:
            return None
        if any(o.get("deleteDeltas") for o in raw):
            return None
    except TypeError:
        return None
    return _decode_plain_columns([[o.get(key) for o in raw] for key in _PLAIN_KEYS])


def _decode_plain_columns(columns: Sequence[Sequence[Any]]) -> tuple[LoadEntry, ...] | None:
    """Entries from one column per ``_PLAIN_KEYS`` key (None: absent), when every entry is
    one ``_decode_plain`` accepts and the load names are distinct; None otherwise."""
    checked = check_plain_columns(columns)
    return None if checked is None else build_plain(*checked)


def check_plain_columns(columns: Sequence[Sequence[Any]]) -> list[Sequence[Any]] | None:
    """The columns (one per ``_PLAIN_KEYS`` key, None: absent) checked as ``_decode_plain``
    checks one entry, with distinct load names; an absent or empty ``fileFormat`` reads as
    ``parquet``. None when any entry differs (the per-entry decoder then decides)."""
    names, statuses, starts, *ints, merged, visible, major, formats, files = columns
    try:
        if not set(map(type, formats)) <= _STR_ONLY or "" in formats:  # absent/empty: parquet
            formats = [f or "parquet" for f in formats]
        if not (
            _names_ok(names) and len(set(names)) == len(names)
            and set(statuses) <= _STATUS_SET and set(map(type, starts)) <= _INT_ONLY
            and all(set(map(type, col)) <= _INT_OR_NONE for col in ints)
            and set(map(type, formats)) <= _STR_ONLY
            and set(visible) <= _FLAG_SET and set(major) <= _FLAG_SET
            and _names_ok([m for m in merged if m is not None])
            and set(map(type, files)) <= _STR_OR_NONE
            and _plain_files_ok([f for f in files if f is not None])
        ):
            return None
    except TypeError:  # an unhashable value where a string belongs: the full decoder says what
        return None
    return [names, statuses, starts, *ints, merged, visible, major, formats, files]


def encode_entry_columns(entries: Iterable[LoadEntry]) -> dict[str, list[Any]] | None:
    """The entries as one array per CarbonData key (docs/tablestatus.md, "Entry columns");
    None when an entry carries keys beyond CarbonData's (``extra``): those stay rows."""
    entries = tuple(entries)
    extras = None
    if any(e.extra for e in entries):  # as dictionary-encoded columns (entry_extras.py)
        extras = encode_extra_columns([e.extra for e in entries], _KNOWN_KEYS)
        if extras is None:
            return None
    columns: dict[str, list[Any]] = {  # what LoadEntry.to_json writes, key by key
        "loadName": [e.load_name for e in entries],
        "loadStatus": [e.status for e in entries],
        "loadStartTime": [e.load_start_time for e in entries],
        "timestamp": [e.timestamp for e in entries],
        "dataSize": [e.data_size for e in entries],
        "indexSize": [e.index_size for e in entries],
        "rowCount": [e.row_count for e in entries],
        "badRecordCount": [e.bad_record_count for e in entries],
        "mergedLoadName": [e.merged_load_name for e in entries],
        "modificationOrDeletionTimestamp": [e.modification_or_deletion_timestamp for e in entries],
        "visibility": ["true" if e.visibility else "false" for e in entries],
        "majorCompacted": ["true" if e.major_compacted else "false" for e in entries],
        "fileFormat": [e.file_format for e in entries],
        "segmentFile": [e.segment_file for e in entries],
    }
    if any(e.delete_deltas for e in entries):
        columns["deleteDeltas"] = [[d.to_json() for d in e.delete_deltas] or None for e in entries]
    if extras is not None:
        columns[EXTRA_COLUMNS] = extras
    return columns


def decode_entry_columns(columns: Any) -> tuple[LoadEntry, ...]:
    """``decode_entries`` of entries written as columns: every check and error is the rows'.

    Raises:
        ValueError: the columns are malformed, an entry is, or a loadName appears twice.
    """
    if type(columns) is not dict:
        raise ValueError("entry columns must be a JSON object")
    extra_columns = columns.get(EXTRA_COLUMNS)
    if extra_columns is not None:
        columns = {k: v for k, v in columns.items() if k != EXTRA_COLUMNS}
    unknown = sorted(columns.keys() - _KNOWN_KEYS)
    if unknown:
        raise ValueError(f"unknown entry column {unknown[0]!r}")
    if not all(type(c) is list for c in columns.values()):
        raise ValueError("every entry column must be an array")
    lengths = set(map(len, columns.values()))
    if len(lengths) > 1:
        raise ValueError(f"entry columns differ in length ({sorted(lengths)})")
    n = lengths.pop() if lengths else 0
    missing = [None] * n  # an absent key reads as null, as in a row
    extras = decode_extra_columns(extra_columns, n, _KNOWN_KEYS) if extra_columns is not None else None
    if not any(columns.get("deleteDeltas") or ()):
        plain = _decode_plain_columns([columns.get(key, missing) for key in _PLAIN_KEYS])
        if plain is not None:
            if extras is not None:
                for e, x in zip(plain, extras, strict=True):
                    if x:
                        object.__setattr__(e, "extra", x)
            return plain
    keys = list(columns)
    rows = [dict(zip(keys, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    if not keys:
        rows = [{} for _ in range(n)]
    if extras is not None:
        for row, x in zip(rows, extras, strict=True):
            row.update(x)
    return decode_entries(rows)


# The keys of a plain entry, in the order _PlainEntry takes their values.
_PLAIN_KEYS = ("loadName", "loadStatus", "loadStartTime", "timestamp", "dataSize", "indexSize",
               "rowCount", "badRecordCount", "modificationOrDeletionTimestamp", "mergedLoadName",
               "visibility", "majorCompacted", "fileFormat", "segmentFile")
PLAIN_KEYS = _PLAIN_KEYS
KNOWN_KEYS = _KNOWN_KEYS
_PLAIN_GETTER = operator.itemgetter(*_PLAIN_KEYS)
_PLAIN_LEN = frozenset({len(_PLAIN_KEYS)})


class _PlainEntry(Frozen):
    """A LoadEntry under construction by ``build_plain``, at a third of the cost of the
    record's generated __init__ (which sets each of its 16 fields through
    ``object.__setattr__``; every fresh open builds every entry of the table). Base and
    slots are LoadEntry's (same names, same order, same layout), so once they are filled the
    instance becomes a LoadEntry (``__class__`` assignment between layout-identical classes)."""

    __slots__ = LoadEntry.__slots__
    __setattr__ = object.__setattr__  # type: ignore[assignment]  # (both: the C slot, no call of Python)
    __delattr__ = object.__delattr__  # type: ignore[assignment]


def build_plain(
    names: Sequence[str], statuses: Sequence[str], starts: Sequence[int], timestamps: Sequence[int | None],
    data: Sequence[int | None], index: Sequence[int | None], rows: Sequence[int | None],
    bad: Sequence[int | None], modified: Sequence[int | None], merged: Sequence[str | None],
    visible: Sequence[str | None], major: Sequence[str | None], formats: Sequence[str],
    files: Sequence[str | None],
) -> tuple[LoadEntry, ...]:
    """LoadEntry objects of plain entries' columns, in one loop: no call per entry (every fresh open
    builds every entry of the table: ~10 % less than a constructor call each)."""
    new, plain, entry = object.__new__, _PlainEntry, LoadEntry
    out = []
    add = out.append
    for name, status, start, ts, size, isize, count, nbad, mod, mname, vis, maj, fmt, sfile in zip(
            names, statuses, starts, timestamps, data, index, rows, bad, modified, merged, visible, major,
            formats, files, strict=True):
        e = new(plain)
        e.load_name = name
        e.status = status
        e.load_start_time = start
        e.timestamp = ts
        e.data_size = size or 0
        e.index_size = isize or 0
        e.row_count = count or 0
        e.bad_record_count = nbad or 0
        e.merged_load_name = mname
        e.modification_or_deletion_timestamp = mod
        e.visibility = vis != "false"
        e.major_compacted = maj == "true"
        e.file_format = fmt
        e.segment_file = sfile
        e.delete_deltas = ()
        e.extra = {}
        e.__class__ = entry  # type: ignore[assignment]
        add(e)
    return tuple(cast("list[LoadEntry]", out))
