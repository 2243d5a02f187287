"""A tablestatus version's entries, checked when read and built when used.

A checkpoint of a big table holds its entries as columns (docs/tablestatus.md, "Entry
columns"). Reading one checks every column at once, as decoding did (the same checks,
the same errors), but builds a ``LoadEntry`` only for an entry that is asked for: the
entry of one segment (a load's commit), the newest page (``show-segments --limit``), or
all of them when a caller iterates. The versions after the checkpoint are applied as an
overlay (the entries they change or add, the names they remove), so a commit costs the
size of its change, not of the table, and the next checkpoint is written by splicing the
overlay into the checkpoint's columns, never one Python object per segment.

An ``EntryView`` is immutable: ``apply`` returns a new view. Its order is the order of
the entries as a dict by load name that every change is applied to: the checkpoint's
order, a changed entry keeps its place, a new one goes last (also one removed and added
again).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import orjson

from carbonstore.store.entries import (
    KNOWN_KEYS,
    PLAIN_KEYS,
    READABLE_STATUSES,
    LoadEntry,
    build_plain,
    check_plain_columns,
    decode_entry_columns,
    encode_entry_columns,
    segment_sort_key,
)
from carbonstore.store.entry_extras import EXTRA_COLUMNS, check_extra_columns

__all__ = ["EntryView", "view_of_columns"]

_Extras = list[tuple[str, list[Any], list[int]]]


class EntryView(Sequence[LoadEntry]):
    """The entries of one version: a base (checked columns, or entries) plus an overlay."""

    __slots__ = ("_all", "_appended", "_base", "_changed", "_cols", "_extras", "_index",
                 "_n", "_removed", "_rows")

    def __init__(self, base: Sequence[LoadEntry] | None, cols: list[Sequence[Any]] | None = None,
                 extras: _Extras | None = None) -> None:
        self._base = tuple(base) if base is not None else None
        self._cols = cols
        self._extras = extras or []
        self._n = len(self._base) if self._base is not None else len(cols[0]) if cols else 0
        self._rows: list[LoadEntry | None] | None = None
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
        if self._cols is not None:
            return self._cols[0]
        assert self._base is not None
        return [e.load_name for e in self._base]

    def _index_of(self) -> dict[str, int]:
        if self._index is None:
            names = self._base_names()
            self._index = dict(zip(names, range(len(names)), strict=True))
        return self._index

    def _base_row(self, i: int) -> LoadEntry:
        if self._base is not None:
            return self._base[i]
        if self._rows is None:
            self._rows = [None] * self._n
        e = self._rows[i]
        if e is None:
            assert self._cols is not None
            e = build_plain(*[[c[i]] for c in self._cols])[0]
            x = {key: values[index[i]] for key, values, index in self._extras if index[i] >= 0}
            if x:
                object.__setattr__(e, "extra", x)
            self._rows[i] = e
        return e

    def _base_entries(self) -> tuple[LoadEntry, ...]:
        if self._base is None:
            assert self._cols is not None
            built = build_plain(*self._cols)
            for key, values, index in self._extras:
                for e, i in zip(built, index, strict=True):
                    if i >= 0:  # build_plain gives each entry a dict of its own
                        e.extra[key] = values[i]
            if self._rows is not None:  # entries handed out before stay the same objects
                built = tuple(r if r is not None else b for r, b in zip(self._rows, built, strict=True))
            self._base = built
            self._rows = None
        return self._base

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
        if self._all is not None and self._base is not None and not self._changed and not self._appended:
            i = self._index_of().get(name)
            return None if i is None else self._base[i]
        e = self._appended.get(name)
        if e is not None:
            return e
        if name in self._changed:
            return self._changed[name]
        i = self._index_of().get(name)
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
        names = self._base_names()
        for i in range(self._n - 1, -1, -1):
            if len(out) >= limit:
                break
            name = names[i]
            e = self._changed[name] if name in self._changed else self._base_row(i)
            if e is None:
                continue
            if skip:
                skip -= 1
            else:
                out.append(e)
        return out

    def next_id_from(self, floor: int) -> int:
        """``max(floor, largest integer part of any load name + 1)``, from the names."""
        names = self.names()
        if not names:
            return floor
        joined = "".join(names)
        if joined.isascii() and joined.isdigit():
            return max(floor, max(map(int, names)) + 1)
        return max(floor, max(segment_sort_key(n)[0] for n in names) + 1)

    def readable_stats(self) -> tuple[int, int]:
        """(readable entries, their live rows), from the columns where no entry is built."""
        if self._cols is None or self._all is not None:
            live = [e for e in self if e.readable]
            return len(live), sum(e.row_count - e.deleted_rows for e in live)
        names, statuses, rows, visible = self._cols[0], self._cols[1], self._cols[6], self._cols[10]
        changed, count, total = self._changed, 0, 0
        for name, status, n, vis in zip(names, statuses, rows, visible, strict=True):
            if status in READABLE_STATUSES and vis != "false" and name not in changed:
                count += 1
                total += n or 0
        for e in (*(e for e in changed.values() if e is not None), *self._appended.values()):
            if e.readable:
                count += 1
                total += e.row_count - e.deleted_rows
        return count, total

    # ---- changes ----------------------------------------------------------------------------
    def apply(self, upserts: Sequence[LoadEntry], removes: Sequence[str]) -> EntryView:
        """A new view: ``removes`` left out, then ``upserts`` put (a dict's order).

        Raises:
            ValueError: a name to remove that is not an entry.
        """
        if not upserts and not removes:
            return self
        new = EntryView.__new__(EntryView)
        new._base, new._cols, new._extras, new._n = self._base, self._cols, self._extras, self._n
        new._rows, new._index = self._rows, self._index_of()
        changed, appended, removed = dict(self._changed), dict(self._appended), self._removed
        index = new._index
        for name in removes:
            if name in appended:
                del appended[name]
            elif name in index and changed.get(name, name) is not None:
                changed[name] = None
                removed += 1
            else:
                raise ValueError(f"it removes segment {name}, which does not exist")
        for e in upserts:
            name = e.load_name
            if name in appended or (name in changed and changed[name] is None):
                appended[name] = e  # in place, or (removed and added again) last
            elif name in index:
                changed[name] = e
            else:
                appended[name] = e
        new._changed, new._appended, new._removed, new._all = changed, appended, removed, None
        return new

    def rebased(self, columns: dict[str, Any]) -> EntryView:
        """This view's entries over ``columns`` (what ``to_columns`` wrote for it): the
        overlay does not grow past a checkpoint. Entries built so far are kept."""
        view = view_of_columns(columns)
        if view._cols is None:
            return self
        return view

    def to_columns(self) -> dict[str, Any] | None:
        """Every entry as ``entryColumns`` (None: an entry's extras need rows): the base
        columns with the overlay spliced in, building no entry of the base."""
        if self._cols is None:
            return encode_entry_columns(self.as_tuple())
        index = self._index_of()
        spots = sorted((index[name], name) for name in self._changed)
        over_entries = [e for _, name in spots if (e := self._changed[name]) is not None]
        over_entries.extend(self._appended.values())
        over = encode_entry_columns(over_entries)
        if over is None:
            return None
        live = [self._changed[name] is not None for _, name in spots]
        positions = [i for i, _ in spots]

        def splice(base: Sequence[Any], extra: Sequence[Any]) -> list[Any]:
            out: list[Any] = []
            prev = k = 0
            for pos, keep in zip(positions, live, strict=True):
                out += base[prev:pos]
                if keep:
                    out.append(extra[k])
                    k += 1
                prev = pos + 1
            out += base[prev:]
            out += extra[k:]
            return out

        m = len(over_entries)
        columns: dict[str, Any] = {key: splice(col, over[key]) for key, col in zip(PLAIN_KEYS, self._cols, strict=True)}
        if "deleteDeltas" in over:
            columns["deleteDeltas"] = splice([None] * self._n, over["deleteDeltas"])
        extras = _splice_extras(self._extras, over.get(EXTRA_COLUMNS, {}), self._n, m, splice)
        if extras:
            columns[EXTRA_COLUMNS] = extras
        return columns


def _splice_extras(base: _Extras, over: dict[str, Any], n: int, m: int, splice: Any) -> dict[str, Any]:
    """The dictionary-encoded extras of the base and of the overlay, as one."""
    out: dict[str, Any] = {}
    by_key = {key: (values, index) for key, values, index in base}
    for key in [*by_key, *(k for k in over if k not in by_key)]:
        values, index = by_key.get(key, ([], [-1] * n))
        values = list(values)
        seen = {orjson.dumps(v, option=orjson.OPT_SORT_KEYS): i for i, v in enumerate(values)}
        col = over.get(key)
        mapped = [-1] * m
        if col is not None:
            for j, i in enumerate(col["index"]):
                if i < 0:
                    continue
                v = col["values"][i]
                token = orjson.dumps(v, option=orjson.OPT_SORT_KEYS)
                if token not in seen:
                    seen[token] = len(values)
                    values.append(v)
                mapped[j] = seen[token]
        out[key] = {"values": values, "index": splice(index, mapped)}
    return out


def view_of_columns(columns: Any) -> EntryView:
    """``decode_entry_columns`` of ``entryColumns``, every check made now, entries built
    when used (plain entries; any other kind is decoded at once, as before).

    Raises:
        ValueError: as ``decode_entry_columns``.
    """
    if type(columns) is not dict:
        raise ValueError("entry columns must be a JSON object")
    plain = {k: v for k, v in columns.items() if k != EXTRA_COLUMNS}
    if (
        plain.keys() <= KNOWN_KEYS and all(type(c) is list for c in plain.values())
        and len(set(map(len, plain.values()))) == 1 and not any(plain.get("deleteDeltas") or ())
    ):
        n = len(plain["loadName"]) if "loadName" in plain else 0
        missing = [None] * n
        checked = check_plain_columns([plain.get(key, missing) for key in PLAIN_KEYS])
        if checked is not None:
            extras = columns.get(EXTRA_COLUMNS)
            return EntryView(None, checked, check_extra_columns(extras, n, KNOWN_KEYS) if extras is not None else None)
    return EntryView(decode_entry_columns(columns))
