"""Segment management: delete by id or by load start time, choose segments for reads.

Deleting only flips entries to ``Marked for Delete`` (with
``modificationOrDeletionTimestamp``) in one new tablestatus version: readers stop seeing
the segments at once, and clean files removes their files after the retention time so
queries already running finish.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from carbonstore.errors import SegmentNotFoundError, UserError
from carbonstore.store.paths import check_segment_id
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import (
    COMPACTED,
    FAILURE,
    MARKED_FOR_DELETE,
    PARTIAL_SUCCESS,
    SUCCESS,
    LoadEntry,
    StatusChange,
    TableStatusSnapshot,
    now_ms,
    segment_sort_key,
)

__all__ = [
    "TIME_FORMATS",
    "delete_segments",
    "delete_segments_before",
    "parse_segment_ids",
    "parse_time",
    "resolve_read_segments",
]

# Segments in these states may be marked for delete.
_DELETABLE = frozenset({SUCCESS, PARTIAL_SUCCESS, FAILURE})
TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d")


def parse_segment_ids(ids: str | Sequence[str]) -> list[str]:
    """``"1,2"`` or ``["1", "2"]`` -> checked ids; none at all is a UserError."""
    parts = ids.split(",") if isinstance(ids, str) else list(ids)
    out = [check_segment_id(p.strip()) for p in parts if p.strip()]
    if not out:
        raise SegmentNotFoundError("Segment ids should not be empty")
    return out


def parse_time(text: str | datetime | int) -> int:
    """A ``yyyy-MM-dd HH:mm:ss`` string (local time, like CarbonData), datetime or epoch ms."""
    if isinstance(text, int):
        return text
    if isinstance(text, datetime):
        return int(text.timestamp() * 1000)
    for fmt in TIME_FORMATS:
        try:
            return int(datetime.strptime(text.strip(), fmt).timestamp() * 1000)
        except ValueError:
            continue
    raise UserError(f"invalid time {text!r}: expected yyyy-MM-dd HH:mm:ss, e.g. 2024-01-31 23:59:00")


def _check_deletable(e: LoadEntry | None, sid: str) -> LoadEntry:
    if e is None:
        raise SegmentNotFoundError(
            f"segment {sid} does not exist; 'carbonstore show-segments' lists the segments"
        )
    if e.status == COMPACTED:
        raise SegmentNotFoundError(
            f"segment {sid} is compacted into {e.merged_load_name} and cannot be deleted on its "
            f"own; delete segment {e.merged_load_name} instead"
        )
    if e.status == MARKED_FOR_DELETE:
        raise SegmentNotFoundError(f"segment {sid} is already marked for delete")
    if e.status not in _DELETABLE:
        raise SegmentNotFoundError(
            f"segment {sid} has status {e.status!r} (a load or compaction is still writing it); "
            "retry when it has finished"
        )
    return e


def delete_segments(table: Table, ids: str | Sequence[str]) -> list[LoadEntry]:
    """Mark the given segments ``Marked for Delete`` (all or none).

    Raises:
        SegmentNotFoundError: an id is unknown, compacted, already deleted or still loading;
            nothing is changed then.
    """
    wanted = parse_segment_ids(ids)
    holder: list[LoadEntry] = []

    def apply(snap: TableStatusSnapshot) -> StatusChange:
        holder.clear()
        ts = now_ms()
        for sid in dict.fromkeys(wanted):  # (an id given twice is marked once)
            holder.append(_check_deletable(snap.find(sid), sid).with_status(
                MARKED_FOR_DELETE, modification_or_deletion_timestamp=ts))
        return StatusChange(upserts=tuple(holder))

    table.status.update(apply, operation="DELETE SEGMENTS")
    return holder


def delete_segments_before(table: Table, before: str | datetime | int) -> list[LoadEntry]:
    """Mark every Success / Partial Success / Failure segment loaded before ``before``.

    Compacted and in-progress segments are left alone (a compacted segment goes with the
    segment it was merged into). Returns the entries that were marked (maybe none).
    """
    limit = parse_time(before)
    holder: list[LoadEntry] = []

    def apply(snap: TableStatusSnapshot) -> list[LoadEntry]:
        holder.clear()
        ts = now_ms()
        out = []
        for e in snap.entries:
            if e.status in _DELETABLE and e.load_start_time < limit:
                e = e.with_status(MARKED_FOR_DELETE, modification_or_deletion_timestamp=ts)
                holder.append(e)
            out.append(e)
        return out

    table.status.update(apply, operation="DELETE SEGMENTS")
    return holder


def resolve_read_segments(
    snapshot: TableStatusSnapshot, requested_ids: str | Sequence[str] | None = None
) -> list[LoadEntry]:
    """The segments a reader scans, in segment order.

    Args:
        snapshot: one tablestatus snapshot (readers use one for the whole query).
        requested_ids: None or ``"*"`` for every readable segment; otherwise the chosen ids
            (a list or ``"1,2"``). A chosen segment that is not readable (compacted, marked
            for delete, in progress) or unknown is left out here; the read paths (plans,
            ``to_spark``, the data source) refuse such an id first
            (``TableStatusSnapshot.refuse_unreadable``).

    Raises:
        UserError: an id is malformed or the list is empty.
    """
    readable = sorted(snapshot.readable, key=lambda e: segment_sort_key(e.load_name))
    if requested_ids is None or (isinstance(requested_ids, str) and requested_ids.strip() == "*"):
        return readable
    wanted = set(parse_segment_ids(requested_ids))
    return [e for e in readable if e.load_name in wanted]
