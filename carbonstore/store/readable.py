"""The readable entries of one tablestatus version in segment order, built when used.

A plan needs, for every readable segment, its load name, its merge index name and its row
count (to find the segment in the index snapshot), and whole entries only for the segments
it keeps. Over an Arrow checkpoint (checkpoint_arrow.py) those three come from its columns,
and a ``LoadEntry`` is built only for an entry that is asked for: a key lookup in a table of
100,000 segments builds one entry, not 100,000.

``ReadableEntries`` is the same sequence ``TableStatusSnapshot.readable_in_order`` returns
(the readable, visible entries sorted by segment id, ``segment_sort_key``); its entries are
the very objects the version's ``EntryView`` hands out. Immutable.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from carbonstore.store.arrow_numpy import strings_bytes
from carbonstore.store.checkpoint_arrow import int64s
from carbonstore.store.entries import READABLE_STATUSES, LoadEntry, segment_sort_key
from carbonstore.store.entry_view import EntryView

__all__ = ["EntryExtra", "ReadableEntries", "extras_of"]

def _readable(e: LoadEntry) -> bool:
    return e.visibility and e.status in READABLE_STATUSES


#: at most this many entries changed or added since the checkpoint: key_bytes puts theirs
#: into the checkpoint's bytes (more: from the names, one string per entry)
_SPLICED = 256


class ReadableEntries(Sequence[LoadEntry]):
    """Readable entries in segment order; ``names``, ``files``, ``row_counts`` and the
    extras without building an entry, ``[i]`` builds entry ``i`` only."""

    __slots__ = ("_built", "_codes", "_extras", "_files", "_in_place", "_key_bytes", "_names", "_over", "_rows",
                 "_view", "row_counts")

    def __init__(self, view: EntryView) -> None:
        self._view = view
        self._built: dict[int, LoadEntry] = {}
        self._key_bytes: Any = None
        arrow = view.arrow_base()
        if arrow is None:  # entries already (a JSON version, or built): nothing to save
            entries = [e for e in view if _readable(e)]
            entries = _in_order(entries, [e.load_name for e in entries])
            self._rows = np.full(len(entries), -1, dtype=np.int64)
            self._in_place = False
            self._over: dict[int, LoadEntry] = dict(enumerate(entries))
            self._extras: list[dict[str, Any]] = [e.extra for e in entries]
            self._codes = np.arange(len(entries), dtype=np.int64)
            self._names = tuple(e.load_name for e in entries)
            self._files = tuple(e.segment_file or "" for e in entries)
            self.row_counts = np.array([e.row_count for e in entries], dtype=np.int64)
            return
        changed, appended = view.overlay()
        mask = arrow.readable_mask()
        if changed:
            mask[list(arrow.positions(list(changed)).values())] = False
        rows = np.flatnonzero(mask).astype(np.int64, copy=False)
        over = [e for e in (*(e for e in changed.values() if e is not None), *appended.values()) if _readable(e)]
        # every row readable and no overlay (a table never compacted, read at a checkpoint):
        # the columns as they are, not gathered and joined (each a fresh array per segment)
        pick: Any = slice(None) if len(rows) == arrow.n else rows
        counts = _joined(int64s(arrow.cols["rowCount"])[pick], [e.row_count for e in over])
        # extras by code: the checkpoint's distinct extras, then each overlay entry's own
        n_x = len(arrow.extras)
        codes = _joined(_codes_of(arrow.extra_index)[pick], range(n_x, n_x + len(over)))
        src_rows = _joined(rows, [-1] * len(over))
        ids = arrow.plain_ids()
        if ids is not None and all(e.load_name.isascii() and e.load_name.isdigit() for e in over):
            keys = _joined(ids[pick], [int(e.load_name) for e in over])
            order = None if len(keys) < 2 or bool((keys[1:] > keys[:-1]).all()) \
                else np.argsort(keys, kind="stable").tolist()  # (what _order finds, from the column)
        else:
            all_names = arrow.names()
            order = _order(_take(all_names, rows.tolist()) + [e.load_name for e in over])
        if order is not None:
            at = np.array(order, dtype=np.intp)
            counts, codes, src_rows = counts[at], codes[at], src_rows[at]
            moved = np.flatnonzero(at >= len(rows))  # where the overlay entries went (a few)
            over_at = {p: over[src - len(rows)] for p, src in zip(moved.tolist(), at[moved].tolist(), strict=True)}
        else:
            over_at = {len(rows) + k: e for k, e in enumerate(over)}
        self._rows, self._over, self._codes = src_rows, over_at, codes
        #: every row of the checkpoint, in its order: its columns are this sequence's
        self._in_place = isinstance(pick, slice) and not over and order is None
        self._extras = [*arrow.extras, *(e.extra for e in over)]
        self.row_counts = counts
        self._names = self._files = None  # built when asked (a lookup compares bytes: key_bytes)

    @property
    def names(self) -> tuple[str, ...]:
        """Each entry's load name."""
        if self._names is None:
            self._names = self._column(self._view.arrow_base().names(), "load_name")  # type: ignore[union-attr]
        return self._names

    @property
    def files(self) -> tuple[str, ...]:
        """Each entry's merge index name ("" for none)."""
        if self._files is None:
            got = self._column(self._view.arrow_base().cols["segmentFile"].to_pylist(), "segment_file")  # type: ignore[union-attr]
            self._files = tuple(f or "" for f in got)
        return self._files

    def name_at(self, i: int) -> str:
        """Entry ``i``'s load name (``names[i]``, without building the others)."""
        return self._at(i, "loadName", "load_name") if self._names is None else self._names[i]

    def file_at(self, i: int) -> str:
        """Entry ``i``'s merge index name ("" for none; ``files[i]``, without the others)."""
        return (self._at(i, "segmentFile", "segment_file") or "") if self._files is None else self._files[i]

    def _at(self, i: int, col: str, attr: str) -> Any:
        row = int(self._rows[i])  # IndexError past the end
        if row < 0:
            return getattr(self._over[i if i >= 0 else i + len(self._rows)], attr)
        return self._view.arrow_base().cols[col][row].as_py()  # type: ignore[union-attr]

    def _column(self, base: list[Any], attr: str) -> tuple[Any, ...]:
        """``base`` (a checkpoint column) at each entry's row, an overlay entry's ``attr``."""
        rows = self._rows.tolist()
        if not self._over:
            return tuple(_take(base, rows))
        return tuple(base[r] if r >= 0 else getattr(self._over[i], attr) for i, r in enumerate(rows))

    def key_bytes(self) -> tuple[tuple[npt.NDArray[np.int64], bytes], tuple[npt.NDArray[np.int64], bytes]]:
        """(lengths, UTF-8 bytes) of the load names and of the merge index names ("" for
        none), in entry order: from the checkpoint's columns when every entry is one of its
        rows (no string per entry), else from the names."""
        if self._key_bytes is None:
            arrow = self._view.arrow_base()
            if arrow is not None and not self._over:
                rows = slice(0, len(self._rows)) if self._in_place else self._rows
                self._key_bytes = (arrow.strings("loadName").take_bytes(rows),
                                   arrow.strings("segmentFile").take_bytes(rows))
            elif arrow is not None and len(self._over) <= _SPLICED:  # a few changed since the
                self._key_bytes = (self._spliced(arrow.strings("loadName"), "load_name"),  # checkpoint
                                   self._spliced(arrow.strings("segmentFile"), "segment_file"))
            else:
                self._key_bytes = (strings_bytes(self.names), strings_bytes(self.files))
        return self._key_bytes  # type: ignore[no-any-return]

    def _spliced(self, column: Any, attr: str) -> tuple[npt.NDArray[np.int64], bytes]:
        """(lengths, bytes) of ``column`` (a checkpoint column's StringBytes) at each entry's
        row, with the overlay entries' ``attr`` (None: "") put in at their places."""
        at = sorted(self._over)  # entry positions of the overlay entries
        base_lengths, base = column.take_bytes(self._rows[self._rows >= 0])
        over = [(getattr(self._over[p], attr) or "").encode("utf-8", "surrogatepass") for p in at]
        lengths = np.empty(len(self._rows), dtype=np.int64)
        is_over = np.zeros(len(self._rows), dtype=bool)
        is_over[at] = True
        lengths[~is_over] = base_lengths
        lengths[at] = [len(b) for b in over]
        ends = np.concatenate([[0], np.cumsum(base_lengths, dtype=np.int64)])
        raw, pieces, done = memoryview(base), [], 0
        for k, (p, b) in enumerate(zip(at, over, strict=True)):
            cut = int(ends[p - k])  # the base entries before position p: p - k of them
            pieces += [raw[done:cut], b]
            done = cut
        pieces.append(raw[done:])
        return lengths, b"".join(pieces)

    # ---- the sequence -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, i: int) -> LoadEntry: ...

    @overload
    def __getitem__(self, i: slice) -> list[LoadEntry]: ...

    def __getitem__(self, i: int | slice) -> LoadEntry | list[LoadEntry]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self._rows)))]
        if i < 0:
            i += len(self._rows)
        e = self._built.get(i)
        if e is None:
            row = int(self._rows[i])  # IndexError past the end
            e = self._over[i] if row < 0 else self._view.base_entry(row)
            self._built[i] = e
        return e

    def __iter__(self) -> Iterator[LoadEntry]:
        return (self[i] for i in range(len(self._rows)))

    def __repr__(self) -> str:
        return f"ReadableEntries({len(self)} entries)"

    # ---- columns ------------------------------------------------------------------------------
    def key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(load names, merge index names): what identifies the set of segments."""
        return self.names, self.files

    def extra_codes(self) -> tuple[npt.NDArray[np.int64], list[dict[str, Any]]]:
        """Each entry's ``extra`` as a code into the list of distinct ones (-1: none; a
        table's entries share a handful). Read only."""
        return self._codes, self._extras

    def any_extra(self, keys: Sequence[str]) -> bool:
        """Some entry's ``extra`` holds one of ``keys``."""
        used = np.flatnonzero(np.bincount(self._codes[self._codes >= 0])).tolist()  # (np.unique: numpy.ma)
        return any(k in self._extras[c] for c in used for k in keys)

    def with_deltas_or(self, key: str) -> list[int]:
        """Positions of the entries with delete deltas or ``key`` in their extra."""
        marked = [c for c, x in enumerate(self._extras) if key in x]
        hit = np.isin(self._codes, marked) if marked else np.zeros(len(self._rows), dtype=bool)
        arrow = self._view.arrow_base()
        if arrow is not None and arrow.deltas:
            hit |= np.isin(self._rows, list(arrow.deltas))
        for i, e in self._over.items():
            if e.delete_deltas:
                hit[i] = True
        return np.flatnonzero(hit).tolist()  # type: ignore[no-any-return]


def _joined(base: npt.NDArray[np.int64], more: Sequence[int]) -> npt.NDArray[np.int64]:
    """``base`` followed by ``more`` (int64): ``base`` itself when there is nothing more."""
    if not len(more):
        return base
    return np.concatenate([base, np.array(more, dtype=np.int64)])


def _codes_of(ix: pa.Array) -> npt.NDArray[np.int64]:
    """A dictionary's indices as int64, -1 for null (from the buffers: neither pandas nor
    pyarrow.compute)."""
    if not len(ix):
        return np.zeros(0, dtype=np.int64)
    dtype = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64}[ix.type]
    codes = np.frombuffer(ix.buffers()[1], dtype=dtype)[ix.offset:ix.offset + len(ix)].astype(np.int64)
    if ix.null_count:
        raw = np.frombuffer(ix.buffers()[0], dtype=np.uint8)
        valid = np.unpackbits(raw, bitorder="little")[ix.offset:ix.offset + len(ix)].astype(bool)
        codes[~valid] = -1
    return codes


class EntryExtra:
    """What the partition and replaced-rows checks read of an entry (``load_name``,
    ``extra``), without building it: one per distinct extra of a checkpoint."""

    __slots__ = ("extra", "load_name")

    def __init__(self, load_name: str, extra: dict[str, Any]) -> None:
        self.load_name, self.extra = load_name, extra


def extras_of(entries: Sequence[LoadEntry], rows: list[int]) -> dict[int, Any]:
    """Entry ``i`` of ``rows`` (increasing) -> an object with its ``load_name`` and
    ``extra``: of readable entries one ``EntryExtra`` per distinct extra, named after its
    first entry in ``rows`` (the one a check reports first); else the entries."""
    if not isinstance(entries, ReadableEntries) or not rows:
        return {i: entries[i] for i in rows}
    codes, extras = entries.extra_codes()
    mine = codes[np.asarray(rows, dtype=np.intp)]
    used, first = np.unique(mine, return_index=True)
    one = {code: EntryExtra(entries.name_at(rows[at]), extras[code] if code >= 0 else {})
           for code, at in zip(used.tolist(), first.tolist(), strict=True)}
    return dict(zip(rows, map(one.__getitem__, mine.tolist()), strict=True))


def _take(values: list[Any], at: list[int]) -> list[Any]:
    """``[values[i] for i in at]``, at C speed."""
    if not at:
        return []
    if len(at) == 1:
        return [values[at[0]]]
    return list(operator.itemgetter(*at)(values))


def _order(names: list[str]) -> list[int] | None:
    """The positions of ``names`` in segment order (None: in order already)."""
    if "." in "".join(names):
        order = sorted(range(len(names)), key=lambda i: segment_sort_key(names[i]))
        return None if order == list(range(len(names))) else order
    keys = np.fromiter(map(int, names), dtype=np.int64, count=len(names))
    if len(keys) < 2 or bool((keys[1:] > keys[:-1]).all()):
        return None
    return np.argsort(keys, kind="stable").tolist()  # type: ignore[no-any-return]


def _in_order(entries: list[LoadEntry], names: list[str]) -> list[LoadEntry]:
    order = _order(names)
    return entries if order is None else [entries[i] for i in order]
