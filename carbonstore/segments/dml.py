"""Row-level DELETE, UPDATE and MERGE with delete deltas (docs/dml.md).

A change is computed on one tablestatus snapshot and committed as ONE new version:

1. plan: the filter (or the merge's key range) prunes segments, files and row groups with
   the index (``pruning.plan.prune`` on the pinned snapshot);
2. match: the kept row groups are read with pyarrow and the predicate is evaluated row by
   row (``pruning.rows.evaluate_rows``, Spark's semantics); rows an earlier delta deleted are
   skipped; each match is a (segment, data file, row position);
3. write: per touched data file a NEW delta holding the union of its current delta and the
   new positions (``segments.deltas``); UPDATE / MERGE write their new and changed rows as
   a new segment through the load writer (CarbonData's insert delta), ``In Progress`` until
   the commit;
4. commit (``TableStatus.update``): the touched entries get their new deltas and the insert
   segment becomes ``Success``, in one version. On a lost race the commit runs again on the
   fresh version: a touched segment that is no longer readable (compacted, deleted) means
   the change is planned again from step 1 on the new state; a file whose delta changed
   meanwhile (a concurrent DELETE) gets the union of both (DELETE), or - for UPDATE and
   MERGE, whose inserted rows must not bring back a row another statement deleted - the
   change is planned again when the two touch a common row.

No data file is ever rewritten. Statistics of touched segments are dropped (stale:
``carbonstore analyze`` or a compaction recomputes them without the deleted rows).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

from carbonstore.errors import (
    CarbonStoreError,
    CommitConflictError,
    UserError,
)
from carbonstore.expressions.expr import Expr, references
from carbonstore.pruning.rows import evaluate_rows
from carbonstore.segments.deltas import deleted_mask, positions, read_delta, write_delta
from carbonstore.segments.dml_filter import RowFilter, row_filter
from carbonstore.segments.unify import file_columns, storage_schema, unify
from carbonstore.statistics.analyze import store_task_statistics
from carbonstore.statistics.store import delete_segment_statistics
from carbonstore.store.entries import DeleteDelta
from carbonstore.store.evolution import Projection, segment_projections
from carbonstore.store.leases import StatementLease
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import (
    SUCCESS,
    LoadEntry,
    TableStatusSnapshot,
    now_ms,
)

__all__ = [
    "FILE_COLUMN",
    "POS_COLUMN",
    "SEGMENT_COLUMN",
    "DmlResult",
    "Matches",
    "apply_changes",
    "RowFilter",
    "delete_rows",
    "fetch_rows",
    "insert_rows",
    "row_filter",
    "scan_rows",
]

log = logging.getLogger(__name__)

# Hidden columns of matched rows: where each row lives.
SEGMENT_COLUMN = "__carbon_segment"
FILE_COLUMN = "__carbon_file"
POS_COLUMN = "__carbon_pos"
_REPLANS = 20
_LEASE_KEYS = ("leaseExpiryMs", "writerHost", "writerPid")  # a finished entry keeps "writer"

FileKey = tuple[str, str]  # (segment id, data file relative to the segment folder)


class Replan(Exception):  # noqa: N818 - a signal: plan the change again on the new version
    """The version a change was planned on is gone in a way a re-commit cannot absorb."""


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


def _decoder(table: Table) -> Callable[[pa.Table], pa.Table]:
    if not table.schema.dictionary_columns:
        return lambda t: t
    from carbonstore.dictionary import decode_batch

    def decode(t: pa.Table) -> pa.Table:
        if not t.num_rows:
            return t
        return pa.Table.from_batches([decode_batch(b, table) for b in t.to_batches()])

    return decode


def scan_rows(
    table: Table, expr: Expr | RowFilter, *, with_rows: bool = False,
    columns: Sequence[str] | None = None, snapshot: TableStatusSnapshot | None = None,
) -> Matches:
    """The live rows of ``table`` for which the bound ``expr`` is TRUE, on one snapshot.

    Args:
        table: the table (its latest version, or the version it is pinned at).
        expr: a bound filter (``plan.bind_where``); ``AlwaysTrue`` matches every row.
        with_rows: also return the matched rows (``columns`` only, default every column),
            values decoded, with their segment, file and position.
        snapshot: plan on this snapshot (default: read now).
    """
    from carbonstore.pruning.plan import prune

    residual = expr.residual if isinstance(expr, RowFilter) else None
    zone = expr.time_zone if isinstance(expr, RowFilter) else "UTC"
    expr = expr.expr if isinstance(expr, RowFilter) else expr
    residual_cols = _columns_of(table, residual) if residual is not None else []
    snap = snapshot if snapshot is not None else table.status.read()
    pinned = table.as_of(snap.version, check_files=False)
    plan = prune(pinned, expr)
    decode = _decoder(table)
    fs = table.store.sfs.fs
    projections = segment_projections(
        table, [snap.get(sid) for sid in sorted({f.segment for f in plan.files})])
    refs = sorted(references(expr))
    names = list(columns) if columns is not None else list(table.schema.column_names)
    out: dict[FileKey, npt.NDArray[np.uint32]] = {}
    pieces: list[pa.Table] = []
    for f in plan.files:
        seg_rel = f.path.rsplit(f"/Segment_{f.segment}/", 1)[1]
        gone: npt.NDArray[np.uint32] | None = None
        if f.delete_delta is not None:
            entry = snap.get(f.segment)
            d = next(x for x in entry.delete_deltas if x.data_file == seg_rel)
            gone = positions(read_delta(table.store.sfs, table.paths.segment_dir(f.segment), d))
        found: list[npt.NDArray[np.int64]] = []
        with fs.open_input_file(plan.absolute(f.path)) as fh:
            pf = pq.ParquetFile(fh)
            md = pf.metadata
            starts = np.concatenate([[0], np.cumsum(
                [md.row_group(i).num_rows for i in range(md.num_row_groups)])]).astype(np.int64)
            for rg in f.row_groups:
                n = int(starts[rg.index + 1] - starts[rg.index])
                want = sorted(set(refs) | set(residual_cols) | (set(names) if with_rows else set()))
                if residual is not None and not want:  # a residual over no column (upper('a')
                    # LIKE 'a%') is still evaluated on every row, not skipped as TRUE
                    want = [table.schema.column_names[0]]
                data = row_group(table, pf, rg.index, want, projections.get(f.segment),
                                 source=f"segment {f.segment} file {seg_rel}") if want else None
                if data is not None:
                    data = decode(data)
                mask = evaluate_rows(expr, data) if refs and data is not None else np.ones(n, bool)
                if gone is not None:
                    mask &= ~deleted_mask(gone, int(starts[rg.index]), n)
                if residual is not None and data is not None and mask.any():
                    from carbonstore.segments.merge import filter_mask

                    mask &= filter_mask(table, data, residual, time_zone=zone)
                hits = np.flatnonzero(mask)
                if not len(hits):
                    continue
                pos = hits.astype(np.int64) + int(starts[rg.index])
                found.append(pos)
                if with_rows and data is not None:
                    rows = data.select(names)
                    if len(hits) < n:
                        rows = rows.take(pa.array(hits))
                    pieces.append(_located(rows, f.segment, seg_rel, pos))
        if found:
            out[(f.segment, seg_rel)] = np.concatenate(found).astype(np.uint32)
    rows_out = None
    if with_rows:
        rows_out = pa.concat_tables(pieces) if pieces else _empty_rows(table, names)
    return Matches(snap, out, rows_out)


def fetch_rows(
    table: Table, snapshot: TableStatusSnapshot, where: Mapping[FileKey, npt.NDArray[np.int64]],
) -> pa.Table:
    """The rows at the given positions (every column, values) with their segment, file and
    position: only the row groups holding them are read."""
    decode = _decoder(table)
    names = list(table.schema.column_names)
    fs = table.store.sfs.fs
    pieces: list[pa.Table] = []
    entries = [snapshot.find(sid) for sid in sorted({sid for sid, _ in where})]
    projections = segment_projections(table, [e for e in entries if e is not None])
    for (sid, rel), pos in sorted(where.items()):
        pos = np.unique(np.asarray(pos, dtype=np.int64))
        if snapshot.find(sid) is None:
            raise Replan(f"segment {sid} is gone")
        with fs.open_input_file(f"{table.paths.segment_dir(sid)}/{rel}") as fh:
            pf = pq.ParquetFile(fh)
            md = pf.metadata
            starts = np.concatenate([[0], np.cumsum(
                [md.row_group(i).num_rows for i in range(md.num_row_groups)])]).astype(np.int64)
            rg_of = np.searchsorted(starts, pos, side="right") - 1
            for rg in np.unique(rg_of).tolist():
                mine = pos[rg_of == rg]
                data = decode(row_group(table, pf, rg, names, projections.get(sid),
                                        source=f"segment {sid} file {rel}"))
                rows = data.select(names).take(pa.array(mine - starts[rg]))
                pieces.append(_located(rows, sid, rel, mine))
    return pa.concat_tables(pieces) if pieces else _empty_rows(table, names)


def row_group(
    table: Table, pf: pq.ParquetFile, rg: int, names: Sequence[str], proj: Projection | None,
    *, source: str = "",
) -> pa.Table:
    """Columns ``names`` (current names) of one row group, as the table's current schema
    (segments/unify.py: by column id, defaults, widened types, the table's nullability)."""
    physical = file_columns(pf.schema_arrow, names, proj)
    raw = pf.read_row_group(rg, columns=physical, use_threads=False) if physical else \
        pa.table({"_": pa.nulls(pf.metadata.row_group(rg).num_rows)})
    return unify(raw, storage_schema(table, names), proj, source=source)


def _located(rows: pa.Table, segment: str, rel: str, pos: npt.NDArray[np.int64]) -> pa.Table:
    """``rows`` with their segment, file and position columns."""
    n = rows.num_rows
    rows = rows.append_column(SEGMENT_COLUMN, pa.repeat(pa.scalar(segment, pa.string()), n))
    rows = rows.append_column(FILE_COLUMN, pa.repeat(pa.scalar(rel, pa.string()), n))
    return rows.append_column(POS_COLUMN, pa.array(pos, pa.int64()))


def _columns_of(table: Table, condition: str) -> list[str]:
    """Table columns a Spark SQL condition references (all of them if it does not parse:
    DuckDB then reports the mistake)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    names = list(table.schema.column_names)
    try:
        tree = sqlglot.parse_one(condition, read="spark")
    except (ParseError, TokenError, RecursionError):
        return names
    refs = {c.name.lower() for c in tree.find_all(exp.Column)}
    if refs - set(names):
        return names
    return sorted(refs)


def _empty_rows(table: Table, names: Sequence[str]) -> pa.Table:
    from carbonstore.segments.writer import arrow_type

    cols = {c.name: pa.array([], arrow_type(c.type)) for c in table.schema.columns
            if c.name in set(names)}
    return pa.table({**{n: cols[n] for n in names}, SEGMENT_COLUMN: pa.array([], pa.string()),
                     FILE_COLUMN: pa.array([], pa.string()), POS_COLUMN: pa.array([], pa.int64())})


# ---- inserts (CarbonData's insert delta) -----------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Insert:
    segment: str
    fields: dict[str, Any]  # of the Success entry
    keeper: Any


def _write_insert(table: Table, rows: pa.Table) -> _Insert:
    """Write ``rows`` (table columns, values) as a new ``In Progress`` segment."""
    from carbonstore.indexfiles.indexfile import merge_indexes
    from carbonstore.segments.commit import abort_segment, begin_segment
    from carbonstore.segments.load import parse_load_options, write_settings
    from carbonstore.segments.writer import write_task

    entry, keeper = begin_segment(table)
    sid = entry.load_name
    sfs = table.store.sfs
    try:
        batches = rows.select(list(table.schema.column_names)).to_batches()
        dict_cols = list(table.schema.dictionary_columns)
        if dict_cols:
            from carbonstore.dictionary import distinct_values, prepare_dictionaries

            prepare_dictionaries(table, distinct_values(iter(batches), dict_cols), sid)
        settings = write_settings(table, sid, parse_load_options(table, {"sort_scope": "no_sort"}))
        sfs.makedirs(settings.segment_dir)
        result = write_task(iter(batches), settings, task_id="dml", fs=sfs.fs)
        if result.bad_records:
            sample = "; ".join(str(s) for s in result.bad_samples[:3])
            raise UserError(
                f"the new rows do not fit table {table.name}: {result.bad_records} of them are "
                f"invalid ({sample}); nothing was changed")
        seg_dir = settings.segment_dir
        merge_name = f"{sid}_{now_ms()}.carbonindexmerge"
        index_files = [result.index_file] if result.index_file else []
        merge_size = merge_indexes(sfs.fs, [f"{seg_dir}/{n}" for n in index_files],
                                   f"{seg_dir}/{merge_name}", segment_id=sid)
        try:
            store_task_statistics(table, sid, [result], source="load")
        except (CarbonStoreError, OSError):  # analyze computes them later
            log.warning("statistics of segment %s not stored", sid, exc_info=True)
        fields = {"row_count": result.rows, "data_size": result.data_bytes,
                  "index_size": result.index_bytes + merge_size, "segment_file": merge_name}
        return _Insert(sid, fields, keeper)
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
    union_on_conflict: bool = True,
) -> tuple[int | None, int, str | None]:
    """Commit ``matches`` as deleted rows (and ``insert`` as a new segment) in one version.

    Returns:
        (version committed or None when nothing changed, files given a new delta, the insert
        segment's id or None).

    Raises:
        Replan: a touched segment is no longer readable, or (``union_on_conflict`` false) a
            concurrent change deleted one of the same rows; nothing is visible.
    """
    from carbonstore.segments.commit import abort_segment, lease_seconds

    sfs = table.store.sfs
    if not matches.positions and (insert is None or not insert.num_rows):
        return None, 0, None
    planned = {(e.load_name): e for e in matches.snapshot.entries}
    new_bits: dict[FileKey, BitMap] = {k: BitMap(v) for k, v in matches.positions.items()}
    written: dict[tuple[FileKey, str | None], DeleteDelta] = {}
    # Held from before the first delta is written until the commit ended: clean files keeps
    # the deltas while it is renewed (store/leases.py, "statement lease").
    lease = StatementLease(table.status, operation, lease_seconds(table)) if new_bits else None
    try:
        ins = _write_insert(table, insert) if insert is not None and insert.num_rows else None
    except BaseException:
        if lease is not None:
            lease.release()
        raise
    try:
        fresh: set[DeleteDelta] = set()  # deltas this statement wrote

        def apply(snap: TableStatusSnapshot) -> list[LoadEntry]:
            by_seg: dict[str, list[FileKey]] = {}
            for key in new_bits:
                by_seg.setdefault(key[0], []).append(key)
            changed: dict[str, LoadEntry] = {}
            for sid, keys in by_seg.items():
                e = snap.find(sid)
                if e is None or not e.readable:
                    raise Replan(f"segment {sid} is {'gone' if e is None else e.status}")
                old = planned.get(sid)
                current = {d.data_file: d for d in e.delete_deltas}
                before = {d.data_file: d for d in old.delete_deltas} if old is not None else {}
                for key in keys:
                    cur = current.get(key[1])
                    was = before.get(key[1])
                    cache_key = (key, None if cur is None else cur.delta_file)
                    if cache_key not in written:
                        seg_dir = table.paths.segment_dir(sid)
                        bits = BitMap(new_bits[key])
                        if was is not None and cur != was and (
                            cur is None
                            or not read_delta(sfs, seg_dir, was) <= read_delta(sfs, seg_dir, cur)
                        ):
                            # rows deleted when this was planned are live again (a restore):
                            # they may match too, so plan again
                            raise Replan(f"rows of {key[1]} were restored meanwhile")
                        if cur is not None:
                            have = read_delta(sfs, seg_dir, cur)
                            if (not union_on_conflict and cur != was
                                    and not have.isdisjoint(new_bits[key])):
                                raise Replan(f"rows of {key[1]} were deleted meanwhile")
                            bits |= have
                        written[cache_key] = write_delta(sfs, seg_dir, key[1], bits)
                    current[key[1]] = written[cache_key]
                fresh.update(written.values())
                changed[sid] = replace(e, delete_deltas=tuple(
                    sorted(current.values(), key=lambda d: d.data_file)),
                    modification_or_deletion_timestamp=now_ms())
            out: list[LoadEntry] = []
            seen_insert = False
            for e in snap.entries:
                if e.load_name in changed:
                    e = changed[e.load_name]
                elif ins is not None and e.load_name == ins.segment:
                    if not e.running:
                        raise CommitConflictError(
                            f"the insert segment {ins.segment} of this {operation} was marked "
                            "dead (its lease expired); nothing was changed - run it again")
                    extra = {k: v for k, v in e.extra.items() if k not in _LEASE_KEYS}
                    e = e.with_status(SUCCESS, timestamp=now_ms(), extra=extra, **ins.fields)
                    seen_insert = True
                out.append(e)
            if ins is not None and not seen_insert:
                raise CommitConflictError(
                    f"the insert segment {ins.segment} of this {operation} was removed; "
                    "nothing was changed - run it again")
            if lease is not None:  # after the version was read: see store/leases.py
                lease.check([f"{table.paths.segment_dir(sid)}/{d.delta_file}"
                             for sid, e in changed.items() for d in e.delete_deltas
                             if d in fresh])
            return out

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
    _stale_statistics(table, {k[0] for k in new_bits})
    return snap.version, len(new_bits), ins.segment if ins is not None else None


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
    """Run ``step`` (plan + commit) until it commits without a :class:`Replan`."""
    if table.pinned_version is not None:
        raise UserError(
            f"table {table.name} is open as of version {table.pinned_version}: it is read-only; "
            f"open the latest version to run {operation}")
    last: Replan | None = None
    for attempt in range(_REPLANS):
        try:
            result = step(table.status.read())
            return replace(result, replans=attempt)
        except Replan as err:
            last = err
            continue
    raise CommitConflictError(
        f"{operation} on {table.name} was planned {_REPLANS} times and each time a concurrent "
        f"change took its rows away ({last}); retry")


def insert_rows(table: Table, rows: pa.Table, *, operation: str = "INSERT") -> DmlResult:
    """Append ``rows`` (the table's columns, values) as one new segment, without Spark
    (the insert path of UPDATE and MERGE; dictionary columns are encoded)."""
    snap = table.status.read()
    version, _, seg = apply_changes(table, Matches(snap, {}, None), operation=operation,
                                    insert=rows)
    return DmlResult(operation=operation, version=version, deleted=0, inserted=rows.num_rows,
                     files=0, segments=(), inserted_segment=seg)


def delete_rows(table: Table, where: str | Expr | None, *, time_zone: str = "UTC") -> DmlResult:
    """``DELETE FROM table WHERE where``: write delete deltas, commit one version.

    Args:
        table: the table (not one opened as of a version).
        where: the condition (the store's WHERE syntax, docs/query.md); None or empty
            deletes every row.
        time_zone: Spark's session time zone the condition is read in.

    Raises:
        ExpressionError: the condition does not parse or bind.
        CommitConflictError: concurrent changes kept winning.
    """
    expr = row_filter(table, where, time_zone=time_zone)

    def step(snap: TableStatusSnapshot) -> DmlResult:
        matches = scan_rows(table, expr, snapshot=snap)
        version, files, _ = apply_changes(table, matches, operation="DELETE")
        return DmlResult(operation="DELETE", version=version, deleted=matches.count, inserted=0,
                         files=files, segments=tuple(sorted({k[0] for k in matches.positions})))

    return run_replanned(table, "DELETE", step)


def apply_update(
    table: Table,
    assignments: Mapping[str, str],
    where: str | Expr | None,
    *,
    evaluate: Callable[[pa.Table, Mapping[str, str]], pa.Table],
    time_zone: str = "UTC",
) -> DmlResult:
    """``UPDATE table SET c = expr, ... WHERE where``: the matched rows are deleted (delta) and
    written again with the new values as a new segment, in one version.

    ``evaluate(rows, assignments)`` returns ``rows`` (table columns) with the assignments
    applied (``carbonstore.segments.merge.evaluate_assignments``, which ``merge.update_rows``
    passes).
    """
    unknown = [c for c in assignments if c.lower() not in table.schema.column_names]
    if unknown or not assignments:
        raise UserError(f"UPDATE {table.name} SET: unknown column(s) "
                        f"{', '.join(unknown) or '(none given)'}; the table has "
                        f"{', '.join(table.schema.column_names)}")
    expr = row_filter(table, where, time_zone=time_zone)
    sets = {c.lower(): v for c, v in assignments.items()}

    def step(snap: TableStatusSnapshot) -> DmlResult:
        matches = scan_rows(table, expr, with_rows=True, snapshot=snap)
        rows = matches.rows
        new = evaluate(rows.select(list(table.schema.column_names)), sets) \
            if rows is not None and rows.num_rows else None
        version, files, seg = apply_changes(table, matches, operation="UPDATE", insert=new,
                                            union_on_conflict=False)
        return DmlResult(operation="UPDATE", version=version, deleted=matches.count,
                         inserted=0 if new is None else new.num_rows, files=files,
                         segments=tuple(sorted({k[0] for k in matches.positions})),
                         inserted_segment=seg)

    return run_replanned(table, "UPDATE", step)

