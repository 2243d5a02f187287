"""Store tables by name in Spark SQL: :func:`register` (``carbonstore.spark.register``).

``register(spark, store=S)`` puts every table of the store into Spark's session catalog as
``db.table`` (the Spark database is made when missing), so ``spark.sql("SELECT ... FROM
shop.orders")``, ``spark.table``, ``INSERT INTO shop.orders ...`` and
``df.write.insertInto`` reach the store table:

- each catalog table is backed by a data source of its own (a subclass of
  :class:`CarbonDataSource` registered in the session under a name of its own, the
  ``provider``), which names its store table: Spark passes a catalog table's OPTIONS to no
  Python call of its data source, so a plain ``USING carbonstore`` catalog table could not
  say which table it is;
- a query through the session's ``spark.sql`` that names the table as ``db.table`` is
  pruned per occurrence by the index (module ``catalog_query``); any other read (
  ``spark.table``, a name Spark resolves itself) is planned per scan by the data source
  (the table's readable segments when the statement runs, not pruned); ``INSERT INTO``
  writes one new segment in one commit, ``INSERT OVERWRITE`` replaces the readable
  segments in one commit (the data source's writer);
- the catalog table's columns are the store table's when registered; after an ALTER, a read
  fails in one line until ``register`` runs again.

Spark calls no Python when it runs ``CREATE TABLE db.t (...) USING carbonstore``: it would
make a catalog-only table with no store table behind it. ``register`` therefore routes the
session's ``spark.sql`` (that session object only) through :func:`carbonstore_statement`
first: ``CREATE TABLE ... USING carbonstore`` creates the store table (OPTIONS, PARTITIONED
BY, CLUSTERED BY, TBLPROPERTIES; module ``create_sql``) and its catalog table, ``DROP
TABLE`` of a registered table drops the store table too; a query naming registered tables
is pruned (``catalog_query.pruned_query``); every other statement goes to Spark unchanged. A catalog-only table made elsewhere fails in one line at its first read or
write (:data:`carbonstore.spark.datasource.NO_TABLE_ERROR`).
"""

from __future__ import annotations

import atexit
import hashlib
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from carbonstore.errors import TableExistsError, UserError
from carbonstore.spark.catalog_query import pruned_query
from carbonstore.spark.create_sql import (
    CreateStatement,
    parse_create,
    parse_drop,
    strip_comments,
)
from carbonstore.spark.datasource import CarbonDataSource
from carbonstore.spark.types import schema_ddl
from carbonstore.store.ddl import quote_name
from carbonstore.store.table import StoreRoot, Table

__all__ = ["carbonstore_statement", "register", "registered_store", "table_source"]

_STATE_ATTR = "_carbonstore_catalog"


@dataclass
class _Registration:
    """What :func:`register` did in one session: its store, the original ``spark.sql`` and
    the catalog tables it made (``db.table`` lower case -> (store location, table name))."""

    store: StoreRoot
    original_sql: Callable[..., Any]
    tables: dict[str, tuple[str, str]] = field(default_factory=dict)
    # the catalog tables whose store table this session's CREATE TABLE made: a DROP TABLE
    # drops their store table too (as Spark drops a managed table's data)
    created: set[str] = field(default_factory=set)
    # the Store each location was registered with (its conf), for the queries by name
    stores: dict[str, StoreRoot] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def store_for(self, location: str) -> StoreRoot:
        with self.lock:
            found = self.stores.get(location)
        return found if found is not None else StoreRoot(location)


def provider_name(table: Table) -> str:
    """The data source name of ``table``'s catalog table: the table's name and a hash of
    its store (two stores' tables of one name are two sources)."""
    digest = hashlib.sha1(table.store.location.encode()).hexdigest()[:8]
    return f"carbonstore_{table.name.database}_{table.name.table}_{digest}".lower()


def table_source(table: Table) -> type[CarbonDataSource]:
    """A data source class bound to ``table``: its name is :func:`provider_name`, its
    options name the table, its store and the store's ``carbon.*`` settings. Made here,
    not importable by name: pyspark pickles it by value for Spark's Python workers."""
    bound = {k: str(v) for k, v in table.store.conf.values.items()
             if k.startswith("carbon.") and k != "carbon.storelocation"}
    bound.update({"store": table.store.location, "table": str(table.name)})
    return type("CarbonTableSource", (CarbonDataSource,),
                {"provider": provider_name(table), "bound": bound, "__module__": __name__})


def _is_connect(spark: Any) -> bool:
    from pyspark.sql.session import SparkSession  # the classic session

    return not isinstance(spark, SparkSession)


_location: list[str] = []
_location_lock = threading.Lock()


def _catalog_location() -> str:
    """A directory of this process (removed at exit) for the databases and tables ``register``
    makes: Spark makes an empty directory per table, which must not land in the current
    directory's spark-warehouse."""
    with _location_lock:
        if not _location:
            _location.append(tempfile.mkdtemp(prefix="carbonstore-catalog-"))
            atexit.register(shutil.rmtree, _location[0], ignore_errors=True)
        return _location[0]


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# the catalog tables this process made (``db.table`` lower case): Spark's catalog shows no
# provider for a table of a Python data source, so ``register`` replaces such a table only
# when it made one of that name
_made: set[str] = set()


def _spark_provider(run: Callable[..., Any], qualified: str) -> str:
    """The provider of an existing catalog table: 'view' for a view, '' where Spark shows
    none (a Python data source's table)."""
    found = {str(r[0]).strip().lower(): str(r[1]).strip()
             for r in run(f"DESCRIBE TABLE EXTENDED {qualified}").collect()}
    if found.get("type", "").upper() == "VIEW":
        return "view"
    return found.get("provider", "")


def _prepare(spark: Any, state: _Registration, tables: list[Table]) -> None:
    """Refuse, before any change, a name Spark's catalog holds for something else."""
    for table in tables:
        name = f"{table.name.database}.{table.name.table}"
        if spark.catalog.tableExists(name):
            provider = _spark_provider(state.original_sql,
                                       _qualified(table.name.database, table.name.table))
            with _location_lock:
                ours = provider.lower().startswith("carbonstore") or (
                    not provider and name.lower() in _made)
            if not ours:
                raise UserError(
                    f"Spark's catalog has a table {table.name} of "
                    f"{f'provider {provider}' if provider else 'another Python data source'}"
                    ": carbonstore does not replace it; drop or rename it, or register the "
                    "other tables with tables=[...]")


def _qualified(database: str, table: str) -> str:
    return f"{quote_name(database)}.{quote_name(table)}"


def _catalog_table(spark: Any, state: _Registration, table: Table,
                   as_name: tuple[str, str] | None = None) -> Any:
    """Register ``table``'s own data source and (re)make its catalog table (named as the
    table, or ``as_name``: (database, table)); Spark's (empty) DataFrame of the CREATE."""
    run = state.original_sql
    source = table_source(table)
    spark.dataSource.register(source)
    db, name = as_name or (table.name.database, table.name.table)
    connect = _is_connect(spark)
    location = "" if connect else f"{_catalog_location()}/{db}"
    if not spark.catalog.databaseExists(db):
        where = f" LOCATION {_literal(location + '.db')}" if location else ""
        run(f"CREATE DATABASE IF NOT EXISTS {quote_name(db)}{where}")
    qualified = _qualified(db, name)
    run(f"DROP TABLE IF EXISTS {qualified}")
    # the columns given: Spark asks the data source for nothing here
    where = f" LOCATION {_literal(f'{location}/{name}')}" if location else ""
    created = run(f"CREATE TABLE {qualified} ({schema_ddl(table)}) USING {source.provider}"
                  f"{where}")
    with state.lock:
        state.tables[f"{db}.{name}".lower()] = (table.store.location, str(table.name))
        state.stores[table.store.location] = table.store
    with _location_lock:
        _made.add(f"{db}.{name}".lower())
    return created


def _registration(spark: Any, store: StoreRoot) -> _Registration:
    """The session's registration, made (and its ``spark.sql`` routed) on first use."""
    state = getattr(spark, _STATE_ATTR, None)
    if state is None:
        state = _Registration(store=store, original_sql=spark.sql)
        _route(spark, state)
        setattr(spark, _STATE_ATTR, state)
    state.store = store
    return state


def _route(spark: Any, state: _Registration) -> None:
    original = state.original_sql

    def sql(sqlQuery: str, args: Any = None, **kwargs: Any) -> Any:  # noqa: N803 - pyspark's
        answered = carbonstore_statement(spark, sqlQuery)
        if answered is not None:
            return answered
        if args is None and not kwargs:  # a query by name: pruned per occurrence
            with state.lock:
                tables = dict(state.tables)
            answered = pruned_query(spark, sqlQuery, tables, state.store_for,
                                    lambda key, table: _still_ours(state, key, table))
            if answered is not None:
                return answered
        return original(sqlQuery, args, **kwargs)

    sql.__doc__ = original.__doc__
    spark.sql = sql


def _still_ours(state: _Registration, key: str, table: Table) -> bool:
    """Spark's catalog table ``key`` (``db.table``) is still the one made for ``table``: its
    provider is the table's own data source (or, where Spark shows none, this process made
    it). One DESCRIBE: the catalog is shared by every session of the JVM."""
    db, _, name = key.partition(".")
    try:
        provider = _spark_provider(state.original_sql, _qualified(db, name))
    except Exception:  # noqa: BLE001 - gone or unreadable: Spark resolves the name itself
        return False
    if provider:
        return provider.lower() == provider_name(table)
    with _location_lock:
        return key in _made


def register(spark: Any, *, store: str | StoreRoot | None = None,
             tables: Iterable[str] | None = None) -> list[str]:
    """Make the tables of ``store`` addressable by name (``db.table``) in ``spark.sql``,
    ``spark.table`` and ``INSERT INTO``; returns the names. Idempotent: run it again after
    new tables or an ALTER.

    ``spark``: a classic or a Spark Connect session. ``store``: a Store, a location, or
    None for ``carbon.storelocation``; it is also where ``CREATE TABLE ... USING
    carbonstore`` without OPTIONS (store ...) creates tables. ``tables``: only these
    ``db.table`` names (default: every table of the store).

    Raises:
        UserError: a named table is missing, or Spark's catalog holds one of the names for
            a table of another provider (nothing is changed then).
    """
    st = store if isinstance(store, StoreRoot) else StoreRoot(store)
    found = [st.table(n) for n in (list(tables) if tables is not None else
                                   [str(t) for t in st.tables()])]
    state = _registration(spark, st)
    _prepare(spark, state, found)
    for table in found:
        _catalog_table(spark, state, table)
    return [f"{t.name.database}.{t.name.table}" for t in found]


def registered_store(spark: Any) -> StoreRoot | None:
    """The store :func:`register` was last given for ``spark`` (None: never registered)."""
    state = getattr(spark, _STATE_ATTR, None)
    return state.store if state is not None else None


_DDL = re.compile(r"\s*(?:CREATE|DROP)\s", re.I)
_USING = re.compile(r"\bUSING\s+`?carbonstore`?(?![\w.])", re.I)


def carbonstore_statement(spark: Any, statement: Any) -> Any:
    """Run ``statement`` when it is carbonstore's to run in a registered session and return
    its (empty) DataFrame: ``CREATE TABLE ... USING carbonstore``, and ``DROP TABLE`` of a
    table :func:`register` made. None for any other statement (Spark runs it).

    Raises:
        UserError: the CREATE cannot be done (bad clause, type or property; the table
            exists), in one line; nothing is created then.
    """
    state: _Registration | None = getattr(spark, _STATE_ATTR, None)
    if state is None or not isinstance(statement, str):
        return None
    statement = strip_comments(statement)
    if not _DDL.match(statement):
        return None
    if _USING.search(statement):
        create = parse_create(statement, spark.catalog.currentDatabase())
        if create is not None:
            return _create(spark, state, create)
        return None
    dropped = parse_drop(statement, spark.catalog.currentDatabase())
    if dropped is None:
        return None
    name, if_exists = dropped
    with state.lock:
        known = state.tables.get(name.lower()) if name.lower() in state.created else None
    if known is None:  # Spark drops the name (a table register attached keeps its data)
        with state.lock:
            state.tables.pop(name.lower(), None)
        return None
    location, table_name = known
    store = state.store if state.store.location == location else StoreRoot(location)
    store.drop_table(table_name)  # the store's drop commits first: the name goes after
    with state.lock:
        state.tables.pop(name.lower(), None)
        state.created.discard(name.lower())
    with _location_lock:
        _made.discard(name.lower())
    db, _, t = name.partition(".")
    return state.original_sql(
        f"DROP TABLE {'IF EXISTS ' if if_exists else ''}{_qualified(db, t)}")


def _create(spark: Any, state: _Registration, create: CreateStatement) -> Any:
    store = state.store
    if create.store is not None or create.conf:
        store = StoreRoot(create.store or state.store.location,
                      conf=state.store.conf.with_overrides(create.conf) if create.conf
                      else state.store.conf)
    run = state.original_sql
    name = f"{create.database}.{create.table}"
    qualified = _qualified(create.database, create.table)
    if spark.catalog.tableExists(name):
        if create.if_not_exists:
            return run(f"CREATE TABLE IF NOT EXISTS {qualified} (x int)")  # Spark's no-op
        provider = _spark_provider(run, qualified)
        raise UserError(f"table {name} already exists in Spark's catalog"
                        f"{f' (provider {provider})' if provider else ''}")
    columns = create.columns
    if columns is None and create.query is not None:  # CREATE ... AS SELECT: its columns
        columns = ", ".join(
            f"{quote_name(f.name)} {f.dataType.simpleString()}{'' if f.nullable else ' NOT NULL'}"
            for f in run(create.query).schema.fields)
    store_name = create.store_table or name
    made = False
    if columns is None:  # CREATE TABLE db.t USING carbonstore: the store's own table
        table = store.table(store_name)
    else:
        try:
            table = store.create_table(store_name, columns, properties=create.properties)
            made = True
        except TableExistsError:
            if not create.if_not_exists:
                raise
            table = store.table(store_name)
    created = _catalog_table(spark, state, table, (create.database, create.table))
    if made:
        with state.lock:
            state.created.add(name.lower())
    if create.query is not None:
        run(f"INSERT INTO {qualified} {create.query}")
    return created
