"""Keys of the driver's cached table views: the entries' segment ids and merge index
names, built and hashed once per set of entries, and table conf integers remembered per
store value and table properties (a cached plan's lookups cost less than rebuilding them)."""

from __future__ import annotations

import operator
from collections.abc import Sequence

from carbonstore.store.readable import ReadableEntries
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry

__all__ = ["conf_int", "entries_key", "names_files_of"]


class _EntriesKey(tuple):  # type: ignore[type-arg]
    """A view key that hashes once: (the segment ids, their merge index names), two tuples of
    thousands of strings, are otherwise hashed again on every cache lookup (equal to, and
    hashing as, the plain tuple)."""

    def __hash__(self) -> int:
        h = self.__dict__.get("hash")
        if h is None:
            h = self.__dict__["hash"] = tuple.__hash__(self)
        return h  # type: ignore[no-any-return]


_ENTRY_KEYS: dict[tuple[int, ...], tuple[tuple[LoadEntry, ...], tuple[tuple[str, ...], tuple[str, ...]]]] = {}


def names_files_of(entries: Sequence[LoadEntry]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The entries' segment ids and merge index names ("" for none)."""
    if isinstance(entries, ReadableEntries):
        return entries.key()
    return tuple([e.load_name for e in entries]), tuple([e.segment_file or "" for e in entries])


def entries_key(entries: Sequence[LoadEntry]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(segment ids, merge index names) of the entries; remembered per set of entry objects
    (each plan of a tablestatus version gets the same immutable entries), so a plan over
    thousands of segments does not rebuild it. Two tuples of strings rather than a pair per
    entry: a fresh plan builds and hashes it once, and the strings' hashes are kept."""
    if isinstance(entries, ReadableEntries):  # one per version: its columns, hashed once
        got = _READABLE_KEYS.get(id(entries))
        if got is None or got[0] is not entries:
            if len(_READABLE_KEYS) >= 16:
                _READABLE_KEYS.clear()
            got = _READABLE_KEYS[id(entries)] = (entries, _EntriesKey(entries.key()))
        return got[1]
    ids = tuple(map(id, entries))
    hit = _ENTRY_KEYS.get(ids)
    if hit is not None and all(map(operator.is_, hit[0], entries)):
        return hit[1]
    key = _EntriesKey(names_files_of(entries))
    if len(_ENTRY_KEYS) >= 16:  # a few versions are live at a time: start over
        _ENTRY_KEYS.clear()
    _ENTRY_KEYS[ids] = (tuple(entries), key)  # holding the entries keeps their ids unique
    return key


_READABLE_KEYS: dict[int, tuple[ReadableEntries, tuple[tuple[str, ...], tuple[str, ...]]]] = {}

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
