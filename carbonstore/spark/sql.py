"""Spark SQL over the store's tables: ``carbonstore sql`` and :func:`register`.

:func:`run_statement` plans each table occurrence of a statement separately
(carbonstore.spark.statements) and runs it; :func:`register` makes tables reachable by
name from a user's own ``spark.sql``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from carbonstore.store.table import Store

__all__ = ["register", "run_statement"]


def run_statement(
    spark: Any, store: Store, statement: str, *, as_of: int | str | None = None
) -> Any:
    """The DataFrame of one SQL statement whose ``db.table`` names are tables of ``store``.

    Each occurrence is pruned by its own conjuncts; every occurrence of a table reads one
    version (``as_of`` when given, else the latest when planned).

    Raises:
        UserError: the statement does not parse, names a missing table, or Spark's analysis
            rejects it.
    """
    from carbonstore.spark.metadata_answers import answer_frame
    from carbonstore.spark.reader import run_sql, scan_frame
    from carbonstore.spark.statements import plan_statement

    answered = answer_frame(spark, store, statement, as_of=as_of)
    if answered is not None:  # count / min / max the index decides exactly: nothing read
        return answered
    planned = plan_statement(statement, store, as_of=as_of)
    for occ in planned.occurrences:
        scan_frame(occ.table, spark, occ.where).createOrReplaceTempView(occ.view)
    try:
        return run_sql(spark, planned.sql)
    finally:
        for occ in planned.occurrences:
            # the DataFrame keeps its plan; the session's name space stays clean
            spark.catalog.dropTempView(occ.view)


def register(spark: Any, *, store: str | Store | None = None,
             tables: Iterable[str] | None = None) -> list[str]:
    """Expose tables of ``store`` to ``spark.sql`` as temporary views ``db_table`` (and
    ``table`` for tables of database ``default``). Returns the view names.

    Each view is a ``carbonstore`` data source relation: it reads the table's readable
    segments when a query runs, so every query sees the newest version. The query's
    filters do not prune it (docs/semantics.md, "Spark's reader reuse"): for statements
    planned per occurrence and read by Spark's Parquet reader, use :func:`run_statement`.

    Args:
        store: a Store, a store location, or None for ``carbon.storelocation``.
        tables: ``db.table`` names (default: every table of the store).
    """
    from carbonstore.spark.session import register_data_source

    st = store if isinstance(store, Store) else Store(store)
    names = list(tables) if tables is not None else [str(t) for t in st.tables()]
    register_data_source(spark)
    views = []
    for name in names:
        table = st.table(name)
        df = spark.read.format("carbonstore").option("store", st.location).load(str(table.name))
        view = f"{table.name.database}_{table.name.table}"
        df.createOrReplaceTempView(view)
        views.append(view)
    return views
