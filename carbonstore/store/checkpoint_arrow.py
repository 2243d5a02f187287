"""tablestatus checkpoints as Arrow files (docs/tablestatus.md, "Checkpoints").

Every ``CHECKPOINT_INTERVAL``-th version is followed by a checkpoint of all the entries as
of that version: ``<version as 20 digits>.checkpoint.arrow`` next to the version files,
written once with put-if-absent *after* the version committed (so a commit never waits for
it to be read back, and a writer killed in between leaves a table that reads from the
checkpoint before). The file is ``CSCKPT1\\n`` + the xxh64 (16 hex digits) of the rest +
``\\n`` + one Arrow IPC stream: one column per CarbonData entry key, ``deleteDeltas`` as a
JSON string (null: none), ``extra`` (the keys beyond CarbonData's) as a dictionary of JSON
objects (a table's extras take a handful of distinct values). The stream's metadata names
the table id and the version.

Reading checks everything the JSON decoder checks, column by column over the columns' bytes
with numpy (a load name twice, a bad name or status, a segment file that is not a plain
name, an extra holding CarbonData's key ...; pyarrow.compute is not imported to read a
checkpoint), and builds a ``LoadEntry`` only for a row that is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import xxhash

from carbonstore.store.arrow_numpy import StringBytes, load_names_ok, plain_file_names_ok
from carbonstore.store.entries import (
    ALL_STATUSES,
    KNOWN_KEYS,
    PLAIN_KEYS,
    READABLE_STATUSES,
    DeleteDelta,
    LoadEntry,
    build_plain,
)
from carbonstore.store.status_checkpoints import checkpoint_name

__all__ = ["ArrowBase", "checkpoint_bytes", "int64s", "checkpoint_name", "decode_checkpoint", "encode_checkpoint", "entries_table"]

_MAGIC = b"CSCKPT1\n"
_HEAD = len(_MAGIC) + 17
_STR, _INT, _BOOL = pa.string(), pa.int64(), pa.bool_()
_TYPES = {
    "loadName": _STR, "loadStatus": _STR, "loadStartTime": _INT, "timestamp": _INT,
    "dataSize": _INT, "indexSize": _INT, "rowCount": _INT, "badRecordCount": _INT,
    "modificationOrDeletionTimestamp": _INT, "mergedLoadName": _STR, "visibility": _BOOL,
    "majorCompacted": _BOOL, "fileFormat": _STR, "segmentFile": _STR, "deleteDeltas": _STR,
    "extra": _STR,
}
SCHEMA = pa.schema([pa.field(k, t) for k, t in _TYPES.items()])
_FILE_TYPES = {**_TYPES, "extra": pa.dictionary(pa.int32(), pa.string())}
_NOT_NULL = ("loadName", "loadStatus", "loadStartTime", "dataSize", "indexSize", "rowCount",
             "badRecordCount", "visibility", "majorCompacted", "fileFormat")


def entries_table(entries: Sequence[LoadEntry]) -> pa.Table:
    """The entries as a table of ``SCHEMA`` (what a checkpoint holds)."""
    cols: dict[str, list[Any]] = {
        "loadName": [e.load_name for e in entries],
        "loadStatus": [e.status for e in entries],
        "loadStartTime": [e.load_start_time for e in entries],
        "timestamp": [e.timestamp for e in entries],
        "dataSize": [e.data_size for e in entries],
        "indexSize": [e.index_size for e in entries],
        "rowCount": [e.row_count for e in entries],
        "badRecordCount": [e.bad_record_count for e in entries],
        "modificationOrDeletionTimestamp": [e.modification_or_deletion_timestamp for e in entries],
        "mergedLoadName": [e.merged_load_name for e in entries],
        "visibility": [e.visibility for e in entries],
        "majorCompacted": [e.major_compacted for e in entries],
        "fileFormat": [e.file_format for e in entries],
        "segmentFile": [e.segment_file for e in entries],
        "deleteDeltas": [orjson.dumps([d.to_json() for d in e.delete_deltas]).decode()
                         if e.delete_deltas else None for e in entries],
        "extra": [orjson.dumps(e.extra, option=orjson.OPT_SORT_KEYS).decode() if e.extra else None
                  for e in entries],
    }
    return pa.table({k: pa.array(v, type=_TYPES[k]) for k, v in cols.items()}, schema=SCHEMA)


def encode_checkpoint(table: pa.Table, *, table_id: str, version: int) -> tuple[bytes, ArrowBase]:
    """The checkpoint file's bytes of ``table`` (of ``SCHEMA``), and its entries as a
    reader of the file sees them (not checked again: they are the entries this writer
    committed; every reader of the file checks it)."""
    data, table = checkpoint_bytes(table, table_id=table_id, version=version)
    return data, ArrowBase(table, check=False)


def checkpoint_bytes(table: pa.Table, *, table_id: str, version: int) -> tuple[bytes, pa.Table]:
    """The checkpoint file's bytes of ``table``, unchecked, and the table as written."""
    import pyarrow.compute as pc  # lazily: a table without an Arrow checkpoint never needs it
    table = table.combine_chunks()
    table = table.set_column(table.schema.get_field_index("extra"), "extra",
                             pc.dictionary_encode(table.column("extra")).cast(_FILE_TYPES["extra"]))
    meta = {b"tableId": table_id.encode(), b"version": str(version).encode()}
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema.with_metadata(meta)) as writer:
        writer.write_table(table)
    body = sink.getvalue().to_pybytes()
    return _MAGIC + xxhash.xxh64_hexdigest(body).encode() + b"\n" + body, table


def decode_checkpoint(data: bytes | memoryview, *, table_id: str, version: int) -> ArrowBase:
    """The checked entries of a checkpoint file.

    Raises:
        ValueError: damage of any kind (the caller names the file).
    """
    view = memoryview(data)  # (the file's bytes, or its mapping: StoreFS.map_file)
    if bytes(view[:len(_MAGIC)]) != _MAGIC or bytes(view[_HEAD - 1:_HEAD]) != b"\n":
        raise ValueError("not a tablestatus checkpoint file")
    body = view[_HEAD:]
    if xxhash.xxh64_hexdigest(body).encode() != bytes(view[len(_MAGIC):_HEAD - 1]):
        raise ValueError("its checksum does not match its content")
    try:
        table = pa.ipc.open_stream(pa.py_buffer(body)).read_all()
    except (pa.ArrowInvalid, OSError) as err:
        raise ValueError(f"unreadable Arrow stream ({err})") from err
    meta = table.schema.metadata or {}
    if meta.get(b"tableId") != table_id.encode() or meta.get(b"version") != str(version).encode():
        raise ValueError(f"it is version {meta.get(b'version')!r} of table {meta.get(b'tableId')!r}")
    if {f.name: f.type for f in table.schema} != _FILE_TYPES or table.schema.names != list(_TYPES):
        raise ValueError(f"unexpected columns {table.schema}")
    return ArrowBase(table.combine_chunks())


# numpy views of Arrow buffers: Array.to_numpy would import pandas (most of a second of a
# fresh process), and these arrays have no nulls (checked, or made by kernels from such).
def _bits(arr: pa.BooleanArray) -> np.ndarray:
    """A boolean array without nulls as numpy bools."""
    if not len(arr):
        return np.zeros(0, dtype=bool)
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[arr.offset:arr.offset + len(arr)].astype(bool)


def int64s(arr: pa.Int64Array) -> np.ndarray:
    """An int64 array without nulls as numpy (zero copy)."""
    if not len(arr):
        return np.zeros(0, dtype=np.int64)
    return np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr)]


#: up to this many names are looked up by value (ArrowBase.positions), more by a map
_BY_VALUE = 16


class ArrowBase:
    """A checkpoint's entries: the columns, checked; rows built when asked for."""

    def __init__(self, table: pa.Table, *, check: bool = True) -> None:
        self.n = table.num_rows
        # one chunk is taken as it is (combine_chunks copies even one: 14 MB at 100,000 entries)
        cols = {name: c.chunk(0) if c.num_chunks == 1 else c.combine_chunks()
                for name, c in zip(table.schema.names, table.columns, strict=True)}
        self.cols = cols
        self._names: list[str] | None = None
        self._statuses: np.ndarray | None = None
        self._plain: np.ndarray | None | bool = False  # (False: not worked out yet)
        self._strings: dict[str, StringBytes] = {}
        if check:
            self._check(cols)
        self.deltas: dict[int, tuple[DeleteDelta, ...]] = {}
        raw = cols["deleteDeltas"]
        for i in (np.flatnonzero(StringBytes(raw).valid).tolist() if raw.null_count < self.n else ()):
            items = orjson.loads(raw[i].as_py())
            if not isinstance(items, list):
                raise ValueError("deleteDeltas must be a list")
            self.deltas[i] = tuple(DeleteDelta.from_json(d) for d in items)
        extra = cols.pop("extra")
        self.extras: list[dict[str, Any]] = []
        for text in extra.dictionary.to_pylist():
            x = orjson.loads(text) if text is not None else None
            if type(x) is not dict or x.keys() & KNOWN_KEYS:
                raise ValueError(f"an extra that is not an object of other keys: {text!r}")
            self.extras.append(x)
        self.extra_index = extra.indices
        self._index: dict[str, int] | None = None
        self._max_id: int | None = None

    def _check(self, cols: dict[str, Any]) -> None:
        """Every check of the JSON decoder, column by column over the columns' bytes (numpy:
        no pyarrow.compute, whose import parses the documentation of every kernel)."""
        for key in _NOT_NULL:
            if cols[key].null_count:
                raise ValueError(f"{key} is missing in {cols[key].null_count} entries")
        ints = self.plain_ids()  # plain numbers are valid load names: no second pass then
        if ints is None and not load_names_ok(self.strings("loadName")):
            raise ValueError("an invalid loadName")
        if ints is not None:  # plain numbers (the common case): ascending, or sorted
            twice = len(ints) > 1 and not bool((ints[1:] > ints[:-1]).all()) and \
                not bool((np.diff(np.sort(ints)) != 0).all())
        else:
            twice = len(set(self.names())) != self.n
        if twice:
            raise ValueError("a loadName appears twice")
        if (self._status_codes() < 0).any():
            raise ValueError("an unknown loadStatus")
        merged = cols["mergedLoadName"]  # (null in every entry never compacted: nothing to test)
        if merged.null_count < self.n and not load_names_ok(self.strings("mergedLoadName")):
            raise ValueError("an invalid mergedLoadName")
        if not plain_file_names_ok(self.strings("segmentFile")):
            raise ValueError("a segmentFile that is not a plain file name")

    def strings(self, key: str) -> StringBytes:
        """String column ``key``'s bytes (StringBytes: its offsets decoded once; the
        checks and the readable entries' keys read the same columns)."""
        got = self._strings.get(key)
        if got is None:
            got = self._strings[key] = StringBytes(self.cols[key])
        return got

    def plain_ids(self) -> np.ndarray | None:
        """Each row's load name as a number, when every name is a plain number (no ``.``,
        no leading zero); None otherwise."""
        if self._plain is False:
            self._plain = self.strings("loadName").plain_ints()
        return self._plain  # type: ignore[return-value]

    def _status_codes(self) -> np.ndarray:
        """Each row's status as its position in ``ALL_STATUSES`` (-1: none)."""
        if self._statuses is None:
            self._statuses = self.strings("loadStatus").codes(ALL_STATUSES)
        return self._statuses

    # ---- lookups ------------------------------------------------------------------------------
    def names(self) -> list[str]:
        if self._names is None:
            self._names = self.cols["loadName"].to_pylist()
        return self._names

    def index(self) -> dict[str, int]:
        if self._index is None:
            names = self.names()
            self._index = dict(zip(names, range(len(names)), strict=True))
        return self._index

    def position(self, name: str) -> int | None:
        return self.positions([name]).get(name)

    def positions(self, names: Sequence[str]) -> dict[str, int]:
        """The rows of those of ``names`` that are entries. A few names of a checkpoint
        whose load names are all plain numbers are found by value (the map of every name
        costs 50 ms at 100,000 entries: a commit's or a lookup's handful of changes)."""
        ids = self.plain_ids() if self._index is None and len(names) <= _BY_VALUE else None
        if ids is None:
            index = self.index()
            return {n: i for n in names if (i := index.get(n)) is not None}
        out = {}
        for n in names:  # only a plain number can be one of them ("07" is not "7")
            if n.isascii() and n.isdigit() and len(n) <= 18 and (n[0] != "0" or n == "0"):
                at = np.flatnonzero(ids == int(n))
                if len(at):
                    out[n] = int(at[0])
        return out

    def max_id(self) -> int:
        """The largest integer part of a load name (-1: none)."""
        import pyarrow.compute as pc  # lazily: a table without an Arrow checkpoint never needs it
        if self._max_id is None:
            if not self.n:
                self._max_id = -1
            else:
                major = pc.replace_substring_regex(self.cols["loadName"], pattern=r"\..*$", replacement="")
                self._max_id = int(pc.max(pc.cast(major, pa.int64())).as_py())
        return self._max_id

    def readable_mask(self) -> np.ndarray:
        """Which rows are readable (a readable status, visible)."""
        readable = np.array([st in READABLE_STATUSES for st in ALL_STATUSES] + [False])
        return readable[self._status_codes()] & _bits(self.cols["visibility"])  # type: ignore[no-any-return]

    def readable_values(self, skip: Sequence[str], keys: Sequence[str],
                        ) -> tuple[list[str], list[np.ndarray]]:
        """Names and the numpy values of the int64 / boolean columns ``keys`` of the
        readable rows, leaving out the entries named ``skip`` (no entry built, no Python
        value turned into an Arrow one)."""
        rows = np.flatnonzero(self._readable_rows(skip))
        names = self.names()
        cols = [(_bits(c) if c.type == _BOOL else int64s(c))[rows]
                for c in (self.cols[k] for k in keys)]
        return [names[i] for i in rows.tolist()], cols

    def readable_sums(self, skip: Sequence[str], keys: Sequence[str]) -> list[int]:
        """The sums of the int64 columns ``keys`` over the readable rows, leaving out the
        entries named ``skip`` (no name or entry built)."""
        mask = self._readable_rows(skip)
        return [int(int64s(self.cols[k])[mask].sum()) for k in keys]

    def extra_rows(self, key: str, skip: Sequence[str]) -> list[int]:
        """The readable rows whose ``extra`` holds ``key``, leaving out the entries named
        ``skip`` (none looked at when no distinct extra holds it: the usual answer)."""
        codes = {c for c, x in enumerate(self.extras) if key in x}
        if not codes:
            return []
        mask = self._readable_rows(skip)
        return [i for i, c in enumerate(self.extra_index.to_pylist()) if c in codes and mask[i]]

    def status_rows(self, statuses: Sequence[str]) -> list[int]:
        """The rows whose status is one of ``statuses``."""
        wanted = np.array([st in statuses for st in ALL_STATUSES] + [False])
        return np.flatnonzero(wanted[self._status_codes()]).tolist()  # type: ignore[no-any-return]

    # ---- entries ------------------------------------------------------------------------------
    def _build(self, cols: list[list[Any]], rows: Sequence[int]) -> tuple[LoadEntry, ...]:
        names, statuses, starts, ts, data, index, count, bad, modified, merged, vis, major, fmt, files = cols
        vis = ["false" if v is False else "true" for v in vis]
        major = ["true" if v else "false" for v in major]
        built = build_plain(names, statuses, starts, ts, data, index, count, bad, modified, merged,
                            vis, major, fmt, files)
        extras, ix, deltas = self.extras, self.extra_index, self.deltas
        xs = ix.to_pylist() if len(rows) == self.n else [ix[i].as_py() for i in rows]
        for e, i, x in zip(built, rows, xs, strict=True):
            if x is not None:
                object.__setattr__(e, "extra", dict(extras[x]))
            if i in deltas:
                object.__setattr__(e, "delete_deltas", deltas[i])
        return built

    def row(self, i: int) -> LoadEntry:
        return self._build([[self.cols[k][i].as_py()] for k in PLAIN_KEYS], [i])[0]

    def all(self) -> tuple[LoadEntry, ...]:
        return self._build([self.cols[k].to_pylist() for k in PLAIN_KEYS], range(self.n))

    def _readable_rows(self, skip: Sequence[str]) -> np.ndarray:
        mask = self.readable_mask()
        if skip:
            mask[list(self.positions(skip).values())] = False
        return mask

    def readable_stats(self, skip: Sequence[str]) -> tuple[int, int]:
        """(readable entries, their live rows), leaving out the entries named ``skip``."""
        mask = self._readable_rows(skip)
        rows = int(int64s(self.cols["rowCount"])[mask].sum())
        for i, dd in self.deltas.items():
            if mask[i]:
                rows -= sum(d.deleted_rows for d in dd)
        return int(mask.sum()), rows

    def readable_files(self, skip: Sequence[str], only: Sequence[str] | None = None,
                       ) -> dict[str, tuple[str | None, tuple[DeleteDelta, ...]]]:
        """Segment file and delete deltas of each readable entry (or of those named in
        ``only``), by load name (leaving out the entries named ``skip``), from the columns."""
        mask = self._readable_rows(skip)
        if only is None:
            rows = np.flatnonzero(mask).tolist()
        elif self._index is not None:
            rows = [i for n in only if (i := self._index.get(n)) is not None and mask[i]]
        else:  # one pass over the names: cheaper than the index of them all
            want = set(only)
            rows = [i for i, n in enumerate(self.names()) if n in want and mask[i]]
        names, files, deltas = self.names(), self.cols["segmentFile"].to_pylist(), self.deltas
        return {names[i]: (files[i], deltas.get(i, ())) for i in rows}

    def table(self) -> pa.Table:
        """The entries as a table of ``SCHEMA``."""
        cols = dict(self.cols)
        cols["extra"] = pa.array([orjson.dumps(x, option=orjson.OPT_SORT_KEYS).decode() for x in self.extras],
                                 type=_STR).take(self.extra_index)
        return pa.table([cols[k] for k in _TYPES], schema=SCHEMA)
