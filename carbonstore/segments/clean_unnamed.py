"""Clean files, part two: files inside readable segments that no version in reach names.

A readable segment's folder holds files that older versions name and the newest does not:
delete deltas superseded by a later DML statement's (deltas are cumulative) and merge
indexes replaced by ``index rebuild``. A reader pinned to an older version (a query that
planned before, ``--as-of``) and ``restore`` of that version need them, so they go only
when no version *within the retention time* names them: the versions from the one that
was the latest ``carbon.segment.retention.minutes`` ago to the newest (``force``: the
newest only). Judging by the versions, not by an entry's timestamps, matters after a
restore: it brings back an entry with its old timestamps, while the versions just before
it (naming the newer deltas) are within the retention time.

Clean files and ``restore`` never leave a version naming a removed file:

1. clean judges the files against the versions in reach (``clean.files_chosen``);
2. it commits a version (``CLEAN FILES``) whose ``filesRemoved`` lists them; this commit
   re-runs on every version committed meanwhile and keeps every file one of them names
   (a restore that committed first wins, its files stay);
3. only then it deletes them (``clean.files_recorded`` is between 2 and 3).

A restore (``Table.restore``) checks, on the version its commit builds on, that no version
after the one it restores recorded removing a file it needs. Either clean's version comes
first - the restore's commit builds on it (or loses its put to it and re-runs) and fails
with ``VersionNotFoundError`` - or the restore's comes first and step 2 keeps its files.

Files written by a statement that has not committed yet are named by no version either:
those written within the lease time, or since a running statement started
(``StatementGuard``), are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from carbonstore.errors import VersionNotFoundError
from carbonstore.segments.clean_scan import ScanRecord, folders_to_list, now_wall_ms, write_record
from carbonstore.segments.deltas import DELTA_SUFFIX
from carbonstore.store.entries import DeleteDelta
from carbonstore.store.faults import crash_point
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import StatusChange, TableStatusSnapshot, segment_sort_key

__all__ = ["CleanItem", "StatementGuard", "delete_path", "first_in_reach", "lease_ms", "unnamed_files"]

ItemKind = Literal["segment", "orphan", "trash", "stats", "sortindex", "index", "delta", "checkpoint"]
_MERGE_INDEX_SUFFIX = ".carbonindexmerge"


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanItem:
    """One thing clean files removes (or would remove, in a dry run)."""

    kind: ItemKind
    path: str
    size: int
    reason: str
    segment_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "segment": self.segment_id,
            "path": self.path,
            "bytes": self.size,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class StatementGuard:
    """What running statements (DML, index rebuilds) keep from clean files: every unnamed
    delta or merge index written after ``since`` (epoch ms; None: nothing is kept)."""

    since: int | None
    skipped: tuple[str, ...]

    def keeps(self, mtime_ms: int) -> bool:
        return self.since is not None and mtime_ms >= self.since


def lease_ms(table: Table) -> int:
    return int(table.store.conf.get_float("carbon.segment.lease.seconds") * 1000)


def delete_path(table: Table, path: str) -> None:
    """Delete a file or folder; one already gone (removed by its writer's abort) is fine."""
    sfs = table.paths.sfs
    try:
        if sfs.is_dir(path):
            sfs.delete_dir(path)
        else:
            sfs.delete_file(path)
    except FileNotFoundError:
        pass


class _Named:
    """The files of ``segments`` named by every version from ``first`` to the newest one
    read so far. Only those segments' entries are looked at in each version (the files in
    question are theirs): a version costs the segments, not the table's 100,000 entries."""

    def __init__(self, table: Table, first: int, segments: set[str]) -> None:
        self.table = table
        self.upto = first - 1
        self.segments = sorted(segments, key=segment_sort_key)
        self.files: set[str] = set()

    def read_to(self, snap: TableStatusSnapshot, *, until_all_of: set[str] | None = None) -> None:
        """Add the files of the versions up to ``snap``; with ``until_all_of``, stop early
        once every one of those is named (the rest cannot change the answer)."""
        # Upwards, so each version is decoded from the one before it (cached).
        for v in range(self.upto + 1, snap.version + 1):
            state = snap if v == snap.version else self.table.status.read(v)
            entries = [e for sid in self.segments if (e := state.find(sid)) is not None and e.readable]
            self.files.update(_named_now(self.table, {
                e.load_name: (e.segment_file, e.delete_deltas) for e in entries}))
            self.upto = v
            if until_all_of is not None and until_all_of <= self.files:
                return


def first_in_reach(table: Table, latest: TableStatusSnapshot, *, now: int, force: bool) -> int:
    """The oldest version a reader may still be on: the one that was the latest
    ``carbon.segment.retention.minutes`` ago (``force``: the latest)."""
    if force:
        return latest.version
    retention_ms = table.conf.get_int("carbon.segment.retention.minutes") * 60_000
    try:
        return min(latest.version, table.status.version_as_of(now - retention_ms))
    except VersionNotFoundError:  # the table is younger than the retention time
        return 0


def _named_now(table: Table, readable: dict[str, tuple[str | None, tuple[DeleteDelta, ...]]],
               ) -> set[str]:
    """``table.files_named`` of the latest version, from its columns (no entry built)."""
    out: set[str] = set()
    for sid, (segment_file, deltas) in readable.items():
        seg = table.paths.relative(table.paths.segment_dir(sid))
        if segment_file:
            out.add(f"{seg}/{segment_file}")
        out.update(f"{seg}/{d.delta_file}" for d in deltas)
    return out


def unnamed_files(
    table: Table, *, dry_run: bool, now: int, force: bool, guard: StatementGuard,
    fact: tuple[int, list[Any]] | None = None,
) -> list[CleanItem]:
    """Superseded delete deltas and replaced merge indexes of readable segments that no
    version in reach names; removed (recorded first, see the module docstring) unless
    ``dry_run``. Only the folders that may hold one are listed (clean_scan.py)."""
    sfs = table.paths.sfs
    # ``fact``: (a start time, the listing of Fact/Part0 taken after it) of the caller
    started, infos = fact if fact is not None else (now_wall_ms(), None)
    latest = table.status.read()
    readable = latest.view.readable_files()
    young = lease_ms(table)
    listed, _ = folders_to_list(table, list(readable), latest.version, young, infos)
    now_named = _named_now(table, {sid: readable[sid] for sid in listed})
    found: list[tuple[str, CleanItem]] = []
    kept: set[str] = set()  # segments left holding an unnamed file (for the next clean)
    for sid in listed:
        seg_dir = table.paths.segment_dir(sid)
        for info in sfs.list_dir(seg_dir):
            if not info.is_file:
                continue
            if info.base_name.endswith(DELTA_SUFFIX):
                kind, reason = "delta", "delete delta superseded by a newer one"
            elif info.base_name.endswith(_MERGE_INDEX_SUFFIX):
                kind, reason = "index", "merge index replaced by an index rebuild"
            else:
                continue
            rel = table.paths.relative(info.path)
            if rel in now_named:
                continue
            mtime = int(info.mtime.timestamp() * 1000) if info.mtime is not None else now
            if now - mtime < young or guard.keeps(mtime):
                kept.add(sid)
                continue  # a running statement may be about to commit it
            found.append((rel, CleanItem(kind=kind, segment_id=sid,  # type: ignore[arg-type]
                                         path=info.path, size=int(info.size or 0),
                                         reason=reason)))
    all_found = list(found)
    if found:  # only then are the versions in reach read (the newest one's are known)
        named = _Named(table, first_in_reach(table, latest, now=now, force=force),
                       {item.segment_id for _, item in found if item.segment_id is not None})
        named.read_to(latest, until_all_of={rel for rel, _ in found})
        found = [(rel, item) for rel, item in found if rel not in named.files]
    if dry_run:
        return [item for _, item in found]
    if not found:
        write_record(table, ScanRecord(started, latest.version, _left(kept, all_found, set())))
        return []
    crash_point("clean.files_chosen")
    chosen: list[tuple[str, CleanItem]] = []

    def keep_named(snap: TableStatusSnapshot) -> StatusChange:
        named.read_to(snap)  # every version committed since the judgement, e.g. a restore
        chosen[:] = [(rel, item) for rel, item in found if rel not in named.files]
        return StatusChange()

    table.status.update(keep_named, operation="CLEAN FILES",
                        files_removed=lambda: tuple(rel for rel, _ in chosen))
    crash_point("clean.files_recorded")
    for _, item in chosen:
        delete_path(table, item.path)
    write_record(table, ScanRecord(started, latest.version,
                                   _left(kept, all_found, {item.path for _, item in chosen})))
    return [item for _, item in chosen]


def _left(kept: set[str], found: list[tuple[str, CleanItem]], deleted: set[str]) -> tuple[str, ...]:
    """The segments this scan left an unnamed file in: the next clean lists them again."""
    left = kept | {item.segment_id for _, item in found if item.path not in deleted and item.segment_id}
    return tuple(sorted(left, key=segment_sort_key))
