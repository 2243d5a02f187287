"""DataFrames over tables: ``to_spark`` (and the per-table scans of a statement,
``scan_frame``), a small plan read on the driver (``local_frame``), and running Spark SQL
with one-line user errors (``run_sql``, ``collect_rows``).

Split from reader.py (the ``carbonstore`` data source's read side), which this module uses;
the data source module and the session do not import this one, so reader -> datasource ->
session -> reader is no longer a cycle.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from carbonstore.errors import UserError
from carbonstore.expressions.bind import session_zone
from carbonstore.expressions.expr import AlwaysTrue, Expr
from carbonstore.pruning.plan import TablePlan, bind_where, prune
from carbonstore.pruning.rows import rows_exact
from carbonstore.spark.reader import (
    LOCAL_ROWS_KEY,
    SEGMENTS_OPTION,
    TIME_ZONE_OPTION,
    WHERE_OPTION,
    arrow_read_schema,
    plan_partitions,
    plan_projections,
    read_row_groups,
)
from carbonstore.spark.types import schema_ddl, struct_type
from carbonstore.store.table import Table

__all__ = ["collect_rows", "local_frame", "run_sql", "scan_frame", "to_spark"]


def to_spark(
    table: Table, spark: Any, where: str | None = None, segments: str | Sequence[str] | None = None
) -> Any:
    """A DataFrame over ``table`` (its readable segments, or ``segments``), filtered by ``where``.

    The scan is planned now, on the driver, from the indexes (the readable segments of the
    tablestatus read now, pinned: later loads are not seen by this DataFrame). When the plan
    keeps at most ``carbon.read.local.rows`` rows (0: never), those rows are read here and
    Spark gets a local one-partition DataFrame (filtered again by Spark unless the driver's
    row filter is exact, ``rows_exact``): a lookup costs no Python task, only a JVM one.
    Otherwise Spark's own Parquet reader reads exactly the kept files
    (:func:`carbonstore.spark.native.native_frame`; no row crosses into Python), or, for a
    store the JVM cannot open, the ``carbonstore`` data source with the ``where`` option.
    """
    from carbonstore.spark.native import jvm_readable, native_frame, plain_columns
    from carbonstore.spark.session import register_data_source
    from carbonstore.spark.statements import split_where

    expr: Expr = AlwaysTrue()
    zone = session_zone(str(spark.conf.get("spark.sql.session.timeZone")))
    if where:
        # Literals are read as Spark reads them: timestamps in the session time zone.
        expr = bind_where(table, where, time_zone=zone or dt.UTC)  # a bad filter fails here
    if jvm_readable(table) or (where and zone is not None):
        plan = prune(table, expr if zone is not None else AlwaysTrue(), segments=segments)
        limit = table.conf.get_int(LOCAL_ROWS_KEY)
        if where and limit > 0 and zone is not None and plan.rows <= limit:
            frame = local_frame(spark, table, plan, expr)
            # The driver filter matches Spark's WHERE exactly for such filters
            # (tests/spark/test_spark_semantics.py); others are filtered again.
            return frame if rows_exact(expr) else frame.where(where)
        if jvm_readable(table):
            # conjuncts on plain columns are applied under the frame's projections (pushed
            # to the Parquet reader), the others on top: each conjunct once
            pushable, rest = split_where(where, plain_columns(table))
            df = native_frame(spark, table, plan, pushable=pushable)
            return df.where(rest) if rest else df
    register_data_source(spark)
    reader = spark.read.format("carbonstore").option("store", table.store.location)
    for k, v in table.store.conf.values.items():
        if k.startswith("carbon.") and k != "carbon.storelocation":
            reader = reader.option(k, v)
    if segments is not None:
        ids = segments if isinstance(segments, str) else ",".join(segments)
        reader = reader.option(SEGMENTS_OPTION, ids)
    if table.pinned_version is not None:  # a table opened as of a version reads only it
        reader = reader.option("versionAsOf", str(table.pinned_version))
    if where and zone is not None:
        reader = reader.option(WHERE_OPTION, where).option(
            TIME_ZONE_OPTION, str(spark.conf.get("spark.sql.session.timeZone")))
    df = reader.load(str(table.name))
    if where:
        df = df.where(where)
    return df


def scan_frame(table: Table, spark: Any, where: str | None = None) -> Any:
    """One table occurrence of a statement: :func:`to_spark` pruned by the conjuncts of
    ``where`` that bind to the table (the others are left to the statement, which keeps its
    whole WHERE)."""
    from carbonstore.spark.statements import conjuncts

    if where:
        import sqlglot

        zone = session_zone(str(spark.conf.get("spark.sql.session.timeZone"))) or dt.UTC
        kept = []
        for term in conjuncts(sqlglot.parse_one(where, read="spark")):
            text = term.sql(dialect="spark")
            try:
                bind_where(table, text, time_zone=zone)
            except (UserError, RecursionError):
                continue
            kept.append(f"({text})")
        where = " AND ".join(kept) or None
    return to_spark(table, spark, where=where)


def local_frame(spark: Any, table: Table, plan: TablePlan, expr: Expr | None = None) -> Any:
    """The rows of ``plan`` (whole pages of its surviving row ranges), read in this process,
    as a one-partition DataFrame with the table's exact schema.

    With the bound filter ``expr``, rows it cannot match are left out here already
    (:func:`rows_may_match` keeps a superset of the matches); the caller applies the filter
    in Spark too unless ``rows_exact(expr)``. One partition: an aggregate over it runs as
    one stage. Spark makes the rows a local relation, which ``collect()`` returns without a
    Spark job; a relation of one row is one partition already (no ``coalesce(1)``, which
    would cost ``collect()`` a job), and ``count()`` of the frame itself is answered from
    the rows held here, without a job (frames derived from it count in Spark).
    """
    slices = [sl for part in plan_partitions(plan, projections=plan_projections(table, plan))
              for sl in part.slices]
    rows = pa.Table.from_batches(list(read_row_groups(table, slices, expr=expr)),
                                 schema=arrow_read_schema(table))
    if rows.num_rows == 0:  # one empty chunk: pyspark fails on a nested column of none
        rows = rows.schema.empty_table()
    df = spark.createDataFrame(rows, schema=struct_type(schema_ddl(table)))
    if rows.num_rows > 1:
        df = df.coalesce(1)
    return _counted(df, rows.num_rows)


def _counted(df: Any, rows: int) -> Any:
    """``df`` whose ``count()`` is ``rows`` (its known row count) without running Spark."""
    from pyspark.sql.classic.dataframe import DataFrame

    if type(df) is not DataFrame:  # not a classic DataFrame: left as it is
        return df
    out = _local_frame_class()(df._jdf, df.sparkSession)
    out._carbon_rows = rows
    return out


@functools.cache
def _local_frame_class() -> type:
    from pyspark.sql.classic.dataframe import DataFrame

    class LocalFrame(DataFrame):
        """A DataFrame over rows held on the driver: ``count()`` needs no Spark job."""

        _carbon_rows: int

        def count(self) -> int:
            return self._carbon_rows

    return LocalFrame


def _user_error(err: Exception) -> UserError:
    text = " ".join(str(getattr(err, "getMessage", lambda: str(err))()).split())
    return UserError(text.split(" JVM stacktrace")[0][:500])


def _quiet_sql_errors() -> None:
    # pyspark logs every analysis error with its traceback; the CLI prints one line instead.
    import logging

    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL + 1)


def run_sql(spark: Any, statement: str) -> Any:
    """``spark.sql`` with analysis and parse errors turned into one-line user errors."""
    from pyspark.errors import AnalysisException, ParseException

    _quiet_sql_errors()
    try:
        return spark.sql(statement)
    except (AnalysisException, ParseException) as err:
        raise _user_error(err) from err


def collect_rows(df: Any, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of ``df`` (at most ``limit``) as dicts; analysis errors become user errors.

    The rows come through Arrow, so a timestamp is an aware datetime in the session time
    zone (UTC unless configured), not a naive one in the time zone of this process.
    """
    from pyspark.errors import AnalysisException

    _quiet_sql_errors()
    try:
        rows = (df.limit(limit) if limit is not None else df).toArrow()
    except AnalysisException as err:
        raise _user_error(err) from err
    return list(rows.to_pylist())

