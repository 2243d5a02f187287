"""The commit-time conflict check of DELETE / UPDATE / MERGE (docs/tablestatus.md,
"Conflict rules").

A statement plans on version ``P`` and commits on a newer version ``N``. Its outcome is a
function of what it read on ``P``: the rows its condition selected (MERGE: the target rows
that joined a source row, whether a clause then took them or not - a NOT MATCHED insert
depends on their presence). It would be the same on ``N`` - so committing its planned
changes on ``N`` equals running it after everything committed since ``P``, i.e. the
statements commit in a serial order, the commit order - when both hold:

(a) no row it read was deleted since ``P`` (by a DELETE, an UPDATE or MERGE rewriting it, a
    compaction or a delete-segments moving or dropping its segment, a restore);
(b) no row added since ``P`` is one it would read on ``N``: rows of a segment that became
    readable (a load, an UPDATE / MERGE insert segment, a compaction output, a restore
    bringing a segment back) or rows a restore made live again in a file, for which its
    condition (MERGE: its ON join with the source) holds.

Otherwise :class:`Replan`: it is planned again from the start on the new version. Rows of
blind appends (``LOAD``, ``INSERT``, ``ADD SEGMENT``: a write that read nothing) are left
out of (b) unless the statement inserts what it did not find (MERGE ... WHEN NOT MATCHED):
a DELETE or UPDATE then commits as if it had run before the append (Delta Lake's
WriteSerializable), as its snapshot promised.

The check reads only delete deltas for (a); for (b) it evaluates the statement's condition
on the added segments only (index-pruned), once per segment state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from carbonstore.segments.deltas import read_delta
from carbonstore.store.entries import DeleteDelta, LoadEntry
from carbonstore.store.table import Table
from carbonstore.store.versions import TableStatusSnapshot, VersionInfo

__all__ = ["BLIND_APPENDS", "EVERY_ROW", "FileKey", "Matcher", "Reads", "Replan", "Validator"]

FileKey = tuple[str, str]  # (segment id, data file relative to the segment folder)
Positions = npt.NDArray[np.uint32]
#: rows of ``segments`` of a snapshot that the statement's condition selects
Matcher = Callable[[TableStatusSnapshot, Sequence[str]], Mapping[FileKey, Positions]]
#: operations whose new segments read nothing of the table (blind appends)
BLIND_APPENDS = frozenset({"LOAD", "INSERT", "ADD SEGMENT"})


class Replan(Exception):  # noqa: N818 - a signal: plan the change again on the new version
    """The version a change was planned on is gone in a way a re-commit cannot absorb."""


def _every_row(snap: TableStatusSnapshot, segments: Sequence[str]) -> Mapping[FileKey, Positions]:
    raise Replan(f"segment(s) {', '.join(segments)} got rows since it planned")


#: the matcher of a change whose condition is unknown: any added row may match it
EVERY_ROW: Matcher = _every_row


@dataclass(frozen=True, slots=True)
class Reads:
    """What a statement's outcome depends on (module docstring).

    ``rows``: the rows it read on its plan version (positions per data file); ``match``:
    its condition, evaluated on given segments of a newer version (None: a blind write,
    which conflicts with nothing); ``appends``: rows of blind appends count for (b) too.
    """

    rows: Mapping[FileKey, Positions]
    match: Matcher | None = EVERY_ROW
    appends: bool = False


@dataclass
class Validator:
    """Checks (a) and (b) of one planned statement against newer versions; what it saw
    valid is remembered, so the check after a lost race only looks at what changed."""

    table: Table
    planned: TableStatusSnapshot
    reads: Reads
    operation: str
    _bits: dict[tuple[str, str], BitMap] = field(default_factory=dict)
    _checked: dict[str, tuple[DeleteDelta, ...]] = field(default_factory=dict)
    _infos: dict[int, VersionInfo] = field(default_factory=dict)

    def check(self, snap: TableStatusSnapshot) -> None:
        """Raise :class:`Replan` unless the statement's planned changes may commit on ``snap``."""
        if snap.version == self.planned.version:
            return
        now = {e.load_name: e for e in snap.entries}
        self._read_rows_live(now)
        if self.reads.match is not None:
            self._no_rows_added(snap, now)

    def delta_bits(self, segment: str, delta: DeleteDelta) -> BitMap:
        key = (segment, delta.delta_file)
        if key not in self._bits:
            self._bits[key] = read_delta(self.table.store.sfs, self.table.paths.segment_dir(segment),
                                         delta)
        return self._bits[key]

    def _read_rows_live(self, now: Mapping[str, LoadEntry]) -> None:
        """(a): every row it read is still live."""
        planned = {e.load_name: e for e in self.planned.entries}
        # the positions are looked up only for files whose state changed: ``rows`` may be
        # a lazy mapping (a Spark statement's reads are computed only after a lost race)
        for sid, rel in self.reads.rows:
            e = now.get(sid)
            if e is None or not e.readable:
                if not len(self.reads.rows[(sid, rel)]):
                    continue
                raise Replan(f"segment {sid} is {'gone' if e is None else e.status}")
            cur = next((d for d in e.delete_deltas if d.data_file == rel), None)
            old = planned.get(sid)
            was = next((d for d in old.delete_deltas if d.data_file == rel), None) \
                if old is not None else None
            if cur is None or cur == was:
                continue
            pos = self.reads.rows[(sid, rel)]
            if len(pos) and not self.delta_bits(sid, cur).isdisjoint(BitMap(pos)):
                raise Replan(f"rows of {rel} that this {self.operation} read were deleted or "
                             "rewritten meanwhile")

    def _no_rows_added(self, snap: TableStatusSnapshot, now: Mapping[str, LoadEntry]) -> None:
        """(b): no row added since the plan is one its condition selects."""
        planned = {e.load_name: e for e in self.planned.entries}
        blind: set[str] | None = None
        todo: list[LoadEntry] = []
        for e in now.values():
            if not e.readable or self._checked.get(e.load_name) == e.delete_deltas:
                continue
            old = planned.get(e.load_name)
            if old is not None and old.readable:
                if not self._rows_restored(old, e):
                    continue
            elif (old is None or old.running) and not self.reads.appends:
                if blind is None:
                    blind = self._blind_appends(snap.version)
                if e.load_name in blind:
                    continue
            todo.append(e)
        if not todo:
            return
        assert self.reads.match is not None
        hits = self.reads.match(snap, [e.load_name for e in todo])
        for key, pos in hits.items():
            mine = self.reads.rows.get(key)
            extra = BitMap(pos) - BitMap(mine) if mine is not None else BitMap(pos)
            if extra:
                raise Replan(f"{len(extra)} row(s) of segment {key[0]} added since it planned "
                             f"meet the condition of this {self.operation}")
        for e in todo:
            self._checked[e.load_name] = e.delete_deltas

    def _rows_restored(self, old: LoadEntry, e: LoadEntry) -> bool:
        """Rows deleted in ``old`` are live in ``e`` (a restore brought them back)."""
        cur = {d.data_file: d for d in e.delete_deltas}
        for was in old.delete_deltas:
            d = cur.get(was.data_file)
            if d is None:
                return True
            if d != was and not self.delta_bits(old.load_name, was) <= self.delta_bits(e.load_name, d):
                return True
        return False

    def _blind_appends(self, upto: int) -> set[str]:
        """Segments made readable since the plan, up to version ``upto``, only by blind
        appends."""
        first = self.planned.version + 1
        missing = [v for v in range(first, upto + 1) if v not in self._infos]
        if missing:
            limit = upto - missing[0] + 1
            while True:
                infos = self.table.status.log(limit=limit)
                self._infos.update((i.version, i) for i in infos)
                if not infos or infos[0].version <= missing[0]:
                    break
                limit += infos[0].version - missing[0]
        ops: dict[str, set[str]] = {}
        for v in range(first, upto + 1):
            info = self._infos.get(v)
            if info is None:
                continue
            for sid in info.added:
                ops.setdefault(sid, set()).add(info.operation)
        return {sid for sid, seen in ops.items() if seen <= BLIND_APPENDS}
