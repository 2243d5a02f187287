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
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from carbonstore.errors import ExpressionError, UserError
from carbonstore.expressions.bind import session_zone
from carbonstore.expressions.expr import AlwaysTrue, Expr
from carbonstore.pruning.plan import TablePlan, prune
from carbonstore.pruning.rows import rows_exact
from carbonstore.spark.native import jvm_readable, native_frame, plain_columns
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
from carbonstore.spark.session import register_data_source
from carbonstore.spark.statements import IndexWhere, index_where, split_where
from carbonstore.spark.types import empty_frame, schema_ddl, struct_type
from carbonstore.store.table import Table

BINARY_AS_BYTES_KEY = "spark.sql.execution.pyspark.binaryAsBytes"  # Spark's; default true

__all__ = ["arrow_rows", "collect_rows", "local_frame", "run_sql", "scan_frame", "to_spark"]


def to_spark(
    table: Table, spark: Any, where: str | None = None, segments: str | Sequence[str] | None = None,
    *, local: bool = True,
) -> Any:
    """A DataFrame over ``table`` (its readable segments, or ``segments``), filtered by ``where``.

    ``where`` is any Spark SQL condition over the table's columns. The scan is planned now,
    on the driver, from the indexes, pruned by the top-level AND terms of ``where`` that
    the index binds (:func:`index_where`; the others, such as ``id % 2 = 0``, prune
    nothing), and Spark evaluates the whole ``where`` over what is kept, so the rows are
    those of ``spark.read.parquet(...).where(where)`` over the same rows. The tablestatus
    is read now, pinned: later loads are not seen by this DataFrame. When the plan keeps
    at most ``carbon.read.local.rows`` rows (0: never), those rows are read here and Spark
    gets a local one-partition DataFrame (filtered again by Spark unless every term bound
    and the driver's row filter is exact, ``rows_exact``): a lookup costs no Python task,
    only a JVM one. Otherwise Spark's own Parquet reader reads exactly the kept files
    (:func:`carbonstore.spark.native.native_frame`; no row crosses into Python), or, for a
    store the JVM cannot open, the ``carbonstore`` data source with the ``where`` option.
    ``local=False``: never the driver-local read.

    Raises:
        ExpressionError: ``where`` is not one SQL condition, names an unknown column, or
            Spark's analysis rejects it (Spark's message, one line).
    """
    zone = session_zone(str(spark.conf.get("spark.sql.session.timeZone")))
    # Literals are read as Spark reads them: timestamps in the session time zone.
    pushed = index_where(table, where, time_zone=zone or dt.UTC)  # a bad filter fails here
    return _pruned_frame(table, spark, where, pushed, zone, segments, local)


def _pruned_frame(
    table: Table, spark: Any, where: str | None, pushed: IndexWhere, zone: dt.tzinfo | None,
    segments: str | Sequence[str] | None, local: bool,
) -> Any:
    expr = pushed.expr if zone is not None else AlwaysTrue()
    if jvm_readable(table) or (pushed.where and zone is not None):
        plan = prune(table, expr, segments=segments)
        limit = table.conf.get_int(LOCAL_ROWS_KEY)
        if local and pushed.where and limit > 0 and zone is not None and plan.rows <= limit:
            frame = local_frame(spark, table, plan, expr)
            # The driver filter matches Spark's WHERE exactly for such filters
            # (tests/spark/test_spark_semantics.py); others are filtered again.
            if pushed.exact and rows_exact(expr):
                return frame
            return _where(frame, where)
        if jvm_readable(table):
            # conjuncts on plain columns are applied under the frame's projections (pushed
            # to the Parquet reader), the others on top: each conjunct once
            if not pushed.exact:  # a filter Spark rejects: one line, whatever the plan

                _where(empty_frame(spark, table), where)
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
    if pushed.where and zone is not None:
        reader = reader.option(WHERE_OPTION, pushed.where).option(
            TIME_ZONE_OPTION, str(spark.conf.get("spark.sql.session.timeZone")))
    return _where(reader.load(str(table.name)), where)


def _where(df: Any, where: str | None) -> Any:
    """``df.where(where)``: a filter Spark's analysis or parser rejects is an
    :class:`ExpressionError` with Spark's message, one line."""
    if not where:
        return df
    from pyspark.errors import AnalysisException, ParseException

    _quiet_sql_errors()
    try:
        return df.where(where)
    except (AnalysisException, ParseException) as err:
        raise ExpressionError(f"filter {where!r}: {_user_error(err)}") from err


def scan_frame(table: Table, spark: Any, where: str | None = None, *, local: bool = True) -> Any:
    """One table occurrence of a statement: :func:`to_spark` pruned by the conjuncts of
    ``where`` that bind to the table (the others are left to the statement, which keeps its
    whole WHERE). ``local``: as :func:`to_spark`'s."""
    if where:
        zone = session_zone(str(spark.conf.get("spark.sql.session.timeZone"))) or dt.UTC
        where = index_where(table, where, time_zone=zone, strict=False).where
    return to_spark(table, spark, where=where, local=local)


def prepare_scan(table: Table, where: str | None = None, time_zone: str = "UTC") -> None:
    """Load what planning :func:`scan_frame` (or :func:`to_spark`) of this occurrence needs,
    without Spark: the table's indexes through the driver cache (carbonstore.pruning), so
    the scan's own pruning later finds them there. A one-shot command calls it while the
    JVM boots (:func:`carbonstore.spark.session.start_spark`). Best effort: whatever fails
    here (a filter that does not bind, a damaged index) is left for the scan to report,
    once the session it started is up, as without this call."""
    try:
        zone = session_zone(time_zone) or dt.UTC
        prune(table, index_where(table, where, time_zone=zone, strict=False).expr)
    except Exception:  # noqa: BLE001 - the scan itself reports it (see above)
        return


def local_frame(spark: Any, table: Table, plan: TablePlan, expr: Expr | None = None) -> Any:
    """The rows of ``plan`` (whole pages of its surviving row ranges), read in this process,
    as a one-partition DataFrame with the table's exact schema.

    With the bound filter ``expr``, rows it cannot match are left out here already
    (:func:`rows_may_match` keeps a superset of the matches); the caller applies the filter
    in Spark too unless ``rows_exact(expr)``. One partition: an aggregate over it runs as
    one stage.

    In a classic session the frame answers ``count()``, ``collect()``, ``take``, ``head``,
    ``first``, ``tail``, ``isEmpty``, ``toLocalIterator``, ``toArrow`` and ``toPandas`` from
    the rows held here, with the values and types Spark's own would return, without the
    JVM; the JVM relation
    (``spark.createDataFrame`` of the rows) is built only when Spark needs it: for a frame
    derived from this one, ``explain``, ``show``, ``rdd``, ``cache``. Frames derived from
    it run in Spark as usual.
    """
    slices = [sl for part in plan_partitions(plan, projections=plan_projections(table, plan))
              for sl in part.slices]
    rows = pa.Table.from_batches(list(read_row_groups(table, slices, expr=expr)),
                                 schema=arrow_read_schema(table))
    if rows.num_rows == 0:  # one empty chunk: pyspark fails on a nested column of none
        rows = rows.schema.empty_table()
    from pyspark.sql.session import SparkSession  # the classic session (Connect's is another)

    if isinstance(spark, SparkSession):
        return _local_frame_class()(spark, rows, struct_type(schema_ddl(table)))
    # Spark Connect: a plain frame of the rows; the schema parsed by the server (a client
    # process has no JVM of its own to parse DDL)
    schema = spark.createDataFrame([], schema=schema_ddl(table)).schema
    return _jvm_frame(spark, rows, schema)


def _jvm_frame(spark: Any, rows: pa.Table, schema: Any) -> Any:
    """The rows as a Spark frame: a local relation, which ``collect()`` returns without a
    Spark job; a relation of one row is one partition already (a ``coalesce(1)``, needed
    above one row so aggregates run as one stage, would cost ``collect()`` a job)."""
    df = spark.createDataFrame(rows, schema=schema)
    return df.coalesce(1) if rows.num_rows > 1 else df


def _internal_values(
    column: pa.Array | pa.ChunkedArray, dtype: Any, *, binary_as_bytes: bool = True
) -> list[Any]:
    """The values of an Arrow column as pyspark's internal Python values of Spark type
    ``dtype`` (what the JVM sends a classic ``collect()``: timestamps and dates as integers,
    binary as bytes, or bytearray when ``spark.sql.execution.pyspark.binaryAsBytes`` is
    false, structs as tuples, maps as dicts), for ``StructType.fromInternal``."""
    from pyspark.sql import types as T

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return arr.cast(pa.timestamp("us", tz=getattr(arr.type, "tz", None))).cast(pa.int64()).to_pylist()
    if isinstance(dtype, T.DateType):
        return arr.cast(pa.int32()).to_pylist()
    if isinstance(dtype, T.BinaryType):
        values = arr.to_pylist()
        return values if binary_as_bytes else [None if v is None else bytearray(v) for v in values]
    if isinstance(dtype, T.StructType):
        fields = [_internal_values(arr.field(i), f.dataType, binary_as_bytes=binary_as_bytes) for i, f in enumerate(dtype.fields)]
        valid = arr.is_valid().to_pylist()
        rows = zip(*fields, strict=True) if fields else [()] * len(arr)
        return [tuple(vals) if ok else None for ok, vals in zip(valid, rows, strict=True)]
    if isinstance(dtype, T.ArrayType):
        values = _internal_values(arr.values, dtype.elementType, binary_as_bytes=binary_as_bytes)  # the whole child
        return _per_row(arr, values)
    if isinstance(dtype, T.MapType):
        entries = arr.values  # the whole child (offsets below are absolute in it)
        keys = _internal_values(entries.field(0), dtype.keyType, binary_as_bytes=binary_as_bytes)
        items = _internal_values(entries.field(1), dtype.valueType,
                                 binary_as_bytes=binary_as_bytes)
        return [None if pairs is None else dict(pairs)
                for pairs in _per_row(arr, list(zip(keys, items, strict=True)))]
    return arr.to_pylist()


def _per_row(arr: Any, values: list[Any]) -> list[Any]:
    """The whole child ``values`` of a list or map array cut into its rows (None: null);
    the offsets of a sliced array index the whole child."""
    offsets = arr.offsets.to_pylist()
    valid = arr.is_valid().to_pylist()
    return [values[offsets[i]:offsets[i + 1]] if valid[i] else None for i in range(len(arr))]


def arrow_rows(rows: pa.Table, schema: Any, *, binary_as_bytes: bool = True) -> list[Any]:
    """The rows of ``rows`` as the ``Row`` objects a classic ``collect()`` returns for a
    frame of Spark schema ``schema``: pyspark's own ``fromInternal`` over the values the
    JVM would send (timestamps naive in this process's local time zone, as pyspark gives
    them; ``binary_as_bytes``: the session's ``spark.sql.execution.pyspark.binaryAsBytes``)."""
    columns = [_internal_values(rows.column(i), f.dataType, binary_as_bytes=binary_as_bytes)
               for i, f in enumerate(schema.fields)]
    if not columns:
        return [schema.fromInternal(()) for _ in range(rows.num_rows)]
    return [schema.fromInternal(values) for values in zip(*columns, strict=True)]


@functools.cache
def _local_frame_class() -> type:
    from pyspark.sql.classic.dataframe import DataFrame
    from pyspark.sql.pandas.types import to_arrow_schema

    class LocalFrame(DataFrame):
        """A DataFrame over rows held on the driver. Its own actions answer from them;
        its JVM relation is built on first use (derived frames, ``show``, ``rdd``, ...)."""

        def __init__(self, session: Any, rows: pa.Table, schema: Any) -> None:
            # DataFrame.__init__ would need the JVM frame; the fields it sets, lazily
            self._session = session
            self._sc = session._sc
            self.is_cached = False
            self._support_repr_html = False
            self._carbon_rows = rows
            self._carbon_schema = schema
            self._carbon_jdf: Any = None

        @property
        def _jdf(self) -> Any:  # type: ignore[override]
            if self._carbon_jdf is None:
                self._carbon_jdf = _jvm_frame(self._session, self._carbon_rows,
                                              self._carbon_schema)._jdf
            return self._carbon_jdf

        @property
        def schema(self) -> Any:  # type: ignore[override]
            return self._carbon_schema

        def count(self) -> int:
            return self._carbon_rows.num_rows

        def isEmpty(self) -> bool:  # noqa: N802 - pyspark's name
            return self._carbon_rows.num_rows == 0

        def _rows(self, rows: pa.Table) -> list[Any]:
            as_bytes = self._session.conf.get(BINARY_AS_BYTES_KEY, "true")
            return arrow_rows(rows, self._carbon_schema,
                              binary_as_bytes=str(as_bytes).lower() == "true")

        def collect(self) -> list[Any]:
            return self._rows(self._carbon_rows)

        def toLocalIterator(  # noqa: N802 - pyspark's name
            self, prefetchPartitions: bool = False  # noqa: N803 - pyspark's name
        ) -> Iterator[Any]:
            return iter(self.collect())

        def take(self, num: int) -> list[Any]:
            if not isinstance(num, int) or num < 0:  # Spark's own error
                return super().take(num)
            return self._rows(self._carbon_rows.slice(0, num))

        def tail(self, num: int) -> list[Any]:
            if not isinstance(num, int) or num < 0:  # Spark's own error
                return super().tail(num)
            n = self._carbon_rows.num_rows
            return self._rows(self._carbon_rows.slice(max(n - num, 0)))

        def _collect_as_arrow(
            self, split_batches: bool = False, empty_list_if_zero_records: bool = True,
            prefers_large_var_types: bool = False,
        ) -> list[pa.RecordBatch]:
            # the batches Spark's collectAsArrowToPython sends: the frame's Arrow schema,
            # timestamps tagged with the session time zone (toArrow and toPandas, both
            # pyspark's own code, take them from here)
            zone = str(self._session.conf.get("spark.sql.session.timeZone"))
            schema = to_arrow_schema(self._carbon_schema, timezone=zone,
                                     prefers_large_types=prefers_large_var_types)
            table = self._carbon_rows.cast(schema)
            if table.num_rows == 0:
                return [] if empty_list_if_zero_records else [
                    pa.RecordBatch.from_pylist([], schema=schema)]
            return table.combine_chunks().to_batches()

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

