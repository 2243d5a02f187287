"""Compaction on Spark: read the source segments' Parquet files, sort, write with the load writer.

The driver plans and commits (``carbonstore.segments.compaction``); this module supplies the
merger that runs the data movement on executors::

    spark-submit "$(python -c 'import carbonstore.spark.compact_job as m; print(m.__file__)')" \\
        sales --type minor --store /shared/carbon.store

Each output task receives a range of SORT_COLUMNS values (range repartition + sort within
partitions, like a GLOBAL_SORT load), so the output files have tight, ordered page bounds;
without sort columns the input partitions are only coalesced. Each task writes its Parquet
files and ONE ``.carbonindex`` through ``carbonstore.segments.writer.write_task`` and sends
back its commit message; the driver writes the ``.carbonindexmerge``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from carbonstore.segments.compaction import (
    Merger,
    SegmentOutput,
    finish_segment,
    segment_data_files,
    write_settings,
)
from carbonstore.segments.writer import ColumnSpec, TaskResult, WriteSettings, write_task
from carbonstore.spark.session import get_spark
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry

__all__ = ["CompactionOutputSource", "main", "merge_with_spark", "spark_merger"]

_TARGET_TASK_BYTES = 128 << 20


def _uri(table: Table, path: str) -> str:
    """A path Spark can open: local stores use plain paths, others keep the store's scheme."""
    if table.paths.sfs.local:
        return path
    scheme = table.store.location.split("://", 1)[0]
    return f"{scheme}://{path.lstrip('/')}" if scheme != "file" else f"file://{path}"


_MESSAGES = "_compaction_tasks.json"


def _settings_json(settings: WriteSettings) -> str:
    return orjson.dumps(asdict(settings)).decode()


def _settings_from_json(text: str) -> WriteSettings:
    d = orjson.loads(text)
    d["columns"] = tuple(ColumnSpec(**c) for c in d["columns"])
    for key in ("bloom_columns", "sort_columns"):
        d[key] = tuple(d[key])
    return WriteSettings(**d)


def _task_result(d: dict[str, Any]) -> TaskResult:
    for key in ("files", "bad_samples"):
        d[key] = tuple(d.get(key) or ())
    return TaskResult(**d)


@dataclass(frozen=True)
class _TaskMessage(WriterCommitMessage):
    result: TaskResult


class CompactionOutputSource(DataSource):
    """Write-only data source: each task writes its part of a compaction output segment.

    Spark runs ``commit`` in a Python worker, not in the driver process that holds the
    compaction lock, so ``commit`` only records the task messages in the output folder; the
    driver reads them, writes the ``.carbonindexmerge`` and commits tablestatus itself.
    """

    @classmethod
    def name(cls) -> str:
        return "carbonstore_compaction_output"

    def writer(self, schema: StructType, overwrite: bool) -> _OutputWriter:
        return _OutputWriter(_settings_from_json(str(self.options["settings"])))


class _OutputWriter(DataSourceArrowWriter):
    def __init__(self, settings: WriteSettings) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _TaskMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task_id = f"{ctx.partitionId() if ctx else 0:05d}-{ctx.attemptNumber() if ctx else 0}"
        return _TaskMessage(write_task(iterator, self.settings, task_id=task_id))

    def commit(self, messages: list[Any]) -> None:
        from carbonstore.store.fs import resolve_fs

        done = [asdict(m.result) for m in messages if isinstance(m, _TaskMessage)]
        sfs = resolve_fs(self.settings.store_location)
        sfs.write_atomic(f"{self.settings.segment_dir}/{_MESSAGES}", orjson.dumps(done))

    def abort(self, messages: list[Any]) -> None:
        """Nothing to do here: the driver removes the whole output folder."""


def merge_with_spark(
    spark: SparkSession, table: Table, sources: Sequence[LoadEntry], output_id: str,
    *, tasks: int | None = None,
) -> SegmentOutput:
    """Write the merged output segment on Spark executors (nothing committed here)."""
    files = [p for e in sources for p in segment_data_files(table, e.load_name)]
    total = sum(e.data_size for e in sources)
    n = tasks or max(
        1, min(spark.sparkContext.defaultParallelism, math.ceil(total / _TARGET_TASK_BYTES))
    )
    df: DataFrame = spark.read.parquet(*[_uri(table, f) for f in files])
    sort_cols = list(table.schema.sort_columns)
    if sort_cols:
        # Ascending with nulls first, as a load sorts.
        df = df.repartitionByRange(n, *sort_cols).sortWithinPartitions(*sort_cols)
    elif df.rdd.getNumPartitions() > n:
        df = df.coalesce(n)
    settings = write_settings(table, output_id)
    table.paths.sfs.makedirs(settings.segment_dir)
    spark.dataSource.register(CompactionOutputSource)
    df.write.format(CompactionOutputSource.name()).mode("append").option(
        "settings", _settings_json(settings)
    ).save()
    sfs = table.paths.sfs
    messages = f"{settings.segment_dir}/{_MESSAGES}"
    results = [_task_result(d) for d in orjson.loads(sfs.read_bytes(messages))]
    return finish_segment(table, output_id, results)


def spark_merger(spark: SparkSession | None = None, *, tasks: int | None = None) -> Merger:
    """A compaction merger running on ``spark`` (default: ``get_spark()``)."""

    def merge(table: Table, sources: Sequence[LoadEntry], output_id: str) -> SegmentOutput:
        return merge_with_spark(spark or get_spark(), table, sources, output_id, tasks=tasks)

    return merge


def main(argv: Sequence[str] | None = None) -> int:
    """spark-submit entry point: the arguments of ``carbonstore compact``."""
    from carbonstore.cli import main as cli_main

    return cli_main(["compact", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
