"""Compaction on Spark: executors run the merge units of ``segments/compaction_merge.py``.

The driver plans and commits (``carbonstore.segments.compaction``); this module supplies the
merger that runs the data movement on executors::

    spark-submit "$(python -c 'import carbonstore.cli.submit as m; print(m.__file__)')" \\
        compact sales --type minor --store /shared/carbon.store

The driver cuts the output into units (key ranges of the first SORT_COLUMN, or source files
dealt out by size); each Spark task reads its unit's rows with pyarrow straight from the
source files, sorts them and writes its Parquet files and ONE ``.carbonindex`` through the
load writer. Rows never pass through the JVM (no Arrow conversion, no shuffle), so a
compaction runs about as fast as a plain Spark read + write of the same files. The driver
then writes the ``.carbonindexmerge`` and commits.

Clustering (``spark_cluster_merger``, docs/clustering.md) is a shuffle: one map task per
source file reads it once and sends each of its rows, as Arrow IPC bytes, to the unit (the
range of the curve key, boundaries sampled on the driver) it falls in; one reduce task per
unit lays its rows out and writes them through the load writer. The driver collects only
the tasks' commit messages, never rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import Any

import orjson
from pyspark.sql import SparkSession

from carbonstore import errors
from carbonstore.errors import CarbonStoreError, CompactionError
from carbonstore.segments.clustering import (
    ClusterPlan,
    ClusterSpec,
    prepare,
    split_source,
    write_unit,
)
from carbonstore.segments.compaction import ClusterMerger, Merger
from carbonstore.segments.compaction_merge import (
    SegmentOutput,
    WorkUnit,
    finish_segment,
    merge_unit,
    ordered_files,
    rank_columns,
    sort_keys,
    source_deltas,
    sources_have_statistics,
    unit_count,
    work_units,
    write_settings,
)
from carbonstore.segments.writer import TaskResult, WriteSettings
from carbonstore.spark import session as spark_session
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry

__all__ = [
    "cluster_with_spark",
    "merge_with_spark",
    "spark_cluster_merger",
    "spark_merger",
    "task_error",
]


def _run_units(  # type: ignore[no-untyped-def]
    settings: WriteSettings, files: Sequence[str], keys: Sequence[Any], ranks: Sequence[str],
    deleted: dict[str, bytes] | None = None,
):
    def run(units: Iterator[WorkUnit]) -> Iterator[str]:
        for unit in units:
            result = merge_unit(settings, files, keys, unit, rank_columns=ranks, deleted=deleted)
            yield orjson.dumps(asdict(result)).decode()

    return run


# The last "module.Class: message" line of the Python traceback a failed task sent back.
_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit)): (.+)$", re.MULTILINE)


def task_error(err: BaseException) -> CarbonStoreError | None:
    """The error a merge task raised on an executor, as this process would have raised it:
    Spark reports it only as ``SQLSTATE: 38000`` with the worker's traceback in its text.
    A carbonstore error comes back as its own class (one line, its exit status); any other
    as a :class:`CompactionError` naming it. None: not a task's Python error."""
    if not type(err).__module__.startswith(("pyspark.", "py4j.")):
        return None
    found = _RAISED.findall(str(err))
    if not found:
        return None
    name, message = found[-1]
    ours = [(n, m) for n, m in found if n.startswith("carbonstore.errors.")]
    if ours:
        name, message = ours[-1]
        cls = getattr(errors, name.rsplit(".", 1)[1], None)
        if isinstance(cls, type) and issubclass(cls, CarbonStoreError):
            return cls(message.strip())
    return CompactionError(f"a compaction task failed: {name.rsplit('.', 1)[-1]}: "
                           f"{message.strip()}; nothing was compacted")


def _task_result(d: dict[str, Any]) -> TaskResult:
    for key in ("files", "bad_samples"):
        d[key] = tuple(d.get(key) or ())
    return TaskResult(**d)


def _split_sources(  # type: ignore[no-untyped-def]
    settings: WriteSettings, plan: ClusterPlan, deleted: dict[str, bytes] | None = None,
):
    def run(paths: Iterator[str]) -> Iterator[tuple[int, bytes]]:
        for path in paths:
            yield from split_source(settings, path, plan, deleted)

    return run


def _write_units(settings: WriteSettings, plan: ClusterPlan):  # type: ignore[no-untyped-def]
    def run(index: int, pairs: Iterator[tuple[int, bytes]]) -> Iterator[str]:
        parts = (part for unit, part in pairs if unit == index)
        result = write_unit(settings, plan, index, parts)
        if result is not None:
            yield orjson.dumps(asdict(result)).decode()

    return run


def _collect(rdd: Any, run: Any, *, indexed: bool = False) -> list[TaskResult]:
    """Run ``run`` over the units; a task's error comes back as this process's."""
    try:
        messages = (rdd.mapPartitionsWithIndex(run) if indexed else rdd.mapPartitions(run)) \
            .collect()
    except Exception as err:
        failed = task_error(err)
        if failed is None:
            raise
        raise failed from None
    return [_task_result(orjson.loads(m)) for m in messages]


def merge_with_spark(
    spark: SparkSession, table: Table, sources: Sequence[LoadEntry], output_id: str,
    *, tasks: int | None = None,
) -> SegmentOutput:
    """Write the merged output segment on Spark executors (nothing committed here)."""
    files = ordered_files(table, sources)
    n = tasks or unit_count(
        sum(e.data_size for e in sources), spark.sparkContext.defaultParallelism
    )
    units = work_units(table, files, n)
    settings = write_settings(
        table, output_id, statistics=not sources_have_statistics(table, sources)
    )
    table.paths.sfs.makedirs(settings.segment_dir)
    rdd = spark.sparkContext.parallelize(units, len(units))
    run = _run_units(settings, files, sort_keys(table), rank_columns(table),
                     source_deltas(table, sources))
    return finish_segment(table, output_id, _collect(rdd, run),
                          partitioning=settings.partitioning)


def cluster_with_spark(
    spark: SparkSession, table: Table, sources: Sequence[LoadEntry], output_id: str,
    spec: ClusterSpec, *, tasks: int | None = None,
) -> SegmentOutput:
    """Write the clustered output segment on Spark executors: map tasks read each source
    file once and range-partition its rows by the curve key; one reduce task per key range
    lays its rows out and writes them (nothing but commit messages reaches the driver)."""
    settings, files, plan, deleted = prepare(
        table, sources, output_id, spec, spark.sparkContext.defaultParallelism, tasks)
    units = len(plan.units)
    shuffled = spark.sparkContext.parallelize(files, len(files)) \
        .mapPartitions(_split_sources(settings, plan, deleted)) \
        .partitionBy(units, lambda unit: unit)
    results = _collect(shuffled, _write_units(settings, plan), indexed=True)
    return finish_segment(table, output_id, results, partitioning=settings.partitioning)


def spark_merger(spark: SparkSession | None = None, *, tasks: int | None = None) -> Merger:
    """A compaction merger running on ``spark`` (default: ``get_spark()``)."""

    def merge(table: Table, sources: Sequence[LoadEntry], output_id: str) -> SegmentOutput:
        session = spark or spark_session.get_spark()
        return merge_with_spark(session, table, sources, output_id, tasks=tasks)

    return merge


def spark_cluster_merger(
    spark: SparkSession | None = None, *, tasks: int | None = None
) -> ClusterMerger:
    """A clustering merger running on ``spark`` (default: ``get_spark()``)."""

    def cluster(
        table: Table, sources: Sequence[LoadEntry], output_id: str, spec: ClusterSpec
    ) -> SegmentOutput:
        session = spark or spark_session.get_spark()
        return cluster_with_spark(session, table, sources, output_id, spec, tasks=tasks)

    return cluster
