"""Keys of the driver's cached table views: a hash of the entries' segment ids and merge
index names, taken once per set of entries from their bytes; a view's segments matched to
an index snapshot's rows as bytes, and its names read one at a time; and table conf integers remembered per
store value and table properties (a cached plan's lookups cost less than rebuilding them)."""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from carbonstore.indexfiles.snapshot import Snapshot
from carbonstore.store.arrow_numpy import StringBytes, same_bytes, strings_bytes
from carbonstore.store.readable import ReadableEntries
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry

__all__ = ["KeyBytes", "ViewColumn", "ViewRows", "conf_int", "entries_key", "first_keys", "key_bytes_of", "names_files_of",
           "snapshot_holds"]


_ENTRY_KEYS: dict[tuple[int, ...], tuple[tuple[LoadEntry, ...], tuple[int, bytes]]] = {}
_READABLE_KEYS: dict[int, tuple[ReadableEntries, tuple[int, bytes]]] = {}

#: (lengths, bytes) of the segment ids and of the merge index names; the bytes may be a
#: read-only memoryview of a checkpoint's column (arrow_numpy.StringBytes.take_bytes)
KeyBytes = tuple[tuple[npt.NDArray[Any], Any], tuple[npt.NDArray[Any], Any]]


def names_files_of(entries: Sequence[LoadEntry]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The entries' segment ids and merge index names ("" for none)."""
    if isinstance(entries, ReadableEntries):
        return entries.key()
    return tuple([e.load_name for e in entries]), tuple([e.segment_file or "" for e in entries])


def key_bytes_of(entries: Sequence[LoadEntry]) -> KeyBytes:
    """(lengths, bytes) of the entries' segment ids and of their merge index names
    (arrow_numpy.strings_bytes): a checkpoint's entries give them from its columns."""
    if isinstance(entries, ReadableEntries):
        return entries.key_bytes()
    names, files = names_files_of(entries)
    return strings_bytes(names), strings_bytes(files)


def first_keys(kb: KeyBytes, n: int) -> KeyBytes:
    """The first ``n`` entries' part of key bytes ``kb``."""
    return tuple((lengths[:n], data[:int(np.sum(lengths[:n], dtype=np.int64))])  # type: ignore[return-value]
                 for lengths, data in kb)


def _digest(kb: KeyBytes) -> tuple[int, bytes]:
    h = xxhash.xxh3_128()
    for lengths, data in kb:
        h.update(np.ascontiguousarray(lengths, dtype="<i4"))  # (a checkpoint's as they are: no copy)
        h.update(data)
    return len(kb[0][0]), h.digest()


def entries_key(entries: Sequence[LoadEntry]) -> tuple[int, bytes]:
    """What identifies the set of segments of ``entries`` (their number and a 128-bit hash
    of their segment ids and merge index names, in order): equal for the same segments in
    any tablestatus version; remembered per set of entry objects. Hashed from the bytes (a
    checkpoint's columns): no tuple of 100,000 strings is built and hashed."""
    if isinstance(entries, ReadableEntries):  # one per version
        got = _READABLE_KEYS.get(id(entries))
        if got is None or got[0] is not entries:
            if len(_READABLE_KEYS) >= 16:
                _READABLE_KEYS.clear()
            got = _READABLE_KEYS[id(entries)] = (entries, _digest(entries.key_bytes()))
        return got[1]
    ids = tuple(map(id, entries))
    hit = _ENTRY_KEYS.get(ids)
    if hit is not None and all(map(operator.is_, hit[0], entries)):
        return hit[1]
    key = _digest(key_bytes_of(entries))
    if len(_ENTRY_KEYS) >= 16:  # a few versions are live at a time: start over
        _ENTRY_KEYS.clear()
    _ENTRY_KEYS[ids] = (tuple(entries), key)  # holding the entries keeps their ids unique
    return key


_SINGLE_READS = 256  # names a view reads one at a time before it builds the lists


class ViewColumn(Sequence[str]):
    """A view's load names (0) or merge index names (1): ``[i]`` reads one (the first 256
    of a view: a lookup names the few segments it keeps), anything else builds the whole
    lists once (TableIndex._names_and_files in table_index.py)."""

    __slots__ = ("_view", "_which")

    def __init__(self, view: Any, which: int) -> None:
        self._view, self._which = view, which

    def __getitem__(self, i: Any) -> Any:
        view = self._view
        view.name_reads += 1  # many single reads (a scan, an explain): the lists once
        if (isinstance(i, slice) or view._names_files is not None or view.name_reads > _SINGLE_READS
                or not isinstance(view.entries, ReadableEntries)):
            return view._names_and_files()[self._which][i]
        return view.entries.file_at(i) if self._which else view.entries.name_at(i)

    def take(self, at: npt.NDArray[np.intp]) -> list[str]:
        """``[self[i] for i in at]`` in one pass: many names (a scan keeps tens of
        thousands of segments) are cut from the entries' bytes (ReadableEntries.key_bytes)
        at once, not read one at a time nor built for every segment of the view."""
        view = self._view
        entries = view.entries
        if len(at) <= _SINGLE_READS or view._names_files is not None or not isinstance(entries, ReadableEntries):
            return [self[i] for i in at.tolist()]
        lengths, data = entries.key_bytes()[self._which]
        ends = np.cumsum(lengths)
        pick = np.asarray(at, dtype=np.intp)
        b, e = (ends[pick] - lengths[pick]).tolist(), ends[pick].tolist()
        try:  # (ASCII: byte offsets are character offsets; bytes or a memoryview alike)
            text = str(data, "ascii")
        except UnicodeDecodeError:
            return [str(data[i:j], "utf-8") for i, j in zip(b, e, strict=True)]
        return [text[i:j] for i, j in zip(b, e, strict=True)]

    def __len__(self) -> int:
        return self._view.size

    def __iter__(self) -> Iterator[str]:
        return iter(self._view._names_and_files()[self._which])


class ViewRows:
    """View index -> snapshot row over an array (what the dict of a view whose every
    segment is a snapshot row would hold, without building it)."""

    __slots__ = ("_rows",)

    def __init__(self, rows: npt.NDArray[np.intp]) -> None:
        self._rows = rows

    def get(self, i: int, default: int | None = None) -> int | None:
        return int(self._rows[i]) if 0 <= i < len(self._rows) else default

    def __len__(self) -> int:
        return len(self._rows)

    def keys(self) -> Any:
        return range(len(self._rows))

    def values(self) -> Any:
        return self._rows.tolist()


def snapshot_holds(snapshot: Snapshot, kb: KeyBytes) -> bool:
    """The snapshot's first rows are the segments of ``kb`` (view_keys.key_bytes_of: their
    ids' and merge index names' lengths and bytes), in order: compared as bytes."""
    n = len(kb[0][0])
    if n > snapshot.size:
        return False
    for col, (lengths, data) in zip(("segment", "merge"), kb, strict=True):
        arr = snapshot.core.column(col)
        sb = StringBytes(arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks())
        ours = sb.lengths[:n] if bool(sb.valid[:n].all()) else np.where(sb.valid[:n], sb.lengths[:n], 0)  # (a null as "")
        if not np.array_equal(ours, lengths):
            return False
        if n and bool((ours == sb.lengths[:n]).all()):  # the rows' bytes back to back (an
            lo = int(sb.starts[0])  # Arrow array's are): compared where they lie, no copy
            if not same_bytes(sb.data[lo:lo + int(ours.sum())], np.frombuffer(data, dtype=np.uint8)):
                return False
        elif bytes(sb.take_bytes(np.arange(n, dtype=np.int64))[1]) != bytes(data):
            return False
    return True


_CONF_INTS: dict[tuple[str, str | None, tuple[tuple[str, str], ...]], int] = {}


def conf_int(table: Table, key: str) -> int:
    """``table.conf.get_int(key)``, remembered per store value and table properties
    (layering the table's properties over the store conf costs more than the rest of a
    cached plan's lookups)."""
    memo_key = (key, table.store.conf.values.get(key), tuple(sorted(table.schema.properties.items())))
    value = _CONF_INTS.get(memo_key)
    if value is None:
        value = table.conf.get_int(key)
        if len(_CONF_INTS) >= 64:
            _CONF_INTS.clear()
        _CONF_INTS[memo_key] = value
    return value
