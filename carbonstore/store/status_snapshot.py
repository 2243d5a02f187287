"""A tablestatus version as its readers see it (``TableStatusSnapshot``), and a commit's
change (``StatusChange``); docs/tablestatus.md.

A snapshot's entries are an ``EntryView`` (entry_view.py): counts, one segment's entry or a
page of the newest are answered without building every entry of a big table; ``entries``
builds them all on first use.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from carbonstore.errors import SegmentNotFoundError
from carbonstore.store.entries import READABLE_STATUSES, LoadEntry, segment_sort_key
from carbonstore.store.entry_view import EntryView
from carbonstore.store.records import Frozen

if TYPE_CHECKING:
    from carbonstore.store.readable import ReadableEntries

__all__ = ["StatusChange", "TableStatusSnapshot"]


class StatusChange(Frozen):
    """What a commit changes: entries to add or replace, load names to remove.

    A change function handed to ``TableStatus.update`` may return one instead of the whole
    list of entries: the commit then costs the size of the change, not of the table.
    """

    upserts: tuple[LoadEntry, ...] = ()
    removes: tuple[str, ...] = ()


class TableStatusSnapshot:
    """One version of tablestatus: the entries as of ``version``.

    ``id_floor`` is the smallest id a new segment may take (ids are never reused, also
    after clean files removed the entries); ``timestamp`` is when the version was written.
    ``entries`` builds every entry on first use; ``view`` (``EntryView``) answers for one
    segment, a page or the counts without building the others. Immutable.
    """

    __slots__ = ("_rows", "id_floor", "legacy", "table_id", "timestamp", "version", "view")

    view: EntryView
    version: int
    id_floor: int
    table_id: str
    timestamp: int
    legacy: bool

    def __init__(self, entries: Iterable[LoadEntry] = (), version: int = 0, id_floor: int = 0,
                 table_id: str = "", timestamp: int = 0, legacy: bool = False,
                 rows: int | None = None) -> None:
        for name, value in (("view", EntryView.of(entries)), ("version", version),
                            ("id_floor", id_floor), ("table_id", table_id),
                            ("timestamp", timestamp), ("legacy", legacy), ("_rows", rows)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TableStatusSnapshot is immutable (setting {name})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TableStatusSnapshot):
            return NotImplemented
        return (self.version, self.id_floor, self.table_id, self.timestamp) == (
            other.version, other.id_floor, other.table_id, other.timestamp) and self.view == other.view

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"TableStatusSnapshot(version={self.version!r}, entries={len(self.view)}, "
                f"id_floor={self.id_floor}, table_id={self.table_id!r}, timestamp={self.timestamp})")

    @property
    def entries(self) -> tuple[LoadEntry, ...]:
        return self.view.as_tuple()

    def get(self, load_name: str) -> LoadEntry:
        e = self.view.find(load_name)
        if e is None:
            raise SegmentNotFoundError(f"segment {load_name} does not exist")
        return e

    def find(self, load_name: str) -> LoadEntry | None:
        return self.view.find(load_name)

    @property
    def readable(self) -> list[LoadEntry]:
        return [e for e in self.entries if e.readable]

    def readable_count(self) -> int:
        """How many segments are readable (no entry built when none was)."""
        return self.view.readable_stats()[0]

    def readable_rows(self) -> int:
        """The live rows of the readable segments: ``count(*)`` from the metadata (the
        version's recorded ``readableRows`` when it has one)."""
        return self._rows if self._rows is not None else self.view.readable_stats()[1]

    def newest(self, limit: int, offset: int = 0) -> list[LoadEntry]:
        """A page of entries, newest first: ``limit`` after skipping the ``offset`` newest."""
        return self.view.tail(limit, offset)

    def readable_in_order(self) -> list[LoadEntry]:
        """Readable entries in segment order (sorted once per decoded version: every plan
        of a version asks for them, and its entries are one shared immutable tuple)."""
        entries = self.entries
        hit = _IN_ORDER.get(id(entries))
        if hit is not None and hit[0] is entries:
            return list(hit[1])
        got = _in_segment_order([e for e in entries if e.visibility and e.status in READABLE_STATUSES])
        if len(_IN_ORDER) >= 16:  # a few versions are live at a time: start over
            _IN_ORDER.clear()
        _IN_ORDER[id(entries)] = (entries, got)  # holding the tuple keeps its id unique
        return list(got)

    def readable_segments(self) -> ReadableEntries:
        """The entries of ``readable_in_order`` as a sequence that builds an entry only when
        it is used (readable.py); one per version's entries, kept while they are live."""
        # numpy and pyarrow come in here: a plan needs them, reading the entries does not
        from carbonstore.store.readable import ReadableEntries

        view = self.view
        hit = _READABLE.get(id(view))
        if hit is not None and hit[0] is view:
            return hit[1]
        got = ReadableEntries(view)
        if len(_READABLE) >= 16:  # a few versions are live at a time: start over
            _READABLE.clear()
        _READABLE[id(view)] = (view, got)  # holding the view keeps its id unique
        return got

    def refuse_unreadable(self, ids: Iterable[str], table: str) -> None:
        """Refuse segment ids a read cannot use: one that is no segment of this version,
        or whose segment is not Success / Partial Success (compacted, marked for delete,
        still loading). A read of such an id would silently give nothing.

        Raises:
            SegmentNotFoundError: naming the first such id (in segment order) and why.
        """
        for sid in sorted(set(ids), key=segment_sort_key):
            entry = self.view.find(sid)
            if entry is not None and entry.readable:
                continue
            state = "does not exist" if entry is None else f"is {entry.status}"
            raise SegmentNotFoundError(
                f"segment {sid} of {table} {state}; only Success and Partial Success segments "
                "can be read (see 'carbonstore show-segments')"
            )

    def next_segment_id(self) -> str:
        return str(self.view.next_id_from(self.id_floor))


# id(entry view) -> (that view, its readable entries in segment order, built when used)
_READABLE: dict[int, tuple[EntryView, ReadableEntries]] = {}

# id(entries tuple) -> (that tuple, its readable entries in segment order)
_IN_ORDER: dict[int, tuple[tuple[LoadEntry, ...], tuple[LoadEntry, ...]]] = {}


def _in_segment_order(entries: list[LoadEntry]) -> tuple[LoadEntry, ...]:
    """``entries`` sorted by ``segment_sort_key`` of their load names; when no name has a
    compaction suffix (``3.1``) the key is the number itself, computed in one pass."""
    names = [e.load_name for e in entries]
    if "." in "".join(names):
        return tuple(sorted(entries, key=lambda e: segment_sort_key(e.load_name)))
    keys = list(map(int, names))
    if keys == sorted(keys):  # the usual order already (entries are appended as loads commit)
        return tuple(entries)
    return tuple(entries[i] for i in sorted(range(len(keys)), key=keys.__getitem__))


