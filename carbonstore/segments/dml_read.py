"""The located read of a DML statement in Arrow: live rows plus where each one lives.

:func:`located_batches` reads slices of a plan (``segments.arrow_read``: the planned row
groups cut to their row ranges, rows of delete deltas dropped, files of older schema
versions projected by column id, dictionary columns decoded, exact types) and appends two
columns to every batch: :data:`FILE` (the file's path in the store's filesystem) and
:data:`POS` (the row's position in its file, counted over every row of the file, as Spark's
``_metadata.row_index``). It is the read of a DML target on a store Spark's JVM cannot
open (``carbonstore.spark.located``, s3://): the same columns the native read takes from
``_metadata.file_path`` / ``_metadata.row_index``.

The rows themselves come from :func:`~carbonstore.segments.arrow_read.read_row_groups`
unchanged; their positions are derived from the same inputs the reader keeps rows by (each
row group's first row from the file's footer, the slice's row ranges, the delta's deleted
positions), in the order it yields them, and the two counts are checked to agree. Files
are opened through the store's file layer (``table.store.sfs``), so local and s3:// stores
differ in one place.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from carbonstore.errors import CorruptIndexError, CorruptMetadataError
from carbonstore.segments.arrow_read import Slice, arrow_read_schema, read_row_groups
from carbonstore.segments.deltas import decode_delta, positions
from carbonstore.store.table import Table

__all__ = ["FILE", "POS", "located_batches", "located_schema", "slice_positions"]

FILE = "__carbon_file"
POS = "__carbon_pos"


def located_schema(table: Table) -> pa.Schema:
    """The batches' schema: the table's columns (:func:`arrow_read_schema`'s types, every
    one nullable: the statement's read checks NOT NULL columns itself, as the native read
    does, instead of Spark trusting the mark), FILE, POS."""
    return pa.schema([f.with_nullable(True) for f in arrow_read_schema(table)]
                     + [pa.field(FILE, pa.string()), pa.field(POS, pa.int64())])


def slice_positions(row_counts: Sequence[int], sl: Slice, deleted: np.ndarray | None) -> np.ndarray:
    """The positions in its file of the rows ``read_row_groups`` yields for ``sl``, in its
    order: per planned row group (``row_counts``: rows of every row group of the file),
    its rows within the slice's row ranges (all rows when None), minus ``deleted`` (sorted
    deleted positions of the file's delta)."""
    starts = np.concatenate([[0], np.cumsum(np.asarray(row_counts, np.int64))])
    out = []
    for rg, ranges in sl.row_groups:
        first, n = int(starts[rg]), int(starts[rg + 1] - starts[rg])
        if deleted is not None:  # the reader keeps rows by a mask: each row once, in order
            keep = np.ones(n, dtype=bool)
            if ranges is not None:
                keep[:] = False
                for a, b in ranges:
                    keep[max(a, 0):min(b, n)] = True
            lo, hi = np.searchsorted(deleted, [first, first + n])
            keep[deleted[lo:hi].astype(np.int64) - first] = False
            out.append(first + np.flatnonzero(keep))
        elif ranges is None:
            out.append(np.arange(first, first + n, dtype=np.int64))
        else:  # the reader cuts the ranges one after the other
            out.extend(np.arange(first + max(a, 0), first + min(b, n), dtype=np.int64)
                       for a, b in ranges if b > a)
    return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)


def _deleted(table: Table, path: str) -> np.ndarray:
    try:
        data = table.store.sfs.read_bytes(path)
    except FileNotFoundError as err:
        raise CorruptMetadataError(
            f"delete delta {path} named by the tablestatus is missing; restore it from a "
            "backup (without it deleted rows would be read again)") from err
    return positions(decode_delta(data, path)).astype(np.int64)


def _row_counts(table: Table, path: str) -> list[int]:
    try:
        with table.store.sfs.open_input_file(path) as fh:
            md = pq.ParquetFile(fh).metadata
            return [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    except (OSError, pa.ArrowException) as err:
        raise CorruptIndexError(
            f"{path}: data file is missing or damaged ({err}); restore it from a backup, or "
            "delete its segment with 'carbonstore delete-segments TABLE --ids ID' (its rows "
            "are then lost)") from err


def located_batches(table: Table, slices: Sequence[Slice], *,
                    batch_rows: int = 65536) -> Iterator[pa.RecordBatch]:
    """The live rows of ``slices`` (``read_row_groups``) with :data:`FILE` and :data:`POS`.

    Raises:
        CorruptIndexError: a data file is missing or damaged, or holds other rows than its
            footer says (the positions would be wrong: nothing is guessed).
    """
    schema = located_schema(table)
    for sl in slices:
        deleted = _deleted(table, sl.delta) if sl.delta is not None else None
        pos = slice_positions(_row_counts(table, sl.path), sl, deleted)
        path = pa.scalar(sl.path, pa.string())
        at = 0
        for batch in read_row_groups(table, [sl], batch_rows=batch_rows):
            n = batch.num_rows
            if at + n > len(pos):
                break
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.repeat(path, n), pa.array(pos[at:at + n])], schema=schema)
            at += n
        else:
            if at == len(pos):
                continue
        raise CorruptIndexError(
            f"{sl.path}: the data file holds other rows than its footer names (read {at}+, "
            f"expected {len(pos)}); restore it from a backup")
