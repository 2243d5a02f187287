"""Spark SQL queries over the store's tables: :func:`run_statement` and :func:`register`.

:func:`run_statement` plans each table occurrence of a query separately
(carbonstore.spark.statements) and runs it; :func:`register` makes tables reachable by
name from a user's own ``spark.sql``. Users import them from ``carbonstore.spark.sql``.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from sqlglot import exp

from carbonstore.spark.session import register_data_source
from carbonstore.spark.statements import parse_statement, plan_statement
from carbonstore.store.table import StoreRoot, Table

__all__ = ["VIEWS_DATABASE", "register", "registered", "run_statement"]

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
    its tree (``carbonstore.spark.statements.parse_statement``; not changed).

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
