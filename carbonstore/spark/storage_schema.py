"""The Spark schema of a table's Parquet files, shared by Spark's plain read
(spark/native.py) and its read of files with deleted rows (spark/dml.py)."""

from __future__ import annotations

from collections.abc import Collection

from carbonstore.store.ddl import quote_name
from carbonstore.store.table import Table

__all__ = ["storage_ddl"]


def storage_ddl(table: Table, not_null: Collection[str] = ()) -> str:
    """The Spark schema of the table's Parquet files: dictionary columns as INT surrogates;
    the columns ``not_null`` marked ``NOT NULL``."""
    dictionary = set(table.schema.dictionary_columns)
    return ", ".join(f"{quote_name(c.name)} {'int' if c.name in dictionary else c.type}"
                     + (" NOT NULL" if c.name in not_null else "")
                     for c in table.schema.columns)
