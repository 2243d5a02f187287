"""Clean files (DESIGN.md section 7): physically remove what no reader needs any more.

Under ``clean_files.lock`` this removes:

* ``Compacted`` and ``Marked for Delete`` segments whose change is older than
  ``carbon.segment.retention.minutes`` (``force``: at once, only when
  ``carbon.clean.files.force.allowed`` is true), so queries that started before the
  change finish first;
* ``Failure`` segments (no reader ever reads them);
* with ``stale_inprogress``: ``In Progress`` segments whose lease expired (or whose writer
  is known dead on this machine; ``carbonstore.store.leases``). They are first committed
  as ``Failure`` in a new tablestatus version, so a load that was merely slow fails its
  own commit instead of being deleted under a ``Success`` entry;
* folders under ``Fact/Part0`` that no entry names and that nothing wrote to for longer
  than the lease time (a killed compaction's output, a segment whose entry was lost):
  moved to ``<table>/.Trash/<epoch ms>/`` first, because they may hold the only copy of
  data a user wants back; trash older than ``carbon.trash.retention.days`` is deleted;
* delete deltas and merge indexes of readable segments that no version within the
  retention time names (``force``: not the latest), recorded in a version before they are
  deleted so a restore can never commit a version naming one (``clean_unnamed``).

The order is what makes it safe: (1) commit dead loads as ``Failure``; (2) commit a
version without the removed entries (each still in the status it was chosen for: a
commit racing with clean files wins or loses as a whole); (3) only then delete their
files. A crash after (2) leaves folders no entry names, which a later run moves to the
trash. Removed entries are appended to ``tablestatus.history``; the segments' statistics
files go with them. A dry run reports the same items and byte counts without touching
anything. No lock is needed for correctness; ``clean_files.lock`` only keeps two runs
from doing the same work.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from carbonstore.dictionary.writer import obsolete_sortindex_files
from carbonstore.errors import CorruptMetadataError, LockTimeoutError, UserError
from carbonstore.indexfiles.bloom_pack import BLOOM_PACK_PREFIX, BLOOM_PACK_SUFFIX
from carbonstore.segments.clean_scan import now_wall_ms
from carbonstore.segments.clean_unnamed import (
    CleanItem,
    StatementGuard,
    delete_path,
    first_in_reach,
    lease_ms,
    unnamed_files,
)
from carbonstore.store.faults import crash_point
from carbonstore.store.leases import MARKED_DEAD, entry_is_dead, statement_is_dead
from carbonstore.store.locks import acquire
from carbonstore.store.status_checkpoints import removable_checkpoints, write_removed_below
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import (
    CHECKPOINT_INTERVAL,
    COMPACTED,
    FAILURE,
    MARKED_FOR_DELETE,
    RUNNING_STATUSES,
    LoadEntry,
    StatusChange,
    TableStatusSnapshot,
    now_ms,
    segment_sort_key,
)

__all__ = ["CLEAN_FILES_LOCK", "CleanItem", "CleanReport", "check_adds_up", "clean_files"]

log = logging.getLogger(__name__)

CLEAN_FILES_LOCK = "clean_files.lock"
_SEGMENT_DIR_RE = re.compile(r"^Segment_(\d+(?:\.\d+)?)$")
_DAY_MS = 24 * 3600 * 1000

@dataclass(frozen=True, slots=True, kw_only=True)
class CleanReport:
    """What a clean-files run removed (or, with ``dry_run``, would remove)."""

    table: str
    dry_run: bool
    items: tuple[CleanItem, ...] = field(default_factory=tuple)
    removed_entries: tuple[str, ...] = field(default_factory=tuple)
    skipped: tuple[str, ...] = field(default_factory=tuple)

    @property
    def bytes(self) -> int:
        """Bytes taken out of the table's data (trash moves included)."""
        return sum(i.size for i in self.items)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "dryRun": self.dry_run,
            "bytes": self.bytes,
            "removedEntries": list(self.removed_entries),
            "items": [i.to_json() for i in self.items],
            "skipped": list(self.skipped),
        }


def _changed_at(e: LoadEntry) -> int:
    return e.modification_or_deletion_timestamp or e.timestamp or e.load_start_time


def _removable_entries(
    table: Table, snap: TableStatusSnapshot, *, now: int, force: bool, stale_inprogress: bool
) -> tuple[list[tuple[LoadEntry, str]], list[str]]:
    retention_ms = table.conf.get_int("carbon.segment.retention.minutes") * 60_000
    out: list[tuple[LoadEntry, str]] = []
    skipped: list[str] = []
    # Only entries in these statuses are judged: only they are built (not 100,000 readable ones).
    judged = snap.view.with_status((COMPACTED, MARKED_FOR_DELETE, FAILURE, *RUNNING_STATUSES))
    for e in sorted(judged, key=lambda x: segment_sort_key(x.load_name)):
        if e.status in (COMPACTED, MARKED_FOR_DELETE):
            age = now - _changed_at(e)
            if force or age >= retention_ms:
                out.append((e, f"{e.status}{' (forced)' if force and age < retention_ms else ''}"))
            else:
                skipped.append(f"segment {e.load_name}: {e.status} within the retention time")
        elif e.status == FAILURE:
            if "compactionAttempt" in e.extra and not entry_is_dead(
                table.status, e, now=now, lease_ms=lease_ms(table)
            ):
                # A compaction aborting right now removes its folder, then this entry; a
                # compaction taking the freed name meanwhile would lose its output to it.
                skipped.append(f"segment {e.load_name}: {FAILURE}, its compaction is aborting")
            else:
                out.append((e, FAILURE))
        elif e.status in RUNNING_STATUSES and stale_inprogress:
            if entry_is_dead(table.status, e, now=now, lease_ms=lease_ms(table)):
                out.append((e, f"stale {e.status} (its lease expired: the load is not running)"))
            else:
                skipped.append(f"segment {e.load_name}: {e.status}, its load is running")
    return out, skipped


def _stats_files(table: Table, segment_id: str) -> list[tuple[str, int]]:
    """Statistics files of one segment (``Metadata/stats/segment_<id>.*``), if any."""
    sfs = table.paths.sfs
    # segment_0.stats belongs to segment 0, segment_0.1.stats to segment 0.1.
    own = re.compile(rf"^segment_{re.escape(segment_id)}(\.[A-Za-z][^.]*)*$")
    out: list[tuple[str, int]] = []
    for info in sfs.list_dir(table.paths.stats_dir):
        if own.match(info.base_name):
            size = int(info.size or 0) if info.is_file else sfs.tree_size(info.path)
            out.append((info.path, size))
    return out


def clean_files(
    table: Table,
    *,
    dry_run: bool = True,
    force: bool = False,
    stale_inprogress: bool = False,
    now: int | None = None,
) -> CleanReport:
    """Remove what no reader needs any more (see the module docstring).

    Args:
        table: the table.
        dry_run: only report (the default: destructive operations are opt-in).
        force: ignore the retention time (refused unless carbon.clean.files.force.allowed).
        stale_inprogress: also remove In Progress segments whose load is dead.
        now: the current time in epoch ms (tests).

    Raises:
        UserError: force is not allowed, or another clean files is running.
    """
    if force and not table.conf.get_bool("carbon.clean.files.force.allowed"):
        raise UserError(
            "clean-files --force is disabled: set carbon.clean.files.force.allowed=true in the "
            "conf to remove segments before the retention time"
        )
    lock = table.locks.lock(CLEAN_FILES_LOCK)
    try:
        acquire(lock, CLEAN_FILES_LOCK, table.store.conf, timeout=0.05, retries=1)
    except LockTimeoutError as err:
        raise UserError(
            f"clean files is already running on table {table.name} ({CLEAN_FILES_LOCK} is "
            "held); retry when it has finished"
        ) from err
    try:
        return _clean(table, dry_run=dry_run, force=force, stale_inprogress=stale_inprogress,
                      now=now_ms() if now is None else now)
    finally:
        lock.release()


def _mark_dead(table: Table, dead: list[LoadEntry], now: int) -> set[str]:
    """Commit the dead running entries as Failure; the ids this version marked."""
    wanted = {e.load_name for e in dead}
    marked: set[str] = set()

    def apply(snap: TableStatusSnapshot) -> StatusChange:
        marked.clear()
        out = []
        for name in sorted(wanted, key=segment_sort_key):
            e = snap.find(name)
            if e is not None and e.status in RUNNING_STATUSES:
                out.append(e.with_status(FAILURE, timestamp=now_ms(), extra={
                    **e.extra, "failureReason": "its lease expired: marked dead by clean files",
                    "failureCause": MARKED_DEAD,
                }))
                marked.add(name)
        return StatusChange(upserts=tuple(out))

    table.status.update(apply, operation="CLEAN FILES (mark dead)")
    return marked


def check_adds_up(table: Table, snap: TableStatusSnapshot) -> None:
    """Refuse to act on a tablestatus that does not add up.

    Clean files deletes on the word of the tablestatus, so before it judges anything it
    checks each version from the last checkpoint to ``snap``: the readable rows the version
    recorded when it was written (``readableRows``) equal those of the entries decoded for
    it, and the segments it made readable (``readableAdded``) are readable in it. A damaged
    key is read as absent (a flipped bit in ``"upserts"`` leaves a committed load
    ``In Progress``, one in ``"rowCount"`` leaves it 0 rows), and a load that looks
    ``In Progress`` would be judged dead and its folder deleted.

    Raises:
        CorruptMetadataError: naming the version; nothing was deleted.
    """
    if table.status.pinned is not None:
        return
    first = snap.version - snap.version % CHECKPOINT_INTERVAL
    for info in table.status.log(limit=snap.version - first + 1):
        if info.operation == "LEGACY" or info.version > snap.version:
            continue
        state = snap if info.version == snap.version else table.status.read(info.version)
        _, rows = state.view.readable_stats()  # from the entries (not the recorded figure)
        missing = {n for n in info.added if (e := state.find(n)) is None or not e.readable}
        if rows != info.rows or missing:
            why = (f"it made segment(s) {', '.join(sorted(missing))} readable, which its "
                   "entries do not show" if missing else
                   f"it recorded {info.rows} readable rows, its entries hold {rows}")
            raise CorruptMetadataError(
                f"tablestatus version {info.version} of {table.name} does not add up ({why}): "
                "a damaged version file; clean files deleted nothing - restore the file "
                f"(Metadata/tablestatus_log/{table.table_id}/{info.version:020d}.json) from "
                "a backup of the table")


def _clean(
    table: Table, *, dry_run: bool, force: bool, stale_inprogress: bool, now: int
) -> CleanReport:
    sfs = table.paths.sfs
    items: list[CleanItem] = []
    snap = table.status.read()
    check_adds_up(table, snap)
    crash_point("clean.after_read")
    removable, skipped = _removable_entries(
        table, snap, now=now, force=force, stale_inprogress=stale_inprogress
    )
    if not dry_run:
        dead = [e for e, _ in removable if e.status in RUNNING_STATUSES]
        if dead:
            marked = _mark_dead(table, dead, now)
            crash_point("clean.after_mark_dead")
            # A load that committed first keeps its segment: drop it from this run.
            removable = [(e.with_status(FAILURE), r) if e.load_name in marked else (e, r)
                         for e, r in removable
                         if e.status not in RUNNING_STATUSES or e.load_name in marked]
        if removable:
            chosen = {e.load_name: e.status for e, _ in removable}
            gone: set[str] = set()

            def apply(s: TableStatusSnapshot) -> StatusChange:
                # Only entries still in the (terminal) status they were chosen for.
                gone.clear()
                gone.update(n for n, status in chosen.items()
                            if (e := s.find(n)) is not None and e.status == status)
                return StatusChange(removes=tuple(n for n in chosen if n in gone))

            crash_point("clean.before_commit")
            table.status.update(apply, operation="CLEAN FILES", remove=lambda e: True)
            removable = [(e, r) for e, r in removable if e.load_name in gone]
    removed_ids = [e.load_name for e, _ in removable]
    for e, reason in removable:
        seg_dir = table.paths.segment_dir(e.load_name)
        items.append(CleanItem(kind="segment", segment_id=e.load_name, path=seg_dir,
                               size=sfs.tree_size(seg_dir), reason=reason))
        for path, size in _stats_files(table, e.load_name):
            items.append(CleanItem(kind="stats", segment_id=e.load_name, path=path, size=size,
                                   reason=f"statistics of removed segment {e.load_name}"))
    if not dry_run:
        for item in items:
            delete_path(table, item.path)
            crash_point("clean.mid_delete")
        for sid in removed_ids:
            table.status.leases.delete_lease(sid)
    # One listing of the segment folders serves the orphans and the unnamed files' choice
    # of folders (taken after the scan's start time: clean_scan.py).
    started = now_wall_ms()
    try:
        fact = sfs.list_dir(table.paths.fact_dir)
    except FileNotFoundError:
        fact = []
    orphans, orphan_skips = _orphans(table, fact, dry_run=dry_run, now=now, force=force)
    items.extend(orphans)
    skipped.extend(orphan_skips)
    # Before any unnamed file a running statement may be about to commit is judged.
    guard = _statement_guard(table, dry_run=dry_run, now=now)
    skipped.extend(guard.skipped)
    items.extend(unnamed_files(table, dry_run=dry_run, now=now, force=force, guard=guard,
                               fact=(started, fact)))
    items.extend(_stale_bloom_packs(table, dry_run=dry_run, now=now, force=force))
    items.extend(_expire_trash(table, dry_run=dry_run, now=now))
    items.extend(_obsolete_sortindexes(table, dry_run=dry_run, now=now, force=force))
    items.extend(_old_checkpoints(table, dry_run=dry_run, now=now, force=force))
    return CleanReport(
        table=str(table.name),
        dry_run=dry_run,
        items=tuple(items),
        removed_entries=tuple(removed_ids),
        skipped=tuple(skipped),
    )


def _statement_guard(table: Table, *, dry_run: bool, now: int) -> StatementGuard:
    """Judge the statement leases (store/leases.py): live ones keep the files written since
    they started (less the lease time, for clocks and file times that disagree); dead ones
    are marked dead and a version is committed BEFORE any of their files is deleted, so
    their commit can no longer succeed."""
    status = table.status
    lease = lease_ms(table)
    live: list[int] = []
    dead: list[str] = []
    skipped: list[str] = []
    keep_ms = table.conf.get_int("carbon.trash.retention.days") * _DAY_MS
    for token, beat, marked in status.leases.statement_leases():
        if marked:
            if beat is None and not dry_run:
                # A tombstone is kept long after its statement stopped: a stalled process
                # that wakes up must still find it.
                _expire_tombstone(table, token, now=now, keep_ms=keep_ms)
            continue
        if statement_is_dead(status, beat, now=now):
            dead.append(token)
            continue
        start = beat.get("startMs") if beat is not None else None
        live.append(start if isinstance(start, int) else now)
        skipped.append(f"{(beat or {}).get('operation', 'a statement')} {token} is running: "
                       "the files it writes are kept")
    if dead and not dry_run:
        for token in dead:
            status.leases.mark_statement_dead(token)
        table.status.update(lambda snap: StatusChange(),
                            operation="CLEAN FILES (mark statements dead)", force=True)
        crash_point("clean.after_mark_dead")
    return StatementGuard(min(live) - lease if live else None, tuple(skipped))


def _expire_tombstone(table: Table, token: str, *, now: int, keep_ms: int) -> None:
    written = table.status.leases.tombstone_time_ms(token)
    if written is not None and now - written >= keep_ms:
        table.status.leases.delete_statement_lease(token)


def _orphans(
    table: Table, fact: list[Any], *, dry_run: bool, now: int, force: bool
) -> tuple[list[CleanItem], list[str]]:
    """Segment folders no entry names, untouched for the lease time: moved to ``.Trash/``.

    A folder is created only after the version with its entry is committed, so a folder
    without an entry is either left by a crash or one whose entry was just removed; the
    age check spares a writer that was marked dead but still runs (its commit fails and
    it removes its own files). ``force`` skips the age check (the move is undoable).
    """
    sfs = table.paths.sfs
    items: list[CleanItem] = []
    skipped: list[str] = []
    named = set(table.status.read().view.names())
    lease = lease_ms(table)
    for info in fact:
        m = _SEGMENT_DIR_RE.match(info.base_name)
        if info.is_file or m is None or m.group(1) in named:
            continue
        sid = m.group(1)
        changed = _newest_mtime_ms(table, info.path, now)
        if now - changed < lease and not force:
            skipped.append(f"folder {info.base_name}: written within the lease time")
            continue
        # Re-read: a compaction or load may have committed it meanwhile.
        if table.status.read().find(sid) is not None:
            continue
        item = CleanItem(kind="orphan", segment_id=sid, path=info.path,
                         size=sfs.tree_size(info.path),
                         reason="no tablestatus entry names it: moved to .Trash")
        if not dry_run:
            target = f"{table.paths.trash_dir}/{now}"
            sfs.makedirs(target)
            try:
                sfs.move(info.path, f"{target}/{info.base_name}")
            except FileNotFoundError:  # its dead writer's own abort removed it meanwhile
                continue
            crash_point("clean.after_move")
        items.append(item)
    return items, skipped


def _newest_mtime_ms(table: Table, folder: str, default: int) -> int:
    fs = table.paths.sfs
    try:
        infos = [fs.file_info(folder), *fs.walk(folder)]
    except FileNotFoundError:
        return default
    times = [int(i.mtime.timestamp() * 1000) for i in infos if i.mtime is not None]
    return max(times) if times else default


def _obsolete_sortindexes(
    table: Table, *, dry_run: bool, now: int, force: bool
) -> list[CleanItem]:
    """Dictionary sort indexes superseded by a newer one, older than the retention time."""
    if not table.schema.dictionary_columns or not table.paths.sfs.exists(
        table.paths.dictionary_dir
    ):
        return []
    fs = table.paths.sfs
    retention_ms = table.conf.get_int("carbon.segment.retention.minutes") * 60_000
    items: list[CleanItem] = []
    for path in obsolete_sortindex_files(table):
        info = fs.file_info(path)
        mtime_ms = int(info.mtime.timestamp() * 1000) if info.mtime is not None else now
        if not force and now - mtime_ms < retention_ms:
            continue  # a running query may still read it
        items.append(CleanItem(kind="sortindex", path=path, size=int(info.size or 0),
                               reason="dictionary sort index superseded by a newer one"))
        if not dry_run:
            table.paths.sfs.delete_file(path)
    return items


def _stale_bloom_packs(
    table: Table, *, dry_run: bool, now: int, force: bool
) -> list[CleanItem]:
    """Bloom packs (``Metadata/index/blooms_*.carbonbloom``) older than the two newest, and
    temp files of pack writes that did not finish (untouched for the lease time). Writing a
    pack deletes the older ones already; this catches a writer that died first. A reader of
    a deleted pack probes the merge indexes instead (same answers)."""
    sfs = table.paths.sfs
    folder = table.paths.index_snapshot_dir
    try:
        infos = [i for i in sfs.list_dir(folder) if i.is_file and i.base_name.startswith(BLOOM_PACK_PREFIX)]
    except FileNotFoundError:
        return []
    packs = sorted((i for i in infos if i.base_name.endswith(BLOOM_PACK_SUFFIX)), key=lambda i: i.base_name)
    stale = [(i, "bloom pack superseded by two newer ones") for i in packs[:-2]]
    lease = lease_ms(table)
    for info in infos:
        if info.base_name.endswith(".tmp"):
            mtime = int(info.mtime.timestamp() * 1000) if info.mtime is not None else now
            if force or now - mtime >= lease:
                stale.append((info, "temp file of a bloom pack write that did not finish"))
    items = []
    for info, reason in stale:
        items.append(CleanItem(kind="index", path=info.path, size=int(info.size or 0), reason=reason))
        if not dry_run:
            delete_path(table, info.path)
    return items


def _old_checkpoints(table: Table, *, dry_run: bool, now: int, force: bool) -> list[CleanItem]:
    """Tablestatus checkpoints no version within the retention time reads
    (store/status_checkpoints.py); removed unless ``dry_run``."""
    status, sfs = table.status, table.paths.sfs
    if status.pinned is not None:
        return []
    first = first_in_reach(table, status.read(), now=now, force=force)
    paths, below = removable_checkpoints(sfs, status.log_dir, first, CHECKPOINT_INTERVAL)
    items = [CleanItem(kind="checkpoint", path=p, size=sfs.size(p),
                       reason=f"tablestatus checkpoint older than the one version {first} reads")
             for p in paths]
    if not dry_run:
        for item in items:
            delete_path(table, item.path)
        if items:
            write_removed_below(sfs, status.log_dir, below)
    return items


def _expire_trash(table: Table, *, dry_run: bool, now: int) -> list[CleanItem]:
    sfs = table.paths.sfs
    keep_ms = table.conf.get_int("carbon.trash.retention.days") * _DAY_MS
    items: list[CleanItem] = []
    for info in sfs.list_dir(table.paths.trash_dir):
        # The folder this run filled is never expired by the same run.
        if info.is_file or not info.base_name.isdigit() or info.base_name == str(now):
            continue
        if now - int(info.base_name) < keep_ms:
            continue
        items.append(CleanItem(kind="trash", path=info.path, size=sfs.tree_size(info.path),
                               reason="trash older than carbon.trash.retention.days"))
        if not dry_run:
            sfs.delete_dir(info.path)
    return items
