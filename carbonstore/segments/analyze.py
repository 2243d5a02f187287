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
from carbonstore.statistics.accumulator import StatsAccumulator
from carbonstore.statistics.analyze import analyze_targets, store_accumulated, table_column_specs
from carbonstore.statistics.model import SegmentStatistics, StatisticsScope

if TYPE_CHECKING:
    import pyarrow.fs as pafs

    from carbonstore.store.table import Table

__all__ = ["accumulate_files", "analyze_local", "compute_segment_statistics", "segment_deltas"]


def accumulate_files(
    fs: pafs.FileSystem, paths: Iterable[str], schema: Any, *,
    columns: Sequence[str] | None = None, batch_rows: int = 131072,
    deleted: Mapping[str, bytes] | None = None,
) -> StatsAccumulator:
    """Statistics of Parquet files (read in batches, only the wanted columns); rows a delete
    delta removes (``deleted``: path -> the delta's bytes) are left out."""
    import pyarrow.parquet as pq

    from carbonstore.segments.deltas import decode_delta, deleted_mask, positions

    acc = StatsAccumulator(schema, columns=columns)
    for path in paths:
        gone = positions(decode_delta(deleted[path], path)) if deleted and path in deleted \
            else None
        with fs.open_input_file(path) as f:
            pf = pq.ParquetFile(f)
            names = {n.lower(): n for n in pf.schema_arrow.names}
            read = [names[c] for c in acc.columns if c in names]
            start = 0
            for batch in pf.iter_batches(batch_size=batch_rows, columns=read):
                n = batch.num_rows
                if gone is not None and len(gone):
                    batch = batch.filter(pa.array(~deleted_mask(gone, start, n)))
                start += n
                acc.update(batch)
    return acc


def segment_deltas(table: Table, segment_ids: Iterable[str]) -> dict[str, bytes]:
    """Data file path -> delete delta bytes of the segments' files (current version)."""
    from carbonstore.segments.deltas import deltas_by_path

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
    from carbonstore.store.evolution import project_table, segment_projections, storage_types

    entry = table.status.read().find(segment_id)
    proj = segment_projections(table, [entry]).get(segment_id) if entry is not None else None
    if proj is not None:  # written with another schema version: read its columns by id
        import pyarrow.parquet as pq

        from carbonstore.segments.deltas import decode_delta, live_rows, positions

        acc = StatsAccumulator(table.schema, columns=columns)
        stypes = storage_types(table)
        for path in files:
            with table.paths.sfs.fs.open_input_file(path) as f:
                data = pq.read_table(f)
            if path in deleted:  # rows a delete delta removes are left out
                data = live_rows(data, positions(decode_delta(deleted[path], path)))
            acc.update(project_table(data, proj, stypes))
        return acc.finish(StatisticsScope(table=str(table.name), segment_id=segment_id),
                          source=source)
    acc = accumulate_files(table.paths.sfs.fs, files, table.schema, columns=columns,
                           deleted=deleted)
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
    fs = table.paths.sfs.fs
    deleted = segment_deltas(table, targets)
    states = {
        sid: [accumulate_files(fs, _data_files(table, sid), spec, columns=columns,
                               deleted=deleted).to_bytes()]
        for sid in targets
    }
    return store_accumulated(table, states, targets, spec, columns=columns)


def _data_files(table: Table, segment_id: str) -> list[str]:
    return segment_data_files(table, segment_id)
