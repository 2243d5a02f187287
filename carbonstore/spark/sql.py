"""Spark SQL over the store's tables: ``carbonstore sql``, :func:`register` and :func:`sql`.

:func:`sql` runs any statement of the store's language (``carbonstore.sql``: queries, DML,
DDL, the CarbonData verbs; the router ``carbonstore sql`` uses too) with a
:class:`SparkEngine` for what needs the JVM. :func:`run_statement` plans each table
occurrence of a query separately (carbonstore.sql.plan) and runs it; :func:`register` makes
tables reachable by name from a user's own ``spark.sql``.

The module itself is callable: ``carbonstore.spark.sql(spark, statement, store=...)`` is
:func:`sql`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa
from sqlglot import exp

from carbonstore.errors import UserError
from carbonstore.sql import Insert, Query, Result, parse, run
from carbonstore.store.table import StoreRoot, Table

__all__ = ["SparkEngine", "register", "registered", "result_frame", "run_statement", "sql"]

# per session (id of the SparkSession): view name (lower case) -> the table it shows
_views: dict[int, dict[str, Table]] = {}
_views_lock = threading.Lock()

# (session, table, version, conjuncts, ...) -> (session, qualified view name, view name,
# DataFrame) of the occurrence; see _scan_view
_scans: OrderedDict[tuple[Any, ...], tuple[Any, str, str, Any]] = OrderedDict()
_view_number = 0
_scans_lock = threading.Lock()
_SCANS_KEPT = 64


def run_statement(
    spark: Any, store: str | StoreRoot | None, statement: str | exp.Expr, *,
    as_of: int | str | None = None, aliases: Mapping[str, Table] | None = None,
    lookup: bool = True,
) -> Any:
    """The DataFrame of one SQL query whose ``db.table`` names are tables of ``store`` (a
    Store, its location, or None for ``carbon.storelocation``); ``statement``: SQL text or
    its tree (``carbonstore.sql.plan.parse_statement``; not changed).

    Each occurrence is pruned by its own conjuncts; every occurrence of a table reads one
    version (``as_of`` when given, else the latest when planned). ``aliases``: more names
    (lower case, ``name`` or ``db.name``) that stand for tables, planned the same way;
    ``lookup=False``: only they name tables (other names are Spark's).

    Raises:
        UserError: the statement does not parse, names a missing table, or Spark's analysis
            rejects it.
    """
    from carbonstore.spark.api import run_sql
    from carbonstore.spark.metadata_answers import answer_frame
    from carbonstore.sql.plan import parse_statement, plan_statement

    if not isinstance(store, StoreRoot):
        store = StoreRoot(store)
    # parsed once: the index answer only reads the tree
    tree = statement.copy() if isinstance(statement, exp.Expr) else parse_statement(statement)
    answered = answer_frame(spark, store, tree, as_of=as_of, aliases=aliases, lookup=lookup)
    if answered is not None:  # count / min / max the index decides exactly: nothing read
        return answered
    # The driver-local read of a tiny result (to_spark) pays when the statement reads that
    # one table: Spark collects the local rows without a job. Next to other tables it saves
    # no job (TPC-H Q5, Q20: the same jobs, stages and tasks as a file scan) and costs a
    # statement's first run the JVM's Arrow ingestion path: read natively there.
    local = sum(1 for _ in tree.find_all(exp.Table)) <= 1
    planned = plan_statement(tree, store, as_of=as_of, aliases=aliases, lookup=lookup,
                             view=lambda table, where: _scan_view(spark, table, where, local))
    return run_sql(spark, planned.sql)


def _scan_view(spark: Any, table: Table, where: str | None, local: bool = True) -> str:
    """The global temporary view (``global_temp.carbonstore_scan_N``) of one occurrence's
    DataFrame (``scan_frame``), reused while nothing it depends on changes, as a temp view
    over ``spark.read.parquet`` reuses its file listing: no planning, file listing or view
    creation per statement. The views live in Spark's global temporary database, so the
    session's own name space stays clean; the least recently used are dropped beyond 64.

    Key: the session, the table (store, name, id), the version the statement pinned (a
    commit makes a new version, which misses), the schema and conf, the occurrence's
    conjuncts, the session time zone and whether the driver-local read is allowed.
    """
    from carbonstore.spark.api import scan_frame

    key = (id(spark), table.store.location, str(table.name), table.table_id,
           table.pinned_version, repr(table.schema),
           tuple(sorted(table.store.conf.values.items())), where,
           str(spark.conf.get("spark.sql.session.timeZone")), local)
    with _scans_lock:
        hit = _scans.get(key)
        if hit is not None:
            _scans.move_to_end(key)
    if hit is not None and hit[0] is spark:
        return str(hit[1])
    df = scan_frame(table, spark, where, local=local)
    global _view_number
    with _scans_lock:
        _view_number += 1
        name = f"carbonstore_scan_{_view_number}"
    df.createOrReplaceGlobalTempView(name)
    qualified = f"{spark.conf.get('spark.sql.globalTempDatabase', 'global_temp')}.{name}"
    evicted = []
    with _scans_lock:
        if hit is not None:
            evicted.append(hit)
        _scans[key] = (spark, qualified, name, df)  # df: keeps Python-side state alive
        while len(_scans) > _SCANS_KEPT:
            evicted.append(_scans.popitem(last=False)[1])
    for session, _, old, _ in evicted:
        try:
            session.catalog.dropGlobalTempView(old)
        except Exception:  # noqa: BLE001 - a stopped session took its views with it
            pass
    return qualified


# the Spark database of register's catalog tables (one per view)
VIEWS_DATABASE = "carbonstore_views"


_location: list[str] = []


def _views_location() -> str:
    """The directory of the views' catalog database (one per process, removed at exit)."""
    with _views_lock:
        if not _location:
            _location.append(tempfile.mkdtemp(prefix=f"{VIEWS_DATABASE}-"))
            atexit.register(shutil.rmtree, _location[0], ignore_errors=True)
        return _location[0]


def _literal(value: str) -> str:
    """``value`` as a Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def register(spark: Any, *, store: str | StoreRoot | None = None,
             tables: Iterable[str] | None = None) -> list[str]:
    """Expose tables of ``store`` to ``spark.sql`` as temporary views ``db_table``.
    Returns the view names.

    Each view is a SQL view (``SELECT * FROM carbonstore_views.db_table WITH (...)``) over
    a catalog table of the ``carbonstore`` data source in Spark's session catalog (database
    ``carbonstore_views``, no files of its own). Spark analyzes a SQL view's text again
    each time a statement names it, so every occurrence gets a new data source relation
    that plans the table's readable segments then: each ``spark.sql`` call sees the newest
    version (a load, DELETE, compaction, clean files, a table dropped and re-created with
    the same columns; after the table's columns change, statements fail with a one-line
    error until ``register`` runs again). A DataFrame keeps the version of its first run,
    as any DataFrame keeps its plan; each occurrence of a view in one statement plans on
    its own, so a commit landing while Spark plans the statement can be seen by one
    occurrence and not by another (:func:`sql` reads every occurrence of a table at one
    version).

    ``spark.sql`` cannot prune these views by the query's filters (the data source takes no
    pushed filters: docs/semantics.md, "Spark's reader reuse"); :func:`sql` runs a
    statement over these names with every occurrence planned by its own filters and read
    by Spark's Parquet reader.

    Args:
        store: a Store, a store location, or None for ``carbon.storelocation``.
        tables: ``db.table`` names (default: every table of the store).
    """
    from carbonstore.spark.session import register_data_source

    st = store if isinstance(store, StoreRoot) else StoreRoot(store)
    names = list(tables) if tables is not None else [str(t) for t in st.tables()]
    register_data_source(spark)
    tables_found = [st.table(name) for name in names]  # a missing table fails before any view
    # its tables hold no files (Spark makes an empty directory for each): its location is
    # a temporary directory of this process, not the warehouse
    location = _views_location()
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {VIEWS_DATABASE} LOCATION {_literal(location)}")
    views = []
    for table in tables_found:
        view = f"{table.name.database}_{table.name.table}"
        options = f"'store' = {_literal(st.location)}, 'table' = {_literal(str(table.name))}"
        # the relation's read options are the statement's (WITH ...); the table's OPTIONS
        # serve Spark's schema lookup
        spark.sql(f"DROP TABLE IF EXISTS {VIEWS_DATABASE}.`{view}`")
        spark.sql(f"CREATE TABLE {VIEWS_DATABASE}.`{view}` USING carbonstore OPTIONS ({options})")
        spark.sql(f"CREATE OR REPLACE TEMP VIEW `{view}` AS "
                  f"SELECT * FROM {VIEWS_DATABASE}.`{view}` WITH ({options})")
        views.append(view)
        with _views_lock:
            known = _views.setdefault(id(spark), {})
            known[view.lower()] = table
            if table.name.database == "default":
                known[table.name.table.lower()] = table
    return views


def registered(spark: Any) -> dict[str, Table]:
    """The views :func:`register` created in ``spark`` (lower-case name -> table) that still
    exist as temporary views."""
    with _views_lock:
        known = dict(_views.get(id(spark), {}))
    if not known:
        return {}
    live = {t.name.lower() for t in spark.catalog.listTables() if t.isTemporary}
    return {k: v for k, v in known.items() if k in live}


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
        self._spark = spark
        self._start = start
        self.aliases = aliases

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
            from carbonstore.sql.plan import plan_statement

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
        from carbonstore.segments.timezones import SESSION_TIME_ZONE_KEY, conf_time_zone

        if self._spark is None and "PYSPARK_GATEWAY_PORT" in os.environ:
            self.session(store)  # spark-submit started the JVM: its settings
        if self._spark is not None:
            return str(self._spark.conf.get(SESSION_TIME_ZONE_KEY))
        return conf_time_zone(store.conf)


class _CallableModule(types.ModuleType):
    """``carbonstore.spark.sql(spark, statement, ...)`` calls :func:`sql`."""

    def __call__(self, spark: Any, statement: str, *, store: str | StoreRoot | None = None,
                 as_of: int | str | None = None) -> Any:
        return sql(spark, statement, store=store, as_of=as_of)


sys.modules[__name__].__class__ = _CallableModule
