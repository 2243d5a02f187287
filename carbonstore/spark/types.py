"""The Spark side of a table's types, shared by the data source (datasource.py), its read
side (reader.py) and the DataFrame API (api.py): the table schema as Spark DDL and as a Spark
schema, an empty frame of it, and the one-line user errors of the data source's planning
methods. It imports no other module of this package, so those modules need not import each
other for it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

from carbonstore.errors import UserError
from carbonstore.store.ddl import quote_name
from carbonstore.store.table import Table

__all__ = ["empty_frame", "one_line_errors", "schema_ddl", "struct_type"]

_T = TypeVar("_T")


def one_line_errors(method: Callable[..., _T]) -> Callable[..., _T]:
    """A carbonstore user error raised by a planning method reaches the PySpark user as
    its one line (``[PYTHON_DATA_SOURCE_ERROR] ...: carbonstore.errors.SchemaError: ...``),
    not after a Python traceback: PySpark's worker formats the exception without its
    traceback when ``SPARK_HIDE_TRACEBACK`` is set, which is done here, in the planning
    worker, only when a user error is on its way out (bugs keep their traceback)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> _T:
        try:
            return method(*args, **kwargs)
        except UserError:
            os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise

    return wrapper


def schema_ddl(table: Table) -> str:
    """The table schema as a Spark DDL string (NOT NULL kept)."""
    return ", ".join(
        f"{quote_name(c.name)} {c.type}{'' if c.nullable else ' NOT NULL'}"
        for c in table.schema.columns
    )


def empty_frame(spark: Any, table: Table) -> Any:
    """An empty DataFrame with the table's exact schema."""
    return spark.createDataFrame([], schema=struct_type(schema_ddl(table)))


@functools.lru_cache(maxsize=64)
def struct_type(ddl: str) -> Any:
    """The Spark schema of a DDL string (parsed by the JVM once per schema, not per lookup)."""
    from pyspark.sql.types import DataType

    return DataType.fromDDL(ddl)

