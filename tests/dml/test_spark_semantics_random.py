"""Semantics by construction: random UPDATE SET / MERGE clauses (casts incl. try_cast and
text casts, decimals, timestamps in random session time zones, NULL / NaN, string
functions, CASE) over random rows give exactly what the same SELECT run by plain Spark over
the same rows gives - or fail where that SELECT fails, changing nothing. CI runs a few
examples (``DML_SEMANTICS_EXAMPLES`` for more)."""

from __future__ import annotations

import datetime as dt
import math
import os
import tempfile
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.errors import UserError
from tests.dml.rows import load

pytestmark = pytest.mark.usefixtures("spark")

SCHEMA = ("id long not null, i int, d double, q decimal(10,2), s string, ts timestamp, "
          "o_int int, o_dbl double, o_dec decimal(12,2), o_str string, o_ts timestamp, "
          "o_bool boolean")
OUT = {"o_int": "int", "o_dbl": "double", "o_dec": "decimal(12,2)", "o_str": "string",
       "o_ts": "timestamp", "o_bool": "boolean"}
ZONES = ["UTC", "Europe/Paris", "America/Los_Angeles", "Asia/Kolkata", "+05:30", "-03:00"]
TEXTS = ["12", " 7 ", "-3.5", "1e3", "abc", "", "true", "NO", "2024-02-29", "2024-1",
         "2024-03-10 02:30:00", "NaN", "Infinity", "1.005", None]

atoms = {
    "num": st.sampled_from(["i", "d", "q", "id", "1", "2.5", "-0.0", "CAST('NaN' AS DOUBLE)",
                            "CAST(NULL AS INT)", "1.10BD"]),
    "str": st.sampled_from(["s", "'x'", "CAST(NULL AS STRING)", "upper(s)", "trim(s)",
                            "substr(s, 2, 3)", "concat(s, '-', i)", "cast(d AS STRING)",
                            "cast(q AS STRING)", "cast(ts AS STRING)",
                            "date_format(ts, 'yyyy-MM-dd HH:mm')"]),
    "ts": st.sampled_from(["ts", "TIMESTAMP '2024-03-31 02:30:00'", "cast(s AS TIMESTAMP)",
                           "try_cast(s AS TIMESTAMP)", "cast(cast(ts AS DATE) AS TIMESTAMP)",
                           "ts + INTERVAL 90 MINUTES"]),
}


@st.composite
def expressions(draw: Any, kind: str, depth: int = 0) -> str:
    if kind != "bool" and (depth >= 2 or draw(st.booleans())):
        return draw(atoms[kind])
    sub = lambda k: draw(expressions(k, depth + 1))  # noqa: E731
    if kind == "num":
        return draw(st.sampled_from([
            f"({sub('num')} + {sub('num')})", f"({sub('num')} * {sub('num')})",
            f"({sub('num')} / 4)", f"try_cast({sub('str')} AS INT)",
            f"try_cast({sub('str')} AS DOUBLE)", f"try_cast({sub('str')} AS DECIMAL(10,3))",
            f"abs({sub('num')})", f"round({sub('num')}, 1)", f"hour({sub('ts')})",
            f"CASE WHEN {sub('num')} > 1 THEN {sub('num')} ELSE {sub('num')} END",
            f"nanvl({sub('num')}, 0)", f"coalesce({sub('num')}, 7)",
            f"length({sub('str')})"]))
    if kind == "bool":  # (Spark's store assignment takes no number into a boolean column)
        return draw(st.sampled_from([
            f"({sub('num')} > 1)", f"({sub('str')} LIKE '1%')", f"isnan({sub('num')})",
            f"({sub('str')} IS NULL)", f"({sub('ts')} < TIMESTAMP '2000-01-01 00:00:00')",
            f"try_cast({sub('str')} AS BOOLEAN)"]))
    if kind == "str":
        return draw(st.sampled_from([
            f"concat({sub('str')}, {sub('str')})", f"lower({sub('str')})",
            f"cast({sub('num')} AS STRING)", f"cast({sub('ts')} AS STRING)",
            f"CASE WHEN {sub('str')} LIKE 'a%' THEN {sub('str')} END",
            f"lpad({sub('str')}, 4, '*')", f"regexp_replace({sub('str')}, '[0-9]', '#')"]))
    return draw(st.sampled_from([f"{sub('ts')} - INTERVAL 1 DAY",
                                 f"try_to_timestamp({sub('str')})"]))


_KIND = {"o_int": "num", "o_dbl": "num", "o_dec": "num", "o_str": "str", "o_ts": "ts",
         "o_bool": "bool"}

row = st.fixed_dictionaries({
    "i": st.one_of(st.none(), st.integers(-100, 100)),
    "d": st.one_of(st.none(), st.sampled_from([0.5, -0.0, 1e300, float("nan"), float("inf"),
                                               3.14159, -2.5])),
    "q": st.one_of(st.none(), st.decimals(min_value=-1000, max_value=1000, places=2,
                                          allow_nan=False)),
    "s": st.sampled_from(TEXTS),
    "ts": st.one_of(st.none(), st.datetimes(min_value=dt.datetime(1900, 1, 1),
                                            max_value=dt.datetime(2100, 1, 1),
                                            timezones=st.just(dt.UTC))),
})


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    n = len(rows)
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "i": pa.array([r["i"] for r in rows], pa.int32()),
        "d": pa.array([r["d"] for r in rows], pa.float64()),
        "q": pa.array([r["q"] for r in rows], pa.decimal128(10, 2)),
        "s": pa.array([r["s"] for r in rows], pa.string()),
        "ts": pa.array([r["ts"] for r in rows], pa.timestamp("us", tz="UTC")),
        **{c: pa.nulls(n, t) for c, t in (("o_int", pa.int32()), ("o_dbl", pa.float64()),
                                          ("o_dec", pa.decimal128(12, 2)),
                                          ("o_str", pa.string()),
                                          ("o_ts", pa.timestamp("us", tz="UTC")),
                                          ("o_bool", pa.bool_()))},
    })


def _norm(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, Decimal):
        return str(v)
    return v


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(_norm(x) for x in r) for r in df.collect()), key=repr)


def _oracle(spark: Any, data: pa.Table, sql: str) -> list[tuple[Any, ...]] | Exception:
    from pyspark.errors import PySparkException

    spark.createDataFrame(data).createOrReplaceTempView("t")
    try:
        return _rows(spark.sql(sql))
    except PySparkException as err:
        return err


def _live(spark: Any, table: Any, cols: list[str]) -> list[tuple[Any, ...]]:
    from carbonstore.spark.api import to_spark

    return _rows(to_spark(table, spark).selectExpr(*cols))


EXAMPLES = int(os.environ.get("DML_SEMANTICS_EXAMPLES", "3"))
#: no shrinking: each example runs Spark jobs; the failure message names the expression
_PHASES = (Phase.explicit, Phase.reuse, Phase.generate)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, phases=_PHASES,
          suppress_health_check=list(HealthCheck))
@given(rows=st.lists(row, min_size=1, max_size=8), col=st.sampled_from(sorted(OUT)),
       data=st.data(), zone=st.sampled_from(ZONES))
def test_random_update_equals_spark(spark: Any, rows: list[dict[str, Any]], col: str,
                                    data: Any, zone: str) -> None:
    expr = data.draw(expressions(_KIND[col]))
    cond = data.draw(st.sampled_from(["id % 2 = 0", "i > 0 OR s IS NULL", "true",
                                      "length(s) > 1"]))
    table_rows = _table(rows)
    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        cols = ["id", "i", "d", "q", "s", "ts", col]
        want = _oracle(spark, table_rows, f"SELECT id, i, d, q, s, ts, CASE WHEN {cond} THEN "
                       f"CAST(({expr}) AS {OUT[col]}) ELSE {col} END AS {col} FROM t")
        with tempfile.TemporaryDirectory() as d:
            t = Store(f"{d}/store").create_table("db.t", SCHEMA)
            load(t, table_rows)
            if isinstance(want, Exception):
                with pytest.raises(UserError):
                    t.update({col: expr}, where=cond, time_zone=zone)
                assert t.status.read().entries[-1].status != "Success" or \
                    len(t.status.read().entries) == 1
                return
            t.update({col: expr}, where=cond, time_zone=zone)
            assert _live(spark, t, cols) == want, (expr, cond, zone)
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)


@settings(max_examples=max(2, EXAMPLES // 2), deadline=None, derandomize=True, phases=_PHASES,
          suppress_health_check=list(HealthCheck))
@given(rows=st.lists(row, min_size=1, max_size=6), col=st.sampled_from(sorted(OUT)),
       data=st.data(), zone=st.sampled_from(ZONES))
def test_random_merge_equals_spark(spark: Any, rows: list[dict[str, Any]], col: str,
                                   data: Any, zone: str) -> None:
    """MERGE: matched rows get SET col = expr, unmatched source rows are inserted (INSERT *:
    the source's columns, the others NULL), target rows no source row joins are deleted
    when odd (WHEN NOT MATCHED BY SOURCE)."""
    from carbonstore.dml import WhenMatched, WhenNotMatched, WhenNotMatchedBySource, merge_rows

    expr = data.draw(expressions(_KIND[col])).replace("id", "t.id")  # id is in both
    target = _table(rows)
    n = len(rows)
    source = pa.table({"id": pa.array([i + n // 2 for i in range(n)], pa.int64()),
                       "sv": pa.array([f"v{i}" for i in range(n)])})
    types = {"id": "bigint", "i": "int", "d": "double", "q": "decimal(10,2)", "s": "string",
             "ts": "timestamp", **OUT}
    cols = ["id", "i", "d", "q", "s", "ts", col]
    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        spark.createDataFrame(source).createOrReplaceTempView("src")
        keep = ", ".join(f"t.{c}" for c in cols[:-1])
        nulls = ", ".join(f"CAST(NULL AS {types[c]})" for c in cols[1:])
        want = _oracle(spark, target, f"""
            SELECT {keep}, CAST(({expr}) AS {OUT[col]}) AS {col}
              FROM t JOIN src ON t.id = src.id
            UNION ALL SELECT {keep}, t.{col} FROM t LEFT ANTI JOIN src ON t.id = src.id
              WHERE t.id % 2 = 0
            UNION ALL SELECT src.id, {nulls} FROM src LEFT ANTI JOIN t ON t.id = src.id""")
        with tempfile.TemporaryDirectory() as d:
            t = Store(f"{d}/store").create_table("db.t", SCHEMA)
            load(t, target)
            kwargs: dict[str, Any] = dict(
                on="t.id = src.id", source_alias="src",
                matched=[WhenMatched(action="update", assignments={col: expr})],
                not_matched=[WhenNotMatched()],
                not_matched_by_source=[WhenNotMatchedBySource(action="delete",
                                                              condition="t.id % 2 = 1")],
                time_zone=zone)
            if isinstance(want, Exception):
                with pytest.raises(UserError):
                    merge_rows(t, source, **kwargs)
                return
            merge_rows(t, source, **kwargs)
            assert _live(spark, t, cols) == want, (expr, zone)
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)
