"""The Spark tasks of a DML statement: delete deltas and the insert segment's files.

Both jobs send the driver one small row per file or per task, never the rows:

- :func:`write_deltas`: the matched (file, position) pairs are hash-partitioned by file, so
  one task owns all of a file's positions; it unions them with the file's delta of the
  planned version and writes the result as a NEW delta (today's portable RoaringBitmap
  format, ``segments.deltas.write_delta``: put-if-absent under a unique name). The driver
  receives (segment, file, delta name, rows in it, rows added). A retried or speculative
  attempt writes a delta of its own under another name; only the attempt whose result
  Spark keeps is named by the commit, the others stay unnamed files that clean files
  removes (as a load's orphan task files).
- :func:`write_rows`: the new rows go through the load writer (``segments.writer.
  write_task``: sort columns, page index, blooms, dictionary encoding, partitions) in tasks
  arranged as a load arranges them (buckets, sort scope), into one ``In Progress`` segment;
  the driver receives each task's ``TaskResult``.

Both are Python data source writers (``df.write.format(...)``), as the load's: each task gets
its partition as Arrow batches and returns a commit message; ``commit()`` runs on the
driver host after every task succeeded and hands the messages (O(files) or O(tasks)) to the
statement through a file only this statement names.
"""

from __future__ import annotations

import base64
import os
import pickle
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from carbonstore.dml.target import FILE, POS, DataFile, file_key
from carbonstore.errors import UserError
from carbonstore.segments.commit import abort_segment, begin_segment
from carbonstore.segments.deltas import read_delta, write_delta
from carbonstore.segments.dml_commit import PreparedInsert, Written, finish_insert
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import write_task
from carbonstore.store.fs import resolve_fs
from carbonstore.store.table import Table

__all__ = ["DUPLICATE", "write_deltas", "write_rows"]

#: the delta task's answer for a file with a position twice (a MERGE target row that more
#: than one source row modifies)
DUPLICATE = "__duplicate__"
_DELTAS = "carbonstore_dml_deltas"
_ROWS = "carbonstore_dml_rows"
_registered: set[int] = set()
_lock = threading.Lock()


def _pack(value: Any) -> str:
    return base64.b64encode(pickle.dumps(value)).decode()


def _unpack(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))  # noqa: S301 - our own options and results


@dataclass(frozen=True)
class _Message(WriterCommitMessage):
    rows: list[Any]


class _Writer(DataSourceArrowWriter):
    """One statement's task side (``job``) and the driver-side commit that hands the
    messages to the statement (``out``: a file of its own)."""

    def __init__(self, job: Any, out: str) -> None:
        self.job = job
        self.out = out

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Message:
        return _Message(list(self.job(iterator)))

    def commit(self, messages: list[Any]) -> None:
        rows = [r for m in messages if isinstance(m, _Message) for r in m.rows]
        tmp = f"{self.out}.part"
        with open(tmp, "wb") as fh:
            pickle.dump(rows, fh)
        os.replace(tmp, self.out)

    def abort(self, messages: list[Any]) -> None:
        pass  # the statement cleans up: it sees save() fail


class _Source(DataSource):
    """A write-only data source whose options carry the pickled job."""

    def schema(self) -> str:  # pragma: no cover - never read
        return "x int"

    def writer(self, schema: Any, overwrite: bool) -> _Writer:
        return _Writer(_unpack(self.options["job"]), self.options["out"])


class _DeltaSource(_Source):
    @classmethod
    def name(cls) -> str:
        return _DELTAS


class _RowsSource(_Source):
    @classmethod
    def name(cls) -> str:
        return _ROWS


def _run_job(spark: Any, frame: Any, source: str, job: Any) -> list[Any]:
    """Run ``job`` over each partition of ``frame`` in Spark tasks; their rows, collected."""
    with _lock:
        if id(spark) not in _registered:
            spark.dataSource.register(_DeltaSource)
            spark.dataSource.register(_RowsSource)
            _registered.add(id(spark))
    fd, out = tempfile.mkstemp(prefix="carbonstore-dml-", suffix=".pickle")
    os.close(fd)
    os.unlink(out)
    try:
        frame.write.format(source).mode("append").option("job", _pack(job)) \
            .option("out", out).save()
        with open(out, "rb") as fh:
            return list(pickle.load(fh))  # noqa: S301 - written by this statement's commit
    finally:
        for path in (out, f"{out}.part"):
            if os.path.exists(path):
                os.unlink(path)


@dataclass(frozen=True, slots=True)
class _DeltaTask:
    """Pickled to the tasks: where the store is and what each planned file had."""

    location: str
    conf: Any  # the store's CarbonConf
    files: dict[str, DataFile]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[Any, ...]]:
        from pyroaring import BitMap


        found: dict[str, list[np.ndarray]] = {}
        for batch in batches:
            if not batch.num_rows:
                continue
            paths = batch.column(0).dictionary_encode()
            pos = batch.column(1).to_numpy(zero_copy_only=False).astype(np.int64)
            codes = paths.indices.to_numpy(zero_copy_only=False)
            for i, path in enumerate(paths.dictionary.to_pylist()):
                if path is not None:
                    found.setdefault(path, []).append(pos[codes == i])
        sfs = resolve_fs(self.location, self.conf) if found else None
        for path, parts in found.items():
            f = self.files[file_key(path)]
            every = np.concatenate(parts)
            bits = BitMap(every.astype(np.uint32))
            if len(bits) != len(every):
                yield (f.segment, f.rel, DUPLICATE, 0, 0)
                continue
            added = len(bits)
            if f.delta is not None:
                bits |= read_delta(sfs, f.segment_dir, f.delta)
            d = write_delta(sfs, f.segment_dir, f.rel, bits)
            yield (f.segment, f.rel, d.delta_file, d.deleted_rows, added)


def write_deltas(
    spark: Any, table: Table, located: Any, files: Mapping[str, DataFile], *, what: str,
) -> dict[tuple[str, str], Written]:
    """Delete the rows of ``located`` (its :data:`FILE` and :data:`POS` columns) by new
    deltas written in tasks; (segment, file) -> what was written.

    Raises:
        UserError: a position came twice (``what`` names the statement: a MERGE target row
            matched by more than one source row).
    """
    from pyspark.sql import functions as F

    if not files:
        return {}
    parts = max(1, min(len(files), spark.sparkContext.defaultParallelism * 2))
    task = _DeltaTask(table.store.location, table.store.conf, dict(files))
    pairs = located.select(F.col(FILE), F.col(POS)).where(F.col(FILE).isNotNull())
    rows = _run_job(spark, pairs.repartition(parts, F.col(FILE)), _DELTAS, task)
    if any(r[2] == DUPLICATE for r in rows):
        raise UserError(
            f"{what} into {table.name}: a target row matched more than one source row "
            "(as in Spark and Delta Lake, such a MERGE is refused); make the source unique "
            "on the ON keys; nothing was changed")
    by_key = {(f.segment, f.rel): f for f in files.values()}
    return {(seg, rel): Written(planned=by_key[(seg, rel)].delta, delta_file=name,
                                deleted_rows=int(total), added=int(added))
            for seg, rel, name, total, added in rows}


@dataclass(frozen=True, slots=True)
class _RowsTask:
    settings: Any

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[Any]:
        from pyspark import TaskContext


        ctx = TaskContext.get()
        task_id = f"dml{ctx.partitionId():05d}-{ctx.attemptNumber()}" if ctx else "dml"
        yield write_task(batches, self.settings, task_id=task_id)


def write_rows(spark: Any, table: Table, rows: Any, *, what: str) -> PreparedInsert | None:
    """Write ``rows`` (a DataFrame of the table's columns, typed) as a new ``In Progress``
    segment through the load writer in Spark tasks; None when it has no row.

    Raises:
        UserError: a new row does not fit the table (NULL into a NOT NULL column); its
            segment is aborted.
    """
    from pyspark.sql import functions as F

    from carbonstore.spark.load_job import arranged

    entry, keeper = begin_segment(table)
    sid = entry.load_name
    try:
        opts = parse_load_options(table, {})
        settings = write_settings(table, sid, opts)
        frame = rows.select(*[F.col(f"`{c}`") for c in table.schema.column_names])
        dict_cols = list(table.schema.dictionary_columns)
        if dict_cols:
            from carbonstore.dictionary import prepare_dictionaries

            distinct = {c: frame.select(F.col(f"`{c}`")).distinct().toArrow().column(0)
                        for c in dict_cols}
            prepare_dictionaries(table, distinct, sid)
        results = _run_job(spark, arranged(frame, table, opts), _ROWS, _RowsTask(settings))
        if not any(r.rows or r.bad_records for r in results):
            abort_segment(table, sid, reason="no row to insert")
            if keeper is not None:
                keeper.release()
            return None
        return finish_insert(table, sid, results, settings, keeper, what=what)
    except BaseException as err:
        abort_segment(table, sid, reason=str(err)[:500] or type(err).__name__)
        if keeper is not None:
            keeper.release()
        raise
