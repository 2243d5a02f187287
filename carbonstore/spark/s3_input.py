"""Load inputs in a bucket (``s3://``), read in Python: the JVM has no S3 connector.

CSV inputs are parsed by the load tasks with pyarrow (carbonstore/spark/csv_load.py lists
the objects and ships the bucket's location with the scan). Parquet inputs are read here,
on the driver, with pyarrow and handed to Spark as a DataFrame (bounded by the driver's
memory). Any other input on s3:// is refused before a segment exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from carbonstore.errors import UserError
from carbonstore.store.fs import input_files, resolve_fs
from carbonstore.store.table import Table

__all__ = ["is_s3_input", "parquet_frame", "refuse"]


def is_s3_input(paths: Sequence[str]) -> bool:
    return any(p.startswith("s3://") for p in paths)


def parquet_frame(spark: Any, table: Table, paths: Sequence[str]) -> Any:
    """A DataFrame of the Parquet objects under ``paths``, read through pyarrow."""
    found = input_files(paths, table.store.conf)
    if found is None:
        refuse(paths, "parquet")
    location, files = found  # type: ignore[misc]
    data = resolve_fs(location).parquet_dataset([p for p, _ in files]).to_table()
    return spark.createDataFrame(data)


def refuse(paths: Sequence[str], fmt: str) -> None:
    first = next(p for p in paths if p.startswith("s3://"))
    raise UserError(
        f"input {first}: {fmt} input on s3:// is read without Spark's JVM, which has no S3 "
        "connector; that works for Parquet and for CSV that pyarrow parses (plain UTF-8, "
        "one line per record, uncompressed, objects or a folder of objects, no glob) - "
        "copy other inputs to a local or HDFS path (docs/object-stores.md)"
    )
