"""Statements answered from the index: ``SELECT count(*), min(c), max(c), count(c) FROM t
[VERSION|TIMESTAMP AS OF x] [WHERE p]``.

:func:`match_aggregates` recognises a statement whose every output is one of those
aggregates over one store table, with no GROUP BY, HAVING, DISTINCT, join, window or ORDER
BY, at most a positive LIMIT, and a WHERE on the table's own columns.
:func:`answer_statement` answers it through :func:`carbonstore.pruning.answers.answer`
(exact or None: the caller then runs the statement through Spark), with Spark's output
column names (``count(1)``, ``min(c)``, or the alias). No Spark is needed to answer.

Pure sqlglot, no JVM: ``carbonstore.spark.metadata_answers.answer_frame`` gives the answer
as a one-row DataFrame with Spark's types for ``run_statement``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from carbonstore.errors import ExpressionError, TableNotFoundError, UserError
from carbonstore.pruning.answers import Aggregate, answer
from carbonstore.store.table import StoreRoot, Table

__all__ = ["AggregateStatement", "answer_parts", "answer_statement", "match_aggregates"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AggregateStatement:
    """A statement of aggregates over one table (see the module docstring)."""

    table: str
    aggregates: tuple[Aggregate, ...]
    names: tuple[str, ...]
    where: str | None
    limit: int | None
    #: ``FROM t VERSION AS OF 4`` (an int) / ``TIMESTAMP AS OF '...'`` (a str); None: none
    as_of: int | str | None = None


def match_aggregates(statement: str | exp.Expr) -> AggregateStatement | None:
    """The statement's parts when it has the answerable shape, else None (also when it does
    not parse: Spark reports that). ``statement``: SQL text or its parsed tree (read, not
    changed)."""
    if isinstance(statement, exp.Expr):
        tree = statement
    else:
        try:
            tree = sqlglot.parse_one(statement, read="spark")
        except (ParseError, TokenError, RecursionError):
            return None
    if not isinstance(tree, exp.Select) or tree.args.get("joins") or tree.args.get("distinct"):
        return None
    for key in ("group", "having", "qualify", "order", "with_", "with", "windows", "laterals",
                "pivots", "offset", "sort", "cluster", "distribute"):
        if tree.args.get(key):
            return None
    limit = _limit(tree)
    if limit is False:
        return None
    from_ = tree.args.get("from_") or tree.args.get("from")
    if from_ is None or not isinstance(from_.this, exp.Table) or not from_.this.name:
        return None
    source = from_.this
    if source.args.get("pivots") or source.args.get("joins"):
        return None
    version = source.args.get("version")
    pinned: int | str | None = None
    if version is not None:  # the version the statement reads, as plan_statement pins it
        if not isinstance(version, exp.Version) or not isinstance(version.expression, exp.Literal):
            return None  # plan_statement reports the form it does not read
        when = version.expression.name
        pinned = int(when) if version.name.upper() == "VERSION" and when.isdigit() else when
    qualifiers = {source.name.lower(), source.alias_or_name.lower()}
    aggregates: list[Aggregate] = []
    names: list[str] = []
    for e in tree.expressions:
        inner = e.this if isinstance(e, exp.Alias) else e
        got = _aggregate(inner, qualifiers)
        if got is None:
            return None
        aggregates.append(got[0])
        names.append(e.alias if isinstance(e, exp.Alias) else got[1])
    if not aggregates:
        return None
    where = None
    if tree.args.get("where") is not None:
        cond = tree.args["where"].this
        if cond.find(exp.Subquery, exp.Select, exp.Exists):
            return None
        for col in cond.find_all(exp.Column):
            if col.table and (col.table.lower() not in qualifiers or col.args.get("db")):
                return None
        cond = cond.copy().transform(
            lambda n: exp.column(n.name, quoted=True) if isinstance(n, exp.Column) else n)
        where = cond.sql(dialect="spark")
    name = f"{source.db}.{source.name}" if source.db else source.name
    if source.catalog:
        return None
    return AggregateStatement(table=name, aggregates=tuple(aggregates), names=tuple(names),
                              where=where, limit=limit if isinstance(limit, int) else None,
                              as_of=pinned)


def _limit(tree: exp.Select) -> int | None | bool:
    """The LIMIT (None: none), or False when it is not a non-negative integer literal."""
    limit = tree.args.get("limit")
    if limit is None:
        return None
    value = limit.expression
    if isinstance(value, exp.Literal) and value.is_int and int(value.this) >= 0:
        return int(value.this)
    return False


def _aggregate(inner: exp.Expr, qualifiers: set[str]) -> tuple[Aggregate, str] | None:
    """(aggregate, Spark's output name) of one select item, or None."""
    if isinstance(inner, exp.Count):
        if inner.args.get("big_int") is False:
            return None
        arg = inner.this
        if isinstance(arg, exp.Star):
            return Aggregate(func="count"), "count(1)"
        if isinstance(arg, exp.Literal) and arg.is_int:
            return Aggregate(func="count"), f"count({arg.this})"
        column = _column(arg, qualifiers)
        return None if column is None else (Aggregate(func="count", column=column.lower()),
                                            f"count({column})")
    if isinstance(inner, (exp.Min, exp.Max)) and not inner.expressions:
        column = _column(inner.this, qualifiers)
        func: Literal["min", "max"] = "min" if isinstance(inner, exp.Min) else "max"
        return None if column is None else (Aggregate(func=func, column=column.lower()),
                                            f"{func}({column})")
    return None


def _column(arg: exp.Expr | None, qualifiers: set[str]) -> str | None:
    if not isinstance(arg, exp.Column) or arg.args.get("db"):
        return None
    if arg.table and arg.table.lower() not in qualifiers:
        return None
    return str(arg.name)


def _resolve(store: StoreRoot, shape: AggregateStatement, as_of: int | str | None,
             aliases: Mapping[str, Table] | None, lookup: bool = True) -> Table | None:
    table = (aliases or {}).get(shape.table.lower())
    if table is None and not lookup:
        return None
    if table is None:
        try:
            table = store.table(shape.table)
        except TableNotFoundError:
            return None  # a view or CTE of the user's, or a missing table: Spark says which
    if shape.as_of is not None:  # the statement's own VERSION / TIMESTAMP AS OF wins
        return table.as_of(shape.as_of)
    if as_of is not None:
        return table.as_of(as_of)
    return table


def answer_statement(
    store: StoreRoot, statement: str | exp.Expr, *, as_of: int | str | None = None,
    time_zone: dt.tzinfo = dt.UTC, aliases: Mapping[str, Table] | None = None,
) -> tuple[list[str], list[dict[str, Any]]] | None:
    """(output column names, rows) of ``statement`` answered from the index, or None.

    ``time_zone``: the zone the WHERE's timestamps without an offset are read in (Spark's
    session zone). ``aliases``: more names that stand for tables (see plan_statement).
    """
    found = answer_parts(store, statement, as_of=as_of, time_zone=time_zone, aliases=aliases)
    if found is None:
        return None
    shape, _, values = found
    rows = [dict(zip(shape.names, values, strict=True))] if shape.limit != 0 else []
    return list(shape.names), rows


def answer_parts(
    store: StoreRoot, statement: str | exp.Expr, *, as_of: int | str | None, time_zone: dt.tzinfo,
    aliases: Mapping[str, Table] | None = None, lookup: bool = True,
) -> tuple[AggregateStatement, Table, tuple[Any, ...]] | None:
    """(the statement's shape, the table it read, the values) when the index answers it
    (``aliases``, ``lookup``: as plan_statement's)."""
    shape = match_aggregates(statement)
    if shape is None or len(set(shape.names)) != len(shape.names):
        return None
    table = _resolve(store, shape, as_of, aliases, lookup)
    if table is None:
        return None
    columns = set(table.schema.column_names)
    if any(a.column is not None and a.column not in columns for a in shape.aggregates):
        return None  # Spark's analysis reports the unknown column
    try:
        values = answer(table, shape.aggregates, shape.where, time_zone=time_zone)
    except (ExpressionError, UserError):
        return None  # a filter the index cannot bind: Spark evaluates (or rejects) it
    return None if values is None else (shape, table, values)
