"""The JVM-free DELETE and the driver-side row scan of row-level DML (docs/dml.md).

DELETE, UPDATE and MERGE run as Spark jobs (``carbonstore.dml``), except a DELETE whose
whole condition the store's filter parser binds, which runs here, on one tablestatus
snapshot, committed as ONE new version:

1. plan: the filter prunes segments, files and row groups with the index
   (``pruning.plan.prune`` on the pinned snapshot);
2. match: the kept row groups are read with pyarrow and the predicate is evaluated row by
   row (``pruning.rows.evaluate_rows``, Spark's semantics, tested against brute force); rows
   an earlier delta deleted are skipped; each match is a (segment, data file, row position);
3. write: per touched data file a NEW delta holding the union of its current delta and the
   new positions (``segments.deltas``);
4. commit (``segments.dml_commit``): the touched entries get their new deltas in one
   version - when the statement's outcome on the version it commits on is the one it
   planned (``segments.dml_conflicts``); otherwise it is planned again from step 1.

No data file is ever rewritten. Statistics of touched segments are dropped (stale:
``carbonstore analyze`` or a compaction recomputes them without the deleted rows).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from carbonstore.errors import ExpressionError
from carbonstore.expressions.bind import session_zone
from carbonstore.expressions.expr import Expr, references
from carbonstore.pruning.plan import bind_where
from carbonstore.pruning.rows import evaluate_rows
from carbonstore.segments.deltas import deleted_mask, positions, read_delta
from carbonstore.segments.dml_commit import DmlResult, Matches, apply_changes, run_replanned
from carbonstore.segments.dml_conflicts import FileKey, Reads, Replan
from carbonstore.segments.dml_filter import RowFilter, row_filter
from carbonstore.segments.unify import file_columns, storage_schema, unify
from carbonstore.store.evolution import (
    Projection,
    segment_projections,
)
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import TableStatusSnapshot

__all__ = [
    "FILE_COLUMN",
    "POS_COLUMN",
    "SEGMENT_COLUMN",
    "DmlResult",
    "Matches",
    "Replan",
    "jvm_free",
    "RowFilter",
    "apply_changes",
    "delete_rows",
    "insert_rows",
    "row_filter",
    "run_replanned",
    "scan_rows",
]

# Hidden columns of matched rows: where each row lives.
SEGMENT_COLUMN = "__carbon_segment"
FILE_COLUMN = "__carbon_file"
POS_COLUMN = "__carbon_pos"


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
    segments: Sequence[str] | None = None,
) -> Matches:
    """The live rows of ``table`` for which the bound ``expr`` is TRUE, on one snapshot.

    Args:
        table: the table (its latest version, or the version it is pinned at).
        expr: a bound filter (``plan.bind_where``); ``AlwaysTrue`` matches every row.
        with_rows: also return the matched rows (``columns`` only, default every column),
            values decoded, with their segment, file and position.
        snapshot: plan on this snapshot (default: read now).
        segments: only these segments (default: every readable one).
    """
    from carbonstore.pruning.plan import prune

    expr = expr.expr if isinstance(expr, RowFilter) else expr
    snap = snapshot if snapshot is not None else table.status.read()
    pinned = table.as_of(snap.version, check_files=False)
    plan = prune(pinned, expr, segments=segments)
    decode = _decoder(table)
    fs = table.store.sfs
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
                want = sorted(set(refs) | (set(names) if with_rows else set()))
                data = row_group(table, pf, rg.index, want, projections.get(f.segment),
                                 source=f"segment {f.segment} file {seg_rel}") if want else None
                if data is not None:
                    data = decode(data)
                mask = evaluate_rows(expr, data) if refs and data is not None else np.ones(n, bool)
                if gone is not None:
                    mask &= ~deleted_mask(gone, int(starts[rg.index]), n)
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


def _empty_rows(table: Table, names: Sequence[str]) -> pa.Table:
    from carbonstore.segments.writer import arrow_type

    cols = {c.name: pa.array([], arrow_type(c.type)) for c in table.schema.columns
            if c.name in set(names)}
    return pa.table({**{n: cols[n] for n in names}, SEGMENT_COLUMN: pa.array([], pa.string()),
                     FILE_COLUMN: pa.array([], pa.string()), POS_COLUMN: pa.array([], pa.int64())})


def insert_rows(table: Table, rows: pa.Table, *, operation: str = "INSERT") -> DmlResult:
    """Append ``rows`` (the table's columns, values) as one new segment, without Spark
    (the insert path of UPDATE and MERGE; dictionary columns are encoded)."""
    snap = table.status.read()
    version, _, seg = apply_changes(table, Matches(snap, {}, None), operation=operation,
                                    insert=rows, reads=Reads({}, match=None))  # blind
    return DmlResult(operation=operation, version=version, deleted=0, inserted=rows.num_rows,
                     files=0, segments=(), inserted_segment=seg)


def _reads(table: Table, expr: RowFilter, matches: Matches) -> Reads:
    """What a DELETE / UPDATE read: its matched rows, and its condition (for rows a newer
    version adds; blind appends excepted: it commits as if it ran before them)."""
    def match(snap: TableStatusSnapshot, segments: Sequence[str]) -> dict[FileKey, Any]:
        return scan_rows(table, expr, snapshot=snap, segments=segments).positions

    return Reads(matches.positions, match=match)


def jvm_free(table: Table, where: str | Expr | None, time_zone: str | None) -> bool:
    """True when the store's filter parser binds the whole condition (the index evaluator
    then decides every row exactly, without Spark)."""
    if where is None or not isinstance(where, str):
        return True
    zone = (session_zone(time_zone) if time_zone else None) or dt.UTC
    try:
        bind_where(table, where, time_zone=zone)
    except (ExpressionError, RecursionError, ValueError):
        return False
    return True


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
        version, files, _ = apply_changes(table, matches, operation="DELETE",
                                          reads=_reads(table, expr, matches))
        return DmlResult(operation="DELETE", version=version, deleted=matches.count, inserted=0,
                         files=files, segments=tuple(sorted({k[0] for k in matches.positions})))

    return run_replanned(table, "DELETE", step)
