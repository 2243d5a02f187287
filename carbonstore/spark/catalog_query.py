"""Queries by name in a registered session, pruned per occurrence.

``spark.sql("SELECT ... FROM shop.orders WHERE ...")`` in a session
:func:`carbonstore.spark.register` routed: a query (SELECT, WITH, UNION, VALUES ...) that
names registered catalog tables as ``db.table`` is run as :func:`carbonstore.spark.
queries.run_statement` runs it: each occurrence of a table planned by the index for its own
conjuncts (segments, files, row groups kept) and read by Spark's Parquet reader, count /
min / max answered from the index when exact, every occurrence of a table at one version
(the newest when ``spark.sql`` is called, or the statement's ``VERSION AS OF``). The
statement keeps its WHERE: pruning only chooses what is read, Spark decides which rows
match.

Why not ``DataSourceReader.pushFilters``: PySpark 4.3 keeps the read that a scan's pushed
filters planned on the relation, not on the scan, and reads every scan of that relation
with the last one (docs/semantics.md, "Spark's reader reuse"): a pruning ``pushFilters``
would answer a self-join, a UNION of two filters of one table, or a DataFrame used again
without its filter, with rows missing. Here each occurrence gets a DataFrame of its own.

What is left to Spark unchanged (read whole through the table's data source, correct,
not pruned): a statement with ``args`` or other keyword arguments, a statement that is not
a query (INSERT ... SELECT, CACHE, EXPLAIN ...), an unqualified or three-part name, a name
not registered, and a query this module cannot run (sqlglot cannot read it, or Spark
rejects its rewritten text: Spark then runs the original text and reports its own error).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from sqlglot import exp

from carbonstore.errors import CarbonStoreError, UserError
from carbonstore.spark.create_sql import strip_comments
from carbonstore.spark.queries import run_statement
from carbonstore.spark.statements import parse_statement
from carbonstore.store.table import StoreRoot, Table

__all__ = ["pruned_query"]

_log = logging.getLogger(__name__)

# a query's first word (after comments and opening parentheses)
_QUERY = re.compile(r"\(*\s*(?:SELECT|WITH|FROM|VALUES|TABLE)\b", re.I)

# set while this thread runs a routed query: the statements it sends to spark.sql itself
# (the rewritten query, an index answer) go to Spark unchanged
_inside = threading.local()


def pruned_query(
    spark: Any, statement: Any, tables: Mapping[str, tuple[str, str]],
    store_for: Callable[[str], StoreRoot], still_ours: Callable[[str, Table], bool],
) -> Any:
    """The DataFrame of ``statement`` with its registered tables pruned per occurrence, or
    None when Spark runs it as it is (see the module's text).

    ``tables``: the registered catalog tables (``db.table`` lower case -> (store location,
    store table name)); ``store_for``: the Store of a location; ``still_ours``: whether
    Spark's catalog table of that name is still the one register made for the table (another
    session may have dropped or replaced it: Spark's table is read then).
    """
    if not isinstance(statement, str) or getattr(_inside, "active", False):
        return None
    text = strip_comments(statement)
    if not _QUERY.match(text) or not tables:
        return None
    lowered = text.lower()
    # cheap: the statement must mention a registered table's name before it is parsed
    if not any(key.partition(".")[2] in lowered for key in tables):
        return None
    try:
        tree = parse_statement(text)
    except UserError:
        return None  # Spark reads it (or says what is wrong with it)
    if not isinstance(tree, exp.Query):
        return None
    named = {f"{n.db}.{n.name}".lower() for n in tree.find_all(exp.Table)
             if n.db and n.name and not n.catalog}
    aliases: dict[str, Table] = {}
    for key in named & tables.keys():
        location, name = tables[key]
        try:
            table = store_for(location).table(name)
        except CarbonStoreError:
            return None  # dropped or damaged: the data source's read says so in one line
        if not still_ours(key, table):
            return None
        aliases[key] = table
    if not aliases:
        return None
    _inside.active = True
    try:
        return run_statement(spark, next(iter(aliases.values())).store, tree,
                             aliases=aliases, lookup=False)
    except Exception as err:  # noqa: BLE001 - Spark runs the original text: its own answer or error
        _log.debug("query by name left to Spark: %s", err)
        return None
    finally:
        _inside.active = False
