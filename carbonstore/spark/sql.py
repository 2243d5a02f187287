"""Spark SQL over the store's tables: ``carbonstore sql``, :func:`register` and :func:`sql`.

The public import path of the SQL front end's Spark side. :func:`sql` runs any statement of
the store's language (``carbonstore.sql``: queries, DML, DDL, the CarbonData verbs; the
router ``carbonstore sql`` uses too) with a :class:`SparkEngine` for what needs the JVM
(carbonstore.sql.spark_engine). :func:`run_statement` plans each table occurrence of a
query separately (carbonstore.spark.statements) and runs it; :func:`register` makes tables
reachable by name from a user's own ``spark.sql`` (carbonstore.spark.queries).

The module itself is callable: ``carbonstore.spark.sql(spark, statement, store=...)`` is
:func:`sql`. It sits in the SQL front end's layer (``spark.sql`` in tools/check_imports.py
LAYERS): no module of ``carbonstore.spark`` imports it.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from carbonstore.spark.queries import VIEWS_DATABASE, register, registered, run_statement
from carbonstore.sql.spark_engine import SparkEngine, result_frame, sql
from carbonstore.store.table import StoreRoot

__all__ = ["VIEWS_DATABASE", "SparkEngine", "register", "registered", "result_frame",
           "run_statement", "sql"]


class _CallableModule(types.ModuleType):
    """``carbonstore.spark.sql(spark, statement, ...)`` calls :func:`sql`."""

    def __call__(self, spark: Any, statement: str, *, store: str | StoreRoot | None = None,
                 as_of: int | str | None = None) -> Any:
        return sql(spark, statement, store=store, as_of=as_of)


sys.modules[__name__].__class__ = _CallableModule
