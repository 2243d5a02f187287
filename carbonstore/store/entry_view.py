"""A tablestatus version's entries, checked when read and built when used.

A checkpoint of a big table is an Arrow file (checkpoint_arrow.py). Reading one checks
every column at once, as decoding did (the same checks), but builds a ``LoadEntry`` only
for an entry that is asked for: the entry of one segment (a load's commit), the newest
page (``show-segments --limit``), or all of them when a caller iterates. The versions
after the checkpoint are applied as an overlay (the entries they change or add, the names
they remove), so a commit costs the size of its change, not of the table, and the next
checkpoint is the checkpoint's columns with the overlay spliced in, never one Python
object per segment.

An ``EntryView`` is immutable: ``apply`` returns a new view. Its order is the order of
the entries as a dict by load name that every change is applied to: the checkpoint's
order, a changed entry keeps its place, a new one goes last (also one removed and added
again).

A view over entries (a JSON tablestatus) is plain Python: numpy, pyarrow and the checkpoint
module are imported only by ``to_table`` (writing a checkpoint); a view over a checkpoint
holds the ``ArrowBase`` its reader made.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, overload

from carbonstore.store.entries import LoadEntry, segment_sort_key

if TYPE_CHECKING:
    import pyarrow as pa

    from carbonstore.store.checkpoint_arrow import ArrowBase

__all__ = ["EntryView"]

#: entry field -> its checkpoint column (the int and bool ones ``readable_values`` serves)
_COLUMN = {"data_size": "dataSize", "index_size": "indexSize", "row_count": "rowCount",
           "load_start_time": "loadStartTime", "timestamp": "timestamp",
           "major_compacted": "majorCompacted", "bad_record_count": "badRecordCount"}


class EntryView(Sequence[LoadEntry]):
    """The entries of one version: a base (a checkpoint's columns, or entries) plus an overlay."""

    __slots__ = ("_all", "_appended", "_arrow", "_base", "_changed", "_index", "_n", "_removed", "_rows")

    def __init__(self, base: Sequence[LoadEntry] | ArrowBase) -> None:
        # entries are a Sequence; a checkpoint's ArrowBase is not (and needs no import here)
        self._arrow = None if isinstance(base, Sequence) else base
        self._base = None if self._arrow is not None else tuple(base)  # type: ignore[arg-type]
        self._n = self._arrow.n if self._arrow is not None else len(self._base or ())
        self._rows: dict[int, LoadEntry] = {}  # arrow rows built so far
        self._index: dict[str, int] | None = None
        self._changed: dict[str, LoadEntry | None] = {}  # base names: the new entry, None: removed
        self._appended: dict[str, LoadEntry] = {}  # names not in the base (or removed and added again)
        self._removed = 0
        self._all: tuple[LoadEntry, ...] | None = self._base

    @classmethod
    def of(cls, entries: Iterable[LoadEntry]) -> EntryView:
        return entries if isinstance(entries, EntryView) else cls(tuple(entries))

    # ---- the base ---------------------------------------------------------------------------
    def _base_names(self) -> Sequence[str]:
        if self._arrow is not None:
            return self._arrow.names()
        return [e.load_name for e in self._base or ()]

    def _position(self, name: str) -> int | None:
        if self._arrow is not None and self._index is None:
            return self._arrow.position(name)
        if self._index is None:
            self._index = {e.load_name: i for i, e in enumerate(self._base or ())}
        return self._index.get(name)

    def _positions(self, names: Sequence[str]) -> dict[str, int]:
        """The base positions of those of ``names`` that are base entries."""
        if self._arrow is not None and self._index is None:
            return self._arrow.positions(names)
        return {n: i for n in names if (i := self._position(n)) is not None}

    def _base_row(self, i: int) -> LoadEntry:
        if self._base is not None:
            return self._base[i]
        e = self._rows.get(i)
        if e is None:
            assert self._arrow is not None
            e = self._rows[i] = self._arrow.row(i)
        return e

    def _base_entries(self) -> tuple[LoadEntry, ...]:
        if self._base is None:
            assert self._arrow is not None
            built = self._arrow.all()
            if self._rows:  # entries handed out before stay the same objects
                built = tuple(self._rows.get(i, b) for i, b in enumerate(built))
            self._base = built
        return self._base

    def arrow_base(self) -> ArrowBase | None:
        """The checkpoint's columns this view reads from (None: its base is entries)."""
        return self._arrow

    def overlay(self) -> tuple[dict[str, LoadEntry | None], dict[str, LoadEntry]]:
        """The changes over the base: base names -> the new entry (None: removed), and the
        entries not in the base. Read only."""
        return self._changed, self._appended

    def base_entry(self, i: int) -> LoadEntry:
        """The base's entry ``i`` (built once; the object ``as_tuple`` hands out)."""
        return self._base_row(i)

    # ---- the entries ------------------------------------------------------------------------
    def as_tuple(self) -> tuple[LoadEntry, ...]:
        """Every entry (built once, then kept)."""
        if self._all is None:
            base = self._base_entries()
            if not self._changed:
                out = list(base)
            else:
                changed, out = self._changed, []
                for e in base:
                    if e.load_name in changed:
                        new = changed[e.load_name]
                        if new is None:
                            continue
                        e = new
                    out.append(e)
            out.extend(self._appended.values())
            self._all = tuple(out)
        return self._all

    def __len__(self) -> int:
        return self._n - self._removed + len(self._appended)

    def __iter__(self) -> Iterator[LoadEntry]:
        return iter(self.as_tuple())

    @overload
    def __getitem__(self, i: int) -> LoadEntry: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[LoadEntry, ...]: ...

    def __getitem__(self, i: int | slice) -> LoadEntry | tuple[LoadEntry, ...]:
        return self.as_tuple()[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (EntryView, tuple, list)):
            return self.as_tuple() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EntryView({len(self)} entries)"

    def find(self, name: str) -> LoadEntry | None:
        """The entry of segment ``name`` (None: no such entry); builds only that one."""
        e = self._appended.get(name)
        if e is not None:
            return e
        if name in self._changed:
            return self._changed[name]
        i = self._position(name)
        return None if i is None else self._base_row(i)

    def names(self) -> list[str]:
        """Every load name in order, without building entries."""
        names = self._base_names()
        if self._changed:
            changed = self._changed
            out = [n for n in names if changed.get(n, n) is not None]
        else:
            out = list(names)
        out.extend(self._appended)
        return out

    def tail(self, limit: int, offset: int = 0) -> list[LoadEntry]:
        """The ``limit`` entries before the ``offset`` last ones, newest (last) first;
        builds only those."""
        if self._all is not None:
            end = len(self._all) - offset
            return list(self._all[max(0, end - limit): max(0, end)][::-1])
        out: list[LoadEntry] = []
        skip = offset
        for e in reversed(self._appended.values()):
            if len(out) >= limit:
                return out
            if skip:
                skip -= 1
            else:
                out.append(e)
        removed = {n for n, e in self._changed.items() if e is None}
        changed = self._changed
        names = self._arrow.cols["loadName"] if self._arrow is not None else None
        for i in range(self._n - 1, -1, -1):
            if len(out) >= limit:
                break
            if changed:
                name = names[i].as_py() if names is not None else self._base_row(i).load_name
                if name in removed:
                    continue
                e = changed.get(name) or self._base_row(i)
            else:
                e = self._base_row(i)
            if skip:
                skip -= 1
            else:
                out.append(e)
        return out

    def next_id_from(self, floor: int) -> int:
        """``max(floor, largest integer part of any load name + 1)``."""
        over = [segment_sort_key(n)[0] + 1 for n in (*self._changed, *self._appended)]
        if self._arrow is not None:
            return max([floor, self._arrow.max_id() + 1, *over])
        return max([floor, *over, *(segment_sort_key(e.load_name)[0] + 1 for e in self._base or ())])

    def with_status(self, statuses: Collection[str]) -> list[LoadEntry]:
        """The entries whose status is one of ``statuses``, in order; builds only those
        (clean files looks at the few that are not readable, not at 100,000 that are)."""
        if self._arrow is None or self._all is not None:
            return [e for e in self if e.status in statuses]
        changed, names = self._changed, self._arrow.names()
        out = [(i, self._base_row(i)) for i in self._arrow.status_rows(sorted(statuses))
               if names[i] not in changed]
        out += [(i, e) for n, e in changed.items() if e is not None and e.status in statuses
                if (i := self._position(n)) is not None]
        out.sort(key=lambda x: x[0])
        return [e for _, e in out] + [e for e in self._appended.values() if e.status in statuses]

    def readable_sums(self, *attrs: str) -> list[int]:
        """The sums of int fields (``data_size``, ``row_count`` ...) over the readable
        entries, from the columns where no entry is built."""
        if self._arrow is None or self._all is not None:
            live = [e for e in self if e.readable]
            return [sum(getattr(e, a) for e in live) for a in attrs]
        sums = self._arrow.readable_sums(list(self._changed), [_COLUMN[a] for a in attrs])
        for e in (*(e for e in self._changed.values() if e is not None), *self._appended.values()):
            if e.readable:
                sums = [s + getattr(e, a) for s, a in zip(sums, attrs, strict=True)]
        return sums

    def readable_with_extra(self, key: str) -> list[LoadEntry]:
        """The readable entries whose ``extra`` holds ``key``, in order; builds only those
        (describe's clustered segments: none of 100,000 built when none is clustered)."""
        if self._arrow is None or self._all is not None:
            return [e for e in self if e.readable and key in e.extra]
        changed = self._changed
        rows = self._arrow.extra_rows(key, list(changed))
        out = [(i, self._base_row(i)) for i in rows]
        out += [(i, e) for n, e in changed.items() if e is not None and e.readable
                and key in e.extra and (i := self._position(n)) is not None]
        out.sort(key=lambda x: x[0])
        return [e for _, e in out] + [e for e in self._appended.values()
                                      if e.readable and key in e.extra]

    def readable_values(self, *attrs: str) -> tuple[list[str], list[list[object]]]:
        """Load names and the values of ``attrs`` (int or bool fields: ``data_size``,
        ``major_compacted``, ``load_start_time`` ...) of the readable entries, the base's
        first; from the columns where no entry is built (compaction planning)."""
        if self._arrow is None or self._all is not None:
            live = [e for e in self if e.readable]
            return [e.load_name for e in live], [[getattr(e, a) for e in live] for a in attrs]
        names, cols = self._arrow.readable_values(list(self._changed), [_COLUMN[a] for a in attrs])
        values = [c.tolist() for c in cols]
        for e in (*(e for e in self._changed.values() if e is not None), *self._appended.values()):
            if e.readable:
                names.append(e.load_name)
                for v, a in zip(values, attrs, strict=True):
                    v.append(getattr(e, a))
        return names, values

    def readable_stats(self) -> tuple[int, int]:
        """(readable entries, their live rows), from the columns where no entry is built."""
        if self._arrow is None or self._all is not None:
            live = [e for e in self if e.readable]
            return len(live), sum(e.row_count - e.deleted_rows for e in live)
        count, total = self._arrow.readable_stats(list(self._changed))
        for e in (*(e for e in self._changed.values() if e is not None), *self._appended.values()):
            if e.readable:
                count += 1
                total += e.row_count - e.deleted_rows
        return count, total

    def readable_files(self, only: Collection[str] | None = None,
                       ) -> dict[str, tuple[str | None, tuple[object, ...]]]:
        """``(segment file, delete deltas)`` of every readable entry (or of those named in
        ``only``), by load name, from the columns where no entry is built."""
        if self._arrow is None or self._all is not None:
            if only is None:
                return {e.load_name: (e.segment_file, e.delete_deltas) for e in self if e.readable}
            found = (self.find(n) for n in only)
            return {e.load_name: (e.segment_file, e.delete_deltas) for e in found
                    if e is not None and e.readable}
        changed, appended = self._changed, self._appended
        base_only = None if only is None else [n for n in only if n not in changed and n not in appended]
        out: dict[str, tuple[str | None, tuple[object, ...]]] = dict(
            self._arrow.readable_files(list(changed), base_only))
        for e in (*(e for e in changed.values() if e is not None), *appended.values()):
            if e.readable and (only is None or e.load_name in only):
                out[e.load_name] = (e.segment_file, e.delete_deltas)
        return out

    # ---- changes ----------------------------------------------------------------------------
    def apply(self, upserts: Sequence[LoadEntry], removes: Sequence[str]) -> EntryView:
        """A new view: ``removes`` left out, then ``upserts`` put (a dict's order).

        Raises:
            ValueError: a name to remove that is not an entry.
        """
        if not upserts and not removes:
            return self
        positions = self._positions([*removes, *(e.load_name for e in upserts)])
        new = EntryView.__new__(EntryView)
        new._arrow, new._base, new._n, new._rows, new._index = (
            self._arrow, self._base, self._n, self._rows, self._index)
        changed, appended, removed = dict(self._changed), dict(self._appended), self._removed
        for name in removes:
            if name in appended:
                del appended[name]
            elif name in positions and changed.get(name, name) is not None:
                changed[name] = None
                removed += 1
            else:
                raise ValueError(f"it removes segment {name}, which does not exist")
        for e in upserts:
            name = e.load_name
            if name in appended or (name in changed and changed[name] is None):
                appended[name] = e  # in place, or (removed and added again) last
            elif name in positions:
                changed[name] = e
            else:
                appended[name] = e
        new._changed, new._appended, new._removed, new._all = changed, appended, removed, None
        return new

    def to_table(self) -> pa.Table:
        """Every entry as a checkpoint's table: the base columns with the overlay spliced
        in (no entry of the base is built)."""
        import numpy as np
        import pyarrow as pa  # noqa: F811

        from carbonstore.store.checkpoint_arrow import entries_table

        if self._arrow is None:
            return entries_table(self.as_tuple())
        spots = sorted((i, n) for n, i in self._positions(list(self._changed)).items())
        live = [(i, self._changed[n]) for i, n in spots if self._changed[n] is not None]
        dead = [i for i, n in spots if self._changed[n] is None]
        over = entries_table([*(e for _, e in live), *self._appended.values()])  # type: ignore[misc]
        n, k = self._n, len(live)
        take = np.arange(n, dtype=np.int64)
        take[[i for i, _ in live]] = n + np.arange(k, dtype=np.int64)
        take = np.concatenate([np.delete(take, dead), n + k + np.arange(len(self._appended), dtype=np.int64)])
        both = pa.concat_tables([self._arrow.table(), over])
        return both.take(pa.array(take))

    def rebased(self, base: ArrowBase) -> EntryView:
        """This view's entries over ``base`` (the checkpoint just written of them): the
        overlay does not grow past a checkpoint."""
        return EntryView(base)
