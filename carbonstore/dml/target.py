"""The target rows of a DML statement as a Spark DataFrame that knows where each row lives.

:func:`located_frame` reads exactly the files a plan keeps with Spark's own Parquet reader,
like the query path (:func:`carbonstore.spark.native.native_frame`), and adds two columns
taken from the file scan before any projection: ``__carbon_file`` (``_metadata.file_path``)
and ``__carbon_pos`` (``_metadata.row_index``, the row's position in its file, exact also
when Spark skips row groups). Rows the plan's delete deltas remove are dropped by the bitmap
filter of :mod:`carbonstore.spark.dml`. Each schema version's files are read with the
storage schema they were written with and projected by column id to the current schema
(renamed, added, widened columns); ``NOT NULL`` columns are ``coalesce``d, so a segment
adopted from ordinary (nullable) Parquet and rows written by the store union under one
schema - the union is Spark's, not pyarrow's.

:class:`DataFile` is what a task needs to build a file's new delete delta: the file's
segment folder, its name there and the delta it had in the planned version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from carbonstore.pruning.plan import FilePlan, TablePlan
from carbonstore.segments.arrow_read import plan_projections
from carbonstore.segments.dml_read import FILE, POS
from carbonstore.spark.dml import drop_deleted, name_groups
from carbonstore.spark.dml_tasks import DataFile, file_key
from carbonstore.spark.located import located_read
from carbonstore.spark.native import (
    decode_dictionaries,
    jvm_readable,
    native_frame,
    projection_exprs,
    storage_ddl,
)
from carbonstore.spark.types import empty_frame
from carbonstore.store.ddl import quote_name
from carbonstore.store.evolution import Projection, column_default
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import TableStatusSnapshot

__all__ = ["FILE", "POS", "DataFile", "data_files", "file_key", "located_frame", "table_frame"]



def data_files(table: Table, plan: TablePlan, snap: TableStatusSnapshot) -> dict[str, DataFile]:
    """:func:`file_key` of each planned file -> its :class:`DataFile`."""
    out: dict[str, DataFile] = {}
    entries = {e.load_name: e for e in snap.entries}
    for f in plan.files:
        rel = f.path.rsplit(f"/Segment_{f.segment}/", 1)[1]
        entry = entries.get(f.segment)
        delta = None
        if f.delete_delta is not None and entry is not None:
            delta = next((d for d in entry.delete_deltas if d.data_file == rel), None)
        out[file_key(plan.absolute(f.path))] = DataFile(
            f.segment, rel, table.paths.segment_dir(f.segment), delta)
    return out


def _uri(path: str) -> str:
    return path if "://" in path else "file://" + path


def _version_columns(table: Table, proj: Projection | None) -> tuple[str, list[str]]:
    """(the storage DDL the files of one schema version are read with, the SQL that projects
    them to the current names and storage types)."""
    dictionary = set(table.schema.dictionary_columns)
    if proj is None:
        return storage_ddl(table), [quote_name(c.name) for c in table.schema.columns]
    ddl = ", ".join(
        f"{quote_name(s.physical)} "
        f"{'int' if s.name in dictionary else s.written.type}"  # type: ignore[union-attr]
        for s in proj if s.physical is not None and s.written is not None)
    cols = []
    for s in proj:
        want = "int" if s.name in dictionary else str(s.column.type)
        if s.physical is None:
            default = column_default(s.column)
            value = "NULL" if default is None else _literal(default.as_py())
            cols.append(f"CAST({value} AS {want}) AS {quote_name(s.name)}")
        else:
            cols.append(f"CAST({quote_name(s.physical)} AS {want}) AS {quote_name(s.name)}")
    return ddl, cols


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def located_frame(spark: Any, table: Table, plan: TablePlan) -> Any:
    """The live rows of the plan's files: the table's columns (current schema, values
    decoded) plus :data:`FILE` and :data:`POS` (see the module docstring)."""
    from pyspark.sql import functions as F

    if not plan.files:
        frame = empty_frame(spark, table)
        return frame.select("*", F.lit(None).cast("string").alias(FILE),
                            F.lit(None).cast("long").alias(POS))
    if not jvm_readable(table):  # s3://: the same columns, read in Python by the tasks
        return located_read(spark, table, plan).selectExpr(*_checked_exprs(table), FILE, POS)
    projections = plan_projections(table, plan)
    groups: dict[tuple[int, bool], tuple[Projection | None, list[FilePlan]]] = {}
    for f in plan.files:
        proj = projections.get(f.segment)
        key = (0 if proj is None else id(proj), f.delete_delta is not None)
        groups.setdefault(key, (proj, []))[1].append(f)
    location = [F.col("_metadata.file_path").alias(FILE), F.col("_metadata.row_index").alias(POS)]
    frames = []
    for (_, deltas), (proj, files) in groups.items():
        ddl, cols = _version_columns(table, proj)
        reader = spark.read.schema(ddl) if ddl else spark.read
        for part in (name_groups(files) if deltas else [files]):
            raw = reader.parquet(*[_uri(plan.absolute(f.path)) for f in part])
            if deltas:
                raw = drop_deleted(spark, table, plan, raw, part)
            frames.append(raw.select(*[F.expr(c) for c in cols], *location))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    out = decode_dictionaries(spark, table, out)
    return out.selectExpr(*_checked_exprs(table), FILE, POS)


def table_frame(spark: Any, table: Table, plan: TablePlan) -> Any:
    """The live rows of the plan's files, the table's columns only: Spark's native read
    where its JVM opens the files, else the located read without its two columns."""
    if jvm_readable(table):
        return native_frame(spark, table, plan)
    return located_frame(spark, table, plan).drop(FILE, POS)


def _checked_exprs(table: Table) -> list[str]:
    """The read's projection, with a NULL in a NOT NULL column (a file changed behind the
    store's back) failing the statement instead of being read as the column's zero: a
    statement must never write such a row back with a made-up value."""
    out = []
    for c, text in zip(table.schema.columns, projection_exprs(table, [c.name for c in
                                                                       table.schema.columns]),
                       strict=True):
        if c.nullable:
            out.append(text)
            continue
        name = quote_name(c.name)
        value = text.rsplit(" AS ", 1)[0] if text != name else name
        message = (f"NOT NULL column {c.name} holds 1 null or more in a data file of "
                   f"{table.name} (changed behind the store's back)").replace("'", "")
        out.append(f"coalesce({value}, raise_error('{message}')) AS {name}")
    return out


def group_positions(rows: Sequence[Any], files: Mapping[str, DataFile]) -> dict[tuple[str, str], Any]:
    """(segment, file) -> sorted uint32 positions of collected (FILE, POS) rows."""
    import numpy as np

    found: dict[tuple[str, str], list[int]] = {}
    for path, pos in rows:
        f = files.get(file_key(path))
        if f is None:
            continue
        found.setdefault((f.segment, f.rel), []).append(int(pos))
    return {k: np.unique(np.asarray(v, dtype=np.uint32)) for k, v in found.items()}
