"""Random rows and random verified expressions through UPDATE, MERGE and DELETE, against
Spark over the same rows in the same session time zone (Spark's INSERT into a Parquet table
is the oracle of what a statement stores). Every column type: integers, doubles, decimals of
several precisions, dates before 1970 and after 2038, timestamps, unicode strings, booleans.
A statement either stores Spark's values, or fails as a whole (a one-line refusal, or where
Spark fails too) and changes nothing; never another value."""

from __future__ import annotations

import datetime as dt
import itertools
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.errors import UserError
from carbonstore.expressions.expr import AlwaysTrue
from carbonstore.segments.dml import scan_rows
from tests.indexfiles.segbuild import add_segments

DDL = ("id long not null, i int, l long, d double, p2 decimal(5,2), p18 decimal(18,6), "
       "p38 decimal(38,10), day date, ts timestamp, c string, b boolean")
COLUMNS = ["i", "l", "d", "p2", "p18", "p38", "day", "ts", "c", "b"]
ARROW = {"id": pa.int64(), "i": pa.int32(), "l": pa.int64(), "d": pa.float64(),
         "p2": pa.decimal128(5, 2), "p18": pa.decimal128(18, 6), "p38": pa.decimal128(38, 10),
         "day": pa.date32(), "ts": pa.timestamp("us", tz="UTC"), "c": pa.string(), "b": pa.bool_()}
SPARK_TYPE = {"i": "int", "l": "long", "d": "double", "p2": "decimal(5,2)", "p18": "decimal(18,6)",
              "p38": "decimal(38,10)", "day": "date", "ts": "timestamp", "c": "string", "b": "boolean"}
ZONES = ["UTC", "Europe/Paris", "America/Los_Angeles"]

_TEXT = st.text(alphabet=st.sampled_from(list("aAbz _%.-019é€ü\u0301\U0001F600ǅß")), max_size=6)


def _decimal(digits: int, scale: int) -> st.SearchStrategy[Decimal]:
    top = 10 ** (digits - scale) - 1
    return st.decimals(-top, top, places=scale, allow_nan=False, allow_infinity=False)


_ROW = st.fixed_dictionaries({
    "i": st.none() | st.integers(-2**31, 2**31 - 1) | st.integers(-9, 9),
    "l": st.none() | st.integers(-2**63, 2**63 - 1) | st.integers(-9, 9),
    "d": st.none() | st.sampled_from([math.nan, -0.0, 0.5, 1e10, -2.25]) | st.floats(-1e6, 1e6).map(
        lambda v: round(v, 2)),
    "p2": st.none() | _decimal(5, 2), "p18": st.none() | _decimal(18, 6),
    "p38": st.none() | _decimal(38, 10) | _decimal(6, 2),
    "day": st.none() | st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)) | st.dates(
        dt.date(1900, 1, 1), dt.date(2100, 1, 1)),
    "ts": st.none() | st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2100, 1, 1)).map(
        lambda v: v.replace(tzinfo=dt.UTC)),
    "c": st.none() | _TEXT | st.sampled_from(["1", " 12 ", "2024-02-29", "1.5", "true", "2F", " f ", "2024-1", "0x1p3", "inf"]),
    "b": st.none() | st.booleans(),
})

NUM, TEXT, BOOL, DATE, TS = "num", "text", "bool", "date", "ts"
_LEAVES = {
    NUM: ["i", "l", "d", "p2", "p18", "p38", "3", "-2", "0", "1.5", "2.25", "0.5"],
    TEXT: ["c", "'aé'", "''", "'A%'", "'1.5d'", "' TRUE '", "'2024-1'", "' 7 '", "'-Infinity'"],
    BOOL: ["b", "true", "NULL"], DATE: ["day", "DATE '1969-07-20'"],
    TS: ["ts", "TIMESTAMP '2040-02-29 12:00:00'"],
}
_FORMS = {
    NUM: ["{n} + {n}", "{n} - {n}", "{n} * {n}", "{n} / {n}", "{n} % {n}", "abs({n})", "-{n}",
          "coalesce({n}, {n})", "if({b}, {n}, {n})", "nullif({n}, {n})", "pmod({n}, {n})",
          "greatest({n}, {n})", "least({n}, {n})", "length({s})", "year({t})", "month({day})",
          "dayofweek({day})", "cast({n} AS int)", "cast({s} AS int)", "sign({n})", "{n} div {n}",
          "instr({s}, {s})", "ascii({s})", "cast({n} AS decimal(10, 3))",
          "CASE WHEN {b} THEN {n} ELSE {n} END", "nanvl({n}, {n})", "cast({n} AS bigint)",
          "cast({s} AS double)", "cast({n} AS double)", "cast({n} AS decimal(38, 2))"],
    TEXT: ["upper({s})", "lower({s})", "concat({s}, {any})", "{s} || {any}", "substr({s}, {k}, {k})",
           "lpad({s}, {k}, '*')", "rpad({s}, {k}, 'é')", "replace({s}, 'a', 'ü')", "trim({s})",
           "initcap({s})", "reverse({s})", "left({s}, {k})", "right({s}, {k})", "repeat({s}, 2)",
           "md5({s})", "sha2({s}, 256)", "cast({any} AS string)", "coalesce({s}, {s})",
           "btrim({s}, 'a')", "if({b}, {s}, {s})"],
    BOOL: ["{n} > {n}", "{n} = {n}", "{n} <=> {n}", "{s} LIKE '%a%'", "{n} BETWEEN {n} AND {n}",
           "{n} IN ({n}, 1, 2)", "isnan({n})", "NOT {b}", "{b} AND {b}", "{b} OR {b}", "{s} < {s}",
           "{t} < {t}", "{n} IS NULL", "{day} >= {day}", "cast({s} AS boolean)",
           "cast({n} AS boolean)"],
    DATE: ["to_date({t})", "cast({t} AS date)", "cast({s} AS date)", "coalesce({day}, {day})"],
    TS: ["cast({day} AS timestamp)", "coalesce({t}, {t})", "cast({s} AS timestamp)"],
}
_SLOTS = {"n": NUM, "s": TEXT, "b": BOOL, "day": DATE, "t": TS}


@st.composite
def expression(draw: Any, kind: str, depth: int = 2) -> str:
    if depth == 0 or draw(st.booleans()):
        return str(draw(st.sampled_from(_LEAVES[kind])))
    form = str(draw(st.sampled_from(_FORMS[kind])))
    out = form
    for slot in ("any", "k", "n", "s", "b", "day", "t"):
        while "{" + slot + "}" in out:
            if slot == "k":
                value = draw(st.sampled_from(["0", "1", "2", "-1", "5", "i"]))
            elif slot == "any":
                value = draw(expression(draw(st.sampled_from(list(_LEAVES))), depth - 1))
            else:
                value = draw(expression(_SLOTS[slot], depth - 1))
            out = out.replace("{" + slot + "}", f"({value})", 1)
    return out


_KIND_OF = {"i": NUM, "l": NUM, "d": NUM, "p2": NUM, "p18": NUM, "p38": NUM, "day": DATE,
            "ts": TS, "c": TEXT, "b": BOOL}


def _norm(v: Any) -> Any:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dt.datetime):  # ours: an aware instant; Spark's: unix_micros already
        return int((v - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) / dt.timedelta(microseconds=1))
    return v


def _frame(spark: Any, rows: list[dict[str, Any]], view: str) -> None:
    data = [(k, *(r[c] for c in COLUMNS)) for k, r in enumerate(rows)]
    spark.createDataFrame(data, DDL.replace(" not null", "")).createOrReplaceTempView(view)


def _arrow(rows: list[dict[str, Any]], ids: list[int]) -> pa.Table:
    cols = {"id": pa.array(ids, pa.int64())}
    cols.update({c: pa.array([r[c] for r in rows], ARROW[c]) for c in COLUMNS})
    return pa.table(cols)


def _ours(table: Any, column: str) -> list[tuple[Any, Any]]:
    got = scan_rows(table, AlwaysTrue(), with_rows=True, columns=["id", column]).rows
    return sorted((i, _norm(v)) for i, v in zip(got.column("id").to_pylist(),
                                                  got.column(column).to_pylist(), strict=True))


def _oracle(spark: Any, folder: Path, column: str, selects: list[str]) -> list[tuple[Any, Any]] | None:
    """Spark's stored (id, column) rows of INSERTs of ``selects``; None when Spark fails."""
    name = f"rand_oracle_{next(_COUNTER)}"
    spark.sql(f"CREATE TABLE {name} (id long, v {SPARK_TYPE[column]}) USING parquet "
              f"LOCATION '{folder / name}'")
    try:
        for select in selects:
            spark.sql(f"INSERT INTO {name} {select}")
        shown = "unix_micros(v)" if column == "ts" else "v"
        return sorted((r[0], _norm(r[1])) for r in spark.sql(f"SELECT id, {shown} FROM {name}").collect())
    except Exception:  # noqa: BLE001 - Spark fails the statement (ANSI, store assignment)
        return None
    finally:
        spark.sql(f"DROP TABLE {name}")


_COUNTER = itertools.count()
_STATS: dict[str, int] = {"equal": 0, "refused": 0, "both fail": 0}


def _table(location: str, rows: list[dict[str, Any]]) -> Any:
    t = Store(location).create_table(f"db.r{next(_COUNTER)}", DDL)
    add_segments(t, [_arrow(rows, list(range(len(rows))))])
    return t


def _check(table: Any, want: list[tuple[Any, Any]] | None, column: str, run: Any, what: str) -> None:
    before = table.status.read().version
    try:
        run()
    except UserError as err:
        assert "\n" not in str(err), what
        assert table.status.read().version == before, what  # nothing changed
        _STATS["refused" if want is not None else "both fail"] += 1
        return
    if want is None:  # Spark fails the statement (a constant that fails, folded before any
        # row is read); ours may read no row and so evaluate nothing: it must store nothing
        assert table.status.read().version == before, f"Spark fails, we stored: {what}"
        _STATS["both fail"] += 1
        return
    assert _ours(table, column) == want, what
    _STATS["equal"] += 1


def _settings(n: int) -> Any:
    # the short runs are the same examples each time (CI); the long ones explore
    return settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck),
                    derandomize=n < 100, database=None if n < 100 else settings.default.database)


def _run_update(spark: Any, tmp: Path, rows: list[dict[str, Any]], column: str, expr: str,
                cond: str, zone: str) -> None:
    spark.conf.set("spark.sql.session.timeZone", zone)
    _frame(spark, rows, "rand_src")
    want = _oracle(spark, tmp, column, [
        f"SELECT id, {expr} FROM rand_src WHERE coalesce({cond}, false)",
        f"SELECT id, {column} FROM rand_src WHERE NOT coalesce({cond}, false)"])
    t = _table(str(tmp / "store"), rows)
    _check(t, want, column, lambda: t.update({column: expr}, where=cond, time_zone=zone),
           f"UPDATE SET {column} = {expr} WHERE {cond} ({zone})")


def _run_merge(spark: Any, tmp: Path, rows: list[dict[str, Any]], source: list[dict[str, Any]],
               column: str, expr: str, insert: str, cond: str, zone: str) -> None:
    spark.conf.set("spark.sql.session.timeZone", zone)
    _frame(spark, rows, "rand_tgt")
    ids = [k * 2 for k in range(len(source))]  # even ids: some match target rows, some do not
    data = [(i, *(r[c] for c in COLUMNS)) for i, r in zip(ids, source, strict=True)]
    spark.createDataFrame(data, DDL.replace(" not null", "")).createOrReplaceTempView("rand_msrc")
    hit = "FROM rand_tgt t JOIN rand_msrc s ON t.id = s.id"
    want = _oracle(spark, tmp, column, [
        f"SELECT t.id, {expr} {hit} WHERE coalesce({cond}, false)",
        f"SELECT t.id, t.{column} {hit} WHERE NOT coalesce({cond}, false)",
        f"SELECT t.id, t.{column} FROM rand_tgt t LEFT ANTI JOIN rand_msrc s ON t.id = s.id",
        f"SELECT s.id, {insert} FROM rand_msrc s LEFT ANTI JOIN rand_tgt t ON t.id = s.id"])
    t = _table(str(tmp / "store"), rows)
    src = _arrow(source, ids)
    from carbonstore.segments.merge import WhenMatched, WhenNotMatched, merge_rows

    _check(t, want, column, lambda: merge_rows(
        t, src, on="t.id = s.id", time_zone=zone,
        matched=[WhenMatched(action="update", condition=cond, assignments={column: expr})],
        not_matched=[WhenNotMatched(values={"id": "s.id", column: insert})]),
        f"MERGE SET {column} = {expr} WHEN MATCHED AND {cond}, INSERT {insert} ({zone})")


def _run_delete(spark: Any, tmp: Path, rows: list[dict[str, Any]], cond: str, zone: str) -> None:
    spark.conf.set("spark.sql.session.timeZone", zone)
    _frame(spark, rows, "rand_src")
    want = _oracle(spark, tmp, "l", [f"SELECT id, l FROM rand_src WHERE NOT coalesce({cond}, false)"])
    t = _table(str(tmp / "store"), rows)
    _check(t, want, "l", lambda: t.delete(cond, time_zone=zone), f"DELETE WHERE {cond} ({zone})")


_ROWS = st.lists(_ROW, min_size=1, max_size=8)
_ANY_KIND = st.sampled_from(list(_LEAVES))


@st.composite
def _update_case(draw: Any) -> tuple[str, str, str, str]:
    column = draw(st.sampled_from(COLUMNS))
    kind = _KIND_OF[column] if draw(st.booleans()) else draw(_ANY_KIND)
    return column, draw(expression(kind)), draw(expression(BOOL, 1)), draw(st.sampled_from(ZONES))


def _update_test(n: int) -> Any:
    @_settings(n)
    @given(rows=_ROWS, case=_update_case())
    def run(spark: Any, tmp_path_factory: Any, rows: list[dict[str, Any]], case: tuple[str, ...]) -> None:
        column, expr, cond, zone = case
        try:
            _run_update(spark, tmp_path_factory.mktemp("u"), rows, column, expr, cond, zone)
        finally:
            spark.conf.set("spark.sql.session.timeZone", "UTC")
    return run


def _merge_test(n: int) -> Any:
    @_settings(n)
    @given(rows=_ROWS, source=_ROWS, case=_update_case(), insert_kind=_ANY_KIND, data=st.data())
    def run(spark: Any, tmp_path_factory: Any, rows: list[dict[str, Any]], source: list[dict[str, Any]],
            case: tuple[str, ...], insert_kind: str, data: Any) -> None:
        column, expr, cond, zone = case
        insert = data.draw(expression(insert_kind))
        for c in sorted(COLUMNS, key=len, reverse=True):  # target columns as t.c, source as s.c
            expr = _qualify(expr, c, "t" if data.draw(st.booleans()) else "s")
            cond = _qualify(cond, c, "s")
            insert = _qualify(insert, c, "s")
        try:
            _run_merge(spark, tmp_path_factory.mktemp("m"), rows, source, column, expr, insert, cond, zone)
        finally:
            spark.conf.set("spark.sql.session.timeZone", "UTC")
    return run


def _qualify(text: str, column: str, alias: str) -> str:
    """``column`` references of ``text`` (outside string literals) as ``alias.column``."""
    import re

    parts = re.split(r"('(?:[^']|'')*')", text)
    return "".join(p if i % 2 else re.sub(rf"(?<![\w.']){column}(?![\w'(])", f"{alias}.{column}", p)
                   for i, p in enumerate(parts))


def _delete_test(n: int) -> Any:
    @_settings(n)
    @given(rows=_ROWS, cond=expression(BOOL), zone=st.sampled_from(ZONES))
    def run(spark: Any, tmp_path_factory: Any, rows: list[dict[str, Any]], cond: str, zone: str) -> None:
        try:
            _run_delete(spark, tmp_path_factory.mktemp("d"), rows, cond, zone)
        finally:
            spark.conf.set("spark.sql.session.timeZone", "UTC")
    return run


test_random_update = _update_test(3)  # CI: a few fixed examples; the long run explores
test_random_merge = _merge_test(12)
test_random_delete = _delete_test(15)
test_random_update_long = pytest.mark.long(_update_test(300))
test_random_merge_long = pytest.mark.long(_merge_test(150))
test_random_delete_long = pytest.mark.long(_delete_test(150))
