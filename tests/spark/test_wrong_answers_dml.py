"""UPDATE SET values and DELETE/UPDATE conditions are Spark SQL evaluated by DuckDB in the
driver (segments/merge.py): each expression must give what Spark gives for the same rows,
or fail the statement where Spark fails (ANSI: division by zero, casts that cannot hold),
never a different value."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from carbonstore.errors import UserError
from carbonstore.segments.merge import Types, duckdb_connection, to_duckdb

SCHEMA = "id long, n int, d double, c string, day date, b boolean"


def _rows() -> list[tuple[Any, ...]]:
    specials = [float("nan"), -0.0, 0.0, None, float("inf"), -1.5, 1.9, -1.9, 2.5]
    out = []
    for i in range(27):
        out.append((i, None if i % 7 == 3 else i % 10 - 4, specials[i % len(specials)],
                    None if i % 11 == 5 else f"c{i % 13}_x{i}",
                    None if i % 8 == 6 else dt.date(2024, 1, 1) + dt.timedelta(days=i * 3),
                    None if i % 4 == 2 else i % 2 == 0))
    return out


@pytest.fixture(scope="module")
def rows(spark: Any) -> pa.Table:
    spark.createDataFrame(_rows(), SCHEMA).createOrReplaceTempView("dml_semantics")  # type: ignore[attr-defined]
    return spark.table("dml_semantics").toArrow()  # type: ignore[attr-defined]


def _norm(v: Any) -> Any:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else round(v, 9) + 0.0
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, dt.datetime):
        return v.date() if v.time() == dt.time(0) else v.replace(tzinfo=None)
    return v


def _spark(spark: Any, expr: str) -> list[Any] | None:
    try:
        got = spark.sql(f"SELECT {expr} AS v FROM dml_semantics ORDER BY id").collect()
    except Exception:  # noqa: BLE001 - Spark refuses the statement (ANSI)
        return None
    return [_norm(r[0]) for r in got]


def _duckdb(rows: pa.Table, expr: str) -> list[Any] | None:
    con = duckdb_connection()
    con.register("__rows", rows)
    try:
        sql = to_duckdb(expr, "x", Types(con, "FROM __rows AS t"))
        got = con.execute(f"SELECT ({sql}) AS v FROM __rows AS t ORDER BY id").fetchall()
    except (duckdb.Error, UserError):
        return None
    return [_norm(r[0]) for r in got]


@pytest.mark.parametrize("expr", [
    # substr: Spark reads position 0 as 1 and a negative length as empty
    "substr(c, 0, 2)", "substring(c, 0, 3)", "substr(c, 3, -1)", "substr(c, -2)", "substr(c, 2)",
    # CAST to an integral type truncates toward zero (DuckDB rounds), and fails on NaN / Infinity
    "cast(d AS int)", "cast(d AS bigint)", "cast(-1.9 AS int)", "cast(2.5 AS smallint)",
    "cast(c AS int)", "cast(n AS bigint)", "cast(b AS int)", "cast(d AS double)",
    # division, div and % by zero fail in Spark (ANSI), never a NULL
    "n / 0", "id div 0", "n % 0", "n / 2", "id div 4", "n % 3", "d / 2",
    # day numbers: Spark's dayofweek is 1 = Sunday, weekday 0 = Monday
    "dayofweek(day)", "weekday(day)",
    # isnan(NULL) is false; LIKE's default escape is a backslash
    "isnan(d)", "NOT isnan(d)", "c LIKE 'c1\\\\_%'", "c LIKE 'c1_%'", "c LIKE '%\\\\_x1%'",
])
def test_expressions_give_sparks_values_or_fail_like_spark(spark: Any, rows: pa.Table, expr: str) -> None:
    want = _spark(spark, expr)
    got = _duckdb(rows, expr)
    assert got == want, (expr, to_duckdb(expr, "x"))


def test_update_writes_sparks_values(spark: Any, store: Any) -> None:
    t = store.create_table("db.u", "id long not null, n int, d double, c string")
    from tests.indexfiles.segbuild import add_segments

    data = pa.table({"id": pa.array(range(6), pa.int64()), "n": pa.array([1, 2, 3, 4, 5, 6], pa.int32()),
                     "d": [1.9, -1.9, 2.5, -0.5, 7.99, 0.0], "c": ["ab_c", "xy", "q_r", "s", "tt", "uu"]})
    add_segments(t, [data])
    t.update({"n": "cast(d AS int)", "c": "substr(c, 0, 2)"}, where="id < 5")
    got = sorted(spark.read.format("carbonstore").option("store", store.location)  # type: ignore[attr-defined]
                 .load("db.u").select("id", "n", "c").collect())
    assert [tuple(r) for r in got] == [(0, 1, "ab"), (1, -1, "xy"), (2, 2, "q_"), (3, 0, "s"),
                                       (4, 7, "tt"), (5, 6, "uu")]
    from carbonstore.errors import UserError

    # ANSI store assignment: toward zero into an integer column, half up into a decimal
    t.update({"n": "d * 2"}, where="id IN (0, 1, 2)")  # 3.8 -> 3, -3.8 -> -3, 5.0 -> 5
    assert sorted(tuple(r) for r in spark.read.format("carbonstore").option(  # type: ignore[attr-defined]
        "store", store.location).load("db.u").where("id < 3").select("id", "n").collect()) == [
        (0, 3), (1, -3), (2, 5)]
    dec = store.create_table("db.dec", "id long not null, p decimal(10,2)")
    add_segments(dec, [pa.table({"id": pa.array([0, 1, 2], pa.int64()),
                                 "p": pa.array([Decimal("1.25"), Decimal("-1.25"), Decimal("2.10")],
                                               pa.decimal128(10, 2))})])
    dec.update({"p": "p * 0.5"}, where="true")  # 0.625 -> 0.63, -0.625 -> -0.63, 1.05
    assert tuple(spark.sql(  # type: ignore[attr-defined]
        "SELECT cast(1.25 * 0.5 AS decimal(10,2)), cast(-1.25 * 0.5 AS decimal(10,2)), "
        "cast(3.8 AS int), cast(-3.8 AS int)").collect()[0]) == (
        Decimal("0.63"), Decimal("-0.63"), 3, -3)  # Spark's own rounding of the same values
    got_p = sorted(tuple(r) for r in spark.read.format("carbonstore").option(  # type: ignore[attr-defined]
        "store", store.location).load("db.dec").collect())
    assert got_p == [(0, Decimal("0.63")), (1, Decimal("-0.63")), (2, Decimal("1.05"))]
    before = t.status.read().version
    with pytest.raises(UserError):
        t.update({"n": "n / 0"}, where="id = 1")  # Spark: DIVIDE_BY_ZERO; nothing changes
    assert t.status.read().version == before
