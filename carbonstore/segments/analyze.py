"""Column statistics computed from a segment's data files in this process (no JVM).

The files are read in batches with the rows their delete deltas remove left out, fed to a
:class:`~carbonstore.statistics.accumulator.StatsAccumulator` and stored through
:mod:`carbonstore.statistics`. ``carbonstore.spark.analyze_job`` does the same on executors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from carbonstore.segments.compaction_merge import segment_data_files
from carbonstore.segments.deltas import decode_delta, deleted_mask, deltas_by_path, positions
from carbonstore.segments.unify import file_columns, storage_schema, unify
from carbonstore.statistics.accumulator import StatsAccumulator
from carbonstore.statistics.analyze import analyze_targets, store_accumulated, table_column_specs
from carbonstore.statistics.model import SegmentStatistics, StatisticsScope
from carbonstore.store.evolution import Projection, segment_projections

if TYPE_CHECKING:
    from carbonstore.store.fs import AnyFS
    from carbonstore.store.table import Table

__all__ = ["accumulate_files", "analyze_local", "compute_segment_statistics", "read_schemas",
           "segment_deltas"]


def accumulate_files(
    fs: AnyFS, paths: Iterable[str], schema: Any, *,
    columns: Sequence[str] | None = None, batch_rows: int = 131072,
    deleted: Mapping[str, bytes] | None = None, target: pa.Schema | None = None,
    projection: Projection | None = None,
) -> StatsAccumulator:
    """Statistics of Parquet files (read in batches, only the wanted columns); rows a delete
    delta removes (``deleted``: path -> the delta's bytes) are left out.

    ``target`` (:func:`~carbonstore.segments.unify.storage_schema` of the table): each file
    is read as the table's current columns through ``projection`` (its segment's schema
    version, None: the current one) - renamed columns under their new name, added ones as
    their default (segments/unify.py). Without it the files' own names are taken."""
    import pyarrow.parquet as pq


    acc = StatsAccumulator(schema, columns=columns)
    want = None if target is None else \
        pa.schema([f for f in target if f.name in set(acc.columns)])
    for path in paths:
        gone = positions(decode_delta(deleted[path], path)) if deleted and path in deleted \
            else None
        with fs.open_input_file(path) as f:
            pf = pq.ParquetFile(f)
            if want is None:
                names = {n.lower(): n for n in pf.schema_arrow.names}
                read = [names[c] for c in acc.columns if c in names]
            else:  # no stored column wanted (only added ones): one read for the row count
                read = file_columns(pf.schema_arrow, want.names, projection) or \
                    pf.schema_arrow.names[:1]
            start = 0
            for batch in pf.iter_batches(batch_size=batch_rows, columns=read):
                n = batch.num_rows
                if gone is not None and len(gone):
                    batch = batch.filter(pa.array(~deleted_mask(gone, start, n)))
                start += n
                acc.update(batch if want is None else unify(batch, want, projection,
                                                            source=path))
    return acc


def segment_deltas(table: Table, segment_ids: Iterable[str]) -> dict[str, bytes]:
    """Data file path -> delete delta bytes of the segments' files (current version)."""

    snap = table.status.read()
    out: dict[str, bytes] = {}
    for sid in segment_ids:
        e = snap.find(sid)
        if e is not None and e.delete_deltas:
            out.update(deltas_by_path(table.paths.sfs, table.paths.segment_dir(sid), e))
    return out


def compute_segment_statistics(
    table: Table, segment_id: str, *, columns: Sequence[str] | None = None,
    source: str = "analyze",
) -> SegmentStatistics:
    """Recompute one segment's statistics in this process from its data files."""
    files = _data_files(table, segment_id)
    deleted = segment_deltas(table, [segment_id])
    entry = table.status.read().find(segment_id)
    proj = segment_projections(table, [entry]).get(segment_id) if entry is not None else None
    acc = accumulate_files(table.paths.sfs, files, table.schema, columns=columns,
                           deleted=deleted, target=storage_schema(table), projection=proj)
    return acc.finish(StatisticsScope(table=str(table.name), segment_id=segment_id), source=source)


def analyze_local(
    table: Table,
    *,
    segments: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
    missing_only: bool = False,
) -> list[SegmentStatistics]:
    """Recompute and store segment statistics in this process with pyarrow (no JVM).

    ``carbonstore.spark.analyze_job.analyze`` does the same on Spark executors.
    """
    spec = table_column_specs(table)
    if columns is not None:
        StatsAccumulator(spec, columns=columns)
    targets = analyze_targets(table, segments, missing_only=missing_only)
    fs = table.paths.sfs
    deleted = segment_deltas(table, targets)
    target, projections = read_schemas(table, targets)
    states = {
        sid: [accumulate_files(fs, _data_files(table, sid), spec, columns=columns,
                               deleted=deleted, target=target,
                               projection=projections.get(sid)).to_bytes()]
        for sid in targets
    }
    return store_accumulated(table, states, targets, spec, columns=columns)


def read_schemas(table: Table, segment_ids: Sequence[str]) -> tuple[pa.Schema, dict[str, Projection]]:
    """What :func:`accumulate_files` reads the segments' files as: the table's storage schema
    and, for segments of another schema version, their projection (store/evolution.py)."""
    snap = table.status.read()
    entries = [e for e in (snap.find(sid) for sid in segment_ids) if e is not None]
    return storage_schema(table), segment_projections(table, entries)


def _data_files(table: Table, segment_id: str) -> list[str]:
    return segment_data_files(table, segment_id)
