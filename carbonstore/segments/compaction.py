"""Compaction (DESIGN.md section 7): planning MINOR / MAJOR / CUSTOM, merging, committing.

Planning is pure: it looks at one tablestatus snapshot and the resolved conf and names the
source segments and the output segment id. The merge reads the sources' Parquet files,
sorts again on SORT_COLUMNS and writes one new segment through the load writer (Parquet,
one ``.carbonindex`` per task, one ``.carbonindexmerge``). The commit is ONE atomic
tablestatus version that flips the sources to ``Compacted`` (``mergedLoadName`` = output)
and the output to ``Success``; it aborts when any source changed status meanwhile.

The output has an ``In Progress`` entry with a lease from before its folder exists (a
version of its own, ``COMPACTION BEGIN``), renewed while the merge runs, so clean files
never takes a running merge's folder for an orphan and treats a killed one as dead once
its lease expired. Readers never read an In Progress entry. The sources stay readable
until the commit and their files stay on disk until clean files removes them after the
retention time, so running queries finish. Loads may commit while a compaction runs:
appends never conflict with a compaction (its change is re-applied to the fresh version);
a compaction conflicts only when one of its sources changed, or when its own entry was
marked dead.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from carbonstore.errors import (
    CarbonStoreError,
    CommitConflictError,
    CompactionError,
    LockTimeoutError,
    TableNotFoundError,
)
from carbonstore.pruning.plan import prune
from carbonstore.pruning.table_index import refresh_if_lagging
from carbonstore.segments.clustering import (
    CLUSTERING_KEY,
    ClusterSpec,
    cluster_batches,
    cluster_local,
    cluster_settings,
    grids_of,
    resolve_spec,
    segment_clustering,
    table_clustering,
)
from carbonstore.segments.compaction_merge import (
    SegmentOutput,
    finish_segment,
    merge_evolved,
    merge_local,
    segment_data_files,
    sort_keys,
    write_output_statistics,
    write_segment,
    write_settings,
)
from carbonstore.segments.compaction_plan import (
    COMPACTION_TYPES,
    CompactionType,
    MergeGroup,
    plan_cluster,
    plan_compaction,
    plan_custom,
    plan_major,
    plan_minor,
    segment_level,
)
from carbonstore.segments.partitions import compacted_rows, removed_partitions
from carbonstore.store.evolution import segment_projections
from carbonstore.store.faults import crash_point
from carbonstore.store.leases import LeaseKeeper, entry_is_dead, lease_fields
from carbonstore.store.locks import acquire
from carbonstore.store.records import replace as replace_record
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import (
    COMPACTED,
    FAILURE,
    IN_PROGRESS,
    READABLE_STATUSES,
    SUCCESS,
    LoadEntry,
    StatusChange,
    TableStatusSnapshot,
    now_ms,
)

__all__ = [
    "COMPACTION_LOCK",
    "ClusterMerger",
    "CompactionResult",
    "CompactionType",
    "MergeGroup",
    "MergedSegment",
    "Merger",
    "SegmentOutput",
    "commit_compaction",
    "compact",
    "maybe_auto_compact",
    "plan_compaction",
    "plan_custom",
    "plan_major",
    "plan_minor",
    "segment_level",
    # re-exported from compaction_merge
    "finish_segment",
    "merge_local",
    "segment_data_files",
    "sort_keys",
    "write_segment",
    "write_settings",
    # re-exported from compaction_plan
    "COMPACTION_TYPES",
]

log = logging.getLogger(__name__)

COMPACTION_LOCK = "compaction.lock"


class RowsDeletedMeanwhile(CompactionError):
    """A source lost rows to a DELETE / UPDATE / MERGE while it was merged (merged again)."""


_DML_RETRIES = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class MergedSegment:
    """What one committed merge did."""

    output: str
    sources: tuple[str, ...]
    row_count: int
    data_size: int
    index_size: int
    seconds: float
    #: how the output is clustered (None: sorted on SORT_COLUMNS)
    clustering: ClusterSpec | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "sources": list(self.sources),
            "rows": self.row_count,
            "dataSize": self.data_size,
            "indexSize": self.index_size,
            "seconds": round(self.seconds, 3),
            "clustering": None if self.clustering is None else self.clustering.describe(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    """Every merge one ``compact`` call committed (MINOR may run several levels)."""

    compaction_type: CompactionType
    merged: tuple[MergedSegment, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.compaction_type, "merged": [m.to_json() for m in self.merged]}


Merger = Callable[[Table, Sequence[LoadEntry], str], SegmentOutput]
"""Writes the merged output segment folder from the sources and reports what it wrote."""

ClusterMerger = Callable[[Table, Sequence[LoadEntry], str, ClusterSpec], SegmentOutput]
"""Writes the output segment ordered along the spec's curve (segments/clustering.py)."""


# ---- commit ---------------------------------------------------------------------------------
def commit_compaction(
    table: Table,
    group: MergeGroup,
    output: SegmentOutput,
    *,
    expected: dict[str, str],
    start_ms: int,
    attempt: str | None = None,
    expected_deltas: dict[str, tuple[Any, ...]] | None = None,
    removed: dict[str, frozenset[str]] | None = None,
) -> LoadEntry:
    """One tablestatus version: sources -> Compacted, output -> Success.

    ``removed``: each source's replaced partitions when the merge started; a dynamic
    partition overwrite that replaced more of a source meanwhile aborts the compaction
    (the output would bring the replaced rows back).

    Args:
        table: the table.
        group: the merge that was written.
        output: what the merge wrote.
        expected: source id -> the status it had when the merge started.
        start_ms: when the merge started (the output's load start time).
        expected_deltas: source id -> its delete deltas when the merge read it; a source
            whose rows a DELETE / UPDATE / MERGE removed meanwhile fails the commit (the
            output would bring those rows back).

    Raises:
        CompactionError: a source changed status or vanished, or the output id is taken;
            nothing is written in that case.
    """
    holder: list[LoadEntry] = []

    def apply(snap: TableStatusSnapshot) -> StatusChange:
        holder.clear()
        _check_sources(snap, group, expected)
        for sid, deltas in (expected_deltas or {}).items():
            if snap.get(sid).delete_deltas != deltas:
                raise RowsDeletedMeanwhile(
                    f"rows of segment {sid} were deleted (DELETE / UPDATE / MERGE) while it was "
                    f"being compacted into {group.output}; the compaction was aborted - run it "
                    "again")
        for sid, gone in (removed or {}).items():
            if removed_partitions(snap.get(sid)) != gone:
                raise CompactionError(
                    f"partitions of segment {sid} were overwritten while it was being compacted "
                    f"into {group.output}; the compaction was aborted"
                )
        mine = snap.find(group.output)
        if mine is None or mine.status != IN_PROGRESS or (
            mine.extra.get("compactionAttempt") != attempt
        ):
            state = "was removed" if mine is None else f"is {mine.status}"
            raise CommitConflictError(
                f"compaction output {group.output} of {table.name} {state}: its lease expired "
                "and clean files marked it dead; the compaction was aborted and nothing changed"
            )
        ts = now_ms()
        sources = [snap.get(s) for s in group.sources]
        entry = LoadEntry(
            load_name=group.output,
            status=SUCCESS,
            load_start_time=start_ms,
            timestamp=ts,
            data_size=output.data_size,
            index_size=output.index_size,
            row_count=output.row_count,
            bad_record_count=sum(s.bad_record_count for s in sources),
            major_compacted=group.major,
            segment_file=output.segment_file,
            extra={**dict(output.extra), "writer": mine.extra.get("writer"),
                   "compactionAttempt": attempt,
                   "schemaVersion": table.schema.schema_version},  # written with the current
        )
        holder.append(entry)
        # Only the sources and the output change: the commit costs them, not the table.
        return StatusChange(upserts=(*(
            snap.get(sid).with_status(COMPACTED, merged_load_name=group.output,
                                      modification_or_deletion_timestamp=ts)
            for sid in expected), entry))

    crash_point("compaction.before_commit")
    table.status.update(apply, operation="COMPACTION")
    refresh_if_lagging(table)  # after the commit, best effort: planning never writes it
    return holder[0]


def _check_sources(snap: TableStatusSnapshot, group: MergeGroup, expected: dict[str, str]) -> None:
    for sid in group.sources:
        e = snap.find(sid)
        if e is None or e.status != expected[sid] or not e.visibility:
            now_status = "gone" if e is None else e.status
            raise CompactionError(
                f"segment {sid} changed from {expected[sid]} to {now_status} while it was "
                f"being compacted into {group.output}; the compaction was aborted"
            )


def begin_compaction(
    table: Table, group: MergeGroup, expected: dict[str, str], start_ms: int
) -> tuple[LeaseKeeper, str]:
    """Commit the output's In Progress entry (with a lease) and start renewing the lease.

    An entry of the output's name left by a dead compaction (killed, lease expired) is
    committed as Failure and its folder removed first, so the merge can run again at once.

    Returns:
        The lease keeper and this attempt's token (``compactionAttempt`` of the entry):
        only the attempt that began the entry may commit or abort it.
    """
    seconds = max(1.0, table.store.conf.get_float("carbon.segment.lease.seconds"))
    attempt = uuid.uuid4().hex
    taken = table.status.read().find(group.output)
    if taken is not None and taken.running and entry_is_dead(
        table.status, taken, now=now_ms(), lease_ms=int(seconds * 1000)
    ):
        _fail_attempt(table, group.output, taken.extra.get("compactionAttempt"),
                      "its compaction died; a new one took its place")
        taken = table.status.read().find(group.output)
    if taken is not None and taken.status == FAILURE:
        # A Failure left by a compaction that is still running (its abort removes the
        # folder, then the entry) is not taken over: that abort would delete the folder of
        # the new output after it was written. Only one whose writer is gone.
        if not entry_is_dead(table.status, taken, now=now_ms(), lease_ms=int(seconds * 1000)):
            raise CompactionError(
                f"segment {group.output} is being aborted by the compaction that wrote it; "
                "retry when it has finished"
            )
        table.paths.sfs.delete_dir(table.paths.segment_dir(group.output))

    def apply(snap: TableStatusSnapshot) -> StatusChange:
        _check_sources(snap, group, expected)
        now_taken = snap.find(group.output)
        if now_taken is not None and not (
            now_taken.status == FAILURE and taken is not None
            and now_taken.extra.get("compactionAttempt") == taken.extra.get("compactionAttempt")
        ):
            raise CompactionError(
                f"segment {group.output} already exists ({now_taken.status}); a compaction "
                "into it is running - retry when it has finished"
            )
        # The lease runs from this attempt (see begin_segment).
        lease = {**lease_fields(seconds), "compactionAttempt": attempt}
        entry = LoadEntry(load_name=group.output, status=IN_PROGRESS, load_start_time=start_ms,
                          major_compacted=group.major, extra=lease)
        return StatusChange(upserts=(entry,))

    table.status.update(apply, operation="COMPACTION BEGIN")
    return LeaseKeeper(table.status, group.output, seconds), attempt


def _failed(snap: TableStatusSnapshot, output: str, attempt: object, reason: str) -> StatusChange:
    """``output`` Failure when it is still this attempt's running one (else no change)."""
    e = snap.find(output)
    if e is None or not e.running or e.extra.get("compactionAttempt") != attempt:
        return StatusChange()
    return StatusChange(upserts=(e.with_status(
        FAILURE, timestamp=now_ms(), extra={**e.extra, "failureReason": reason[:2000]}),))


def _aborted(snap: TableStatusSnapshot, output: str, attempt: object, reason: str) -> StatusChange:
    """``_failed``, and an entry of this attempt already ``Failure`` named for removal too
    (``abort_compaction`` takes both to tablestatus.history)."""
    e = snap.find(output)
    if e is not None and e.status == FAILURE and e.extra.get("compactionAttempt") == attempt:
        return StatusChange(removes=(output,))
    return _failed(snap, output, attempt, reason)


def _fail_attempt(table: Table, output: str, attempt: object, reason: str) -> LoadEntry | None:
    """Commit ``output`` as Failure when it is still this attempt's running entry."""
    return table.status.update(lambda snap: _failed(snap, output, attempt, reason),
                               operation="COMPACTION ABORT").find(output)


def _marked_dead(table: Table, output: str, attempt: object) -> CommitConflictError | None:
    """The error of a compaction whose output clean files marked dead meanwhile (its
    writing then fails on the removed folder); None while the output is still its own."""
    mine = table.status.read().find(output)
    if mine is not None and mine.running and mine.extra.get("compactionAttempt") == attempt:
        return None
    state = "was removed" if mine is None else f"is {mine.status}"
    return CommitConflictError(
        f"compaction output {output} of {table.name} {state}: its lease expired and clean "
        "files marked it dead; the compaction was aborted and nothing changed")


def abort_compaction(table: Table, output: str, attempt: str, reason: str) -> None:
    """Remove this attempt's output folder, then its entry, in ONE ``COMPACTION ABORT``
    version (the entry, marked ``Failure`` with ``reason``, goes to tablestatus.history).

    The folder goes while the entry is still this attempt's running one: its lease is renewed
    until the caller releases it, so clean files does not take it and its id cannot be given
    to another segment meanwhile. A crash between the two leaves a running entry whose
    lease expires: clean files then marks it dead as any killed compaction's.
    """
    try:
        mine = table.status.read().find(output)
    except TableNotFoundError:
        return
    if mine is None or not mine.running or mine.extra.get("compactionAttempt") != attempt:
        return  # no longer ours (marked dead, another attempt took the name over): touch nothing
    table.paths.sfs.delete_dir(table.paths.segment_dir(output))

    try:
        table.status.update(
            lambda snap: _aborted(snap, output, attempt, reason), operation="COMPACTION ABORT",
            remove=lambda x: x.load_name == output and x.status == FAILURE
            and x.extra.get("compactionAttempt") == attempt,
        )
    except TableNotFoundError:
        return


# ---- orchestration --------------------------------------------------------------------------
def _merge_one(
    table: Table, group: MergeGroup, merger: Merger, spec: ClusterSpec | None = None,
    cluster_merger: ClusterMerger = cluster_local,
) -> MergedSegment:
    t0 = time.perf_counter()
    start = now_ms()
    snap = table.status.read()
    sources = [snap.get(s) for s in group.sources]
    expected = {e.load_name: e.status for e in sources}
    bad = [e.load_name for e in sources if e.status not in READABLE_STATUSES]
    if bad:
        raise CompactionError(f"segments {','.join(bad)} are no longer Success; nothing compacted")
    keeper, attempt = begin_compaction(table, group, expected, start)
    committed = False
    try:
        projections = segment_projections(table, sources)
        if projections and spec is not None:  # older schema versions: read by column id
            output = merge_evolved(
                table, sources, group.output, projections,
                settings=(settings := cluster_settings(
                    table, group.output, statistics=True,
                    rows=sum(e.row_count for e in sources), columns=len(spec.columns))),
                order=lambda data: cluster_batches(data, spec, grids_of(data, spec), settings))
        elif projections:
            output = merge_evolved(table, sources, group.output, projections)
        elif spec is not None:
            output = cluster_merger(table, sources, group.output, spec)
        else:
            output = merger(table, sources, group.output)
        if spec is not None:  # recorded in the output's tablestatus entry
            output = replace(output, extra={**output.extra, CLUSTERING_KEY: spec.to_json()})
        crash_point("compaction.after_output")
        # rows deleted by DELETE / UPDATE / MERGE, and partitions a dynamic overwrite
        # replaced, are not compacted
        expected_rows = sum(compacted_rows(e) for e in sources)
        if output.row_count != expected_rows:
            raise CarbonStoreError(
                f"compaction into {group.output} wrote {output.row_count} rows but the sources "
                f"hold {expected_rows}; the compaction was aborted and nothing changed"
            )
        entry = commit_compaction(table, group, output, expected=expected, start_ms=start,
                                  attempt=attempt,
                                  expected_deltas={e.load_name: e.delete_deltas for e in sources},
                                  removed={e.load_name: removed_partitions(e) for e in sources})
        committed = True
    except BaseException as err:
        if not committed:
            dead = _marked_dead(table, group.output, attempt) if isinstance(err, OSError) else None
            abort_compaction(table, group.output, attempt, str(err) or type(err).__name__)
            if dead is not None:  # not the OSError of its folder clean files removed
                raise dead from err
        raise
    finally:
        keeper.release()
    try:
        write_output_statistics(table, sources, group.output, output)
    except Exception as err:  # noqa: BLE001 - committed already; analyze recomputes statistics
        log.warning("statistics of compacted segment %s not stored: %s", group.output, err)
    return MergedSegment(
        output=entry.load_name,
        sources=group.sources,
        row_count=entry.row_count,
        data_size=entry.data_size,
        index_size=entry.index_size,
        seconds=time.perf_counter() - t0,
        clustering=spec,
    )


def compact(
    table: Table,
    compaction_type: CompactionType,
    *,
    segment_ids: Sequence[str] | None = None,
    merger: Merger | None = None,
    by: Sequence[str] | None = None,
    curve: str | None = None,
    where: str | None = None,
    cluster_merger: ClusterMerger | None = None,
) -> CompactionResult:
    """Run a compaction to completion under ``compaction.lock``.

    MINOR and MAJOR re-plan after every merge until nothing is left to merge (so twelve
    fresh segments with ``4,3`` end as one level-2 segment); CUSTOM and CLUSTER merge once.
    With the table property ``clustering.columns`` set, every output is clustered on them
    (docs/clustering.md); CLUSTER merges the segments not yet clustered on ``by`` (default:
    the property) along ``curve``.

    Args:
        table: the table.
        compaction_type: ``minor``, ``major``, ``custom`` or ``cluster``.
        segment_ids: the segments for ``custom`` (for ``cluster``: only these).
        merger: writes the output segment; default: the driver-side pyarrow merge
            (``carbonstore.spark.compact_job`` passes a Spark one).
        by, curve: the clustering columns and curve (``cluster`` only).
        where: ``cluster`` only: only segments that may hold rows matching this filter.
        cluster_merger: writes a clustered output (default: in this process).

    Raises:
        CompactionError: bad ids or columns, or another compaction holds the lock.
    """
    if compaction_type not in COMPACTION_TYPES:
        raise CompactionError(
            f"unknown compaction type {compaction_type!r}; use one of {', '.join(COMPACTION_TYPES)}"
        )
    if segment_ids is not None and compaction_type not in ("custom", "cluster"):
        raise CompactionError("--segments is only for --type custom or cluster")
    if compaction_type != "cluster" and (by is not None or curve is not None or where is not None):
        raise CompactionError("--by, --curve and --where are only for --type cluster")
    spec = _cluster_spec(table, compaction_type, by, curve)
    run = merger if merger is not None else merge_local
    lock = table.locks.lock(COMPACTION_LOCK)
    try:
        acquire(lock, COMPACTION_LOCK, table.store.conf, timeout=0.05, retries=1)
    except LockTimeoutError as err:
        raise CompactionError(
            f"another compaction is running on table {table.name} ({COMPACTION_LOCK} is held); "
            "retry when it has finished"
        ) from err
    try:
        merged: list[MergedSegment] = []
        conf = table.conf
        allowed = _may_match(table, where) if where is not None else None
        while True:
            snap = table.status.read()
            if compaction_type == "cluster" and spec is not None:
                group = plan_cluster(snap, lambda e: segment_clustering(e) == spec,
                                     segment_ids=segment_ids, allowed=allowed)
            else:
                group = plan_compaction(snap, conf, compaction_type, segment_ids=segment_ids)
            if group is None:
                break
            log.info("compacting %s into %s", ",".join(group.sources), group.output)
            for attempt in range(_DML_RETRIES):
                try:
                    merged.append(_merge_one(table, group, run, spec,
                                             cluster_merger or cluster_local))
                    break
                except RowsDeletedMeanwhile:
                    if attempt == _DML_RETRIES - 1:
                        raise
                    log.info("rows of %s were deleted meanwhile; merging again",
                             ",".join(group.sources))
            if compaction_type in ("custom", "cluster"):
                break
        return CompactionResult(compaction_type=compaction_type, merged=tuple(merged))
    finally:
        lock.release()


def _cluster_spec(
    table: Table, compaction_type: str, by: Sequence[str] | None, curve: str | None
) -> ClusterSpec | None:
    """The clustering of this compaction's outputs: ``by`` / ``curve`` for CLUSTER, else
    (and as CLUSTER's default) the table's ``clustering.columns`` property."""
    prop = table_clustering(table)
    if compaction_type != "cluster":
        return prop
    if by is None:
        if prop is None:
            raise CompactionError(
                f"table {table.name} has no clustering.columns property: pass the columns "
                "with --by a,b")
        return prop if curve is None else replace_record(prop, curve=curve)  # type: ignore[arg-type]
    return resolve_spec(table, by, curve or (prop.curve if prop is not None else "zorder"))


def _may_match(table: Table, where: str) -> Callable[[LoadEntry], bool]:
    """Segments that may hold rows matching ``where`` (from the indexes)."""
    kept = {f.segment for f in prune(table, where).files}
    return lambda e: e.load_name in kept


def maybe_auto_compact(table: Table, *, merger: Merger | None = None) -> CompactionResult | None:
    """MINOR compaction after a successful load, when ``auto_load_merge`` asks for it.

    Never raises: a failed auto-compaction leaves the table as it was (the load it follows
    is already committed) and is logged as a warning.
    """
    try:
        if not table.conf.get_bool("carbon.enable.auto.load.merge"):
            return None
        return compact(table, "minor", merger=merger)
    except Exception as err:  # noqa: BLE001 - the load is committed; never fail it here
        log.warning("auto compaction of %s skipped: %s", table.name, err)
        return None
