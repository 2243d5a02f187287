"""CSV loads whose tasks parse the files with pyarrow (see carbonstore/segments/csvparse.py).

The driver lists the input files, cuts them into splits and packs those into tasks the way
Spark packs a file scan (``spark.sql.files.maxPartitionBytes``, ``openCostInBytes``), then
runs one Python task per pack on the executors: parse, (sort,) write, index. Nothing passes
through the JVM but the small commit messages.

It is taken when the load is one this parser reads exactly as Spark's CSV reader would
(:func:`plan_csv_tasks` says None otherwise): local files (a path every executor sees,
as for Spark's own reader), uncompressed, UTF-8; the options ``header``, ``sep``,
``quote``, ``escape`` (single characters), ``nullValue``, ``nanValue``, ``positiveInf``,
``negativeInf`` and an empty ``emptyValue`` only; no binary columns; NO_SORT or LOCAL_SORT;
a UTC session time zone when the table has timestamps; and ``carbon.load.csv.parser`` left
at ``auto``. When a task meets a value only Spark decides (a doubled or stray quote, a
date form, ...), every task's files are dropped and the load reads the input through
Spark's CSV reader into the same segment, saying why in one line (a warning). A value
Spark certainly takes for a bad record fails a ``BAD_RECORDS_ACTION=FAIL`` load at once,
naming the file, line, column and value.
"""

from __future__ import annotations

import functools
import glob
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession

from carbonstore.dictionary import prepare_dictionaries
from carbonstore.errors import BadRecordError
from carbonstore.progress import LoadUpdate
from carbonstore.segments.commit import LoadTransaction
from carbonstore.segments.csvparse import (
    CsvScan,
    CsvSplit,
    Fallback,
    csv_task,
    distinct_task,
    pack_splits,
)
from carbonstore.segments.load import LoadOptions
from carbonstore.segments.load_inputs import (
    COMPRESSED,
    file_fields,
    header_columns,
    local_path,
)
from carbonstore.segments.writer import ColumnSpec, TaskResult, WriteSettings
from carbonstore.spark.load_progress import Counters, watching
from carbonstore.store.fs import input_files, resolve_fs
from carbonstore.store.objectstore import object_uri
from carbonstore.store.table import Table

__all__ = [
    "CsvPlan", "file_fields", "header_columns", "local_path", "plan_csv_tasks", "run_csv_tasks",
]

log = logging.getLogger(__name__)

PARSER_KEY = "carbon.load.csv.parser"
_READER_OPTIONS = frozenset({"header", "sep", "quote", "escape", "nullValue", "multiLine",
                             "encoding", "nanValue", "positiveInf", "negativeInf",
                             "emptyValue"})
_TYPES = frozenset({"boolean", "byte", "short", "int", "long", "float", "double", "string",
                    "date", "timestamp", "decimal"})
_UTC = frozenset({"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z", "+00:00", "UCT", "Etc/UCT"})


@dataclass(frozen=True, slots=True)
class CsvPlan:
    """What the tasks of a CSV load read."""

    scan: CsvScan
    tasks: tuple[tuple[CsvSplit, ...], ...]
    input_bytes: int
    #: (path, size) of every input file
    files: tuple[tuple[str, int], ...] = ()

    def task_bytes(self) -> list[int]:
        """The input bytes each task reads (for a load's progress)."""
        sizes = dict(self.files)
        return [sum((s.end if s.end >= 0 else sizes.get(s.path, s.start)) - s.start
                    for s in task) for task in self.tasks]


def _local_files(paths: Sequence[str]) -> list[tuple[str, int]] | None:
    """(path, size) of every input file as Spark would list them; None: not plain local."""
    out: list[tuple[str, int]] = []
    for raw in paths:
        path = local_path(raw)
        if path is None:
            return None
        hits = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
        if not hits:
            return None
        for hit in hits:
            if os.path.isdir(hit):
                with os.scandir(hit) as it:
                    entries = sorted(it, key=lambda e: e.name)
                for e in entries:
                    if e.name.startswith(("_", ".")):
                        continue
                    if not e.is_file():
                        return None  # nested folders: Spark's own listing decides
                    out.append((e.path, e.stat().st_size))
            elif os.path.isfile(hit):
                out.append((hit, os.path.getsize(hit)))
            else:
                return None
    if not out or any(p.lower().endswith(COMPRESSED) for p, _ in out):
        return None
    return out


def _bytes_conf(spark: SparkSession, key: str, default: int) -> int:
    """A Spark size setting (``128MB``, ``4194304``, ``64k``) in bytes."""
    text = str(spark.conf.get(key, str(default))).strip().lower()
    units = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
             "g": 1 << 30, "gb": 1 << 30}
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix) and text[: -len(suffix)].strip().isdigit():
            return int(text[: -len(suffix)]) * units[suffix]
    return int(text) if text.isdigit() else default


def plan_csv_tasks(
    spark: SparkSession, table: Table, paths: Sequence[str], opts: LoadOptions
) -> CsvPlan | None:
    """The tasks of a CSV load parsed by pyarrow, or None when Spark's reader must read it.

    Raises:
        SchemaError: a NOT NULL column is missing from the header.
    """
    if table.conf.get(PARSER_KEY).strip().lower() != "auto":
        return None
    reader_opts = dict(opts.csv)
    others = sorted(set(reader_opts) - _READER_OPTIONS)
    if reader_opts.get("emptyValue", "") != "":
        others.append("emptyValue")
    if others or reader_opts.get("multiLine", "false") != "false":
        log.warning("load of %s reads its CSV through Spark's CSV reader (slower): the option(s) "
                    "%s are read by Spark only", table.name, ", ".join(others or ["multiLine"]))
        return None
    if reader_opts.get("encoding", "utf-8").lower().replace("-", "") != "utf8":
        return None
    delimiter = reader_opts.get("sep", ",")
    quote = reader_opts.get("quote", '"')
    escape = reader_opts.get("escape", "\\")
    if len(delimiter) != 1 or len(quote) > 1 or len(escape) > 1 or delimiter in "\r\n":
        return None
    if not delimiter.isascii() or delimiter in (quote, escape):
        return None
    schema = table.schema
    if any(c.type.name not in _TYPES for c in schema.columns):
        return None
    if opts.sort_scope == "global_sort":
        return None
    if any(c.type.name == "timestamp" for c in schema.columns):
        if str(spark.conf.get("spark.sql.session.timeZone")) not in _UTC:
            return None
    files = _local_files(paths)
    input_location = ""
    if files is None:
        remote = input_files(paths, table.store.conf)  # s3:// inputs: read by the tasks
        if remote is None:
            return None
        input_location, files = remote
        if any(p.lower().endswith(COMPRESSED) for p, _ in files):
            return None
    if opts.header:
        first = [f for f, _ in files[:1]]
        if input_location:
            first = [object_uri(first[0], input_location)]
        file_cols = header_columns(first, {**reader_opts, "sep": delimiter})
        if file_cols is None:
            return None
    else:
        file_cols = list(schema.column_names)
    fields = file_fields(table, file_cols)
    total = sum(size for _, size in files)
    open_cost = _bytes_conf(spark, "spark.sql.files.openCostInBytes", 4 << 20)
    max_part = _bytes_conf(spark, "spark.sql.files.maxPartitionBytes", 128 << 20)
    per_core = (total + open_cost * len(files)) // max(1, spark.sparkContext.defaultParallelism)
    max_split = min(max_part, max(open_cost, per_core))
    tasks = pack_splits(files, max_bytes=max_split, open_cost=open_cost)
    if not tasks:
        return None
    scan = CsvScan(
        file_columns=tuple(fields),
        columns=tuple(ColumnSpec.from_column(c) for c in schema.columns),
        header=opts.header,
        delimiter=delimiter,
        quote=quote,
        escape=escape,
        null_value=reader_opts.get("nullValue", ""),
        nan_value=reader_opts.get("nanValue", "NaN"),
        positive_inf=reader_opts.get("positiveInf", "Inf"),
        negative_inf=reader_opts.get("negativeInf", "-Inf"),
        input_location=input_location,
    )
    return CsvPlan(scan, tuple(tuple(t) for t in tasks), total, tuple(files))


def _task_id() -> str:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return f"{ctx.partitionId():05d}-{ctx.attemptNumber()}" if ctx else "00000-0"


def _task(
    scan: CsvScan, settings: WriteSettings, local_sort: bool, counters: Counters | None,
    packs: Iterator[tuple[int, tuple[CsvSplit, ...]]],
) -> Iterator[TaskResult | Fallback]:
    packs_ = list(packs)
    splits = [s for _, pack in packs_ for s in pack]
    result = csv_task(scan, settings, splits, task_id=_task_id(), local_sort=local_sort)
    if counters is not None and isinstance(result, TaskResult):
        counters.rows.add(result.rows)
        counters.bytes.add(sum(n for n, _ in packs_))
    yield result


def _distinct(
    scan: CsvScan, columns: tuple[str, ...], packs: Iterator[tuple[int, tuple[CsvSplit, ...]]]
) -> Iterator[dict[str, pa.Array] | Fallback]:
    splits = [s for _, pack in packs for s in pack]
    yield distinct_task(scan, splits, columns, task_id=_task_id())


def _fallback(table: Table, results: Sequence[object], settings: WriteSettings) -> bool:
    """True when a task needs Spark's reader (said in one line).

    Raises:
        BadRecordError: a task met a value Spark certainly reads as a bad record and the
            load's BAD_RECORDS_ACTION is FAIL (what the tasks wrote is removed first).
    """
    fallbacks = [r for r in results if isinstance(r, Fallback)]
    bad = [f for f in fallbacks if f.bad]
    if bad and settings.action == "FAIL":
        _discard(table, settings)
        raise BadRecordError(
            f"load of {table.name} failed with BAD_RECORDS_ACTION=FAIL (nothing was loaded): "
            f"bad record at {bad[0].reason}. Load with BAD_RECORDS_ACTION=REDIRECT and "
            "BAD_RECORD_PATH=<folder> to collect such rows, or FORCE / IGNORE to load the rest")
    if fallbacks:
        log.warning("load of %s reads its CSV through Spark's CSV reader (slower): %s",
                    table.name, fallbacks[0].reason)
    return bool(fallbacks)


def run_csv_tasks(
    spark: SparkSession,
    table: Table,
    plan: CsvPlan,
    settings: WriteSettings,
    *,
    local_sort: bool,
    overwrite: bool,
    prebuilt: Mapping[str, str] | None = None,
    progress: LoadUpdate | None = None,
) -> bool:
    """Run the plan's tasks and commit the segment; False: a task needs Spark's reader.

    A table with global dictionaries first runs a pass of tasks that collect the distinct
    values of its dictionary columns (not those given by ``prebuilt`` files), which the
    driver adds to the dictionaries before the write tasks encode with them.

    On False nothing of the tasks is left: the segment folder and its bad-record folder are
    empty again, the tablestatus entry still ``In Progress``, no dictionary value added.
    """
    sc = spark.sparkContext
    rdd = sc.parallelize(list(zip(plan.task_bytes(), plan.tasks, strict=True)), len(plan.tasks))
    what = f"load {table.name} segment {settings.segment_id}"
    try:
        if table.schema.dictionary_columns:
            cols = tuple(c for c in table.schema.dictionary_columns if c not in (prebuilt or {}))
            distinct: dict[str, pa.Array] = {}
            if cols:
                sc.setJobDescription(f"{what}: distinct values of {', '.join(cols)}")
                found = rdd.mapPartitions(functools.partial(_distinct, plan.scan, cols)).collect()
                if _fallback(table, found, settings):
                    return False
                distinct = {
                    c: pa.concat_arrays([f[c] for f in found if isinstance(f, dict)])
                    for c in cols
                }
            prepare_dictionaries(table, distinct, settings.segment_id, prebuilt=prebuilt)
        sc.setJobDescription(f"{what}: parse CSV and write ({len(plan.tasks)} tasks)")
        with watching(sc, progress) as counters:
            results = rdd.mapPartitions(
                functools.partial(_task, plan.scan, settings, local_sort, counters)
            ).collect()
    finally:
        sc.setJobDescription(None)  # type: ignore[arg-type]
    if _fallback(table, results, settings):
        _discard(table, settings)
        return False
    log.info("load of %s segment %s: CSV parsed by %d tasks", table.name, settings.segment_id,
             len(results))
    LoadTransaction.resume(table, settings.segment_id, overwrite=overwrite).commit(
        [r for r in results if isinstance(r, TaskResult)], settings
    )
    return True


def _discard(table: Table, settings: WriteSettings) -> None:
    """Remove what the tasks wrote (the segment is still in progress and locked by us)."""
    sfs = table.store.sfs
    sfs.delete_dir_contents(settings.segment_dir)
    if settings.bad_record_dir:
        bfs = resolve_fs(settings.bad_record_dir)
        bfs.delete_dir_contents(bfs.base)
