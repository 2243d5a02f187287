"""DataFrames over exactly the files a plan keeps, read by Spark's own Parquet reader.

No row crosses into Python: the driver plans (segments, files) from the indexes, and Spark's
vectorised reader reads the kept files with the table's storage schema. Contract of
:func:`native_frame`:

- the DataFrame has the table's exact Spark schema (types, names, nullability);
- dictionary columns are decoded inside the JVM plan: a broadcast join of the INT32
  surrogates with the column's dictionary (surrogate 1, null, has no row and decodes to null);
- float/double columns are projected through ``nanvl(c, c)`` (the identity), so no predicate
  on them reaches parquet-java's row-group filter: it knows no NaN counts and would skip a
  row group whose max is below ``x`` for ``c > x`` although NaN rows (greater than every
  number in Spark) match. Our index still prunes on them, with NaN counts. A struct column
  with a float/double field (at any struct depth) is projected through ``coalesce(s, s)``
  for the same reason: Spark pushes ``s.f > x`` to parquet-java too;
- ``NOT NULL`` columns are marked non-nullable on the Parquet relation itself
  (:func:`carbonstore.spark.nullability.not_null_relation`; the load rejects nulls there),
  so they stay plain columns to Spark's optimizer: filters and join keys on them are pushed
  and inferred as over ``spark.read.parquet``. Where the relation cannot carry the mark
  (older schema versions, files with deletes, dictionary columns) they are projected
  through ``coalesce(c, <zero>)`` instead, which Spark knows is never null;
- ``pushable``, a condition over plain columns, is applied under those projections, so
  Spark pushes it to the Parquet reader (row-group statistics, dictionary and page-index
  filters), which the projections above would prevent;
- files with a delete delta (row-level DML) lose their deleted rows: they are read with
  ``_metadata.row_index`` and filtered by a bitmap of each file's deleted positions
  (:func:`carbonstore.spark.dml.without_deleted_rows`).

Only local stores are read this way (``table.store.sfs.local``): the JVM opens the paths.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from typing import Any

import pyarrow as pa

from carbonstore.dictionary import load_dictionary
from carbonstore.dictionary.column import FIRST_SURROGATE
from carbonstore.pruning.plan import TablePlan
from carbonstore.segments.writer import arrow_type
from carbonstore.spark import dml as spark_dml
from carbonstore.spark.evolution import evolved_frame
from carbonstore.spark.nullability import not_null_relation
from carbonstore.spark.storage_schema import storage_ddl
from carbonstore.spark.types import empty_frame
from carbonstore.store.ddl import quote_name
from carbonstore.store.schema import DataType
from carbonstore.store.table import Table

__all__ = ["decode_dictionaries", "jvm_readable", "native_frame", "nested_floating", "plain_columns", "storage_ddl",
           "zero_sql"]

_FLOATING = frozenset({"float", "double"})
# the dictionary frame's columns (names no table is expected to use: they would clash)
_SURROGATE = "__carbonstore_surrogate"
_VALUE = "__carbonstore_value"
_ZERO = {
    "boolean": "false", "string": "''", "binary": "X''", "date": "DATE '1970-01-01'",
    "timestamp": "TIMESTAMP '1970-01-01 00:00:00 UTC'",
}


def jvm_readable(table: Table) -> bool:
    """True when Spark's JVM can open the table's files by path (a local store)."""
    return bool(table.store.sfs.local)


def plain_columns(table: Table) -> frozenset[str]:
    """Columns a predicate may be pushed to Spark's Parquet reader on (not dictionary-encoded,
    not floating point, not a struct with a floating-point field)."""
    dictionary = set(table.schema.dictionary_columns)
    return frozenset(c.name for c in table.schema.columns
                     if c.name not in dictionary and c.type.name not in _FLOATING
                     and not nested_floating(c.type))


def nested_floating(t: DataType) -> bool:
    """True for a struct with a float / double field reached through struct fields alone:
    Spark pushes a predicate on such a field (``s.f > 0.5``) to parquet-java, whose
    row-group filter knows no NaN counts (docs/semantics.md)."""
    return t.name == "struct" and any(
        ft.name in _FLOATING or nested_floating(ft) for _, ft in t.fields)


def _uri(path: str) -> str:
    return path if "://" in path else "file://" + path


def native_frame(spark: Any, table: Table, plan: TablePlan, *, pushable: str | None = None) -> Any:
    """A DataFrame over the files of ``plan`` (see the module contract)."""


    paths = [_uri(plan.absolute(f.path)) for f in plan.files if f.delete_delta is None]
    if not plan.files:
        return empty_frame(spark, table)
    from carbonstore.spark.reader import plan_projections

    raw: Any = None
    dictionary = set(table.schema.dictionary_columns)
    not_null = {c.name for c in table.schema.columns if not c.nullable}
    known: set[str] = set()  # NOT NULL columns the relation itself marks non-nullable
    projections = plan_projections(table, plan)
    if projections:  # segments of older schema versions: one projection per version
        raw = evolved_frame(spark, table, plan, projections, storage_ddl(table), _uri)
        if pushable:
            raw = raw.where(pushable)
    else:
        if paths:
            raw = spark.read.schema(storage_ddl(table)).parquet(*paths)
            if len(paths) == len(plan.files):
                exact = not_null_relation(spark, raw, storage_ddl(table, not_null - dictionary))
                if exact is not None:
                    raw, known = exact, not_null - dictionary
            if pushable:
                raw = raw.where(pushable)
        if len(paths) < len(plan.files):
            # files with a delete delta: a bitmap filter drops their deleted rows (spark/dml.py)
            live = spark_dml.without_deleted_rows(spark, table, plan, pushable=pushable)
            raw = live if raw is None else raw.unionByName(live)
    out = decode_dictionaries(spark, table, raw)
    exprs = projection_exprs(table, known)
    if projections or len(paths) < len(plan.files) or dictionary \
            or exprs != [quote_name(c.name) for c in table.schema.columns]:
        # one selectExpr of SQL texts: a handful of JVM calls, not several per column
        out = out.selectExpr(*exprs)
    # else: a bare read whose schema is the table's already (no projection to analyze)
    return out


def decode_dictionaries(spark: Any, table: Table, frame: Any) -> Any:
    """``frame`` with each dictionary column's INT surrogates replaced by their values (a
    broadcast join with the column's dictionary; other columns kept)."""
    from pyspark.sql import functions as F

    out = frame
    for name in sorted(table.schema.dictionary_columns):
        values = _dictionary_frame(spark, table, name)
        out = out.join(F.broadcast(values), out[f"`{name}`"] == values[_SURROGATE], "left") \
            .drop(name, _SURROGATE).withColumnRenamed(_VALUE, name)
    return out


def projection_exprs(table: Table, known: Collection[str] = ()) -> list[str]:
    """The SQL expressions of the frame's final projection (see the module contract);
    ``known``: NOT NULL columns already non-nullable in the frame (no ``coalesce``)."""
    exprs = []
    for c in table.schema.columns:
        name = quote_name(c.name)
        if c.type.name in _FLOATING:
            text = f"nanvl({name}, {name})"
        elif nested_floating(c.type):  # the identity, which Spark pushes no field filter under
            text = f"coalesce({name}, {name})"
        else:
            text = name
        if not c.nullable and c.name not in known:
            text = f"coalesce({text}, {zero_sql(c.type)})"
        exprs.append(text if text == name else f"{text} AS {name}")
    return exprs


def zero_sql(t: DataType) -> str:
    """A Spark SQL literal of type ``t`` (a zero, an empty string, array or map, a struct of
    zeros): the second argument of ``coalesce`` that tells Spark a NOT NULL column is
    never null."""
    if t.name == "struct":
        fields = ", ".join(f"'{n.replace(chr(92), chr(92) * 2).replace(chr(39), chr(92) + chr(39))}'"
                           f", {zero_sql(ft)}" for n, ft in t.fields)
        return f"CAST(named_struct({fields}) AS {t})"
    if t.name == "array":
        return f"CAST(array() AS {t})"
    if t.name == "map":
        return f"CAST(map() AS {t})"
    return f"CAST({_ZERO.get(t.name, '0')} AS {t})"


_dictionaries: dict[tuple[int, str, str, int], Any] = {}
_lock = threading.Lock()


def _dictionary_frame(spark: Any, table: Table, name: str) -> Any:
    """(surrogate INT, value) of the column's committed dictionary, as a
    local DataFrame, cached per session, dictionary file and size (a dictionary only grows)."""

    column = table.schema.column(name)
    d = load_dictionary(table, column)
    key = (id(spark), str(d.files.meta_path), name, d.size)
    with _lock:
        hit = _dictionaries.get(key)
    if hit is not None:
        return hit
    values = d.values.cast(arrow_type(column.type))
    surrogates = pa.array(range(FIRST_SURROGATE, FIRST_SURROGATE + len(values)), pa.int32())
    rows = pa.table({_SURROGATE: surrogates, _VALUE: values})
    frame = spark.createDataFrame(rows, schema=f"{_SURROGATE} int, {_VALUE} {column.type}")
    with _lock:
        if len(_dictionaries) > 256:
            _dictionaries.clear()
        _dictionaries[key] = frame
    return frame
