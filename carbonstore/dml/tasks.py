"""The Spark jobs of a DML statement: delete deltas and the insert segment's files.

Both are one Spark job each of Python tasks (``spark.tasks.run_tasks``: ``mapInArrow``,
the tasks' small results collected), whose task side is ``spark.dml_tasks``; the driver
receives one small row per file or per task, never the rows:

- :func:`write_deltas`: the matched (file, position) pairs are hash-partitioned by file, so
  one task owns all of a file's positions and writes its new delta (put-if-absent under a
  unique name); the driver receives (segment, file, delta name, rows in it, rows added).
  Only the attempt whose results Spark keeps is named by the commit.
- :func:`write_rows`: the new rows go through the load writer in tasks arranged as a load
  arranges them (buckets, sort scope), into one ``In Progress`` segment; the driver
  receives each task's ``TaskResult``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import functions as F  # noqa: N812 - the usual pyspark alias

from carbonstore.dictionary import prepare_dictionaries
from carbonstore.errors import UserError
from carbonstore.segments.commit import abort_segment, begin_segment
from carbonstore.segments.dml_commit import PreparedInsert, Written, finish_insert
from carbonstore.segments.dml_read import FILE, POS
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.spark.dml_tasks import DUPLICATE, DataFile, DeltaTask, RowsTask
from carbonstore.spark.load_job import arranged
from carbonstore.spark.tasks import run_tasks
from carbonstore.store.table import Table

__all__ = ["DUPLICATE", "write_deltas", "write_rows"]

def write_deltas(
    spark: Any, table: Table, located: Any, files: Mapping[str, DataFile], *, what: str,
) -> dict[tuple[str, str], Written]:
    """Delete the rows of ``located`` (its :data:`FILE` and :data:`POS` columns) by new
    deltas written in tasks; (segment, file) -> what was written.

    Raises:
        UserError: a position came twice (``what`` names the statement: a MERGE target row
            matched by more than one source row).
    """
    if not files:
        return {}
    parts = max(1, min(len(files), spark.sparkContext.defaultParallelism * 2))
    task = DeltaTask(table.store.location, table.store.conf, dict(files))
    pairs = located.select(F.col(FILE), F.col(POS)).where(F.col(FILE).isNotNull())
    rows = run_tasks(pairs.repartition(parts, F.col(FILE)), task)
    if any(r[2] == DUPLICATE for r in rows):
        raise UserError(
            f"{what} into {table.name}: a target row matched more than one source row "
            "(as in Spark and Delta Lake, such a MERGE is refused); make the source unique "
            "on the ON keys; nothing was changed")
    by_key = {(f.segment, f.rel): f for f in files.values()}
    return {(seg, rel): Written(planned=by_key[(seg, rel)].delta, delta_file=name,
                                deleted_rows=int(total), added=int(added))
            for seg, rel, name, total, added in rows}


def write_rows(spark: Any, table: Table, rows: Any, *, what: str) -> PreparedInsert | None:
    """Write ``rows`` (a DataFrame of the table's columns, typed) as a new ``In Progress``
    segment through the load writer in Spark tasks; None when it has no row.

    Raises:
        UserError: a new row does not fit the table (NULL into a NOT NULL column); its
            segment is aborted.
    """
    entry, keeper = begin_segment(table)
    sid = entry.load_name
    try:
        opts = parse_load_options(table, {})
        settings = write_settings(table, sid, opts)
        frame = rows.select(*[F.col(f"`{c}`") for c in table.schema.column_names])
        dict_cols = list(table.schema.dictionary_columns)
        if dict_cols:
            distinct = {c: frame.select(F.col(f"`{c}`")).distinct().toArrow().column(0)
                        for c in dict_cols}
            prepare_dictionaries(table, distinct, sid)
        results = run_tasks(arranged(frame, table, opts), RowsTask(settings))
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
