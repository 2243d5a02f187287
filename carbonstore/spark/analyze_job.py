"""ANALYZE on Spark: recompute column statistics of segments from their data files.

For segments written before statistics existed, adopted with add-segment, or whose
statistics were deleted. The driver lists each segment's data files (from its index) and
deals ``(segment, file)`` pairs to tasks; each task reads its files with pyarrow (rows never
pass through the JVM) and returns one :class:`StatsAccumulator` state per segment it
touched; the driver merges the states of each segment (HLL unions) and stores the segment statistics::

    spark-submit "$(python -c 'import carbonstore.cli.submit as m; print(m.__file__)')" \\
        analyze sales --columns id,name --store /shared/carbon.store
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql import SparkSession

from carbonstore.segments.analyze import accumulate_files, read_schemas, segment_deltas
from carbonstore.segments.compaction import segment_data_files
from carbonstore.spark import session as spark_session
from carbonstore.statistics.accumulator import StatsAccumulator
from carbonstore.statistics.analyze import analyze_targets, store_accumulated, table_column_specs
from carbonstore.statistics.model import SegmentStatistics
from carbonstore.store.evolution import Projection
from carbonstore.store.fs import resolve_fs
from carbonstore.store.table import Table

__all__ = ["analyze"]

ColumnSpec = tuple[str, str]  # (name, Spark type string)


def _analyze_task(
    location: str, spec: Sequence[ColumnSpec], columns: Sequence[str] | None,
    deleted: dict[str, bytes] | None = None, target: pa.Schema | None = None,
    projections: dict[str, Projection] | None = None,
) -> Callable[[Iterable[tuple[str, str]]], Iterable[tuple[str, bytes]]]:
    def run(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, bytes]]:
        fs = resolve_fs(location)
        by_segment: dict[str, list[str]] = defaultdict(list)
        for seg, path in pairs:
            by_segment[seg].append(path)
        for seg, paths in by_segment.items():
            yield seg, accumulate_files(fs, paths, spec, columns=columns, deleted=deleted,
                                        target=target,
                                        projection=(projections or {}).get(seg)).to_bytes()

    return run


def analyze(
    table: Table,
    *,
    spark: SparkSession | None = None,
    segments: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
    missing_only: bool = False,
    tasks: int | None = None,
) -> list[SegmentStatistics]:
    """Recompute and store the statistics of ``segments`` (default: every readable one).

    ``carbonstore.statistics.accumulator.analyze_local`` does the same in this process.

    Args:
        table: the table.
        spark: the session (default: ``get_spark()``).
        segments: segment ids to analyze.
        columns: only these columns (others already stored are kept).
        missing_only: skip segments that already have statistics.
        tasks: Spark tasks (default: one per file, at most the default parallelism x 2).

    Returns:
        What is stored now for each analyzed segment.
    """
    spec = table_column_specs(table)
    if columns is not None:
        StatsAccumulator(spec, columns=columns)  # unknown column names fail here, not on executors
    targets = analyze_targets(table, segments, missing_only=missing_only)
    pairs = [(sid, path) for sid in targets for path in segment_data_files(table, sid)]
    states: dict[str, list[bytes]] = defaultdict(list)
    if pairs:
        session = spark or spark_session.get_spark()
        n = tasks or max(1, min(len(pairs), 2 * session.sparkContext.defaultParallelism))
        rdd = session.sparkContext.parallelize(pairs, n)
        task = _analyze_task(table.store.location, spec, columns,
                             segment_deltas(table, targets), *read_schemas(table, targets))
        for seg, state in rdd.mapPartitions(task).collect():
            states[seg].append(bytes(state))
    return store_accumulated(table, states, targets, spec, columns=columns)
