"""Spark side of row-level DML: reading files with delete deltas natively.

:func:`without_deleted_rows` reads the files of a plan that have a delete delta with Spark's
own Parquet reader, with each row's position in its file (``_metadata.row_index``, which
Spark computes correctly also when it skips row groups) and file name
(``_metadata.file_name``: data file names carry a uuid, so they are unique in a table), and
drops the deleted positions with a left anti join against a broadcast frame of
(file name, position). The deltas are those the plan names (its pinned version).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from carbonstore.pruning.plan import FilePlan, TablePlan
from carbonstore.segments.deltas import decode_delta, positions
from carbonstore.store.table import Table

__all__ = [
    "BROADCAST_POSITIONS", "deleted_frame", "drop_deleted", "name_groups", "without_deleted_rows",
]

_FILE = "__carbon_file_name"
_ROW = "__carbon_row_index"
#: above this many deleted positions the anti join is a shuffle join, not a broadcast
BROADCAST_POSITIONS = 20_000_000


def _uri(path: str) -> str:
    return path if "://" in path else "file://" + path


def deleted_frame(
    spark: Any, table: Table, plan: TablePlan, files: list[FilePlan] | None = None
) -> tuple[Any, int]:
    """(file name, row index) of every deleted row of the plan's files; and its size."""
    sfs = table.store.sfs
    names: list[pa.Array] = []
    rows: list[np.ndarray] = []
    for f in plan.files if files is None else files:
        if f.delete_delta is None:
            continue
        path = plan.absolute(f.delete_delta)
        pos = positions(decode_delta(sfs.read_bytes(path), path))
        base = f.path.rsplit("/", 1)[-1]
        names.append(pa.array([base] * len(pos), pa.string()))
        rows.append(pos.astype(np.int64))
    data = pa.table({
        _FILE: pa.concat_arrays(names) if names else pa.array([], pa.string()),
        _ROW: pa.array(np.concatenate(rows) if rows else np.zeros(0, np.int64), pa.int64()),
    })
    return spark.createDataFrame(data, schema=f"{_FILE} string, {_ROW} long"), data.num_rows


def without_deleted_rows(
    spark: Any, table: Table, plan: TablePlan, *, pushable: str | None = None
) -> Any:
    """The live rows of the plan's files that have a delete delta (storage schema, like the
    plain read of :func:`carbonstore.spark.native.native_frame`)."""
    from carbonstore.spark.native import storage_ddl

    out = None
    for files in name_groups([f for f in plan.files if f.delete_delta is not None]):
        raw = spark.read.schema(storage_ddl(table)).parquet(*[_uri(plan.absolute(f.path))
                                                              for f in files])
        if pushable:
            raw = raw.where(pushable)
        part = drop_deleted(spark, table, plan, raw, files)
        out = part if out is None else out.unionByName(part)
    return out


def name_groups(files: list[FilePlan]) -> list[list[FilePlan]]:
    """``files`` split so no two files of a group share a name: the anti join tells files
    apart by name (data file names carry a uuid; should two share a name anyway, they go to
    different scans)."""
    groups: list[list[FilePlan]] = []
    for f in files:
        name = f.path.rsplit("/", 1)[-1]
        for g in groups:
            if all(x.path.rsplit("/", 1)[-1] != name for x in g):
                g.append(f)
                break
        else:
            groups.append([f])
    return groups


def drop_deleted(
    spark: Any, table: Table, plan: TablePlan, raw: Any, files: list[FilePlan]
) -> Any:
    """``raw`` (a plain Parquet read of ``files``, no two of one name, before any
    projection) without the rows the plan's delete deltas remove; same columns."""
    from pyspark.sql import functions as F

    columns = list(raw.columns)
    raw = raw.select("*", F.col("_metadata.file_name").alias(_FILE),
                     F.col("_metadata.row_index").alias(_ROW))
    deleted, n = deleted_frame(spark, table, plan, files)
    if n <= BROADCAST_POSITIONS:
        deleted = F.broadcast(deleted)
    return raw.join(deleted, [_FILE, _ROW], "left_anti").select(*columns)
