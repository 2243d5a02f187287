"""Spark side of row-level DML: reading files with delete deltas natively.

:func:`without_deleted_rows` reads the files of a plan that have a delete delta with Spark's
own Parquet reader, with each row's position in its file (``_metadata.row_index``, which
Spark computes correctly also when it skips row groups) and file name
(``_metadata.file_name``: data file names carry a uuid, so they are unique in a table), and
drops the deleted positions with a filter: each file's deleted positions as a bitmap, a
literal array of longs (bit ``i % 64`` of word ``i // 64`` set when position ``i`` is
deleted), chosen by file name. No join, no shuffle, no row crosses into Python; measured
against a broadcast anti join of (file name, position) in BENCHMARKS.md (Row-level DML).
The deltas are those the plan names (its pinned version).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from carbonstore.pruning.plan import FilePlan, TablePlan
from carbonstore.segments.deltas import decode_delta, positions
from carbonstore.spark.storage_schema import storage_ddl
from carbonstore.store.table import Table

__all__ = ["FILES_PER_FILTER", "deleted_bitmap", "drop_deleted", "name_groups",
           "without_deleted_rows"]

#: at most this many files share one scan (the filter picks a file's bitmap by comparing
#: the row's file name with each of them); more files are read as a union of scans
FILES_PER_FILTER = 16


def _uri(path: str) -> str:
    return path if "://" in path else "file://" + path


def deleted_bitmap(table: Table, plan: TablePlan, f: FilePlan) -> np.ndarray:
    """The deleted positions of ``f`` (its delta in ``plan``) as 64-bit words: bit
    ``p % 64`` of word ``p // 64`` is set when position ``p`` is deleted; the words end at
    the last deleted position (positions past them are live)."""
    assert f.delete_delta is not None
    path = plan.absolute(f.delete_delta)
    pos = positions(decode_delta(table.store.sfs.read_bytes(path), path)).astype(np.uint64)
    words = np.zeros(int(pos.max()) // 64 + 1 if len(pos) else 0, np.uint64)
    np.bitwise_or.at(words, (pos >> np.uint64(6)).astype(np.int64),
                     np.uint64(1) << (pos & np.uint64(63)))
    return words.view(np.int64)


def _long_array(spark: Any, words: np.ndarray) -> Any:
    """A literal ``array<bigint>`` column of ``words``, handed to the JVM as one byte array
    (``F.lit`` of a numpy array sets the elements one py4j call at a time)."""
    from pyspark.sql.classic.column import Column

    jvm = spark._jvm
    data = jvm.java.nio.ByteBuffer.wrap(bytearray(words.astype(">i8").tobytes()))
    out = spark.sparkContext._gateway.new_array(jvm.long, len(words))
    data.asLongBuffer().get(out)
    return Column(jvm.org.apache.spark.sql.functions.lit(out))


def without_deleted_rows(
    spark: Any, table: Table, plan: TablePlan, *, pushable: str | None = None
) -> Any:
    """The live rows of the plan's files that have a delete delta (storage schema, like the
    plain read of :func:`carbonstore.spark.native.native_frame`)."""
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
    """``files`` split so no two files of a group share a name (the filter tells files apart
    by name; data file names carry a uuid, should two share a name anyway they go to
    different scans) and no group holds more than :data:`FILES_PER_FILTER` files."""
    groups: list[list[FilePlan]] = []
    for f in files:
        name = f.path.rsplit("/", 1)[-1]
        for g in groups:
            if len(g) < FILES_PER_FILTER and all(x.path.rsplit("/", 1)[-1] != name for x in g):
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

    bitmap = None
    for f in files:
        if f.delete_delta is None:
            continue
        words = _long_array(spark, deleted_bitmap(table, plan, f))
        same = F.col("_metadata.file_name") == f.path.rsplit("/", 1)[-1]
        bitmap = F.when(same, words) if bitmap is None else bitmap.when(same, words)
    if bitmap is None:
        return raw
    # a file or position the bitmaps do not cover is live: get() is null past the end
    word = F.coalesce(F.get(bitmap, F.expr("cast(_metadata.row_index div 64 as int)")),
                      F.lit(0).cast("long"))
    bit = F.expr("shiftleft(1L, cast(_metadata.row_index % 64 as int))")
    return raw.where(word.bitwiseAND(bit) == 0)
