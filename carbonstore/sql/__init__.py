"""The statement language of carbonstore, in one place for the CLI and the library.

``parse`` reads a statement into a typed object once; ``run`` runs it over a store, with
an ``Engine`` for what needs Spark (``carbonstore.sql.spark_engine.SparkEngine``, public
as ``carbonstore.spark.sql.SparkEngine``); ``split_script`` cuts a script into statements.
docs/sql.md lists the statements and where each runs.
"""

from __future__ import annotations

from carbonstore.sql.router import Engine, Result, run
from carbonstore.sql.script import split_script
from carbonstore.sql.statements import (
    Alter,
    Catalog,
    Dml,
    Insert,
    Query,
    Statement,
    Verb,
    parse,
)

__all__ = ["Alter", "Catalog", "Dml", "Engine", "Insert", "Query", "Result", "Statement", "Verb",
           "parse", "run", "split_script"]
