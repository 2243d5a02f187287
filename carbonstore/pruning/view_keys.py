"""Keys of the driver's cached table views: a hash of the entries' segment ids and merge
index names, taken once per set of entries from their bytes, and table conf integers remembered per
store value and table properties (a cached plan's lookups cost less than rebuilding them)."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import xxhash

from carbonstore.store.arrow_numpy import strings_bytes
from carbonstore.store.readable import ReadableEntries
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry

__all__ = ["KeyBytes", "conf_int", "entries_key", "key_bytes_of", "names_files_of"]


_ENTRY_KEYS: dict[tuple[int, ...], tuple[tuple[LoadEntry, ...], tuple[int, bytes]]] = {}
_READABLE_KEYS: dict[int, tuple[ReadableEntries, tuple[int, bytes]]] = {}

KeyBytes = tuple[tuple[npt.NDArray[np.int64], bytes], tuple[npt.NDArray[np.int64], bytes]]


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


def _digest(kb: KeyBytes) -> tuple[int, bytes]:
    h = xxhash.xxh3_128()
    for lengths, data in kb:
        h.update(np.ascontiguousarray(lengths, dtype="<i8").tobytes())
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
