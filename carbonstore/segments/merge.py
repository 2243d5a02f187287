"""MERGE INTO and the SQL expressions of UPDATE SET / MERGE (docs/dml.md).

Expressions (SET values, MERGE conditions, INSERT values) are Spark SQL, translated by
sqlglot and evaluated by DuckDB over Arrow tables in this process: no JVM is needed for an
UPDATE or a MERGE. Results are cast to the table's column types with Arrow's safe cast (a
value the column cannot hold fails the statement; nothing changes).

MERGE, on one snapshot (then committed as in ``segments.dml``):

1. the ON condition's equality pairs ``target.k = source.s`` give a key range of the source
   (min/max of ``s``) that prunes the target through the index;
2. the target's live rows in that range (with their file and position) and the source are
   joined by DuckDB; a target row matched by more than one source row is an error (as in
   Delta Lake and the SQL standard) when a WHEN MATCHED clause exists;
3. WHEN MATCHED clauses apply in order, the first whose condition holds wins: UPDATE
   deletes the target row (delta) and inserts its new version, DELETE deletes it; WHEN NOT
   MATCHED clauses likewise insert source rows no target row matched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from carbonstore.errors import UserError
from carbonstore.expressions.bind import session_zone
from carbonstore.expressions.expr import AlwaysTrue, Expr
from carbonstore.expressions.parser import and_terms
from carbonstore.expressions.sql_checks import check_sql_text, check_tree_depth, too_deep_sql
from carbonstore.segments.dml import (
    FILE_COLUMN,
    POS_COLUMN,
    SEGMENT_COLUMN,
    DmlResult,
    Matches,
    apply_changes,
    fetch_rows,
    run_replanned,
    scan_rows,
)
from carbonstore.segments.dml_calls import check_calls
from carbonstore.segments.dml_conflicts import Reads
from carbonstore.segments.spark_casts import (
    BLANKS_PATTERN,
    spark_boolean,
    spark_date,
    spark_double,
    spark_double_decimal,
)
from carbonstore.segments.spark_decimals import (
    MAX_PRECISION,
    SCALA_DIGITS,
    decimal_of,
    literal_type,
    result_type,
    spark_decimal_op,
)
from carbonstore.segments.spark_text import java_double_text, spark_case, spark_text
from carbonstore.segments.timezones import duckdb_zone
from carbonstore.segments.writer import arrow_type
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import TableStatusSnapshot

__all__ = ["Types", "WhenMatched", "WhenNotMatched", "duckdb_connection", "evaluate_assignments",
           "filter_mask", "merge_rows", "to_duckdb"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WhenMatched:
    """``WHEN MATCHED [AND condition] THEN UPDATE SET ... | DELETE``.

    ``assignments``: target column -> Spark SQL expression (over target and source
    aliases); None with ``action="update"`` is ``UPDATE SET *`` (every column from the
    source column of the same name).
    """

    action: Literal["update", "delete"]
    condition: str | None = None
    assignments: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WhenNotMatched:
    """``WHEN NOT MATCHED [AND condition] THEN INSERT (...) VALUES (...) | INSERT *``.

    ``values``: target column -> expression over the source alias (columns left out are
    NULL); None is ``INSERT *``.
    """

    condition: str | None = None
    values: Mapping[str, str] | None = field(default=None)


class Types:
    """DuckDB's types of expressions over a statement's rows (``FROM ...`` of a connection
    of :func:`duckdb_connection`), bound and not evaluated: what :func:`to_duckdb` needs to
    give decimal arithmetic Spark's result types."""

    def __init__(self, con: Any, source: str) -> None:
        self._con, self._source = con, source
        self._seen: dict[str, str] = {}

    def __call__(self, node: exp.Expr, what: str) -> str:
        import duckdb

        sql = node.sql(dialect="duckdb")
        if sql not in self._seen:
            try:
                kind = self._con.sql(f"SELECT ({sql}) AS v {self._source} LIMIT 0").types[0]
            except duckdb.Error as err:
                raise UserError(f"{what}: {str(err).splitlines()[0]}") from err
            self._seen[sql] = str(kind)
        return self._seen[sql]


def to_duckdb(text: str, what: str, types: Types | None = None) -> str:
    """A Spark SQL expression as DuckDB SQL with Spark's meaning (:func:`_spark_meaning`),
    for a connection of :func:`duckdb_connection`; a user error when it does not parse, calls
    a function with a number of arguments Spark refuses (``segments.dml_calls``) or uses a
    function whose DuckDB result is not known to equal Spark's (:data:`_VERIFIED`).
    ``types``: the types of expressions over the rows it is evaluated on (decimal
    arithmetic is refused without them)."""
    try:
        check_calls(check_sql_text(text, what), what)
        tree = sqlglot.parse_one(text, read="spark")
    except RecursionError:
        raise too_deep_sql(what, text) from None
    except (ParseError, TokenError) as err:
        raise UserError(f"{what}: cannot parse {text!r}: {str(err).splitlines()[0]}") from err
    check_tree_depth(tree, what, text)  # _rewrite below recurses once per level
    _refuse_unverified(tree, what)
    return _rewrite(tree, types, what).sql(dialect="duckdb")


def _rewrite(node: exp.Expr, types: Types | None, what: str) -> exp.Expr:
    """:func:`_spark_meaning` applied bottom-up: every node sees its rewritten arguments
    (``cast(substr(c, 0, 2) AS int)`` rewrites both)."""
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expr):
            node.set(key, _rewrite(value, types, what))
        elif isinstance(value, list):
            node.set(key, [_rewrite(v, types, what) if isinstance(v, exp.Expr) else v for v in value])
    _exact_doubles(node, types, what)
    out = _decimal_arithmetic(node, types, what)
    return out if out is not None else _spark_meaning(node)


_MIXED = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT,
          exp.LTE, exp.NullSafeEQ, exp.Pow, exp.Nanvl)
_FLOATING = ("DOUBLE", "FLOAT")


def _exact_doubles(node: exp.Expr, types: Types | None, what: str) -> None:
    """Decimal operands beside a double or a float (arithmetic, comparisons, ``pow``,
    ``nanvl``, ``coalesce``, ``greatest``, ``least``, ``if``, ``CASE``) become doubles
    through their text, in place: Spark takes a decimal's nearest double (Java's
    ``BigDecimal.doubleValue``), where DuckDB's cast of a decimal of more than 15 digits to
    DOUBLE may be one unit off in the last place (so ``q + d`` would differ)."""
    if types is None:
        return
    if isinstance(node, _MIXED) or (isinstance(node, exp.Anonymous) and str(node.this).lower()
                                     == "pmod" and len(node.expressions) == 2):
        slots: list[tuple[exp.Expr, Any]] = (
            [(node, 0), (node, 1)] if isinstance(node, exp.Anonymous)
            else [(node, "this"), (node, "expression")])
    elif isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
        slots = [(node, "this")] + [(node, k) for k in range(len(node.expressions))]
    elif isinstance(node, exp.Case) and node.args.get("this") is None:
        slots = [(i, "true") for i in node.args.get("ifs") or []] + [(node, "default")]
    elif isinstance(node, exp.If) and not isinstance(node.parent, exp.Case):
        slots = [(node, "true"), (node, "false")]
    else:
        return

    def get(owner: exp.Expr, key: Any) -> Any:
        return owner.expressions[key] if isinstance(key, int) else owner.args.get(key)

    present = [(o, k, get(o, k)) for o, k in slots if isinstance(get(o, k), exp.Expr)]
    kinds = [types(e, what) for _, _, e in present]
    doubles = isinstance(node, (exp.Pow, exp.Nanvl)) or any(k in _FLOATING for k in kinds)
    if not doubles or not any(k.startswith("DECIMAL(") for k in kinds):  # pow, nanvl: doubles
        return
    for (owner, key, operand), kind in zip(present, kinds, strict=True):
        if kind.startswith("DECIMAL("):
            operand = exp.Cast(this=exp.Cast(this=exp.Paren(this=operand.copy()), to=exp.DataType.build(
                "VARCHAR")), to=exp.DataType.build("DOUBLE"))
        elif kind == "FLOAT":  # Spark: a float beside a decimal is a double too
            operand = exp.Cast(this=exp.Paren(this=operand.copy()), to=exp.DataType.build("DOUBLE"))
        else:
            continue
        if isinstance(key, int):
            owner.expressions[key] = operand
        else:
            owner.set(key, operand)


_LITERAL = "spark_literal"  # meta key: (precision, scale) of a number literal, as Spark types it
_VALUE = "spark_integer"  # meta key: the value of an integer literal
_ARITHMETIC: dict[type, str] = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Mod: "%",
                                 exp.Div: "/", exp.IntDiv: "div"}
_BIGINT = 2**63


def _literal_of(node: exp.Expr) -> tuple[int, int] | None:
    while isinstance(node, exp.Paren):
        node = node.this
    return node.meta.get(_LITERAL) if node.meta else None


def _decimal_arithmetic(node: exp.Expr, types: Types | None, what: str) -> exp.Expr | None:
    """Number literals as Spark types them (``0.5`` is a ``decimal(1,1)``, an integer beyond
    bigint a decimal) and ``+ - * / % div`` / ``pmod`` with a decimal operand at Spark's
    result type and value (``segments.spark_decimals``); None where the node is none of
    these."""
    if isinstance(node, exp.Literal) and not node.is_string and not isinstance(
            node.parent, exp.DataTypeParam):
        text = node.this
        if not re.fullmatch(r"\d*\.?\d*", text) or text in ("", "."):
            return None  # 1e3: a double, as in DuckDB
        p, s = literal_type(text)
        if p > MAX_PRECISION:
            raise UserError(f"{what}: the number {text} has more than 38 digits")
        if s == 0 and int(text) < _BIGINT:
            node.meta[_LITERAL] = (p, 0)
            node.meta[_VALUE] = int(text)
            return node
        out = exp.Cast(this=node.copy(), to=exp.DataType.build(f"DECIMAL({p}, {s})"))
        out.meta[_LITERAL] = (p, s)
        return out
    if isinstance(node, exp.Neg) and _literal_of(node.this) is not None:
        node.meta[_LITERAL] = _literal_of(node.this)  # -1 is a literal in Spark's grammar
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if inner.meta and _VALUE in inner.meta:
            node.meta[_VALUE] = -inner.meta[_VALUE]
        return node
    if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least, exp.Case)) or (
            isinstance(node, exp.If) and not isinstance(node.parent, exp.Case)):
        return _wider_decimal(node, types, what)
    if isinstance(node, (exp.Neg, exp.Abs)) and types is not None:
        name = types(node.this, what)
        kind = decimal_of(name)
        if kind is None or kind[0] <= SCALA_DIGITS or not name.startswith("DECIMAL("):
            return None
        # Spark negates a decimal of more than 18 digits through Scala's BigDecimal, which
        # keeps 34 significant digits: -x of a decimal(38,10) may be rounded, or overflow
        text = exp.Cast(this=exp.Paren(this=node.this.copy()), to=exp.DataType.build("VARCHAR"))
        return exp.Cast(this=exp.Anonymous(this="__spark_decimal", expressions=[
            exp.Literal.string("neg" if isinstance(node, exp.Neg) else "abs"), text,
            exp.Literal.string("0"), exp.Literal.number(kind[0]), exp.Literal.number(kind[1])]),
            to=exp.DataType.build(f"DECIMAL({kind[0]}, {kind[1]})"))
    if type(node) in _ARITHMETIC:
        op, left, right = _ARITHMETIC[type(node)], node.this, node.expression
    elif isinstance(node, exp.Anonymous) and str(node.this).lower() == "pmod" and len(node.expressions) == 2:
        op, (left, right) = "pmod", node.expressions
    else:
        return None
    if types is None:  # no rows to type the operands by: refused where one is a decimal
        kinds = [exp.Anonymous(this="typeof", expressions=[e.copy()]) for e in (left, right)]
        return exp.Case(ifs=[exp.If(this=exp.or_(*(exp.Like(this=k, expression=exp.Literal.string(
            "DECIMAL(%")) for k in kinds)), true=_fail(
            "decimal arithmetic is not supported here"))], default=_spark_meaning(node))
    kinds = [types(e, what) for e in (left, right)]
    if not any(k.startswith("DECIMAL(") for k in kinds):
        if op in ("pmod", "/", "div") or not any(_literal_of(e) for e in (left, right)):
            return None  # integers: / divides doubles and div longs (_spark_meaning)
        # Spark types an integer literal int (bigint past 2^31): tinyint + 1 is an int,
        # where DuckDB would keep a TINYINT and overflow at 127 + 1
        node = node.copy()
        for key in ("this", "expression"):
            lit = _literal_of(node.args[key])
            if lit and lit[1] == 0 and "DECIMAL" not in kinds[key == "expression"]:
                inner = node.args[key]
                while isinstance(inner, exp.Paren):
                    inner = inner.this
                value = inner.meta.get(_VALUE, _BIGINT)
                wide = "INTEGER" if -2**31 <= value < 2**31 else "BIGINT"
                node.set(key, exp.Cast(this=node.args[key], to=exp.DataType.build(wide)))
        return _spark_meaning(node)
    operands = [_literal_of(e) or decimal_of(k) for e, k in zip((left, right), kinds, strict=True)]
    if operands[0] is None or operands[1] is None:
        return None  # a double (or float) operand: Spark computes doubles, as DuckDB does
    p, s, exact = result_type(op, operands[0], operands[1])
    to = exp.DataType.build("BIGINT" if op == "div" else f"DECIMAL({p}, {s})")
    if exact:  # DuckDB's exact result fits the type: no rounding, no overflow (operands of
        # 38 digits: DuckDB multiplies decimals of up to 18 digits in 64 bits, and overflows)
        wide = [exp.Cast(this=exp.Paren(this=e.copy()), to=exp.DataType.build(f"DECIMAL(38, {r})"))
                for e, (_, r) in zip((left, right), operands, strict=True)]
        return exp.Cast(this=exp.Paren(this=type(node)(this=wide[0], expression=wide[1])), to=to)
    args = [exp.Cast(this=exp.Paren(this=e.copy()), to=exp.DataType.build(f"DECIMAL({q}, {r})"))
            for e, (q, r) in zip((left, right), operands, strict=True)]
    text = [exp.Cast(this=a, to=exp.DataType.build("VARCHAR")) for a in args]
    return exp.Cast(this=exp.Anonymous(this="__spark_decimal", expressions=[
        exp.Literal.string(op), *text, exp.Literal.number(p), exp.Literal.number(s)]), to=to)


def _wider_decimal(node: exp.Expr, types: Types | None, what: str) -> exp.Expr | None:
    """``coalesce``, ``greatest``, ``least``, ``if`` and ``CASE`` of a decimal and integers
    at Spark's common type: a bigint is a ``decimal(20,0)`` there (DuckDB widens it as 19
    digits) and an integer literal an int (DuckDB would fit it into the decimal), so
    ``coalesce(p, l)`` of a decimal(10,2) and a bigint is a decimal(22,2) as in Spark."""
    if types is None:
        return None
    if isinstance(node, exp.Case):
        keys = [(i, "true") for i in node.args.get("ifs") or []] + [(node, "default")]
    elif isinstance(node, exp.If):
        keys = [(node, "true"), (node, "false")]
    else:
        keys = [(node, "this")] + [(node, k) for k in range(len(node.expressions))]

    def get(owner: exp.Expr, key: Any) -> exp.Expr | None:
        return owner.expressions[key] if isinstance(key, int) else owner.args.get(key)

    branches = [(o, k, get(o, k)) for o, k in keys if isinstance(get(o, k), exp.Expr)]
    kinds = [types(b, what) for _, _, b in branches]
    if not any(k.startswith("DECIMAL(") for k in kinds):
        return None
    changed = False
    for (owner, key, branch), kind in zip(branches, kinds, strict=True):
        wide = None
        literal = _literal_of(branch)
        if kind == "BIGINT" or (literal is not None and literal[1] == 0 and kind == "INTEGER"):
            inner = branch
            while isinstance(inner, exp.Paren):
                inner = inner.this
            small = kind == "INTEGER" and -2**31 <= (inner.meta or {}).get(_VALUE, _BIGINT) < 2**31
            wide = "DECIMAL(10, 0)" if small else "DECIMAL(20, 0)"
        if wide is not None:
            cast = exp.Cast(this=exp.Paren(this=branch.copy()), to=exp.DataType.build(wide))
            if isinstance(key, int):
                owner.expressions[key] = cast
            else:
                owner.set(key, cast)
            changed = True
    return _spark_meaning(node) if changed else None


# Expression nodes whose DuckDB translation (after _spark_meaning) gives Spark's value for
# every input, or fails where Spark fails: tests/spark/test_wrong_answers_dml_functions.py
# compares each with Spark over NULL, NaN, -0.0, Infinity, extremes and non-ASCII text.
# Anything else is refused: a DML expression must never store a value Spark would not.
_VERIFIED: frozenset[type] = frozenset({
    exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Neg,
    exp.Not, exp.And, exp.Or, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.EQ,
    exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.Is, exp.In, exp.Between,
    exp.Like, exp.Case, exp.If, exp.Coalesce, exp.Cast, exp.TryCast, exp.DataType,
    exp.DataTypeParam, exp.Upper, exp.Lower, exp.Length, exp.Substring, exp.Concat, exp.DPipe,
    exp.Abs, exp.Greatest, exp.Least, exp.Nullif, exp.IsNan, exp.DayOfWeek, exp.Year,
    exp.Month, exp.Day, exp.DayOfYear, exp.DayOfMonth, exp.TsOrDsToDate, exp.Trim, exp.Sign,
    exp.Pad, exp.Replace, exp.Left, exp.Right, exp.MD5, exp.SHA, exp.SHA2, exp.Initcap,
    exp.Ascii, exp.StrPosition, exp.Pow, exp.Reverse, exp.Repeat, exp.Nanvl,
})
# Functions sqlglot does not know, kept as calls: Spark name -> verified
_VERIFIED_CALLS = frozenset({"weekday", "pmod", "btrim"})


def _refuse_unverified(tree: exp.Expr, what: str) -> None:
    for node in tree.walk():
        if isinstance(node, exp.Anonymous):
            name = str(node.this).lower()
            if name in _VERIFIED_CALLS:
                continue
        elif type(node) in _VERIFIED and not (isinstance(node, exp.TryCast) and node.args.get("safe")) \
                and not (isinstance(node, exp.TsOrDsToDate) and node.args.get("format")):
            continue
        shown = node.sql(dialect="spark")
        kind = (f"function {node.sql_name().lower() if not isinstance(node, exp.Anonymous) else str(node.this).lower()}"
                if isinstance(node, exp.Func) else shown)
        raise UserError(f"{what}: {kind} is not supported in DML expressions (its result could "
                        f"differ from Spark's): {shown[:80]}")


def _not_float(value: exp.Expr) -> exp.Expr:
    """``value``, or an error when DuckDB types it FLOAT (4-byte floats mix with other types
    otherwise than in Spark)."""
    return exp.Case(ifs=[exp.If(this=exp.EQ(
        this=exp.Anonymous(this="typeof", expressions=[value.copy()]), expression=exp.Literal.string("FLOAT")),
        true=_fail("greatest/least of a float value is not supported in DML expressions"))],
        default=exp.Paren(this=value.copy()))


def _boolean(value: exp.Expr) -> exp.Expr:
    """``value``, or an error when DuckDB types it other than a boolean (Spark refuses a
    number or a string as a condition; DuckDB would cast it)."""
    kinds = [exp.Literal.string("BOOLEAN"), exp.Literal.string('"NULL"')]
    return exp.Case(ifs=[exp.If(this=exp.Not(this=exp.In(
        this=exp.Anonymous(this="typeof", expressions=[value.copy()]), expressions=kinds)),
        true=_fail("a condition that is not a boolean is not supported in DML expressions"))],
        default=exp.Paren(this=value.copy()))


def _integral(value: exp.Expr) -> exp.Expr:
    """``value``, or an error when DuckDB types it other than an integer."""
    kinds = [exp.Literal.string(k) for k in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT")]
    return exp.Case(ifs=[exp.If(this=exp.Not(this=exp.In(
        this=exp.Anonymous(this="typeof", expressions=[value.copy()]), expressions=kinds)),
        true=_fail("div of a value that is not an integer is not supported in DML expressions"))],
        default=exp.Paren(this=value.copy()))


# string functions: the arguments Spark casts to their text when they are not strings
_STRING_ARGS: dict[type, tuple[str, ...]] = {
    exp.Upper: ("this",), exp.Lower: ("this",), exp.Length: ("this",), exp.Initcap: ("this",),
    exp.Ascii: ("this",), exp.Reverse: ("this",), exp.Repeat: ("this",),
    exp.Trim: ("this", "expression"),
    exp.Pad: ("this", "fill_pattern"), exp.Replace: ("this", "expression", "replacement"),
    exp.StrPosition: ("this", "substr"),
    exp.MD5: ("this",), exp.SHA: ("this",), exp.SHA2: ("this",),
}


def _text(value: exp.Expr) -> exp.Expr:
    """``value`` as Spark's ``CAST(value AS STRING)``: DuckDB's text for strings, integers,
    decimals, booleans and dates; doubles laid out as Java's ``Double.toString`` (``NaN``,
    ``Infinity``, ``1.0E10``) and timestamps in the session time zone by
    ``segments.spark_text`` (floats refused)."""
    kind = exp.Anonymous(this="typeof", expressions=[value.copy()])
    text = exp.Cast(this=value.copy(), to=exp.DataType.build("VARCHAR"))
    plain = exp.Or(this=exp.In(this=kind.copy(), expressions=[
        exp.Literal.string(k) for k in ("VARCHAR", "TINYINT", "SMALLINT", "INTEGER", "BIGINT",
                                        "BOOLEAN", "DATE", '"NULL"')]),
        expression=exp.Like(this=kind.copy(), expression=exp.Literal.string("DECIMAL(%")))
    # DuckDB writes a decimal without integer digits (DECIMAL(2,2)) as .50; Spark as 0.50
    decimal = exp.Like(this=kind.copy(), expression=exp.Literal.string("DECIMAL(%"))
    zero = exp.Anonymous(this="regexp_replace", expressions=[
        text.copy(), exp.Literal.string("^(-?)\\."), exp.Literal.string("\\10.")])
    return exp.Case(ifs=[exp.If(this=decimal, true=zero), exp.If(this=plain, true=text)],
                    default=exp.Anonymous(this="__spark_text", expressions=[kind, text.copy()]))


_TEXT = {exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR}
_INTEGRAL = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
             exp.DataType.Type.BIGINT}


_INSTANT = {exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ}
# text that names its zone: an offset or a zone after the time of day, or a zone name at the end
_NAMES_ZONE = r"\d:\d\d(:\d\d(\.\d*)?)?\s*[A-Za-z+-]|[A-Za-z]\s*$"


def _instant(value: exp.Expr) -> exp.Expr:
    """Spark's ``CAST(value AS TIMESTAMP)``: a date, a TIMESTAMP_NTZ or text without a zone is
    a wall time of the session zone, read as Java reads it (``__local_instant``: a wall
    time in a daylight-saving overlap takes the earlier offset, where ICU takes the later
    one); text that names its zone, and instants, as DuckDB casts them."""
    kind = exp.Anonymous(this="typeof", expressions=[value.copy()])
    text = exp.Cast(this=value.copy(), to=exp.DataType.build("VARCHAR"))
    wall = exp.Anonymous(this="__local_instant", expressions=[
        exp.Cast(this=text.copy(), to=exp.DataType.build("TIMESTAMP"))])
    local = exp.Or(
        this=exp.In(this=kind.copy(), expressions=[exp.Literal.string("DATE"), exp.Literal.string("TIMESTAMP")]),
        expression=exp.And(
            this=exp.EQ(this=kind.copy(), expression=exp.Literal.string("VARCHAR")),
            expression=exp.Not(this=exp.Anonymous(this="regexp_matches", expressions=[
                text.copy(), exp.Literal.string(_NAMES_ZONE)]))))
    return exp.Case(ifs=[exp.If(this=local, true=wall)], default=exp.Cast(
        this=value.copy(), to=exp.DataType.build("TIMESTAMPTZ")))


def _local_instants(zone: Any) -> Any:
    """``__local_instant``: wall times (Arrow timestamps without a zone) of ``zone`` as
    instants, as Java's ``LocalDateTime.atZone`` reads them: in an overlap the earlier
    offset, in a gap the offset before it (the wall time moves forward by the gap)."""
    import datetime as dt

    import pyarrow.compute as pc

    utc = pa.timestamp("us", tz="UTC")

    def convert(wall: Any) -> Any:
        wall = wall.cast(pa.timestamp("us"))
        if isinstance(zone, dt.timezone):  # a fixed offset: no gaps, no overlaps
            shift = zone.utcoffset(None) // dt.timedelta(microseconds=1)
            return pc.subtract(wall.cast(pa.int64()), shift).cast(utc)
        micros = wall.cast(pa.int64()).to_pylist()
        try:  # offsets of the naive wall times (fold 0), kept in integers: year 1 in a zone
            # east of UTC is an instant of year 0, which Python's datetime cannot hold
            shifts = [None if v is None else zone.utcoffset(v) // dt.timedelta(microseconds=1)
                      for v in wall.to_pylist()]
        except (ValueError, OverflowError) as err:
            raise ValueError(f"a timestamp outside the years 1-9999: {err}") from err
        return pa.array([None if m is None else m - s for m, s in zip(micros, shifts, strict=True)],
                        pa.int64()).cast(utc)

    return convert


_DECIMAL = {exp.DataType.Type.DECIMAL}


def _decimal(value: exp.Expr, to: exp.DataType) -> exp.Expr:
    """Spark's ``CAST(value AS DECIMAL(p, s))``: a double through its shortest text, as
    Scala's ``BigDecimal(double)`` reads it (Java's ``Double.toString``), then rounded half up
    (0.145D is 0.15; DuckDB rounds the binary double 0.14499... to 0.14); NaN and Infinity
    are NULL, as in Spark (ANSI mode too); other values as DuckDB casts them."""
    if not to.expressions:  # Spark's DECIMAL is a decimal(10,0); DuckDB's a DECIMAL(18,3)
        to = exp.DataType.build("DECIMAL(10, 0)")
    value = _number_text(value)
    kind = exp.Anonymous(this="typeof", expressions=[value.copy()])
    scale = to.expressions[1].this if len(to.expressions) > 1 else exp.Literal.number(0)
    via_text = exp.Cast(this=exp.Anonymous(this="__spark_double_decimal", expressions=[
        exp.TryCast(this=value.copy(), to=exp.DataType.build("DOUBLE")), scale.copy()]), to=to.copy())
    # Spark: NaN and Infinity are no decimal: NULL (ANSI mode too)
    number = exp.TryCast(this=value.copy(), to=exp.DataType.build("DOUBLE"))
    special = exp.and_(
        exp.In(this=kind.copy(), expressions=[exp.Literal.string("DOUBLE"), exp.Literal.string("FLOAT")]),
        exp.or_(exp.Anonymous(this="isnan", expressions=[number]),
                exp.Anonymous(this="isinf", expressions=[number.copy()])))
    return exp.Case(ifs=[exp.If(this=special, true=exp.Cast(this=exp.Null(), to=to.copy())),
                         exp.If(this=exp.In(this=kind, expressions=[  # a float as its double
                             exp.Literal.string("DOUBLE"), exp.Literal.string("FLOAT")]), true=via_text)],
                    default=exp.Cast(this=value.copy(), to=to.copy()))


def _number_text(value: exp.Expr) -> exp.Expr:
    """``value``, or an error when it is text with an underscore: DuckDB reads ``'1_000'``
    as 1000 in a cast to a decimal or a double, Spark fails."""
    bad = exp.and_(
        exp.EQ(this=exp.Anonymous(this="typeof", expressions=[value.copy()]),
               expression=exp.Literal.string("VARCHAR")),
        exp.Anonymous(this="contains", expressions=[
            exp.Cast(this=value.copy(), to=exp.DataType.build("VARCHAR")), exp.Literal.string("_")]))
    return exp.Case(ifs=[exp.If(this=bad, true=_fail(
        "[CAST_INVALID_INPUT] cannot cast text with '_' to a number"))], default=value.copy())


_FRACTIONAL = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT}


def _not_decimal_quotient(div: exp.Div) -> exp.Expr:
    """``div``, refused where Spark divides decimals (a decimal operand and no double or
    float one) and the operands' types were not known to :func:`_decimal_arithmetic`, which
    gives Spark's exact quotient (``decimal(10,2) / 2`` is a decimal(14,6) rounded half up);
    DuckDB's is a double, which would store 0.14 for 0.29 / 2 where Spark stores 0.15."""
    kinds = [exp.Anonymous(this="typeof", expressions=[e.copy()]) for e in (div.this, div.expression)]
    decimal = exp.or_(*(exp.Like(this=k.copy(), expression=exp.Literal.string("DECIMAL(%"))
                        for k in kinds))
    floating = exp.or_(*(exp.In(this=k.copy(), expressions=[exp.Literal.string("DOUBLE"),
                                                              exp.Literal.string("FLOAT")])
                         for k in kinds))
    return exp.Case(ifs=[exp.If(this=exp.and_(decimal, exp.not_(floating)), true=_fail(
        "a division with a decimal operand is not evaluated as Spark divides decimals "
        "(exactly, at Spark's result scale): cast an operand to double, e.g. "
        "cast(p AS double) / 2"))], default=div)


def _fail(message: str) -> exp.Expr:
    return exp.Anonymous(this="error", expressions=[exp.Literal.string(message)])


def _nonzero(divisor: exp.Expr, dividend: exp.Expr) -> exp.Expr:
    """``divisor``, or an error where it is zero and ``dividend`` is not NULL (Spark's ANSI
    DIVIDE_BY_ZERO; a NULL divided by zero is NULL there)."""
    zero = exp.and_(exp.EQ(this=divisor.copy(), expression=exp.Literal.number(0)),
                    exp.Not(this=exp.Is(this=exp.Paren(this=dividend.copy()), expression=exp.Null())))
    return exp.Case(ifs=[exp.If(this=zero, true=_fail("[DIVIDE_BY_ZERO] Division by zero"))],
                    default=divisor.copy())


def _cast(value: exp.Expr, to: exp.DataType) -> exp.Expr:
    """Spark's (ANSI) ``CAST(value AS to)``: fails where Spark fails, never another value."""
    if to.this in _INTEGRAL:
        # Spark truncates toward zero (DuckDB rounds) and fails on NaN, Infinity and
        # text that is not a number
        # doubles and floats truncated as doubles (exact; DuckDB's cast of a double to a
        # decimal is inexact past 2^53), other values through a decimal
        kind0 = exp.Anonymous(this="typeof", expressions=[value.copy()])
        exact = exp.Case(ifs=[exp.If(
            this=exp.In(this=kind0, expressions=[exp.Literal.string("DOUBLE"), exp.Literal.string("FLOAT")]),
            true=exp.Cast(this=exp.Anonymous(this="trunc", expressions=[
                exp.TryCast(this=value.copy(), to=exp.DataType.build("DOUBLE"))]), to=to.copy()))],
            default=exp.Cast(this=exp.Anonymous(this="trunc", expressions=[
                exp.TryCast(this=value.copy(), to=exp.DataType.build("DECIMAL(38, 10)"))]), to=to.copy()))
        invalid = _fail(f"[CAST_INVALID_INPUT] cannot cast the value to {to.sql(dialect='spark')}")
        # Spark 4 (ANSI) takes text as an integer only when it is one: digits with a
        # sign, between blanks and controls ('1.5', '1e3', '1_000' fail; DuckDB reads them)
        kind = exp.Anonymous(this="typeof", expressions=[value.copy()])
        not_integer = exp.and_(
            exp.EQ(this=kind.copy(), expression=exp.Literal.string("VARCHAR")),
            exp.not_(exp.Anonymous(this="regexp_full_match", expressions=[
                exp.Cast(this=value.copy(), to=exp.DataType.build("VARCHAR")),
                exp.Literal.string(f"{BLANKS_PATTERN}*[+-]?[0-9]+{BLANKS_PATTERN}*")])))
        ifs = [exp.If(this=exp.Is(this=value.copy(), expression=exp.Null()), true=exp.Null()),
               exp.If(this=not_integer, true=invalid.copy())]
        if to.this == exp.DataType.Type.BIGINT:
            # Spark: a double or float of 2^63 passes its range check (Long.MaxValue is 2^63
            # as a double) and Java's conversion saturates: 9223372036854775807
            top = exp.and_(
                exp.In(this=kind.copy(), expressions=[exp.Literal.string("DOUBLE"), exp.Literal.string("FLOAT")]),
                exp.EQ(this=exp.TryCast(this=value.copy(), to=exp.DataType.build("DOUBLE")),
                       expression=exp.Literal.number("9223372036854775808.0")))
            ifs.append(exp.If(this=top, true=exp.Literal.number(2**63 - 1)))
        checked = exp.Case(ifs=ifs, default=exp.Coalesce(this=exact, expressions=[invalid]))
        return exp.Cast(this=checked, to=to.copy())
    if to.this in _TEXT:
        return _text(value)
    if to.this in _INSTANT:  # TIMESTAMP '...' too
        return _instant(value)
    if to.this in _DECIMAL:
        return _decimal(value, to)
    if to.this in _FRACTIONAL:  # text as Java reads it ('1.5d', ' 2F ', 'inf'); a decimal
        # through its text (DuckDB's own cast of a wide decimal may be an ulp off)
        kind = exp.Anonymous(this="typeof", expressions=[value.copy()])
        nearest = exp.Case(ifs=[exp.If(
            this=exp.Like(this=kind, expression=exp.Literal.string("DECIMAL(%")),
            true=exp.Cast(this=_varchar(value), to=to.copy()))], default=exp.Cast(this=value.copy(), to=to.copy()))
        return _from_text(value, to, exp.Anonymous(this="__spark_double", expressions=[
            _varchar(value), exp.Literal.string("FLOAT" if to.this == exp.DataType.Type.FLOAT
                                                else "DOUBLE")]), nearest)
    if to.this == exp.DataType.Type.BOOLEAN:  # ' TRUE ', 'y', '0'
        return _from_text(value, to, exp.Anonymous(this="__spark_boolean", expressions=[_varchar(value)]))
    if to.this == exp.DataType.Type.DATE:  # '2024', '2024-1', '2024-01-05T10:00'
        return _from_text(value, to, exp.Anonymous(this="__spark_date", expressions=[_varchar(value)]))
    return exp.Cast(this=value.copy(), to=to.copy())


def _varchar(value: exp.Expr) -> exp.Expr:
    return exp.Cast(this=value.copy(), to=exp.DataType.build("VARCHAR"))


def _from_text(value: exp.Expr, to: exp.DataType, parsed: exp.Expr,
               other: exp.Expr | None = None) -> exp.Expr:
    """``parsed`` (Spark's reading of ``value``'s text, ``segments.spark_casts``) where
    ``value`` is text, else ``other`` (default: DuckDB's cast of ``value`` to ``to``)."""
    kind = exp.Anonymous(this="typeof", expressions=[value.copy()])
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=kind, expression=exp.Literal.string("VARCHAR")),
                                true=exp.Cast(this=parsed, to=to.copy()))],
                    default=other if other is not None else exp.Cast(this=value.copy(), to=to.copy()))


def _spark_meaning(node: exp.Expr) -> exp.Expr:
    """Rewrite one node whose DuckDB translation means something else than in Spark (ANSI
    mode, Spark 4's default): where Spark fails, DuckDB must fail (the statement then
    changes nothing), never write another value. tests/spark/test_wrong_answers_dml.py
    compares each with Spark."""
    if isinstance(node, exp.TryCast) and not node.args.get("safe") or type(node) is exp.Cast:
        # sqlglot reads Spark's CAST as TRY_CAST (NULL on failure); ANSI CAST fails; int(x),
        # double(x), DATE '...' are a CAST
        return _cast(node.this, node.args["to"])
    if isinstance(node, (exp.Left, exp.Right)):  # Spark: a length below 1 is the empty string
        return type(node)(this=_text(node.this), expression=exp.Greatest(
            this=node.expression.copy(), expressions=[exp.Literal.number(0)]))
    if isinstance(node, (exp.And, exp.Or)):
        return type(node)(this=_boolean(node.this), expression=_boolean(node.expression))
    if isinstance(node, exp.Not):
        return exp.Not(this=_boolean(node.this))
    if isinstance(node, exp.If) and isinstance(node.parent, exp.Case):
        if node.parent.args.get("this") is not None:
            return node  # CASE x WHEN value: compared with x
        return exp.If(this=_boolean(node.this), true=node.args["true"])
    if isinstance(node, exp.If):  # if(c, a, b)
        out = node.copy()
        out.set("this", _boolean(node.this))
        return out
    if isinstance(node, (exp.Greatest, exp.Least)):
        # Spark widens float and integer arguments to double, DuckDB to float: refused
        out = node.copy()  # keeps ignore_nulls: Spark's greatest skips NULL arguments
        out.set("this", _not_float(node.this))
        out.set("expressions", [_not_float(e) for e in node.expressions])
        return out
    if isinstance(node, exp.IntDiv):  # Spark's div of integral values (as longs: the int
        # -2^31 div -1 is 2^31); decimals are divided by _decimal_arithmetic; others refused
        left, right = (exp.Cast(this=_integral(e), to=exp.DataType.build("BIGINT"))
                       for e in (node.this, node.expression))
        return exp.IntDiv(this=left, expression=_nonzero(right, left))
    if isinstance(node, (exp.Upper, exp.Lower, exp.Initcap)):  # Unicode's full case mappings
        kind = {exp.Upper: "upper", exp.Lower: "lower", exp.Initcap: "initcap"}[type(node)]
        return exp.Anonymous(this="__spark_case", expressions=[exp.Literal.string(kind),
                                                               _text(node.this)])
    if isinstance(node, tuple(_STRING_ARGS)):
        # Spark casts a non-string argument of a string function to its text
        args = {k: (_text(v) if k in _STRING_ARGS[type(node)] and isinstance(v, exp.Expr) else v)
                for k, v in node.args.items()}
        return type(node)(**args)
    if isinstance(node, (exp.Concat, exp.DPipe)):
        return node.__class__(**{k: ([_text(a) for a in v] if isinstance(v, list) else
                                     _text(v) if k in ("this", "expression") else v)
                                 for k, v in node.args.items()})
    if isinstance(node, exp.Sign):
        # Spark's signum is a double: NaN stays NaN, -0.0 stays -0.0
        x = exp.Cast(this=node.this.copy(), to=exp.DataType.build("DOUBLE"))
        return exp.Case(ifs=[exp.If(this=exp.Or(this=exp.EQ(this=x.copy(), expression=exp.Literal.number(0)),
                                                expression=exp.Anonymous(this="isnan", expressions=[x.copy()])),
                                    true=x.copy())],
                        default=exp.Cast(this=exp.Sign(this=x.copy()), to=exp.DataType.build("DOUBLE")))
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "pmod" and len(node.expressions) == 2:
        a, b = (exp.Paren(this=e.copy()) for e in node.expressions)
        m = exp.Paren(this=exp.Mod(this=a, expression=_nonzero(b, a)))
        return exp.Case(ifs=[exp.If(this=exp.LT(this=m.copy(), expression=exp.Literal.number(0)),
                                    true=exp.Mod(this=exp.Paren(this=exp.Add(this=m.copy(), expression=b.copy())),
                                                 expression=b.copy()))], default=m)
    if isinstance(node, exp.Nanvl):
        a, b = exp.Paren(this=node.this.copy()), exp.Paren(this=node.expression.copy())
        return exp.Case(ifs=[exp.If(this=exp.Anonymous(this="isnan", expressions=[a.copy()]), true=b)],
                        default=a)
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "btrim" and node.expressions:
        return exp.Trim(this=node.expressions[0].copy(),
                        expression=node.expressions[1].copy() if len(node.expressions) > 1 else None)
    if isinstance(node, exp.TsOrDsToDate):  # to_date(x), year(x), ...: ANSI fails on bad text
        return _cast(node.this, exp.DataType.build("DATE"))
    if isinstance(node, exp.Div):
        div = exp.Div(this=node.this.copy(), expression=_nonzero(node.expression, node.this),
                      typed=node.args.get("typed"), safe=False) if node.args.get("safe") else node
        return _not_decimal_quotient(div)
    if isinstance(node, exp.Mod):
        return type(node)(this=node.this.copy(), expression=_nonzero(node.expression, node.this))
    if isinstance(node, exp.Substring):
        # Spark: position 0 is position 1; a negative length is the empty string
        start = node.args.get("start")
        length = node.args.get("length")
        if start is not None:
            start = exp.Case(ifs=[exp.If(this=exp.EQ(this=start.copy(), expression=exp.Literal.number(0)),
                                         true=exp.Literal.number(1))], default=start.copy())
        if length is not None:
            length = exp.Greatest(this=length.copy(), expressions=[exp.Literal.number(0)])
        return exp.Substring(this=_text(node.this), start=start, length=length)
    if isinstance(node, exp.DayOfWeek):  # Spark: 1 = Sunday; DuckDB: 0 = Sunday
        return exp.Add(this=node.copy(), expression=exp.Literal.number(1))
    if isinstance(node, exp.Anonymous) and str(node.this).lower() == "weekday" and len(node.expressions) == 1:
        # Spark: 0 = Monday; DuckDB's ISODOW: 1 = Monday
        return exp.Sub(this=exp.Anonymous(this="isodow", expressions=[node.expressions[0].copy()]),
                       expression=exp.Literal.number(1))
    if isinstance(node, exp.IsNan):  # Spark: isnan(NULL) is false
        return exp.Coalesce(this=node.copy(), expressions=[exp.false()])
    if isinstance(node, exp.Like) and not isinstance(node.parent, exp.Escape):
        # Spark's LIKE escapes with a backslash unless told otherwise
        return exp.Escape(this=exp.Like(this=_text(node.this), expression=_text(node.expression)),
                          expression=exp.Literal.string("\\"))
    return node


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def duckdb_connection(time_zone: str = "UTC") -> Any:
    """A DuckDB connection that evaluates :func:`to_duckdb`'s SQL in Spark's session time
    zone ``time_zone`` (a Spark zone id: ``segments.timezones``).

    Raises:
        UserError: ``time_zone`` is no zone DuckDB knows.
    """
    import duckdb

    zone = duckdb_zone(time_zone)
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    try:  # the text, date and fields of a timestamp, and timestamps read without an offset
        con.execute(f"SET TimeZone = '{zone}'")
    except duckdb.Error as err:
        con.close()
        raise UserError(f"session time zone {time_zone!r} is not known to DuckDB, which "
                        "evaluates DML expressions: name another region") from err
    con.create_function("__spark_text", spark_text, ["VARCHAR", "VARCHAR"], "VARCHAR",
                        type="arrow", null_handling="special", side_effects=False)
    con.create_function("__spark_decimal", spark_decimal_op,
                        ["VARCHAR", "VARCHAR", "VARCHAR", "INTEGER", "INTEGER"], "VARCHAR",
                        type="arrow", null_handling="special", side_effects=False)
    con.create_function("__spark_double", spark_double, ["VARCHAR", "VARCHAR"], "DOUBLE",
                        type="arrow", null_handling="special", side_effects=False)
    con.create_function("__spark_double_decimal", spark_double_decimal, ["DOUBLE", "INTEGER"],
                        "VARCHAR", type="arrow", null_handling="special", side_effects=False)
    con.create_function("__spark_boolean", spark_boolean, ["VARCHAR"], "BOOLEAN",
                        type="arrow", null_handling="special", side_effects=False)
    con.create_function("__spark_date", spark_date, ["VARCHAR"], "DATE",
                        type="arrow", null_handling="special", side_effects=False)
    con.create_function("__spark_case", spark_case, ["VARCHAR", "VARCHAR"], "VARCHAR",
                        type="arrow", null_handling="special", side_effects=False)
    con.create_function("__local_instant", _local_instants(session_zone(time_zone)),
                        ["TIMESTAMP"], "TIMESTAMPTZ", type="arrow", null_handling="special",
                        side_effects=False)
    return con


def _load(con: Any, name: str, data: pa.Table) -> None:
    """``data`` as DuckDB's table ``name``, copied in: a query over a registered Arrow table
    pushes its filters into Arrow, where NaN >= 0 is false and NaN = NaN is not true (Spark
    and DuckDB: NaN is the greatest value and equals NaN)."""
    con.register("__arrow", data)
    con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM __arrow")
    con.unregister("__arrow")


def _run(con: Any, sql: str, what: str) -> pa.Table:
    import duckdb

    try:
        return con.execute(sql).to_arrow_table()
    except duckdb.Error as err:
        raise UserError(f"{what}: {str(err).splitlines()[0]}") from err


def _conform(table: Table, data: pa.Table, what: str, time_zone: str = "UTC") -> pa.Table:
    """``data`` with the table's columns cast to its types (Spark's store assignment in
    the session time zone ``time_zone``, then safe casts only)."""
    arrays = []
    for c in table.schema.columns:
        col = data.column(c.name)
        want = arrow_type(c.type)
        if col.type != want:
            try:
                col = _store_assignment(col, want, f"{what}: column {c.name} ({c.type})",
                                        time_zone)
                col = col.cast(want, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                raise UserError(f"{what}: column {c.name} ({c.type}) cannot hold the new "
                                f"values: {err}") from err
        if pa.types.is_timestamp(want):
            _check_instants(col, f"{what}: column {c.name} ({c.type})")
        arrays.append(col)
    return pa.table(arrays, names=list(table.schema.column_names))


# instants the store writes (its statistics hold Python datetimes): years 1-9999 in UTC
_FIRST_INSTANT, _LAST_INSTANT = -62135596800000000, 253402300799999999


def _check_instants(col: Any, what: str) -> None:
    """Refuse timestamps outside years 1-9999 of UTC (e.g. midnight of 0001-01-01 in a zone
    east of UTC): Spark holds them, the store's writer does not."""
    import pyarrow.compute as pc

    micros = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    low, high = pc.min_max(micros).values()
    if low.is_valid and (low.as_py() < _FIRST_INSTANT or high.as_py() > _LAST_INSTANT):
        raise UserError(f"{what}: a timestamp outside the years 1 to 9999 of UTC cannot be "
                        "stored")


def _kind(t: pa.DataType) -> str:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return "datetime"
    return "other"


def _zone_cast(col: Any, spark_type: str, time_zone: str, what: str) -> Any:
    """``col`` cast to ``spark_type`` as Spark casts it in the session time zone (the casts
    of :func:`to_duckdb`: ``string`` is Spark's text, ``segments.spark_text``)."""
    con = duckdb_connection(time_zone)
    try:
        con.register("__col", pa.table({"v": col}))
        value = to_duckdb(f"cast(v AS {spark_type})", what, Types(con, "FROM __col"))
        return _run(con, f"SELECT {value} AS v FROM __col", what).column(0)
    finally:
        con.close()


def _store_assignment(col: Any, want: pa.DataType, what: str = "", time_zone: str = "UTC") -> Any:
    """``col`` as Spark's ANSI store assignment takes it before the cast to ``want``: a
    number, date or boolean into a string column is its Spark text (doubles as Java prints
    them, timestamps in the session time zone; floats refused), a date or timestamp into
    a date or timestamp column is read in the session time zone (a date is its midnight
    there, a timestamp its date there, a TIMESTAMP_NTZ its wall time there), a string or
    boolean into a number column, a
    number into a boolean one, a string into a date or timestamp one is refused
    (``INCOMPATIBLE_DATA_FOR_TABLE``); numbers are rounded toward zero into an integer column
    (3.5 -> 3), half away from zero into a decimal of smaller scale (1.225 -> 1.23). What is
    still out of range (NaN, Infinity, overflow) then fails the safe cast, as in Spark."""
    import pyarrow.compute as pc

    src, dst = _kind(col.type), _kind(want)
    if pa.types.is_null(col.type) or src == "other" or dst == "other":
        return col
    if dst == "string" and src != "string":
        if pa.types.is_floating(col.type) and col.type.bit_width == 64:
            try:
                return pa.array([None if v is None else java_double_text(repr(v))
                                 for v in col.to_pylist()], pa.string())
            except ValueError as err:
                raise UserError(f"{what}: {err}") from err
        if pa.types.is_timestamp(col.type) or pa.types.is_decimal(col.type):
            # Arrow writes a decimal zero of scale 10 as 0E-10; Spark (and DuckDB) 0.0000000000
            return _zone_cast(col, "string", time_zone, what)
        if not pa.types.is_floating(col.type):
            return col
    elif src == dst == "datetime":
        if pa.types.is_date(want) and pa.types.is_timestamp(col.type):
            return _zone_cast(col, "date", time_zone, what)
        if pa.types.is_timestamp(want) and (pa.types.is_date(col.type) or (
                col.type.tz is None) != (want.tz is None)):
            return _zone_cast(col, "timestamp_ntz" if want.tz is None else "timestamp",
                              time_zone, what)
        return col
    elif src == dst:
        pass
    else:
        raise UserError(f"{what} cannot hold {col.type} values (Spark's ANSI store "
                        "assignment refuses it: write an explicit CAST)")
    if dst == "string":
        raise UserError(f"{what} cannot hold float values as text exactly as Spark "
                        "writes them: cast them to double first")

    fractional = pa.types.is_floating(col.type) or pa.types.is_decimal(col.type)
    if pa.types.is_integer(want) and fractional:
        return pc.round(col, 0, round_mode="towards_zero")
    if pa.types.is_decimal(want) and pa.types.is_floating(col.type):
        return _double_decimals(col, want, what)
    if pa.types.is_decimal(want) and pa.types.is_decimal(col.type) and col.type.scale > want.scale:
        return pc.round(col, want.scale, round_mode="half_towards_infinity")
    return col


def _double_decimals(col: Any, want: pa.DataType, what: str) -> Any:
    """Doubles as Spark stores them into a decimal column: each double's Java text (Scala's
    ``BigDecimal(double)``) rounded half up to the column's scale (0.145 -> 0.15, where
    rounding the binary double gives 0.14). NaN and Infinity are NULL, as Spark stores
    them; a double whose Java text may differ between Java versions is refused."""
    import math
    from decimal import ROUND_HALF_UP, Context, Decimal

    values = [None if v is None or not math.isfinite(v) else v for v in col.to_pylist()]
    quantum = Decimal(1).scaleb(-want.scale)
    context = Context(prec=80, rounding=ROUND_HALF_UP)
    out: list[Decimal | None] = []
    for v in values:
        if v is None:
            out.append(None)
            continue
        if v != 0:
            try:
                java_double_text(repr(v))  # Java versions print (and Spark reads) it alike
            except ValueError:
                raise UserError(f"{what}: cannot store the double {v!r} exactly as Spark does "
                                "(Java versions read it differently): only values from 1e-11 "
                                "to 2^53 with at most 15 digits, or from 0.001 to 1e7, are "
                                "stored") from None
        out.append(Decimal(repr(v)).quantize(quantum, context=context))
    return pa.array(out, pa.decimal128(38, want.scale))


def evaluate_assignments(
    table: Table, rows: pa.Table, assignments: Mapping[str, str], *, alias: str | None = None,
    time_zone: str = "UTC",
) -> pa.Table:
    """``rows`` (the table's columns) with ``assignments`` (column -> Spark SQL expression
    over the row's columns) applied in Spark's session time zone ``time_zone``, cast to
    the table's types."""
    con = duckdb_connection(time_zone)
    con.register("__rows", rows)  # a projection: no filter is pushed into Arrow (_load)
    name = _quote(alias or table.name.table)
    sets = {c.lower(): v for c, v in assignments.items()}
    types = Types(con, f"FROM __rows AS {name}")
    select = ", ".join(
        f"({to_duckdb(sets[c], 'UPDATE SET ' + c, types)}) AS {_quote(c)}" if c in sets else _quote(c)
        for c in table.schema.column_names)
    out = _run(con, f"SELECT {select} FROM __rows AS {name}", "UPDATE SET")
    con.close()
    return _conform(table, out, "UPDATE SET", time_zone)


def filter_mask(table: Table, rows: pa.Table, condition: str, *, time_zone: str = "UTC") -> np.ndarray:
    """Rows of ``rows`` (decoded values) for which the Spark SQL ``condition`` is TRUE (in
    Spark's session time zone ``time_zone``)."""
    con = duckdb_connection(time_zone)
    con.register("__rows", rows)  # a projection: no filter is pushed into Arrow (_load)
    source = f"FROM __rows AS {_quote(table.name.table)}"
    got = _run(con, f"SELECT COALESCE(({to_duckdb(condition, 'WHERE', Types(con, source))}), "
               f"FALSE) AS m {source}", "WHERE")
    con.close()
    return np.asarray(got.column(0).to_numpy(zero_copy_only=False), dtype=bool)


def update_rows(
    table: Table, assignments: Mapping[str, str], where: str | Expr | None, *,
    time_zone: str = "UTC",
) -> DmlResult:
    """``UPDATE table SET ... WHERE ...`` with SQL expressions evaluated here (DuckDB), in
    Spark's session time zone ``time_zone`` (``segments.timezones``)."""
    from carbonstore.segments import dml

    duckdb_zone(time_zone)  # a bad zone is a user error before anything is read
    # Spark refuses a SET value of a type the column cannot take (a string into an int
    # column) whether or not a row matches: check the types on no rows first
    empty = pa.schema([pa.field(c.name, arrow_type(c.type)) for c in table.schema.columns]).empty_table()
    evaluate_assignments(table, empty, {c.lower(): v for c, v in assignments.items()
                                        if c.lower() in table.schema.column_names},
                         time_zone=time_zone)
    return dml.apply_update(table, assignments, where, time_zone=time_zone,
                            evaluate=lambda rows, sets: evaluate_assignments(
                                table, rows, sets, time_zone=time_zone))


# ---- MERGE ------------------------------------------------------------------------------------
def _assigned(
    given: Mapping[str, str] | None, names: Sequence[str], source: pa.Table, alias: str,
    table: Table, what: str,
) -> dict[str, str]:
    """Target column -> SQL expression of an UPDATE SET or INSERT clause; ``None`` (``*``):
    every target column from the source's column of the same name."""
    out = ({c.lower(): v for c, v in given.items()} if given is not None
           else {c: f"{alias}.`{c}`" for c in names if c in source.column_names})
    bad = [c for c in out if c not in names]
    if bad:
        raise UserError(f"{what}: unknown column(s) {', '.join(bad)} of {table.name}")
    return out


def _key_pairs(on: str, target: str, source: str) -> list[tuple[str, str]]:
    """(target column, source column) of the top-level ``t.a = s.b`` conjuncts of ``on``."""
    try:
        tree = sqlglot.parse_one(on, read="spark")
    except (ParseError, TokenError, RecursionError) as err:
        raise UserError(f"MERGE ON: cannot parse {on!r}") from err
    out = []
    terms = and_terms(tree)
    for c in terms:
        if not isinstance(c, exp.EQ):
            continue
        left, right = c.left, c.right
        if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
            continue
        sides = {left.table.lower(): left.name.lower(), right.table.lower(): right.name.lower()}
        if target.lower() in sides and source.lower() in sides and target.lower() != source.lower():
            out.append((sides[target.lower()], sides[source.lower()]))
    return out


def _target_columns(on: str, target: str, names: list[str]) -> list[str]:
    """Target columns the ON condition references (qualified by the target alias, or
    unqualified names of the table)."""
    tree = sqlglot.parse_one(on, read="spark")
    out = []
    for col in tree.find_all(exp.Column):
        name = col.name.lower()
        if name in names and (not col.table or col.table.lower() == target) and name not in out:
            out.append(name)
    return out


def _group_locations(hit: pa.Table) -> dict[tuple[str, str], Any]:
    """(segment, file) -> positions of a table of row locations."""
    import pyarrow.compute as pc

    out: dict[tuple[str, str], Any] = {}
    if not hit.num_rows:
        return out
    key = pc.binary_join_element_wise(hit.column(SEGMENT_COLUMN), hit.column(FILE_COLUMN), "\0")
    pos = hit.column(POS_COLUMN).to_numpy()
    keys = key.to_numpy(zero_copy_only=False)
    order = np.argsort(keys, kind="stable")
    keys, pos = keys[order], pos[order]
    bounds = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        s_, _, f_ = str(keys[a]).partition("\0")
        out[(s_, f_)] = pos[a:b]
    return out


def _literal(v: Any) -> str | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str) and "'" not in v and "\\" not in v:
        return f"'{v}'"
    return None


_RANGE_TYPES = frozenset({"byte", "short", "int", "long", "string"})


def _prune_filter(table: Table, source: pa.Table, pairs: list[tuple[str, str]]) -> str | None:
    """``k >= min AND k <= max`` of the source keys, for target keys the index prunes on."""
    import pyarrow.compute as pc

    terms = []
    for tcol, scol in pairs:
        if tcol not in table.schema.column_names or scol not in source.column_names:
            continue
        if table.schema.column(tcol).type.name not in _RANGE_TYPES:
            continue
        if tcol in {c.lower() for c in table.schema.dictionary_columns}:
            continue
        stype = source.column(scol).type
        if not (pa.types.is_integer(stype) if table.schema.column(tcol).type.name != "string"
                else pa.types.is_string(stype) or pa.types.is_large_string(stype)):
            continue
        mm = pc.min_max(source.column(scol))
        lo, hi = _literal(mm["min"].as_py()), _literal(mm["max"].as_py())
        if lo is None or hi is None:
            continue
        terms.append(f"`{tcol}` >= {lo} AND `{tcol}` <= {hi}")
    return " AND ".join(terms) or None


def _typed_null(table: Table, name: str) -> str:
    """A NULL of column ``name``'s type (DuckDB types a bare NULL INTEGER, which the store
    assignment into a date, timestamp or boolean column refuses)."""
    spark_type = str(table.schema.column(name).type)
    try:
        return f"CAST(NULL AS {exp.DataType.build(spark_type, dialect='spark').sql(dialect='duckdb')})"
    except (ParseError, TokenError, ValueError):
        return "NULL"


def _not_earlier(conditions: list[str | None], k: int, what: str, types: Types) -> str:
    """SQL: clause ``k``'s condition holds and no earlier clause's does (NULL is not TRUE)."""
    parts = []
    for i, c in enumerate(conditions[: k + 1]):
        cond = "TRUE" if c is None else f"COALESCE(({to_duckdb(c, what, types)}), FALSE)"
        parts.append(cond if i == k else f"NOT {cond}")
    return " AND ".join(parts)


def merge_rows(
    table: Table,
    source: pa.Table,
    *,
    on: str | Sequence[str],
    matched: Sequence[WhenMatched] = (),
    not_matched: Sequence[WhenNotMatched] = (),
    target_alias: str = "t",
    source_alias: str = "s",
    time_zone: str = "UTC",
) -> DmlResult:
    """``MERGE INTO table AS t USING source AS s ON ... WHEN ...``, one commit.

    Args:
        table: the target.
        source: the source rows (an Arrow table).
        on: a Spark SQL condition over both aliases, or column names equal in both.
        matched: WHEN MATCHED clauses, in order.
        not_matched: WHEN NOT MATCHED clauses, in order.
        time_zone: Spark's session time zone the expressions are evaluated in
            (``segments.timezones``).
    """
    if not matched and not not_matched:
        raise UserError("MERGE needs at least one WHEN clause")
    duckdb_zone(time_zone)
    ta, sa = target_alias.lower(), source_alias.lower()
    if ta == sa:
        raise UserError("MERGE: the target and the source need different aliases")
    source = source.rename_columns([c.lower() for c in source.column_names])
    if not isinstance(on, str):
        names = [c.lower() for c in on]
        if not names:
            raise UserError("MERGE: give the ON condition or the key columns")
        on = " AND ".join(f"{ta}.`{c}` = {sa}.`{c}`" for c in names)
    pairs = _key_pairs(on, ta, sa)
    where = _prune_filter(table, source, pairs) if pairs else None
    to_duckdb(on, "MERGE ON")  # a condition that cannot be evaluated fails before any read
    names = list(table.schema.column_names)
    on_columns = _target_columns(on, ta, names)

    tq, sq = _quote(ta), _quote(sa)
    loc = f"{tq}.{SEGMENT_COLUMN}, {tq}.{FILE_COLUMN}, {tq}.{POS_COLUMN}"

    def join_keys(snap: TableStatusSnapshot, segments: Sequence[str] | None) -> tuple[Any, str, Any]:
        """A connection holding the target's key rows (``__keys``) and the source, the ON
        condition as DuckDB SQL, and the target rows that join a source row (what the
        MERGE read: docs/tablestatus.md, "Conflict rules") per data file."""
        from carbonstore.pruning.plan import bind_where

        expr = bind_where(table, where) if where else AlwaysTrue()
        # The join reads only the target columns ON names; the matched rows are then
        # fetched whole (only their row groups), so a MERGE of few rows into a large table
        # moves the key columns, not the table.
        keys = scan_rows(table, expr, with_rows=True, columns=on_columns or names[:1],
                         snapshot=snap, segments=segments).rows
        con = duckdb_connection(time_zone)
        _load(con, "__keys", keys)
        _load(con, "__source", source)
        con.execute(f"CREATE VIEW {sq} AS SELECT * FROM __source")
        on_sql = to_duckdb(on, "MERGE ON", Types(con, f"FROM __keys AS {tq} CROSS JOIN {sq}"))
        hit = _run(con, f"SELECT DISTINCT {loc} FROM __keys AS {tq} JOIN {sq} ON ({on_sql})",
                   "MERGE ON")
        return con, on_sql, {k: v.astype(np.uint32) for k, v in _group_locations(hit).items()}

    def joined(snap: TableStatusSnapshot, segments: Sequence[str]) -> Any:
        con, _, found = join_keys(snap, segments)
        con.close()
        return found

    def step(snap: TableStatusSnapshot) -> DmlResult:
        con, on_sql, read = join_keys(snap, None)
        target = fetch_rows(table, snap, read if matched else {})
        _load(con, "__target", target)
        con.execute(f"CREATE VIEW {tq} AS SELECT * FROM __target")
        join = f"FROM {tq} JOIN {sq} ON ({on_sql})"
        both = Types(con, f"FROM {tq} CROSS JOIN {sq}")
        if matched:
            dup = _run(con, f"SELECT count(*) AS n {join} GROUP BY {loc} HAVING count(*) > 1 "
                       "LIMIT 1", "MERGE ON")
            if dup.num_rows:
                raise UserError(
                    f"MERGE into {table.name}: a target row matched more than one source row; "
                    "make the source unique on the ON keys")
        gone: list[pa.Table] = []
        inserts: list[pa.Table] = []
        conditions = [c.condition for c in matched]
        for k, clause in enumerate(matched):
            pred = _not_earlier(conditions, k, "WHEN MATCHED AND", both)
            if clause.action == "delete":
                gone.append(_run(con, f"SELECT {loc} {join} WHERE {pred}", "WHEN MATCHED"))
                continue
            sets = _assigned(clause.assignments, names, source, sa, table, "MERGE UPDATE SET")
            select = ", ".join(
                f"({to_duckdb(sets[c], 'UPDATE SET ' + c, both)}) AS {_quote(c)}" if c in sets
                else f"{tq}.{_quote(c)}" for c in names)
            got = _run(con, f"SELECT {loc}, {select} {join} WHERE {pred}", "WHEN MATCHED UPDATE")
            gone.append(got.select([SEGMENT_COLUMN, FILE_COLUMN, POS_COLUMN]))
            inserts.append(_conform(table, got.select(names), "MERGE UPDATE SET", time_zone))
        if not_matched:
            con.execute(f"CREATE VIEW __unmatched AS SELECT {sq}.* FROM {sq} ANTI JOIN "
                         f"__keys AS {tq} ON ({on_sql})")
            nconds = [c.condition for c in not_matched]
            alone = Types(con, f"FROM __unmatched AS {sq}")
            for k, nclause in enumerate(not_matched):
                pred = _not_earlier(nconds, k, "WHEN NOT MATCHED AND", alone)
                vals = _assigned(nclause.values, names, source, sa, table, "MERGE INSERT")
                select = ", ".join(
                    f"({to_duckdb(vals[c], 'INSERT ' + c, alone)}) AS {_quote(c)}" if c in vals
                    else f"{_typed_null(table, c)} AS {_quote(c)}" for c in names)
                got = _run(con, f"SELECT {select} FROM __unmatched AS {sq} WHERE {pred}",
                           "WHEN NOT MATCHED INSERT")
                inserts.append(_conform(table, got, "MERGE INSERT", time_zone))
        con.close()
        positions: dict[tuple[str, str], Any] = {}
        if gone:
            grouped = _group_locations(pa.concat_tables(gone))
            positions = {k: np.unique(v.astype(np.uint32)) for k, v in grouped.items() if len(v)}
        new = pa.concat_tables(inserts) if inserts else None
        matches = Matches(snap, positions, None)
        # A NOT MATCHED insert depends on keys being absent: rows any newer version added
        # (loads too) may be ones it would have matched.
        reads = Reads(read, match=joined, appends=bool(not_matched))
        version, nfiles, seg = apply_changes(table, matches, operation="MERGE", insert=new,
                                             reads=reads)
        return DmlResult(operation="MERGE", version=version, deleted=matches.count,
                         inserted=0 if new is None else new.num_rows, files=nfiles,
                         segments=tuple(sorted({k[0] for k in positions})),
                         inserted_segment=seg)

    return run_replanned(table, "MERGE", step)
