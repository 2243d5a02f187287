"""Compaction on Spark: executors merge key ranges of the source segments with pyarrow.

The driver plans and commits (``carbonstore.segments.compaction``); this module supplies the
merger that runs the data movement on executors::

    spark-submit "$(python -c 'import carbonstore.spark.compact_job as m; print(m.__file__)')" \\
        sales --type minor --store /shared/carbon.store

How the output is written: the driver samples the first SORT_COLUMN (a few row groups of the
source files, one column) and cuts its value range into one range per output task. Each
Spark task reads, with pyarrow, only the rows of its range from the source files (row groups
outside the range are skipped by their statistics: source files are sorted, so their row
groups have tight bounds), sorts them on SORT_COLUMNS and writes its Parquet files and ONE
``.carbonindex`` through ``carbonstore.segments.writer.write_task``. Rows never pass through
the JVM (no Arrow conversion, no shuffle), which makes compaction as fast as a plain Spark
read + write of the same files. Without SORT_COLUMNS the source files are dealt out to the
tasks by size. The driver then writes the ``.carbonindexmerge`` and commits.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from carbonstore.segments.compaction import (
    Merger,
    SegmentOutput,
    finish_segment,
    segment_data_files,
    sort_keys,
    write_settings,
)
from carbonstore.segments.writer import TaskResult, WriteSettings, write_task
from carbonstore.spark.session import get_spark
from carbonstore.store.fs import resolve_fs
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry

__all__ = ["KeyRange", "key_ranges", "main", "merge_with_spark", "spark_merger"]

_TARGET_TASK_BYTES = 128 << 20
_SAMPLE_ROWS = 1 << 20

# (task index, lower bound inclusive or None, upper bound exclusive or None, holds nulls)
KeyRange = tuple[int, Any, Any, bool]


def _sample_column(fs: Any, files: Sequence[str], column: str) -> pa.Array:
    """Values of ``column`` from evenly spread row groups, about ``_SAMPLE_ROWS`` in all."""
    metas: list[tuple[str, int, int]] = []
    for path in files:
        with fs.open_input_file(path) as f:
            md = pq.ParquetFile(f).metadata
            metas.extend((path, i, md.row_group(i).num_rows) for i in range(md.num_row_groups))
    total = sum(m[2] for m in metas)
    step = max(1, math.ceil(total / _SAMPLE_ROWS))
    chunks: list[pa.Array] = []
    by_file: dict[str, list[int]] = {}
    for path, rg, _rows in metas[::step] if step > 1 and len(metas) > 8 else metas:
        by_file.setdefault(path, []).append(rg)
    for path, groups in by_file.items():
        with fs.open_input_file(path) as f:
            pf = pq.ParquetFile(f)
            col = pf.read_row_groups(groups, columns=[column]).column(0).combine_chunks()
        if len(col) > _SAMPLE_ROWS // max(1, len(by_file)):
            idx = np.linspace(0, len(col) - 1, _SAMPLE_ROWS // max(1, len(by_file))).astype(np.int64)
            col = col.take(pa.array(idx))
        chunks.append(col)
    return pa.concat_arrays(chunks) if chunks else pa.array([])


def key_ranges(fs: Any, files: Sequence[str], column: str, n: int) -> list[KeyRange]:
    """Cut ``column``'s values into at most ``n`` ranges of about equal row counts.

    Boundaries are sampled values, deduplicated, so every value (and every group of equal
    values) lands in exactly one range; nulls go to the first range.
    """
    if n <= 1:
        return [(0, None, None, True)]
    sample = pc.drop_null(_sample_column(fs, files, column))
    if len(sample) == 0:
        return [(0, None, None, True)]
    ordered = sample.take(pc.sort_indices(sample))
    picks = [ordered[int(len(ordered) * k / n)].as_py() for k in range(1, n)]
    bounds: list[Any] = []
    for v in picks:
        if not bounds or v != bounds[-1]:
            bounds.append(v)
    edges = [None, *bounds, None]
    return [(i, edges[i], edges[i + 1], i == 0) for i in range(len(edges) - 1)]


def _range_filter(column: str, lo: Any, hi: Any, nulls: bool) -> ds.Expression | None:
    field = ds.field(column)
    expr: ds.Expression | None = None
    if lo is not None:
        expr = field >= lo
    if hi is not None:
        expr = (field < hi) if expr is None else (expr & (field < hi))
    if nulls and expr is not None:
        expr = expr | field.is_null()
    return expr


def _merge_task(
    settings: WriteSettings, files: Sequence[str], keys: Sequence[tuple[str, str, str]],
    task: KeyRange | tuple[int, Sequence[str]],
) -> TaskResult:
    fs = resolve_fs(settings.store_location).fs
    if keys:
        idx, lo, hi, nulls = task  # type: ignore[misc]
        dataset = ds.dataset(list(files), format="parquet", filesystem=fs)
        data = dataset.to_table(filter=_range_filter(keys[0][0], lo, hi, nulls))
        data = data.sort_by(list(keys))
    else:
        idx, mine = task  # type: ignore[misc]
        data = ds.dataset(list(mine), format="parquet", filesystem=fs).to_table()
    return write_task(data.to_batches(), settings, task_id=f"{idx:05d}", fs=fs)


def _run_tasks(settings: WriteSettings, files: Sequence[str], keys: Sequence[Any]):  # type: ignore[no-untyped-def]
    def run(tasks: Iterator[Any]) -> Iterator[str]:
        for task in tasks:
            yield orjson.dumps(asdict(_merge_task(settings, files, keys, task))).decode()

    return run


def _task_result(d: dict[str, Any]) -> TaskResult:
    for key in ("files", "bad_samples"):
        d[key] = tuple(d.get(key) or ())
    return TaskResult(**d)


def _deal_files(fs: Any, files: Sequence[str], n: int) -> list[tuple[int, list[str]]]:
    """Source files dealt out to ``n`` tasks, largest first onto the lightest task."""
    sizes = sorted(((int(fs.get_file_info(f).size or 0), f) for f in files), reverse=True)
    count = max(1, min(n, len(files)))
    totals = [0] * count
    out: list[tuple[int, list[str]]] = [(i, []) for i in range(count)]
    for size, f in sizes:
        i = totals.index(min(totals))
        totals[i] += size
        out[i][1].append(f)
    return out


def merge_with_spark(
    spark: SparkSession, table: Table, sources: Sequence[LoadEntry], output_id: str,
    *, tasks: int | None = None,
) -> SegmentOutput:
    """Write the merged output segment on Spark executors (nothing committed here)."""
    fs = table.paths.sfs.fs
    files = [p for e in sources for p in segment_data_files(table, e.load_name)]
    total = sum(e.data_size for e in sources)
    n = tasks or max(
        1, min(spark.sparkContext.defaultParallelism, math.ceil(total / _TARGET_TASK_BYTES))
    )
    keys = sort_keys(table)
    units: list[Any]
    if keys:
        units = key_ranges(fs, files, keys[0][0], n)
    else:
        units = _deal_files(fs, files, n)
    settings = write_settings(table, output_id)
    table.paths.sfs.makedirs(settings.segment_dir)
    rdd = spark.sparkContext.parallelize(units, len(units))
    messages = rdd.mapPartitions(_run_tasks(settings, files, keys)).collect()
    return finish_segment(table, output_id, [_task_result(orjson.loads(m)) for m in messages])


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
