"""Expressions: SQL parsing, the Python builders, NOT push-down, binding and coercion."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pytest

from carbonstore.errors import ExpressionError
from carbonstore.expressions.bind import bind
from carbonstore.expressions.expr import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundRef,
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
    NotNaN,
    NotStartsWith,
    Or,
    StartsWith,
    and_,
    col,
    or_,
    push_not,
    references,
)
from carbonstore.expressions.parser import parse_where
from carbonstore.store.schema import TableSchema, parse_schema_string

SCHEMA = TableSchema(
    database="db", table="t",
    columns=tuple(parse_schema_string(
        "i int, l long, b byte, d double, f float, dec decimal(10,2), big decimal(30,3), "
        "s string, bin binary, dt date, ts timestamp, flag boolean"
    )),
)


def _b(text: str) -> str:
    return str(bind(parse_where(text), SCHEMA))


@pytest.mark.parametrize(
    ("where", "bound"),
    [
        # a fractional literal against an integral column rounds to the equivalent bound
        ("i > 1.5", "i >= 2"), ("i >= 1.5", "i >= 2"), ("i < 1.5", "i <= 1"), ("i <= 1.5", "i <= 1"),
        ("i > -1.5", "i >= -1"), ("i < -1.5", "i <= -2"),
        ("i = 1.5", "FALSE"), ("i <> 1.5", "i IS NOT NULL"),
        # out of the type's range: nulls still never match
        ("i < 1e30", "i IS NOT NULL"), ("i > 1e30", "FALSE"), ("i >= -1e30", "i IS NOT NULL"),
        ("b > 127", "FALSE"), ("b <= -129", "FALSE"), ("l > 9223372036854775807", "FALSE"),
        ("NOT (i < 1e30)", "FALSE"),
        ("i < CAST('NaN' AS double)", "i IS NOT NULL"),  # NaN is greater than every number
        # floating columns take the literal as a double; -0.0 is 0.0
        ("d = 1", "d = 1.0"), ("d > -0.0", "d > 0.0"), ("f < 2.5", "f < 2.5"),
        # decimals compare unscaled at the column's scale, rounding like integers
        ("dec = 3", "dec = 300"), ("dec = 1.005", "FALSE"), ("dec < 1.005", "dec <= 100"),
        ("dec > 1.005", "dec >= 101"), ("big >= 1.0005", "big >= 1001"),
        ("dec < 99999999.995", "dec IS NOT NULL"),
        # strings and binary compare as UTF-8 bytes
        ("s = 'é'", "s = b'\\xc3\\xa9'"), ("s LIKE 'ab%'", "s STARTSWITH b'ab'"),
        ("s LIKE 'a\\\\%b%'", "s STARTSWITH b'a%b'"), ("s LIKE 'abc'", "s = b'abc'"),
        ("s LIKE '%'", "s IS NOT NULL"), ("NOT s LIKE 'ab%'", "s NOT STARTSWITH b'ab'"),
        # dates are days, timestamps microseconds (UTC)
        ("dt = '2020-01-02'", "dt = 18263"), ("dt = DATE '1970-01-01'", "dt = 0"),
        ("dt < TIMESTAMP '2020-01-02 01:00:00'", "dt <= 18263"),
        ("dt > TIMESTAMP '2020-01-02 01:00:00'", "dt >= 18264"),
        ("dt = TIMESTAMP '2020-01-02 01:00:00'", "FALSE"),
        ("dt = CAST('1970-01-02' AS date)", "dt = 1"),
        ("ts >= DATE '1970-01-02'", "ts >= 86400000000"), ("ts = '1970-01-01 00:00:01.5'", "ts = 1500000"),
        ("ts = '1970-01-01T01:00:00+01:00'", "ts = 0"),
        # IN / NOT IN with impossible values and NULL
        ("i IN (1, 1.5, 2, NULL)", "i IN (1, 2)"), ("i IN (1.5)", "FALSE"),
        ("i NOT IN (1.5, 3)", "i <> 3"), ("i NOT IN (1, NULL)", "FALSE"), ("i NOT IN (1.5)", "i IS NOT NULL"),
        ("d IN (CAST('NaN' AS double), CAST('nan' AS double))", "d = nan"),
        # NULL, booleans, isnan
        ("i = NULL", "FALSE"), ("NOT (i = NULL)", "FALSE"), ("flag", "flag = True"),
        ("NOT flag", "flag <> True"), ("flag = 'true'", "flag = True"),
        ("isnan(i)", "FALSE"), ("NOT isnan(i)", "TRUE"), ("NOT isnan(d)", "NOT isnan(d)"),
        ("i = 1 OR TRUE", "TRUE"), ("i = 1 AND FALSE", "FALSE"),
        ("i BETWEEN 1 AND 3", "(i >= 1 AND i <= 3)"),
        ("NOT (i BETWEEN 1 AND 3)", "(i < 1 OR i > 3)"),
        ("3 < i", "i > 3"), ("i <=> 3", "(i = 3 AND i IS NOT NULL)"), ("i <=> NULL", "i IS NULL"),
        ("I > 3", "i > 3"), ("i = '7'", "i = 7"), ("d > '1.5'", "d > 1.5"),
    ],
)
def test_bind_coerces_literals(where: str, bound: str) -> None:
    assert _b(where) == bound


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("zz = 1", r"unknown column 'zz'; table db.t has columns i, l, b, d"),
        ("i = 'abc'", r"int column i with 'abc': the string is not a number"),
        ("s = 3", r"string column s with 3: quote the value as a string"),
        ("dt = '2020-13-01'", r"date column dt .*YYYY-MM-DD"),
        ("ts = 'noon'", r"timestamp column ts"),
        ("i = TRUE", r"use a number, not a boolean"),
        ("flag = 1", r"use TRUE or FALSE"),
        ("i LIKE 'a%'", r"LIKE / startswith needs a string column; i is int"),
        ("t.i = 1", r"unknown column 't.i'.*without a table qualifier"),
        ("s.x = 1", r"unknown column 's.x'"),
    ],
)
def test_bind_refuses_clearly(where: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        bind(parse_where(where), SCHEMA)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("i >", r"cannot parse filter 'i >'"),
        ("i = 'abc", r"cannot parse filter"),
        ("", r"empty filter"),
        ("i = l", r"column op column"),
        ("i + 1 > 2", r"compare a column with a literal"),
        ("s LIKE 'a_c%'", r"only LIKE 'prefix%'"),
        ("s LIKE '%abc'", r"only LIKE 'prefix%'"),
        ("i IN (SELECT 1)", r"IN needs a list of literals"),
        ("upper(s) = 'A'", r"not a supported predicate|compare a column"),
        ("SELECT 1", r"not a supported predicate"),
    ],
)
def test_parse_errors(where: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        parse_where(where)


def test_parse_where_builds_unbound_trees() -> None:
    e = parse_where("(a > 1 OR b IS NULL) AND NOT c IN ('x', 'y') AND isnan(d) AND e IS NOT NULL")
    # A chain of one connective is balanced (its depth grows with log2 of its length).
    assert e == And(And(Or(Gt("a", 1), IsNull("b")), Not(In("c", ("x", "y")))), And(IsNaN("d"), Not(IsNull("e"))))
    assert parse_where("x = -2.50") == Eq("x", Decimal("-2.50"))
    big = "-12345678901234567890123456789012.345"  # beyond the default 28-digit context
    assert parse_where(f"x = {big}") == Eq("x", Decimal(big))
    assert parse_where("x = DATE '2024-02-29'") == Eq("x", dt.date(2024, 2, 29))
    assert parse_where("x = TIMESTAMP '2024-02-29 10:00:00'") == Eq("x", dt.datetime(2024, 2, 29, 10))
    assert references(e) == {"a", "b", "c", "d", "e"}


def test_python_builders() -> None:
    e = (col("i") > 3) & ~col("s").startswith("a") | col("d").is_nan()
    assert e == Or(And(Gt("i", 3), Not(StartsWith("s", "a"))), IsNaN("d"))
    assert (col("i") == 3) == Eq("i", 3)
    assert col("i").isin([1, 2]) == In("i", (1, 2))
    assert and_() == AlwaysTrue() and or_() == AlwaysFalse()
    assert and_(col("i") >= 1, col("i") <= 2) == And(GtEq("i", 1), LtEq("i", 2))
    assert str(bind(col("x") != 1, TableSchema(database="d", table="t", columns=tuple(
        parse_schema_string("x long"))))) == "x <> 1"


@pytest.mark.parametrize(
    ("expr", "pushed"),
    [
        (Not(Lt("x", 3)), GtEq("x", 3)),
        (Not(Eq("x", 3)), NotEq("x", 3)),
        (Not(Not(Gt("x", 3))), Gt("x", 3)),
        (Not(And(Lt("x", 1), Gt("y", 2))), Or(GtEq("x", 1), LtEq("y", 2))),
        (Not(Or(IsNull("x"), In("y", (1,)))), And(IsNotNull("x"), NotIn("y", (1,)))),
        (Not(IsNaN("x")), NotNaN("x")),
        (Not(StartsWith("s", "a")), NotStartsWith("s", "a")),
        (Not(AlwaysTrue()), AlwaysFalse()),
    ],
)
def test_push_not(expr: Expr, pushed: Expr) -> None:
    assert push_not(expr) == pushed


def test_bound_reference_carries_the_column() -> None:
    bound = bind(parse_where("dec > 1"), SCHEMA)
    assert isinstance(bound, Gt) and isinstance(bound.term, BoundRef)
    assert bound.term.type.scale == 2 and bound.term.column is SCHEMA.column("dec")


@pytest.mark.parametrize(
    ("literal", "bound"),
    [
        (dt.datetime(1970, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))), "ts = 0"),
        (dt.date(1970, 1, 2), "ts = 86400000000"),
        (math.inf, "FALSE"),
        (Decimal("NaN"), "FALSE"),
    ],
)
def test_python_literals(literal: Any, bound: str) -> None:
    name = "ts" if isinstance(literal, dt.date) else "i"
    assert str(bind(Eq(name, literal), SCHEMA)) == bound


def test_session_time_zones_resolve_like_spark_ids() -> None:
    import datetime as dt

    from carbonstore.expressions.bind import session_zone

    hour = dt.timedelta(hours=1)
    assert session_zone("UTC") is dt.UTC and session_zone(None) is dt.UTC
    assert session_zone("+08:00").utcoffset(None) == 8 * hour  # type: ignore[union-attr]
    assert session_zone("GMT-3").utcoffset(None) == -3 * hour  # type: ignore[union-attr]
    assert session_zone("-0530").utcoffset(None) == -5.5 * hour  # type: ignore[union-attr]
    paris = session_zone("Europe/Paris")
    assert paris is not None and dt.datetime(2024, 7, 1, tzinfo=paris).utcoffset() == 2 * hour
    assert session_zone("Etc/GMT+3") is not None
    assert session_zone("Bogus/Zone") is None and session_zone("+19:00") is None


def test_parse_where_remembers_texts_not_refusals() -> None:
    """Parsing the same text again gives the equal (immutable) expression without sqlglot;
    a refused text is refused every time; the memory is bounded."""
    from carbonstore.expressions import parser

    text = "a = 1 AND b IN ('x', 'y') OR c IS NULL"
    first = parse_where(text)
    assert parse_where(text) is first
    assert parse_where(" " + text) == first  # another text: parsed, equal
    before = parser._parsed.cache_info().currsize
    for _ in range(2):
        with pytest.raises(ExpressionError):
            parse_where("a = ")
    assert parser._parsed.cache_info().currsize == before  # the refusal is not remembered
    for i in range(parser._PARSED_ENTRIES + 10):
        parse_where(f"x = {i}")
    assert parser._parsed.cache_info().currsize == parser._PARSED_ENTRIES
    assert parse_where("x = 5") == parse_where("x  =  5")
