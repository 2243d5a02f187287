"""Filters as Spark evaluates them: the SQL binding, the row oracle and the driver row filter.

Random tables (NaN, +-0.0, +-inf, nulls, unicode, extreme ints, decimals, dates, timestamps)
are written as Parquet the way the store writes them; random WHERE strings are evaluated by
Spark over that file and by carbonstore (``parse_where`` + ``bind``). The row oracle
``evaluate_rows`` (whose matches the pruning soundness tests prove lie inside every plan) must
keep exactly the rows Spark keeps, and ``rows_may_match`` (the driver-side row filter of
``to_spark``) at least those, and exactly those where ``rows_exact`` says so (``to_spark``
then does not filter again). Also run with session time zones other than UTC: timestamp and
date literals are read in the session zone.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore.errors import ExpressionError
from carbonstore.expressions.bind import bind, session_zone
from carbonstore.expressions.expr import (
    And,
    Comparison,
    Eq,
    Expr,
    Gt,
    GtEq,
    In,
    IsNaN,
    IsNotNull,
    IsNull,
    Lt,
    LtEq,
    Not,
    NotEq,
    NotIn,
    Or,
    StartsWith,
)
from carbonstore.expressions.parser import parse_where
from carbonstore.pruning.rows import evaluate_rows, rows_exact, rows_may_match
from carbonstore.segments.writer import arrow_type
from carbonstore.store.schema import Column, DataType, TableSchema
from tests.pruning import test_evaluator_soundness as sound

_PLAIN = st.characters(blacklist_categories=["Cs", "Cc"], blacklist_characters="'\\%_")

# the column types of a table (binary has no SQL literal the filter parser reads)
_TYPES: dict[str, tuple[DataType, st.SearchStrategy[Any]]] = {
    name: (sound._TYPES[name][0], sound._TYPES[name][2])
    for name in ("byte", "short", "int", "long", "double", "float", "dec", "bigdec", "date", "ts", "bool")
}
_TYPES["string"] = (DataType("string"), sound._mix(
    st.sampled_from(["", "a", "ab", "abc", "b", "\U0010ffff", "é", "a b"]), st.text(_PLAIN, max_size=6)))
_OPS = {Eq: "=", NotEq: "<>", Lt: "<", LtEq: "<=", Gt: ">", GtEq: ">="}


def _sql_literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, float):
        text = "NaN" if math.isnan(v) else ("Infinity" if v == math.inf else "-Infinity" if v == -math.inf else repr(v))
        return f"CAST('{text}' AS DOUBLE)"
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.replace(tzinfo=None).isoformat(sep=' ')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    raise TypeError(f"no SQL literal for {v!r}")


def to_sql(expr: Expr) -> str:
    if isinstance(expr, And):
        return f"({to_sql(expr.left)} AND {to_sql(expr.right)})"
    if isinstance(expr, Or):
        return f"({to_sql(expr.left)} OR {to_sql(expr.right)})"
    if isinstance(expr, Not):
        return f"(NOT {to_sql(expr.child)})"
    col = f"`{expr.term}`"  # type: ignore[attr-defined]
    if isinstance(expr, IsNull):
        return f"{col} IS NULL"
    if isinstance(expr, IsNotNull):
        return f"{col} IS NOT NULL"
    if isinstance(expr, IsNaN):
        return f"isnan({col})"
    if isinstance(expr, StartsWith):
        return f"{col} LIKE {_sql_literal(expr.prefix + '%')}"
    if isinstance(expr, (In, NotIn)):
        items = ", ".join(_sql_literal(v) for v in expr.literals)
        return f"{col} {'NOT IN' if isinstance(expr, NotIn) else 'IN'} ({items})"
    assert isinstance(expr, Comparison)
    return f"{col} {_OPS[type(expr)]} {_sql_literal(expr.literal)}"


@st.composite
def _case(draw: st.DrawFn) -> tuple[dict[str, list[Any]], list[str]]:
    names = draw(st.lists(st.sampled_from(sorted(_TYPES)), min_size=1, max_size=3, unique=True))
    n = draw(st.integers(1, 40))
    table = {name: draw(st.lists(st.none() | _TYPES[name][1], min_size=n, max_size=n)) for name in names}
    types = {k: (v[0], arrow_type(v[0]), v[1]) for k, v in _TYPES.items()}
    exprs = draw(st.lists(sound._predicate(table, types=types), min_size=1, max_size=20))
    return table, [to_sql(e) for e in exprs if "\x00" not in to_sql(e)]


def _schema(names: list[str]) -> TableSchema:
    return TableSchema(database="db", table="t",
                       columns=tuple(Column(name=n, type=_TYPES[n][0]) for n in names))


def _spark_truth(spark: Any, path: str, wheres: list[str]) -> dict[str, np.ndarray]:
    """Rows (by position) for which Spark finds each WHERE clause TRUE; clauses Spark
    refuses (analysis) or fails on (ANSI casts) are left out."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    df = spark.read.parquet(path)
    ok = []
    for i, w in enumerate(wheres):
        try:
            df.selectExpr(f"({w}) AS p{i}")
            ok.append((i, w))
        except (PySparkException, Py4JJavaError):
            continue
    truth: dict[str, np.ndarray] = {}

    def run(batch: list[tuple[int, str]]) -> None:
        cols = ["__rid"] + [f"({w}) AS p{i}" for i, w in batch]
        try:
            got = df.selectExpr(*cols).toArrow()
        except (PySparkException, Py4JJavaError):
            if len(batch) > 1:
                for one in batch:
                    run([one])
            return
        order = np.argsort(got.column("__rid").to_numpy())
        for i, w in batch:
            col = got.column(f"p{i}").to_pylist()
            truth[w] = np.array([col[j] is True for j in order], dtype=bool)

    if ok:
        run(ok)
    return truth


def _check(spark: Any, data: dict[str, list[Any]], wheres: list[str], folder: Path, tag: str,
           zone: str = "UTC") -> int:
    """Compare every clause both sides accept; returns how many that was."""
    schema = _schema(list(data))
    tz = session_zone(zone)
    assert tz is not None
    arrow = pa.table({n: pa.array(v, arrow_type(_TYPES[n][0])) for n, v in data.items()})
    path = str(folder / f"{tag}.parquet")
    pq.write_table(arrow.append_column("__rid", pa.array(range(arrow.num_rows), pa.int32())), path)
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        truth = _spark_truth(spark, path, wheres)
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    compared = 0
    for where, want in truth.items():
        try:
            bound = bind(parse_where(where), schema, time_zone=tz)
        except ExpressionError:
            continue  # refused with a message; Spark then fails the same way or sees no pruning
        oracle = evaluate_rows(bound, arrow)
        lost = np.flatnonzero(want & ~oracle)
        assert not lost.size, (
            f"{where!r} (bound {bound}): Spark keeps rows {lost.tolist()} "
            f"{[{n: data[n][r] for n in data} for r in lost[:3].tolist()]} the oracle drops")
        extra = np.flatnonzero(oracle & ~want)
        assert not extra.size, (
            f"{where!r} (bound {bound}): the oracle keeps rows {extra.tolist()} "
            f"{[{n: data[n][r] for n in data} for r in extra[:3].tolist()]} Spark drops")
        may = rows_may_match(bound, arrow)
        assert not (want & ~may).any(), f"{where!r}: the driver row filter drops a row Spark keeps"
        if rows_exact(bound):  # to_spark then leaves the WHERE out of the local DataFrame
            assert (may == want).all(), f"{where!r}: the driver row filter keeps rows Spark drops"
        compared += 1
    return compared


_SETTINGS = settings(max_examples=int(os.environ.get("CARBONSTORE_SPARK_EXAMPLES", "30")), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kathmandu"])
@_SETTINGS
@given(case=_case())
def test_binding_and_row_filters_agree_with_spark(
    spark: Any, scratch_dir: Path, zone: str, case: tuple[dict[str, list[Any]], list[str]]
) -> None:
    data, wheres = case
    _check(spark, data, wheres, scratch_dir, f"random-{zone.replace('/', '-')}", zone)


_EDGE = {
    "long": [2**63 - 1, -(2**63), 2**53 + 1, 2**53, 0, None],
    "int": [2**31 - 1, -(2**31), 16_777_217, 0, 7, None],
    "float": [16_777_216.0, 0.1, 1.0, -0.0, math.nan, None],
    "double": [0.1, 1e300, -0.0, math.inf, math.nan, None],
    "date": [dt.date(2024, 1, 1), dt.date(2023, 12, 31), dt.date(2024, 1, 2), dt.date(1, 1, 1), dt.date(9999, 12, 31), None],
    "ts": [dt.datetime(2024, 1, 1, tzinfo=dt.UTC), dt.datetime(2023, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
           dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC), dt.datetime(2024, 1, 1, 8, tzinfo=dt.UTC),
           dt.datetime(2024, 1, 1, 7, 59, 59, tzinfo=dt.UTC), None],
    "dec": [Decimal("0.10"), Decimal("9999999.99"), Decimal("-9999999.99"), Decimal("1.00"), Decimal("0.00"), None],
    "string": ["a", "ab", "é", "", "b", None],
}
_EDGE_WHERES = [
    "long = CAST('9.223372036854776e18' AS DOUBLE)", "long >= CAST('9.223372036854776e18' AS DOUBLE)",
    "long < CAST('9.223372036854776e18' AS DOUBLE)", "long = CAST('9007199254740992' AS DOUBLE)",
    "long > CAST('9007199254740992' AS DOUBLE)", "long <= 9.2e18", "long = 9007199254740993", "long < 1e30",
    "long <= 18446744073709551616", "long > -9223372036854775809", "long <> 18446744073709551616",
    "int = 16777217", "int = CAST('16777216' AS FLOAT)", "int < 2147483648", "int <= 1e10",
    "float = 16777217", "float > 0.1", "float = 0.1", "float >= 0.1", "float < CAST('0.1' AS DOUBLE)",
    "float = CAST('0.1' AS FLOAT)", "float > 0", "float = -0.0", "float < 1", "float IN (0.1, 1)",
    "double = 0.1", "double > 1e299", "double = CAST('-0.0' AS DOUBLE)", "double >= CAST('Infinity' AS DOUBLE)",
    "date >= '2024-01-01 12:00:00'", "date = '2024-01-01 12:00:00'", "date < '2024-01-01 12:00:00'",
    "date > '2024-01-01 12:00:00'", "date < TIMESTAMP '2024-01-01 12:00:00'",
    "date >= TIMESTAMP '2024-01-01 12:00:00'", "date = TIMESTAMP '2024-01-01 00:00:00'",
    "date = '2024-01-01'", "date IN ('2024-01-01', DATE '2023-12-31')", "date > DATE '9999-12-30'",
    "ts >= DATE '2024-01-01'", "ts < DATE '2024-01-01'", "ts = '2024-01-01'", "ts >= '2024-01-01 08:00:00'",
    "ts < TIMESTAMP '2024-01-01 08:00:00'", "ts = TIMESTAMP '2024-01-01 12:00:00'",
    "ts > TIMESTAMP '2024-01-01T07:59:59+00:00'", "ts BETWEEN '2024-01-01' AND '2024-01-01 08:00:00'",
    "dec = 0.1", "dec < 0.105", "dec = CAST('0.1' AS DOUBLE)", "dec > 9999999.985", "dec < 1e30",
    "dec = 1", "dec <= 99999999999999999999",
    "string = 'a'", "string < 'ab'", "string >= 'é'", "string LIKE 'a%'", "string = ''", "string > ''",
    "string IN ('a', 'b')", "string NOT IN ('a', 'b')",
]


@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles"])
def test_edge_literals_agree_with_spark(spark: Any, scratch_dir: Path, zone: str) -> None:
    """Literals at type edges: doubles against longs and floats, strings with a time of day
    against dates, dates against timestamps (in the session time zone), out-of-range ints."""
    assert _check(spark, _EDGE, _EDGE_WHERES, scratch_dir, f"edge-{zone.replace('/', '-')}",
                  zone) == len(_EDGE_WHERES)
