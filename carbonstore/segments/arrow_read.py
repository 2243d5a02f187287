"""The Arrow read path of planned row groups: one reader for every JVM-free read.

A :class:`~carbonstore.pruning.plan.TablePlan` names files, row groups and row ranges;
:func:`plan_slices` groups them into :class:`Slice` s of about a size, and
:func:`read_row_groups` reads slices as Arrow batches of the table's current schema:
only the planned row groups, cut to the surviving row ranges, rows of delete deltas
removed, files of older schema versions projected by column id (store/evolution.py),
dictionary columns decoded, exact types and nullability.

The ``carbonstore`` Spark data source (spark/reader.py) reads its partitions with it on the
executors, and ``Table.scan`` (carbonstore/scan.py) in the caller's process, without a JVM.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from carbonstore.dictionary import decode_batch
from carbonstore.errors import CorruptIndexError, CorruptMetadataError
from carbonstore.expressions.expr import AlwaysTrue, Expr, references
from carbonstore.pruning.plan import TablePlan
from carbonstore.pruning.rows import narrows, rows_may_match
from carbonstore.segments.deltas import decode_delta, deleted_mask, positions
from carbonstore.segments.writer import arrow_type
from carbonstore.store.evolution import (
    Projection,
    physical_names,
    project_batch,
    segment_projections,
    storage_types,
)
from carbonstore.store.table import Table

__all__ = [
    "PARTITION_BYTES", "PARTITION_ROW_GROUPS", "Slice", "arrow_read_schema", "plan_projections",
    "plan_slices", "read_row_groups",
]

PARTITION_BYTES = 128 << 20
PARTITION_ROW_GROUPS = 8


def arrow_read_schema(table: Table) -> pa.Schema:
    """The Arrow schema read() yields: table types (values, not surrogates) and nullability."""
    return pa.schema(
        [pa.field(c.name, arrow_type(c.type), nullable=c.nullable) for c in table.schema.columns]
    )

@dataclass(frozen=True, slots=True)
class Slice:
    path: str  # absolute, in the store's filesystem
    row_groups: tuple[tuple[int, tuple[tuple[int, int], ...] | None], ...]  # None: whole
    delta: str | None = None  # absolute path of the file's live delete delta, if any
    # the file's segment was written with another schema version (store/evolution.py)
    projection: Projection | None = None


def plan_slices(
    plan: TablePlan, *, max_bytes: int = PARTITION_BYTES,
    projections: dict[str, Projection] | None = None,
) -> list[tuple[Slice, ...]]:
    """Group the plan's row groups into groups of slices of about ``max_bytes`` (file order
    kept; a Spark partition each); ``projections``: segment id -> how to read its files
    (segments of older schemas)."""
    projections = projections or {}
    out: list[tuple[Slice, ...]] = []
    current: list[Slice] = []
    size = count = 0
    for f in plan.files:
        delta = None if f.delete_delta is None else plan.absolute(f.delete_delta)
        rgs: list[tuple[int, tuple[tuple[int, int], ...] | None]] = []
        for rg in f.row_groups:
            if rgs and (size + rg.length > max_bytes or count >= PARTITION_ROW_GROUPS):
                current.append(Slice(plan.absolute(f.path), tuple(rgs), delta,
                                     projections.get(f.segment)))
                rgs = []
            if current and not rgs and (size + rg.length > max_bytes or count >= PARTITION_ROW_GROUPS):
                out.append(tuple(current))
                current, size, count = [], 0, 0
            rgs.append((rg.index, None if rg.whole else rg.row_ranges))
            size += rg.length
            count += 1
        if rgs:
            current.append(Slice(plan.absolute(f.path), tuple(rgs), delta,
                                 projections.get(f.segment)))
    if current:
        out.append(tuple(current))
    return out


def read_row_groups(
    table: Table, slices: Sequence[Slice], *, batch_rows: int = 65536, expr: Expr | None = None
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the given row groups cut to their row ranges, decoded and conformed.

    With the bound filter ``expr``, each row group's filter columns are read first and only
    the rows it may match (:func:`rows_may_match`, a superset of the matches) are read and
    kept: fewer rows cross into the JVM; the caller still applies the filter (Spark, or
    ``Table.scan``). Pure: testable with a plain Table handle.
    """
    schema = arrow_read_schema(table)
    decode = _decoder(table)
    fs = table.store.sfs
    if expr is not None and not narrows(expr):
        expr = None
    # pre-buffering fetches every column chunk of a row group at once: one request per row
    # group on an object store, and a few percent faster for whole row groups on a local
    # disk; but a filtered read on a local disk decodes only some rows of the other columns
    # (a lookup: 3.5 -> 2.9 ms, BENCHMARKS.md "Lookups answered on the driver")
    pre_buffer = expr is None or not table.store.sfs.local
    stypes = storage_types(table) if any(sl.projection for sl in slices) else {}
    for sl in slices:
        try:
            if sl.projection is not None:
                yield from _read_projected(fs, sl, batch_rows, decode, schema, stypes, expr,
                                           pre_buffer=pre_buffer)
                continue
            yield from _read_slice(fs, sl, batch_rows, decode, schema, expr, pre_buffer=pre_buffer)
        except (OSError, pa.ArrowException) as err:
            raise CorruptIndexError(
                f"{sl.path}: data file is missing or damaged ({err}); restore it from a backup, "
                "or delete its segment with 'carbonstore delete-segments TABLE --ids ID' (its "
                "rows are then lost)"
            ) from err


def _read_slice(
    fs: Any, sl: Slice, batch_rows: int, decode: Any, schema: pa.Schema, expr: Expr | None = None,
    *, pre_buffer: bool = True,
) -> Iterator[pa.RecordBatch]:
    deleted = _deleted_positions(fs, sl.delta) if sl.delta is not None else None
    with fs.open_input_file(sl.path) as fh:
        pf = pq.ParquetFile(fh, pre_buffer=pre_buffer)
        refs = sorted(references(expr)) if expr is not None else []
        # a filter on struct fields (s.a): applied to the decoded rows, fields flattened
        late = expr if refs and any("." in r for r in refs) else None
        if not refs or not set(refs) <= set(pf.schema_arrow.names):
            refs = []
        starts = _row_group_starts(pf) if deleted is not None else None
        for rg, ranges in sl.row_groups:
            if deleted is not None and starts is not None:
                # rows of a file with a delete delta: read the rows the plan keeps and drop
                # the deleted positions (with the filter's rows narrowed as below)
                n = int(starts[rg + 1] - starts[rg])
                gone = deleted_mask(deleted, int(starts[rg]), n)
                yield from _read_matching(pf, rg, ranges, refs, expr or AlwaysTrue(), batch_rows,
                                          decode, schema, deleted=gone)
                continue
            if refs and expr is not None:
                yield from _read_matching(pf, rg, ranges, refs, expr, batch_rows, decode, schema)
                continue
            pos = 0
            for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[rg], use_threads=False):
                n = batch.num_rows
                pieces = [batch] if ranges is None else [
                    batch.slice(max(a, pos) - pos, min(b, pos + n) - max(a, pos))
                    for a, b in ranges if a < pos + n and b > pos
                ]
                pos += n
                for piece in pieces:
                    if not piece.num_rows:
                        continue
                    out = decode(piece)
                    if late is not None:
                        out = _row_filter(late, out)
                        if not out.num_rows:
                            continue
                    yield _conform(out, schema)


def _row_filter(expr: Expr, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The rows of ``batch`` that ``expr`` may match (struct fields as ``s.a`` columns)."""
    view = pa.Table.from_batches([batch])
    while any(pa.types.is_struct(f.type) for f in view.schema):
        view = view.flatten()
    mask = rows_may_match(expr, view)
    return batch if mask.all() else batch.filter(pa.array(mask))


def _read_projected(
    fs: Any, sl: Slice, batch_rows: int, decode: Any, schema: pa.Schema,
    stypes: dict[str, pa.DataType], expr: Expr | None, *, pre_buffer: bool = True,
) -> Iterator[pa.RecordBatch]:
    """A slice of a segment written with another schema version: its columns read by
    column id, renamed, defaulted and widened (store/evolution.py)."""
    assert sl.projection is not None
    proj = sl.projection
    wanted = physical_names(proj)
    deleted = _deleted_positions(fs, sl.delta) if sl.delta is not None else None
    with fs.open_input_file(sl.path) as fh:
        pf = pq.ParquetFile(fh, pre_buffer=pre_buffer)
        starts = _row_group_starts(pf) if deleted is not None else None
        for rg, ranges in sl.row_groups:
            pos = 0
            if wanted:
                source = pf.iter_batches(batch_size=batch_rows, row_groups=[rg], columns=wanted,
                                         use_threads=False)
            else:  # only columns added later: the row count comes from the footer
                n_rows = pf.metadata.row_group(rg).num_rows
                source = iter([pa.record_batch({"_": pa.nulls(n_rows)})])
            for batch in source:
                n = batch.num_rows
                if deleted is not None and starts is not None:  # a delete delta's rows go
                    keep = ~deleted_mask(deleted, int(starts[rg]) + pos, n)
                    if ranges is not None:
                        within = np.zeros(n, dtype=bool)
                        for a, b in ranges:
                            if a < pos + n and b > pos:
                                within[max(a, pos) - pos:min(b, pos + n) - pos] = True
                        keep &= within
                    pieces = [batch if keep.all() else batch.filter(pa.array(keep))]
                else:
                    pieces = [batch] if ranges is None else [
                        batch.slice(max(a, pos) - pos, min(b, pos + n) - max(a, pos))
                        for a, b in ranges if a < pos + n and b > pos
                    ]
                pos += n
                for piece in pieces:
                    if not piece.num_rows:
                        continue
                    out = decode(project_batch(piece, proj, stypes))
                    if expr is not None:  # the rows expr may match (exact where rows_exact)
                        out = _row_filter(expr, out)
                        if not out.num_rows:
                            continue
                    yield _conform(out, schema)


def _read_matching(
    pf: pq.ParquetFile, rg: int, ranges: Sequence[tuple[int, int]] | None, refs: list[str],
    expr: Expr, batch_rows: int, decode: Any, schema: pa.Schema,
    *, deleted: np.ndarray | None = None,
) -> Iterator[pa.RecordBatch]:
    """One row group, filter columns first: only the rows ``expr`` may match are read on,
    from the other columns (the filter columns already read are joined back, not reread).
    ``deleted``: the row group's rows a delete delta removes (never read)."""
    if refs:
        keys = pf.read_row_group(rg, columns=refs, use_threads=False)
        if keys.num_rows:  # dictionary columns: the filter compares values, not surrogates
            keys = pa.Table.from_batches([decode(b) for b in keys.to_batches()])
        mask = rows_may_match(expr, keys)
    else:  # no filter column: every row may match (only deleted rows go)
        n = pf.metadata.row_group(rg).num_rows
        keys = pa.table({})
        mask = np.ones(n, dtype=bool)
    if deleted is not None:
        mask &= ~deleted
    if ranges is not None:
        within = np.zeros(len(mask), dtype=bool)
        for a, b in ranges:
            within[a:b] = True
        mask &= within
    hits = np.flatnonzero(mask)
    if not len(hits):
        return
    # a few hits: one batch that ends at the last hit (decoding stops there; a lookup's one
    # row early in a row group decodes ~100 rows of the other columns, not 8,192)
    size = batch_rows if len(hits) > 64 else min(batch_rows, int(hits[-1]) + 1)
    others = [n for n in pf.schema_arrow.names if n not in set(refs)]
    if not others and not refs:  # pragma: no cover - a table has at least one column
        return
    source = (pf.iter_batches(batch_size=size, row_groups=[rg], columns=others, use_threads=False)
              if others else keys.to_batches(max_chunksize=size))
    pos = 0
    for batch in source:
        n = batch.num_rows
        part = mask[pos : pos + n]
        if part.any():
            if others and refs:
                rest, known = decode(batch), keys.slice(pos, n)
                batch = pa.RecordBatch.from_arrays(
                    [*rest.columns, *(known.column(r).combine_chunks() for r in refs)],
                    names=[*rest.schema.names, *refs])
            elif others:
                batch = decode(batch)
            yield _conform(batch if part.all() else batch.filter(pa.array(part)), schema)
        pos += n
        if pos > hits[-1]:
            break


def _deleted_positions(fs: Any, path: str) -> np.ndarray:
    """Sorted deleted positions of a delete delta file (checked; damage is an error)."""
    try:
        with fs.open_input_stream(path) as fh:
            data = fh.read()
    except FileNotFoundError as err:
        raise CorruptMetadataError(
            f"delete delta {path} named by the tablestatus is missing; restore it from a "
            "backup (without it deleted rows would be read again)") from err
    return positions(decode_delta(data, path))


def _row_group_starts(pf: pq.ParquetFile) -> np.ndarray:
    md = pf.metadata
    return np.concatenate([[0], np.cumsum([md.row_group(i).num_rows
                                           for i in range(md.num_row_groups)])]).astype(np.int64)


def plan_projections(table: Table, plan: TablePlan) -> dict[str, Projection]:
    """Segment id -> projection, for the plan's segments written with another schema."""
    kept = set(plan.segments)
    if not kept:
        return {}
    # the entries of the version the plan read: a later compaction or clean files cannot
    # change which schema a planned segment is read with
    entries = [e for e in table.status.read(plan.version).entries if e.load_name in kept]
    return segment_projections(table, entries)


def _decoder(table: Table) -> Any:
    if not table.schema.dictionary_columns:
        return lambda b: b

    return lambda b: decode_batch(b, table)


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    arrays = []
    by_lower: dict[str, int] | None = None
    for f in schema:
        i = batch.schema.get_field_index(f.name)
        if i < 0:  # a file adopted with add-segment may name the column in another case
            if by_lower is None:
                by_lower = {n.lower(): j for j, n in enumerate(batch.schema.names)}
            i = by_lower.get(f.name.lower(), -1)
            if i < 0:  # never column -1 (the last one) in its place
                raise pa.ArrowInvalid(f"the data file has no column {f.name}")
        arr = batch.column(i)
        arrays.append(arr if arr.type == f.type else arr.cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
