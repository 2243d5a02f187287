"""The driver side of a load's commit protocol (DESIGN.md section 4, steps 1 and 5).

``begin_segment`` allocates the segment id and its ``In Progress`` entry and takes the
segment lock in the same tablestatus update, so no clean-files run can mistake the new
entry for a dead load. ``commit_segment`` writes the segment's ``.carbonindexmerge`` and
flips the entry to ``Success`` / ``Partial Success`` in one atomic tablestatus write
(which, for an overwrite, also marks every older readable segment ``Marked for Delete``).
``abort_segment`` marks the entry ``Failure`` and removes the segment folder.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import filelock

from carbonstore.errors import BadRecordError, CarbonStoreError
from carbonstore.indexfiles.indexfile import merge_indexes
from carbonstore.progress import progress
from carbonstore.segments.writer import TaskResult
from carbonstore.store.faults import crash_point
from carbonstore.store.locks import acquire
from carbonstore.store.tablestatus import (
    FAILURE,
    IN_PROGRESS,
    MARKED_FOR_DELETE,
    OVERWRITE_IN_PROGRESS,
    PARTIAL_SUCCESS,
    SUCCESS,
    LoadEntry,
    TableStatusSnapshot,
    now_ms,
)

if TYPE_CHECKING:
    from carbonstore.store.table import Table

__all__ = ["abort_segment", "auto_compact_hook", "begin_segment", "commit_segment"]

log = logging.getLogger(__name__)
_RUNNING = (IN_PROGRESS, OVERWRITE_IN_PROGRESS)


def begin_segment(
    table: Table, *, overwrite: bool = False, hold_lock: bool = True
) -> tuple[LoadEntry, filelock.BaseFileLock | None]:
    """Allocate the next segment (``In Progress``) and take its segment lock.

    Returns:
        The new entry and the held segment lock (None when ``hold_lock`` is false); the
        caller releases the lock when the load has committed or failed.
    """
    holder: list[LoadEntry] = []
    locks: list[filelock.BaseFileLock] = []
    status = OVERWRITE_IN_PROGRESS if overwrite else IN_PROGRESS

    def add(snap: TableStatusSnapshot) -> list[LoadEntry]:
        seg = snap.next_segment_id()
        if hold_lock and not locks:
            lock = table.locks.segment(seg)
            acquire(lock, f"Segment_{seg}.lock", table.store.conf)
            locks.append(lock)
        entry = LoadEntry(load_name=seg, status=status, load_start_time=now_ms())
        holder.append(entry)
        return [*snap.entries, entry]

    try:
        table.status.update(add)
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    table.store.sfs.makedirs(table.paths.segment_dir(holder[0].load_name))
    crash_point("load.after_inprogress")
    return holder[0], (locks[0] if locks else None)


def _remove_orphans(table: Table, segment_id: str, keep: set[str]) -> None:
    """Delete files of failed or speculative task attempts that no commit message names."""
    sfs = table.store.sfs
    for info in sfs.list_dir(table.paths.segment_dir(segment_id)):
        if info.is_file and info.base_name not in keep:
            sfs.delete_file(info.path)


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
) -> LoadEntry:
    """Commit a written segment, or abort it when its bad records say so.

    Raises:
        BadRecordError: FAIL with bad records, or every row was bad (the entry is Failure).
        CarbonStoreError: the entry is no longer running (e.g. it was marked Failure).
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
    sfs.makedirs(seg_dir)
    task_indexes = [r.index_file for r in done if r.index_file]
    keep = {f for r in done for f in r.files} | set(task_indexes)
    _remove_orphans(table, segment_id, keep)
    ts = now_ms()
    merge_name = f"{segment_id}_{ts}.carbonindexmerge"
    with progress(len(task_indexes), f"merging {len(task_indexes)} task indexes of segment "
                  f"{segment_id}") as step:
        merge_size = merge_indexes(
            sfs.fs, [f"{seg_dir}/{n}" for n in task_indexes], f"{seg_dir}/{merge_name}",
            segment_id=segment_id,
        )
        step(len(task_indexes))
    crash_point("load.merge_index_written")
    _store_statistics(table, segment_id, done)
    status = PARTIAL_SUCCESS if bad else SUCCESS
    extra = {"badRecordPath": bad_record_dir} if bad and bad_record_dir else {}
    holder: list[LoadEntry] = []

    def flip(snap: TableStatusSnapshot) -> list[LoadEntry]:
        out: list[LoadEntry] = []
        for e in snap.entries:
            if e.load_name == segment_id:
                if e.status not in _RUNNING:
                    raise CarbonStoreError(
                        f"segment {segment_id} of {table.name} is {e.status}, not in progress; "
                        "the load cannot commit"
                    )
                e = e.with_status(
                    status,
                    timestamp=ts,
                    row_count=rows,
                    bad_record_count=bad,
                    data_size=sum(r.data_bytes for r in done),
                    index_size=sum(r.index_bytes for r in done) + merge_size,
                    segment_file=merge_name,
                    extra={**e.extra, **extra},
                )
                holder.append(e)
            elif overwrite and e.readable:
                e = e.with_status(MARKED_FOR_DELETE, modification_or_deletion_timestamp=ts)
            out.append(e)
        if not holder:
            raise CarbonStoreError(f"segment {segment_id} of {table.name} has no tablestatus entry")
        return out

    crash_point("load.before_commit")
    table.status.update(flip)
    auto_compact_hook(table)
    return holder[0]


def _store_statistics(table: Table, segment_id: str, results: Sequence[TaskResult]) -> None:
    """The segment's column statistics from its tasks' accumulators; never fails the load."""
    from carbonstore.segments.sketches import store_task_statistics

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

    def fail(snap: TableStatusSnapshot) -> list[LoadEntry]:
        out: list[LoadEntry] = []
        for e in snap.entries:
            if e.load_name == segment_id and e.status in _RUNNING:
                extra = {**e.extra, "failureReason": reason[:2000]} if reason else dict(e.extra)
                if bad_records:
                    extra["failureCause"] = "badRecords"
                e = e.with_status(FAILURE, timestamp=now_ms(), extra=extra)
            if e.load_name == segment_id:
                holder.append(e)
            out.append(e)
        return out

    table.status.update(fail)
    table.store.sfs.delete_dir(table.paths.segment_dir(segment_id))
    return holder[0] if holder else None


def auto_compact_hook(table: Table) -> None:
    """Run automatic compaction after a successful load when the compaction module offers it.

    Never fails the load: errors are logged.
    """
    try:
        module = importlib.import_module("carbonstore.segments.compaction")
    except ImportError:
        return
    hook = getattr(module, "maybe_auto_compact", None)
    if hook is None:
        return
    try:
        hook(table)
    except Exception:  # a committed load stays committed whatever compaction does
        log.exception("automatic compaction after loading %s failed", table.name)
