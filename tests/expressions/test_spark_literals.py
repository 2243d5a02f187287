"""Text read as Spark casts it (carbonstore.expressions.literals), and the binder refusing
what Spark fails on; Spark's answers for these are in tests/spark/test_wrong_answers_literals.py."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from carbonstore.errors import ExpressionError
from carbonstore.expressions import bind, parse_where
from carbonstore.expressions.literals import (
    spark_date,
    spark_double,
    spark_integer,
    spark_timestamp,
)
from carbonstore.store.schema import TableSchema, parse_schema_string


@pytest.mark.parametrize(("text", "value"), [
    ("5", 5), (" +5 ", 5), ("-0", 0), ("\t7\n", 7),
    ("5.0", None), ("5.5", None), ("1e3", None), ("1_000", None), ("５", None), ("0x10", None), ("", None),
    # Spark casts the text to BIGINT: beyond its range the statement fails (CAST_INVALID_INPUT)
    ("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -2**63),
    ("9223372036854775808", None), ("-99999999999999999999", None),
])
def test_spark_integer(text: str, value: int | None) -> None:
    assert spark_integer(text) == value


@pytest.mark.parametrize(("text", "value"), [
    ("1.5", 1.5), (".5", 0.5), ("5.", 5.0), ("1e1", 10.0), ("-Infinity", -math.inf), ("inf", math.inf),
    ("1_0", None), ("５", None), ("sNaN", None), ("abc", None), ("--1", None),
])
def test_spark_double(text: str, value: float | None) -> None:
    assert spark_double(text) == value
    assert math.isnan(spark_double("NaN") or 0.0)


@pytest.mark.parametrize(("text", "value"), [
    ("2024-01-05", dt.date(2024, 1, 5)), ("2024-1-5", dt.date(2024, 1, 5)),
    (" 2024-01-05 10:00 ", dt.date(2024, 1, 5)), ("2024-01-05T23", dt.date(2024, 1, 5)),
    ("20240105", None), ("2024-W01-5", None), ("2024-02-30", None), ("2024-01-05x", None),
])
def test_spark_date(text: str, value: dt.date | None) -> None:
    assert spark_date(text) == value


def test_spark_timestamp() -> None:
    assert spark_timestamp("2024-01-01 7:0:0") == dt.datetime(2024, 1, 1, 7)
    assert spark_timestamp("2024-01-01T07:00:00.1234567") == dt.datetime(2024, 1, 1, 7, 0, 0, 123456)
    assert spark_timestamp("2024-01-01 07:00:00Z") == dt.datetime(2024, 1, 1, 7, tzinfo=dt.UTC)
    plus_one = dt.timezone(dt.timedelta(hours=1))
    assert spark_timestamp("2024-01-01 07:00+01:00") == dt.datetime(2024, 1, 1, 7, tzinfo=plus_one)
    for bad in ("20240101T070000", "2024-01-01 07:00:00 UTC", "2024-01-01Z", "2024-13-01"):
        assert spark_timestamp(bad) is None


SCHEMA = TableSchema(database="db", table="t", columns=tuple(parse_schema_string(
    "i long, m decimal(10,2), d date, ts timestamp, sh short")))


@pytest.mark.parametrize("where", [
    "i = '5.0'", "i < '5.5'", "i = '1_0'", "d = '20240105'", "d = DATE '20240105'",
    "ts = '20240101T070000'", "sh = CAST(300 AS TINYINT)", "i = CAST('5.7' AS INT)",
    "m = CAST(3.65 AS DECIMAL(1,1))", "m = 'x'",
    "i = '99999999999999999999'", "i < '-9223372036854775809'", "sh = '9223372036854775808'",
])
def test_what_spark_fails_on_is_refused(where: str) -> None:
    with pytest.raises(ExpressionError):
        bind(parse_where(where), SCHEMA)


@pytest.mark.parametrize(("where", "bound"), [
    ("m <= CAST(0.395 AS DECIMAL(10,2))", "m <= 40"),
    ("m = CAST(0.05 AS DECIMAL)", "m = 0"),
    ("m = '0.05000000000000000001'", "m = 5"),
    ("i = CAST(5.7 AS INT)", "i = 5"),
    ("i = ' +5 '", "i = 5"),
])
def test_literals_bind_to_sparks_value(where: str, bound: str) -> None:
    assert str(bind(parse_where(where), SCHEMA)) == bound
