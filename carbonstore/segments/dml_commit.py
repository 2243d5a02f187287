"""The commit of DELETE / UPDATE / MERGE: deltas and the insert segment in one version, and
planning again when a concurrent change makes the plan stale (docs/dml.md, "Conflicts").

``apply_changes`` commits rows matched on one snapshot (``Matches``) as deleted - a new
delete delta per touched data file, the union of the file's current delta and the new
positions - and the new and changed rows as a new segment (CarbonData's insert delta),
in ONE tablestatus version. Before that version is written (and again on the fresh
version after every lost race) :class:`~carbonstore.segments.dml_conflicts.Validator`
checks that the statement's outcome is the same on the version it commits on as on the
one it planned on; when it is not, :class:`Replan` goes back to ``run_replanned``, which
plans the statement again from the start. ``run_replanned`` also plans again when files of
the version a statement planned on were removed meanwhile (clean files, after a compaction
or a newer delta made them unnamed): a race, not damage.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyroaring import BitMap

from carbonstore.errors import (
    CarbonStoreError,
    CommitConflictError,
    CorruptIndexError,
    CorruptMetadataError,
    UserError,
)
from carbonstore.pruning.table_index import refresh_if_lagging
from carbonstore.segments.deltas import read_delta, write_delta
from carbonstore.segments.dml_conflicts import FileKey, Reads, Replan, Validator
from carbonstore.statistics.analyze import store_task_statistics
from carbonstore.statistics.store import delete_segment_statistics
from carbonstore.store.entries import DeleteDelta
from carbonstore.store.faults import crash_point
from carbonstore.store.leases import StatementLease
from carbonstore.store.records import replace as replace_record
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import (
    SUCCESS,
    LoadEntry,
    StatusChange,
    TableStatusSnapshot,
    now_ms,
)

__all__ = ["DmlResult", "Matches", "PreparedInsert", "Written", "apply_changes", "finish_insert",
           "read_latest", "run_replanned"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_REPLANS = 20
_LEASE_KEYS = ("leaseExpiryMs", "writerHost", "writerPid")  # a finished entry keeps "writer"
#: errors of reading files a version names; when that version is no longer the latest,
#: clean files removed them (a race), else they are damage
_MISSING_FILES = (FileNotFoundError, CorruptMetadataError, CorruptIndexError)


@dataclass(frozen=True, slots=True, kw_only=True)
class DmlResult:
    """What one DELETE / UPDATE / MERGE committed."""

    operation: str
    version: int | None  # the tablestatus version committed (None: nothing changed)
    deleted: int  # rows deleted (for UPDATE / MERGE: rows replaced or deleted)
    inserted: int  # rows written into the insert segment
    files: int  # data files that got a new delete delta
    segments: tuple[str, ...]  # segments touched
    inserted_segment: str | None = None
    replans: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"operation": self.operation, "version": self.version, "deleted": self.deleted,
                "inserted": self.inserted, "files": self.files,
                "segments": ",".join(self.segments), "insertedSegment": self.inserted_segment}


@dataclass(frozen=True, slots=True)
class Matches:
    """Rows matched on one snapshot: new positions per data file (and the rows, if asked)."""

    snapshot: TableStatusSnapshot
    positions: dict[FileKey, npt.NDArray[np.uint32]]
    rows: pa.Table | None  # table columns (values) + SEGMENT/FILE/POS columns

    @property
    def count(self) -> int:
        return sum(len(p) for p in self.positions.values())


# ---- inserts (CarbonData's insert delta) -----------------------------------------------------
@dataclass(frozen=True, slots=True)
class PreparedInsert:
    """A written ``In Progress`` insert segment, ready to become ``Success`` in the commit."""

    segment: str
    fields: dict[str, Any]  # of the Success entry
    keeper: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Written:
    """The new delete delta a task wrote for one data file: the union of the file's delta
    in the planned version (``planned``) and ``added`` new positions."""

    planned: DeleteDelta | None
    delta_file: str
    deleted_rows: int
    added: int


def finish_insert(
    table: Table, sid: str, results: Sequence[Any], settings: Any, keeper: Any, *, what: str,
) -> PreparedInsert:
    """The insert segment ``sid`` its tasks wrote (``results``: their ``TaskResult``):
    files of other task attempts removed, the task indexes merged, statistics stored.

    Raises:
        UserError: a new row did not fit the table (the caller aborts the segment).
    """
    from carbonstore.indexfiles.indexfile import merge_indexes
    from carbonstore.segments.commit import remove_orphans
    from carbonstore.segments.partitions import with_spec

    done = [r for r in results if r is not None]
    bad = sum(r.bad_records for r in done)
    if bad:
        sample = "; ".join(str(s) for r in done for s in r.bad_samples[:3])
        raise UserError(
            f"the new rows of this {what} do not fit table {table.name}: {bad} of them are "
            f"invalid ({sample}); nothing was changed")
    sfs = table.store.sfs
    seg_dir = table.paths.segment_dir(sid)
    index_files = [r.index_file for r in done if r.index_file]
    remove_orphans(table, sid, {f for r in done for f in r.files} | set(index_files))
    merge_name = f"{sid}_{now_ms()}.carbonindexmerge"
    merge_size = merge_indexes(sfs, [f"{seg_dir}/{n}" for n in index_files],
                               f"{seg_dir}/{merge_name}", segment_id=sid)
    try:
        store_task_statistics(table, sid, done, source="load")
    except (CarbonStoreError, OSError):  # analyze computes them later
        log.warning("statistics of segment %s not stored", sid, exc_info=True)
    fields = {"row_count": sum(r.rows for r in done),
              "data_size": sum(r.data_bytes for r in done),
              "index_size": sum(r.index_bytes for r in done) + merge_size,
              "segment_file": merge_name,
              "extra": with_spec({}, getattr(settings, "partitioning", None))}
    return PreparedInsert(sid, fields, keeper)


def _write_insert(table: Table, rows: pa.Table) -> PreparedInsert:
    """Write ``rows`` (table columns, values) as a new ``In Progress`` segment, in this
    process (the JVM-free insert of ``insert_rows``)."""
    from carbonstore.segments.commit import abort_segment, begin_segment
    from carbonstore.segments.load import parse_load_options, write_settings
    from carbonstore.segments.writer import write_task

    for column in table.schema.columns:  # the usual misfit, named before anything is written
        nulls = rows.column(column.name).null_count if not column.nullable else 0
        if nulls:
            raise UserError(
                f"the new rows do not fit table {table.name}: column {column.name} is NOT NULL "
                f"and {nulls} of them would set it to NULL; nothing was changed")
    entry, keeper = begin_segment(table)
    sid = entry.load_name
    try:
        batches = rows.select(list(table.schema.column_names)).to_batches()
        dict_cols = list(table.schema.dictionary_columns)
        if dict_cols:
            from carbonstore.dictionary import distinct_values, prepare_dictionaries

            prepare_dictionaries(table, distinct_values(iter(batches), dict_cols), sid)
        settings = write_settings(table, sid, parse_load_options(table, {"sort_scope": "no_sort"}))
        table.store.sfs.makedirs(settings.segment_dir)
        result = write_task(iter(batches), settings, task_id="dml", fs=table.store.sfs)
        return finish_insert(table, sid, [result], settings, keeper, what="INSERT")
    except BaseException as err:
        abort_segment(table, sid, reason=str(err)[:500] or type(err).__name__)
        if keeper is not None:
            keeper.release()
        raise


# ---- the commit --------------------------------------------------------------------------
def apply_changes(
    table: Table,
    matches: Matches,
    *,
    operation: str,
    insert: pa.Table | None = None,
    reads: Reads | None = None,
    written: Mapping[FileKey, Written] | None = None,
    prepared: PreparedInsert | None = None,
    lease: StatementLease | None = None,
) -> tuple[int | None, int, str | None]:
    """Commit ``matches`` as deleted rows (and ``insert`` as a new segment) in one version.

    ``reads``: what the statement's outcome depends on (``dml_conflicts``); default: the
    matched rows, and any row a newer version added (other than by a blind append) is
    taken to meet its condition.

    ``written``: deltas the statement's Spark tasks already wrote (``matches`` then has no
    positions); ``prepared``: an insert segment they wrote; ``lease``: the statement lease
    taken before they wrote (released here).

    Returns:
        (version committed or None when nothing changed, files given a new delta, the insert
        segment's id or None).

    Raises:
        Replan: its outcome on the version it would commit on may differ from the planned
            one (``dml_conflicts``); nothing is visible.
    """
    from carbonstore.segments.commit import abort_segment, lease_seconds

    sfs = table.store.sfs
    done = dict(written or {})
    if not matches.positions and not done and prepared is None and (
            insert is None or not insert.num_rows):
        if lease is not None:
            lease.release()
        return None, 0, None
    validator = Validator(table, matches.snapshot,
                          reads if reads is not None else Reads(matches.positions), operation)
    new_bits: dict[FileKey, BitMap] = {k: BitMap(v) for k, v in matches.positions.items()}
    keys = set(new_bits) | set(done)
    ins = prepared
    try:
        validator.check(table.status.read())  # the costly part before any file is written
        # Held from before the first delta is written until the commit ended: clean files
        # keeps the deltas while it is renewed (store/leases.py, "statement lease").
        if lease is None and new_bits:
            lease = StatementLease(table.status, operation, lease_seconds(table))
        if ins is None and insert is not None and insert.num_rows:
            ins = _write_insert(table, insert)
    except BaseException as err:
        if lease is not None:
            lease.release()
        if prepared is not None:
            abort_segment(table, prepared.segment, reason=str(err)[:500] or type(err).__name__)
            if prepared.keeper is not None:
                prepared.keeper.release()
        raise
    cache: dict[tuple[FileKey, str | None], DeleteDelta] = {}
    own = {k: DeleteDelta(data_file=k[1], delta_file=w.delta_file, deleted_rows=w.deleted_rows)
           for k, w in done.items()}

    def delta_for(key: FileKey, cur: DeleteDelta | None) -> DeleteDelta:
        """The file's new delta on a version whose delta of it is ``cur``."""
        w = done.get(key)
        if w is not None and cur == w.planned:
            return own[key]  # the one its task wrote
        cache_key = (key, None if cur is None else cur.delta_file)
        if cache_key not in cache:
            if w is not None:  # another statement changed the file's delta meanwhile
                seg_dir = table.paths.segment_dir(key[0])
                bits = read_delta(sfs, seg_dir, own[key])
                if w.planned is not None:
                    bits -= read_delta(sfs, seg_dir, w.planned)
            else:
                bits = BitMap(new_bits[key])
            if cur is not None:  # rows another statement deleted: none of ours
                bits |= validator.delta_bits(key[0], cur)
            cache[cache_key] = write_delta(sfs, table.paths.segment_dir(key[0]), key[1], bits)
        return cache[cache_key]
    try:
        fresh: set[DeleteDelta] = set()  # deltas this statement wrote

        def apply(snap: TableStatusSnapshot) -> StatusChange:
            validator.check(snap)  # raises Replan: the plan is stale
            by_seg: dict[str, list[FileKey]] = {}
            for key in keys:
                by_seg.setdefault(key[0], []).append(key)
            changed: dict[str, LoadEntry] = {}
            for sid, mine in by_seg.items():
                e = snap.get(sid)  # readable: the check saw its rows live
                current = {d.data_file: d for d in e.delete_deltas}
                for key in mine:
                    current[key[1]] = delta_for(key, current.get(key[1]))
                    fresh.add(current[key[1]])
                changed[sid] = replace_record(e, delete_deltas=tuple(
                    sorted(current.values(), key=lambda d: d.data_file)),
                    modification_or_deletion_timestamp=now_ms())
            # Only the segments given a new delta and the insert segment change: the
            # commit costs them, not the table.
            out = list(changed.values())
            if ins is not None:
                e = snap.find(ins.segment)
                if e is None or ins.segment in changed:
                    raise CommitConflictError(
                        f"the insert segment {ins.segment} of this {operation} was removed; "
                        "nothing was changed - run it again")
                if not e.running:
                    raise CommitConflictError(
                        f"the insert segment {ins.segment} of this {operation} was marked "
                        "dead (its lease expired); nothing was changed - run it again")
                fields = dict(ins.fields)
                extra = {**{k: v for k, v in e.extra.items() if k not in _LEASE_KEYS},
                         **fields.pop("extra", {})}
                out.append(e.with_status(SUCCESS, timestamp=now_ms(), extra=extra, **fields))
            if lease is not None:  # after the version was read: see store/leases.py
                lease.check([f"{table.paths.segment_dir(sid)}/{d.delta_file}"
                             for sid, e in changed.items() for d in e.delete_deltas
                             if d in fresh])
            return StatusChange(upserts=tuple(out))

        snap = table.status.update(apply, operation=operation)
    except BaseException as err:
        if ins is not None:
            abort_segment(table, ins.segment, reason=str(err)[:500] or type(err).__name__)
        raise
    finally:
        if ins is not None and ins.keeper is not None:
            ins.keeper.release()
        if lease is not None:
            lease.release()
    _stale_statistics(table, {k[0] for k in keys})
    refresh_if_lagging(table)  # after the commit, best effort: planning never writes it
    return snap.version, len(keys), ins.segment if ins is not None else None


def _stale_statistics(table: Table, segments: set[str]) -> None:
    """Drop the column statistics of segments that lost rows (analyze recomputes them)."""
    if not segments:
        return
    for sid in sorted(segments):
        try:
            delete_segment_statistics(table, sid)
        except (CarbonStoreError, OSError):
            log.warning("statistics of segment %s not dropped", sid, exc_info=True)


def run_replanned(
    table: Table, operation: str, step: Callable[[TableStatusSnapshot], DmlResult]
) -> DmlResult:
    """Run ``step`` (plan + commit) on the latest version until it commits without a
    :class:`Replan`; a file of the planned version found missing is a :class:`Replan` too
    when that version is no longer the latest (clean files removed what the newer versions
    no longer name), and damage otherwise."""
    if table.pinned_version is not None:
        raise UserError(
            f"table {table.name} is open as of version {table.pinned_version}: it is read-only; "
            f"open the latest version to run {operation}")
    last: Replan | None = None
    for attempt in range(_REPLANS):
        snap = table.status.read()
        crash_point("dml.after_read")
        try:
            result = step(snap)
            return replace(result, replans=attempt)
        except Replan as err:
            last = err
        except _MISSING_FILES as err:
            if table.status.read().version == snap.version:
                raise  # the latest version names the file: damage
            log.info("%s: a file of version %s went meanwhile (%s); planning again",
                     operation, snap.version, err)
            last = Replan(f"clean files removed files of version {snap.version} it planned "
                          "on, which newer versions no longer name - a race with clean files, "
                          "nothing is damaged")
    raise CommitConflictError(
        f"{operation} on {table.name} was planned {_REPLANS} times and each time a concurrent "
        f"change made the plan stale ({last}); retry")


def read_latest(table: Table, what: str, read: Callable[[TableStatusSnapshot], T]) -> T:
    """``read(snapshot)`` of the latest version, again on the next latest one when clean
    files removed files of that version meanwhile (:func:`run_replanned`'s rule; a MERGE
    reading its source table)."""
    for _ in range(_REPLANS):
        snap = table.status.read()
        crash_point("dml.after_read")
        try:
            return read(snap)
        except _MISSING_FILES:
            if table.status.read().version == snap.version:
                raise  # the latest version names the file: damage
    raise CommitConflictError(
        f"{what} {table.name}: each of {_REPLANS} reads lost a race with clean files (files "
        "of the version it read were removed meanwhile; nothing is damaged); retry")
