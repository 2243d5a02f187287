"""The index's answer to a statement (:mod:`carbonstore.spark.query_answers`) as a DataFrame."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from carbonstore.expressions.bind import session_zone
from carbonstore.spark.query_answers import (
    AggregateStatement,
    answer_parts,
    answer_statement,
    match_aggregates,
)
from carbonstore.store.table import StoreRoot, Table

__all__ = ["AggregateStatement", "answer_frame", "answer_statement", "match_aggregates"]


def answer_frame(spark: Any, store: StoreRoot, statement: str | exp.Expr, *,
                 as_of: int | str | None = None,
                 aliases: Mapping[str, Table] | None = None, lookup: bool = True) -> Any:
    """The answer of ``statement`` (SQL text or its parsed tree, not changed) as a one-row
    DataFrame with Spark's types, or None."""

    zone = session_zone(str(spark.conf.get("spark.sql.session.timeZone")))
    if zone is None:
        return None
    found = answer_parts(store, statement, as_of=as_of, time_zone=zone, aliases=aliases,
                         lookup=lookup)
    if found is None:
        return None
    shape, table, values = found
    # A SELECT of literals: Spark answers it on the driver without a job (a DataFrame made
    # with createDataFrame costs a job per collect: ~10x slower end to end)
    items = []
    for name, a, v in zip(shape.names, shape.aggregates, values, strict=True):
        sql_type = "bigint" if a.func == "count" else str(table.schema.column(str(a.column)).type)
        items.append(f"{_literal(v, sql_type)} AS `{name.replace('`', '``')}`")
    statement = f"SELECT {', '.join(items)}" + (" LIMIT 0" if shape.limit == 0 else "")
    return spark.sql(statement)


def _literal(value: Any, sql_type: str) -> str:
    """A Spark SQL expression of type ``sql_type`` whose value is exactly ``value``."""
    import math

    if value is None:
        return f"CAST(NULL AS {sql_type})"
    if sql_type == "boolean":
        return "TRUE" if value else "FALSE"
    if sql_type in ("float", "double"):
        text = "NaN" if math.isnan(value) else repr(float(value))  # repr round-trips
        return f"CAST('{text}' AS {sql_type})"
    if sql_type == "string":
        return f"CAST(X'{str(value).encode('utf-8').hex()}' AS STRING)"
    if sql_type == "binary":
        return f"X'{bytes(value).hex()}'"
    if sql_type == "date":
        return f"DATE_FROM_UNIX_DATE({(value - dt.date(1970, 1, 1)).days})"
    if sql_type == "timestamp":
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return f"TIMESTAMP_MICROS({micros})"
    if sql_type.startswith("decimal"):
        return f"CAST('{format(value, 'f')}' AS {sql_type})"
    return f"CAST({int(value)} AS {sql_type})"
