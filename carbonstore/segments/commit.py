"""The driver side of a load's commit protocol (DESIGN.md section 4, steps 1 and 5).

``begin_segment`` commits a tablestatus version with the new ``In Progress`` entry (its id
allocated in that version) carrying a lease, and starts renewing the lease from this
process (``carbonstore.store.leases``). ``commit_segment`` writes the segment's
``.carbonindexmerge`` and commits a version that flips the entry to ``Success`` /
``Partial Success`` (for an overwrite, the same version marks every older readable
segment ``Marked for Delete``); when clean files marked the entry dead meanwhile, the
commit fails with a clear error and the load's files are removed. ``abort_segment``
marks the entry ``Failure`` and removes the segment folder.

Every load path drives these steps through one :class:`LoadTransaction` (the Python and CLI
load, the CSV tasks, a bare ``df.write`` through the data source): ``begin`` (or ``resume``
in the process that commits a segment another process began), ``commit`` and then the
automatic compaction, as an explicit call, or ``abort``; ``release`` stops the lease renewal.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from carbonstore.errors import (
    BadRecordError,
    CarbonStoreError,
    CommitConflictError,
    TableNotFoundError,
    UserError,
)
from carbonstore.indexfiles.indexfile import merge_indexes
from carbonstore.progress import progress
from carbonstore.pruning.table_index import refresh_if_lagging
from carbonstore.segments.compaction import maybe_auto_compact
from carbonstore.segments.partitions import replace_partitions, with_spec
from carbonstore.segments.writer import TaskResult, WriteSettings
from carbonstore.statistics.analyze import store_task_statistics
from carbonstore.store.faults import crash_point
from carbonstore.store.leases import MARKED_DEAD, LeaseKeeper, lease_fields
from carbonstore.store.partitioning import PartitionSpec
from carbonstore.store.tablestatus import (
    FAILURE,
    IN_PROGRESS,
    MARKED_FOR_DELETE,
    OVERWRITE_IN_PROGRESS,
    PARTIAL_SUCCESS,
    SUCCESS,
    LoadEntry,
    StatusChange,
    TableStatusSnapshot,
    now_ms,
)

if TYPE_CHECKING:
    from carbonstore.store.table import Table

__all__ = ["LoadTransaction", "abort_segment", "begin_segment", "commit_segment", "dead_load_error", "remove_orphans",
           "marked_dead_error"]

log = logging.getLogger(__name__)
_RUNNING = (IN_PROGRESS, OVERWRITE_IN_PROGRESS)


def lease_seconds(table: Table) -> float:
    return max(1.0, table.store.conf.get_float("carbon.segment.lease.seconds"))


def begin_segment(
    table: Table, *, overwrite: bool = False, hold_lock: bool = True
) -> tuple[LoadEntry, LeaseKeeper | None]:
    """Commit the next segment's ``In Progress`` entry and keep its lease renewed.

    Returns:
        The new entry and the lease keeper (None when ``hold_lock`` is false: the caller's
        process ends before the load does, so the caller renews the lease another way, as
        the data source does with ``carbonstore.store.renewer``); the caller calls
        ``release()`` on it when the load has committed or failed.
    """
    holder: list[LoadEntry] = []
    status = OVERWRITE_IN_PROGRESS if overwrite else IN_PROGRESS
    seconds = lease_seconds(table)

    def add(snap: TableStatusSnapshot) -> list[LoadEntry]:
        holder.clear()
        # The lease runs from this attempt, not from the call: waiting for the courtesy
        # lock and lost races must not leave an entry whose lease is already spent.
        lease = lease_fields(seconds)
        if not hold_lock:  # no process of ours stays to renew it: do not claim to be its writer
            lease = {"leaseExpiryMs": lease["leaseExpiryMs"]}
        entry = LoadEntry(load_name=snap.next_segment_id(), status=status,
                          load_start_time=now_ms(),
                          # the schema its files are written with (docs/schema-evolution.md)
                          extra={**lease, "schemaVersion": table.schema.schema_version})
        holder.append(entry)
        return StatusChange(upserts=(entry,))  # the commit costs one entry, not the table

    table.status.update(add, operation="OVERWRITE BEGIN" if overwrite else "LOAD BEGIN")
    entry = holder[0]
    keeper = LeaseKeeper(table.status, entry.load_name, seconds) if hold_lock else None
    table.store.sfs.makedirs(table.paths.segment_dir(entry.load_name))
    crash_point("load.after_inprogress")
    return entry, keeper


def dead_segment_message(table: Table, segment_id: str, entry: LoadEntry | None) -> str:
    state = "was removed" if entry is None else f"is {entry.status}"
    return (
        f"segment {segment_id} of {table.name} {state}: its lease expired and clean files "
        "marked the load dead, so it cannot commit; nothing of it is visible and its files "
        "are removed - run the load again"
    )


def dead_load_error(table: Table, segment_id: str) -> CommitConflictError | None:
    """The error of a load whose work failed because clean files marked it dead meanwhile.

    Clean files removes a dead load's folder, so the load's own tasks, index merge or
    commit then fail on missing files; that is this error (the load did not commit, run it
    again), not the ``OSError`` of a file. None when the entry is still running: the
    failure is the load's own.
    """
    mine = table.status.read().find(segment_id)
    if mine is None or mine.status not in _RUNNING:
        return CommitConflictError(dead_segment_message(table, segment_id, mine))
    return None


def marked_dead_error(table: Table, segment_id: str) -> CommitConflictError | None:
    """The error of a load whose job failed after clean files marked it dead (the same
    one-line error on every load path); None when its entry failed for a reason of its own
    (a task error, bad records) or is still running."""
    mine = table.status.read().find(segment_id)
    if mine is None or (mine.status == FAILURE and (
            mine.extra.get("failureCause") == MARKED_DEAD
            or "marked dead by clean files" in str(mine.extra.get("failureReason", "")))):
        return CommitConflictError(dead_segment_message(table, segment_id, mine))
    return None


def remove_orphans(table: Table, segment_id: str, keep: set[str]) -> None:
    """Delete files of failed or speculative task attempts that no commit message names."""
    sfs = table.store.sfs
    seg_dir = table.paths.segment_dir(segment_id)
    for info in sfs.list_dir(seg_dir):
        if info.is_file and info.base_name not in keep:
            sfs.delete_file(info.path)
        elif not info.is_file:  # a partition folder (docs/partitioning.md)
            for sub in sfs.walk(info.path):
                rel = sub.path[len(seg_dir.rstrip("/")) + 1:]
                if sub.is_file and rel not in keep:
                    sfs.delete_file(sub.path)


def _fail_message(table: Table, segment_id: str, results: Sequence[TaskResult], bad: int) -> str:
    samples = [s for r in results for s in r.bad_samples][:3]
    shown = "; ".join(repr(s) for s in samples)
    return (
        f"load of {table.name} failed: {bad} bad record(s) with BAD_RECORDS_ACTION=FAIL "
        f"(segment {segment_id}, nothing was loaded); first bad rows: {shown}. Load with "
        "BAD_RECORDS_ACTION=REDIRECT and BAD_RECORD_PATH=<folder> to collect them, or "
        "FORCE / IGNORE to load the rest"
    )


def commit_segment(
    table: Table,
    segment_id: str,
    results: Sequence[TaskResult | None],
    *,
    overwrite: bool = False,
    action: str = "FAIL",
    bad_record_dir: str | None = None,
    partitioning: PartitionSpec | None = None,
    overwrite_partitions: bool = False,
) -> LoadEntry:
    """Commit a written segment, or abort it when its bad records say so.

    ``partitioning`` (the spec the tasks wrote with) is recorded in the entry; with
    ``overwrite_partitions`` the same version replaces, in older segments, exactly the
    partitions the new segment holds (segments/partitions.py).

    Raises:
        BadRecordError: FAIL with bad records, or every row was bad (the entry is Failure).
        CommitConflictError: clean files marked the entry dead meanwhile (its files are removed).
        TableNotFoundError: the table was dropped meanwhile.
    """
    done = [r for r in results if r is not None]
    rows = sum(r.rows for r in done)
    bad = sum(r.bad_records for r in done)
    if bad and action == "FAIL":
        msg = _fail_message(table, segment_id, done, bad)
        abort_segment(table, segment_id, reason=msg, bad_records=True)
        raise BadRecordError(msg)
    if bad and rows == 0:
        msg = (
            f"load of {table.name} failed: all {bad} record(s) are bad "
            f"(BAD_RECORDS_ACTION={action}); nothing was loaded"
        )
        abort_segment(table, segment_id, reason=msg, bad_records=True)
        raise BadRecordError(msg)
    crash_point("load.after_data")
    sfs = table.store.sfs
    seg_dir = table.paths.segment_dir(segment_id)
    try:
        sfs.makedirs(seg_dir)
        task_indexes = [r.index_file for r in done if r.index_file]
        keep = {f for r in done for f in r.files} | set(task_indexes)
        remove_orphans(table, segment_id, keep)
        ts = now_ms()
        merge_name = f"{segment_id}_{ts}.carbonindexmerge"
        with progress(len(task_indexes), f"merging {len(task_indexes)} task indexes of segment "
                      f"{segment_id}") as step:
            merge_size = merge_indexes(
                sfs, [f"{seg_dir}/{n}" for n in task_indexes], f"{seg_dir}/{merge_name}",
                segment_id=segment_id,
            )
            step(len(task_indexes))
    except (CarbonStoreError, OSError) as err:
        # Files gone under us: clean files marked the load dead and removed them.
        dead = dead_load_error(table, segment_id)
        if dead is not None:
            abort_segment(table, segment_id, reason="marked dead before its commit")
            raise dead from err
        raise
    crash_point("load.merge_index_written")
    _store_statistics(table, segment_id, done)
    status = PARTIAL_SUCCESS if bad else SUCCESS
    extra = {"badRecordPath": bad_record_dir} if bad and bad_record_dir else {}
    holder: list[LoadEntry] = []
    seen: dict[tuple[str, str | None], dict[str, int]] = {}

    def done_entry(e: LoadEntry) -> LoadEntry:
        return e.with_status(
            status,
            timestamp=ts,
            row_count=rows,
            bad_record_count=bad,
            data_size=sum(r.data_bytes for r in done),
            index_size=sum(r.index_bytes for r in done) + merge_size,
            segment_file=merge_name,
            extra=with_spec({**_without_lease(e.extra), **extra}, partitioning),
        )

    def flip(snap: TableStatusSnapshot) -> list[LoadEntry] | StatusChange:
        holder.clear()
        out: list[LoadEntry] = []
        mine = snap.find(segment_id)
        if mine is None or mine.status not in _RUNNING:
            raise CommitConflictError(dead_segment_message(table, segment_id, mine))
        if not overwrite and not overwrite_partitions:  # a plain load changes its own entry only
            holder.append(done_entry(mine))
            return StatusChange(upserts=(holder[0],))
        entries = snap.entries
        if overwrite_partitions:
            entries = tuple(replace_partitions(
                table, snap, segment_id, partitioning, [f for r in done for f in r.files],
                ts=ts, cache=seen,
            ))
        for e in entries:
            if e.load_name == segment_id:
                e = done_entry(e)
                holder.append(e)
            elif overwrite and e.readable:
                e = e.with_status(MARKED_FOR_DELETE, modification_or_deletion_timestamp=ts)
            out.append(e)
        return out

    crash_point("load.before_commit")
    try:
        operation = "OVERWRITE" if overwrite else "OVERWRITE PARTITIONS" if overwrite_partitions else "LOAD"
        table.status.update(flip, operation=operation)
    except (CommitConflictError, UserError):
        abort_segment(table, segment_id, reason="the commit failed")
        raise
    refresh_if_lagging(table)  # after the commit, best effort: planning never writes it
    return holder[0]


_LEASE_KEYS = ("leaseExpiryMs", "writer", "writerHost", "writerPid")


def _without_lease(extra: dict[str, object]) -> dict[str, object]:
    """A finished entry keeps its writer (``host:pid``) but not its lease."""
    return {k: v for k, v in extra.items() if k not in _LEASE_KEYS or k == "writer"}


def _store_statistics(table: Table, segment_id: str, results: Sequence[TaskResult]) -> None:
    """The segment's column statistics from its tasks' accumulators; never fails the load."""
    try:
        store_task_statistics(table, segment_id, results, source="load")
    except (CarbonStoreError, OSError):  # 'carbonstore analyze' can compute them later
        log.warning("statistics of segment %s of %s not stored", segment_id, table.name,
                    exc_info=True)


def abort_segment(
    table: Table, segment_id: str, *, reason: str = "", bad_records: bool = False
) -> LoadEntry | None:
    """Mark the segment ``Failure`` (if still running) and remove its folder. Idempotent.

    ``reason`` is kept in the entry (``failureReason``); ``bad_records`` records that bad
    records, not an error, failed the load (``failureCause``).
    """
    holder: list[LoadEntry] = []

    def fail(snap: TableStatusSnapshot) -> StatusChange:
        holder.clear()
        e = snap.find(segment_id)
        if e is None:
            return StatusChange()
        if e.status in _RUNNING:
            extra = {**e.extra, "failureReason": reason[:2000]} if reason else dict(e.extra)
            if bad_records:
                extra["failureCause"] = "badRecords"
            e = e.with_status(FAILURE, timestamp=now_ms(), extra=_without_lease(extra))
        holder.append(e)
        return StatusChange(upserts=(e,))

    try:
        table.status.update(fail, operation="LOAD ABORT")
    except TableNotFoundError:
        return None  # dropped: the folder went with the table (or belongs to a new one)
    # Only a Failure (or removed) entry's folder: never one a commit made readable.
    if not holder or not holder[0].readable:
        table.store.sfs.delete_dir(table.paths.segment_dir(segment_id))
    table.status.leases.delete_lease(segment_id)
    return holder[0] if holder else None


@dataclass(slots=True, kw_only=True)
class LoadTransaction:
    """One load's segment, from its ``In Progress`` entry to its commit or abort.

    ``begin`` allocates the segment (``begin_segment``); a process that commits a segment
    another process began (the data source's driver-side commit) takes it over with
    ``resume``. ``commit`` commits the tasks' results and then runs the automatic compaction
    (``maybe_auto_compact``: MINOR when ``auto_load_merge`` is on; it never fails the
    committed load); ``abort`` marks the entry ``Failure`` and removes its files; ``release``
    stops this process's lease renewal (call it when the load has committed or failed).
    """

    table: Table
    segment_id: str
    overwrite: bool = False
    keeper: LeaseKeeper | None = None

    @classmethod
    def begin(
        cls, table: Table, *, overwrite: bool = False, hold_lock: bool = True
    ) -> LoadTransaction:
        """Commit the new segment's ``In Progress`` entry (see ``begin_segment``)."""
        entry, keeper = begin_segment(table, overwrite=overwrite, hold_lock=hold_lock)
        return cls(table=table, segment_id=entry.load_name, overwrite=overwrite, keeper=keeper)

    @classmethod
    def resume(cls, table: Table, segment_id: str, *, overwrite: bool = False) -> LoadTransaction:
        """The transaction of a segment begun elsewhere (its lease is renewed there)."""
        return cls(table=table, segment_id=segment_id, overwrite=overwrite)

    def commit(
        self,
        results: Sequence[TaskResult | None],
        settings: WriteSettings | None = None,
        *,
        auto_compact: bool = True,
    ) -> LoadEntry:
        """Commit the segment (``commit_segment``, with the bad-record action, bad-record
        folder and partitioning of the ``settings`` the tasks wrote with), then run the
        automatic compaction unless ``auto_compact`` is false.

        Raises:
            BadRecordError, CommitConflictError, TableNotFoundError: as ``commit_segment``.
        """
        entry = commit_segment(
            self.table,
            self.segment_id,
            results,
            overwrite=self.overwrite,
            action=settings.action if settings is not None else "FAIL",
            bad_record_dir=settings.bad_record_dir if settings is not None else None,
            partitioning=settings.partitioning if settings is not None else None,
            overwrite_partitions=settings.overwrite_partitions if settings is not None else False,
        )
        if auto_compact:
            maybe_auto_compact(self.table)
        return entry

    def abort(self, reason: str = "") -> LoadEntry | None:
        """Mark the segment ``Failure`` and remove its folder (``abort_segment``)."""
        return abort_segment(self.table, self.segment_id, reason=reason)

    def release(self) -> None:
        """Stop renewing the lease from this process (nothing when it was begun elsewhere)."""
        if self.keeper is not None:
            self.keeper.release()
