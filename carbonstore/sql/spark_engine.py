"""The SQL front end's Spark side: :func:`sql` (``carbonstore.spark.sql(spark, statement)``)
and :class:`SparkEngine`, the router's engine over a Spark session.

:func:`sql` runs any statement of the store's language (``carbonstore.sql``: queries, DML,
DDL, the CarbonData verbs; the router ``carbonstore sql`` uses too) with a
:class:`SparkEngine` for what needs the JVM; a query goes to
:func:`carbonstore.spark.queries.run_statement`. Users import these names from
``carbonstore.spark.sql``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from carbonstore.errors import UserError
from carbonstore.segments.timezones import SESSION_TIME_ZONE_KEY, conf_time_zone
from carbonstore.spark.queries import registered, run_statement
from carbonstore.spark.statements import plan_statement
from carbonstore.sql.router import Result, run
from carbonstore.sql.statements import Insert, Query, parse
from carbonstore.store.table import StoreRoot, Table

__all__ = ["SparkEngine", "result_frame", "sql"]


def sql(spark: Any, statement: str, *, store: str | StoreRoot | None = None,
        as_of: int | str | None = None) -> Any:
    """Run one statement of the store's language (docs/sql.md; the statements ``carbonstore
    sql`` runs, with the same results) and return its DataFrame.

    A query is ``spark.sql(statement)`` where the views of :func:`register` (and, with
    ``store``, its ``db.table`` names) are planned per occurrence like
    :func:`run_statement`: each pruned by its own filters, read by Spark's Parquet reader,
    count/min/max answered from the index when exact, every occurrence of a table at one
    version. Any other statement (DELETE / UPDATE / MERGE, INSERT INTO, CREATE / DROP /
    ALTER TABLE, DESCRIBE, SHOW ..., the CarbonData verbs) runs through the store and
    returns its result table as a DataFrame.

    Raises:
        UserError: the statement does not parse, is not one of the language, or Spark's
            analysis rejects it.
    """
    views = registered(spark)
    if store is None:
        first = next(iter(views.values()), None)
        st = first.store if first is not None else StoreRoot(None)
    else:
        st = store if isinstance(store, StoreRoot) else StoreRoot(store)
    result = run(st, parse(statement), engine=SparkEngine(spark, aliases=views), as_of=as_of)
    return result.frame if result.frame is not None else result_frame(spark, result)


def result_frame(spark: Any, result: Result) -> Any:
    """A statement's result table as a DataFrame (a column of nothing but nulls: string)."""
    table = pa.Table.from_pylist(result.rows) if result.rows else None
    fields = []
    for name in result.columns:
        kind = table.schema.field(name).type if table is not None else pa.null()
        fields.append(pa.field(name, pa.string() if pa.types.is_null(kind) else kind))
    schema = pa.schema(fields)
    data = (table.select(result.columns).cast(schema) if table is not None
            else schema.empty_table())
    return spark.createDataFrame(data)


class SparkEngine:
    """What ``carbonstore.sql.run`` asks of Spark (``carbonstore.sql.Engine``), over a
    session given (the library's) or started at the first statement that needs one (the
    CLI's ``start``: every statement of a script then runs in that one JVM)."""

    def __init__(self, spark: Any = None, *, start: Callable[[StoreRoot], Any] | None = None,
                 aliases: Mapping[str, Table] | None = None) -> None:
        self._spark = self._given = spark
        self._start = start
        self.aliases = aliases

    @property
    def closed(self) -> bool:
        """The session is the engine's own (the CLI's): it knows no name of the user's (a
        view, a SQL variable), so a column the store does not know is an error."""
        return self._start is not None and self._given is None

    @property
    def live(self) -> bool:
        """A session runs (a statement the index answers then asks Spark for its types)."""
        return self._spark is not None

    def session(self, store: StoreRoot) -> Any:
        if self._spark is None:
            if self._start is None:
                raise UserError("this statement needs Spark")
            self._spark = self._start(store)()
        return self._spark

    def query(self, store: StoreRoot, statement: Query, *, as_of: int | str | None) -> Any:
        if self._spark is None and self._start is not None:
            # the JVM boots while this process loads the occurrences' indexes
            from carbonstore.spark.api import prepare_scan

            # its tables and versions are checked first: a statement naming no table of the
            # store starts no JVM
            planned = plan_statement(statement.tree.copy(), store, as_of=as_of,
                                     aliases=self.aliases)
            wait = self._start(store)
            for occurrence in planned.occurrences:
                prepare_scan(occurrence.table, occurrence.where)
            self._spark = wait()
        return run_statement(self.session(store), store, statement.tree, as_of=as_of,
                             aliases=self.aliases)

    def read_source(self, store: StoreRoot, sql: str) -> Any:
        # a DataFrame: the MERGE joins it in Spark, no row crosses into the driver
        return run_statement(self.session(store), store, sql, aliases=self.aliases)

    def merger(self) -> Any:
        from carbonstore.spark.compact_job import spark_merger

        def merge(table: Table, sources: Any, output_id: str) -> Any:
            return spark_merger(self.session(table.store))(table, sources, output_id)

        return merge

    def cluster_merger(self) -> Any:
        from carbonstore.spark.compact_job import spark_cluster_merger

        def cluster(table: Table, sources: Any, output_id: str, spec: Any) -> Any:
            return spark_cluster_merger(self.session(table.store))(table, sources, output_id,
                                                                   spec)

        return cluster

    def insert(self, table: Table, statement: Insert) -> Any:
        from carbonstore.spark.load_job import load

        spark = self.session(table.store)
        df = run_statement(spark, table.store, statement.source, aliases=self.aliases)
        names = list(statement.columns or table.schema.column_names)
        if len(df.columns) != len(names):
            raise UserError(f"INSERT INTO {table.name}: the query gives {len(df.columns)} "
                            f"column(s) for {len(names)} ({', '.join(names)})")
        return load(table, df.toDF(*names), spark=spark,
                    mode="overwrite" if statement.overwrite else "append")

    def time_zone(self, store: StoreRoot) -> str:
        if self._spark is None and "PYSPARK_GATEWAY_PORT" in os.environ:
            self.session(store)  # spark-submit started the JVM: its settings
        if self._spark is not None:
            return str(self._spark.conf.get(SESSION_TIME_ZONE_KEY))
        return conf_time_zone(store.conf)

