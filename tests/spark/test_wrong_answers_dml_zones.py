"""DML expressions over timestamps in a session time zone other than UTC, against Spark in
the same ``spark.sql.session.timeZone``: the text of a timestamp (``cast``, ``concat``, a
timestamp stored into a string column), its date and fields, timestamps given without an
offset (literals, ``cast(string AS timestamp)``, dates and TIMESTAMP_NTZ taken as
timestamps), through the expressions and through UPDATE, MERGE and DELETE. Each gives Spark's
value or fails (a refusal), never another value."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from carbonstore.errors import UserError
from carbonstore.segments.merge import Types, duckdb_connection, to_duckdb

UTC = dt.UTC
ZONES = ["Europe/Paris", "America/Los_Angeles", "Asia/Kolkata", "+08:00", "UTC"]
_TS = [dt.datetime(2024, 7, 1, 12, 0, 0, 500000, tzinfo=UTC), dt.datetime(2024, 3, 31, 1, 30, tzinfo=UTC),
       dt.datetime(2024, 10, 27, 0, 30, tzinfo=UTC), dt.datetime(2024, 10, 27, 1, 30, tzinfo=UTC),
       dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), dt.datetime(1850, 7, 1, 12, tzinfo=UTC),
       dt.datetime(2100, 1, 1, tzinfo=UTC), dt.datetime(1900, 1, 1, 0, 0, 1, tzinfo=UTC),
       dt.datetime(1, 1, 1, 12, tzinfo=UTC), dt.datetime(9999, 12, 31, 20, tzinfo=UTC), None,
       dt.datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC)]
_NTZ = [dt.datetime(2024, 3, 31, 2, 30), dt.datetime(2024, 10, 27, 2, 30), dt.datetime(2024, 7, 1, 12),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(2100, 1, 1), None,
        dt.datetime(1850, 7, 1, 12), dt.datetime(2024, 1, 1, 0, 0, 0, 120000), dt.datetime(1, 1, 1),
        dt.datetime(9999, 12, 31, 23), dt.datetime(2038, 1, 19, 3, 14, 8), dt.datetime(1970, 1, 1)]
_DAY = [dt.date(2024, 7, 1), dt.date(2024, 3, 31), dt.date(1969, 12, 31), None, dt.date(1850, 7, 1),
        dt.date(2100, 1, 1), dt.date(1, 1, 2), dt.date(9999, 12, 31), dt.date(2024, 10, 27),
        dt.date(1970, 1, 1), dt.date(2038, 1, 20), dt.date(2000, 2, 29)]
_C = ["2024-03-31 02:30:00", "2024-10-27 02:30:00", "2024-01-01", "2024-01-01T10:00:00",
      "2024-01-01 10:00:00Z", "2024-01-01 10:00:00+05:30", " 2024-01-01 10:00 ", "2024-1-1",
      "2024", None, "1850-07-01 12:00:00", "2024-07-01 12:00:00.123456"]
SCHEMA = "id long, ts timestamp, ntz timestamp_ntz, day date, c string"

# (expression, kind of its value: text/date/int/bool as they are, ts as the instant, ntz as
# the wall time)
EXPRS = [
    ("cast(ts AS string)", "text"), ("concat(ts, '|')", "text"), ("ts || ''", "text"),
    ("string(ts)", "text"), ("length(ts)", "int"), ("cast(ntz AS string)", "text"),
    ("concat(ntz, '|', day)", "text"), ("cast(cast(ts AS timestamp_ntz) AS string)", "text"),
    ("cast(cast(ntz AS timestamp) AS string)", "text"), ("cast(cast(day AS timestamp) AS string)", "text"),
    ("cast(ts AS date)", "date"), ("to_date(ts)", "date"), ("cast(ntz AS date)", "date"),
    ("year(ts)", "int"), ("month(ts)", "int"), ("day(ts)", "int"), ("dayofweek(ts)", "int"),
    ("dayofyear(ts)", "int"), ("year(ntz)", "int"), ("cast(day AS timestamp)", "ts"),
    ("cast(ntz AS timestamp)", "ts"), ("TIMESTAMP '2024-03-31 02:30:00'", "ts"),
    ("TIMESTAMP '2024-10-27 02:30:00'", "ts"), ("TIMESTAMP '1850-07-01 12:00:00'", "ts"),
    ("cast(ts AS timestamp_ntz)", "ntz"), ("cast(day AS timestamp_ntz)", "ntz"),
    ("ts = TIMESTAMP '2024-07-01 14:00:00.5'", "bool"), ("ts > cast(day AS timestamp)", "bool"),
    ("cast(c AS timestamp)", "ts"), ("cast(c AS date)", "date"), ("to_date(c)", "date"),
    ("cast(c AS timestamp_ntz)", "ntz"), ("cast(ts AS timestamp)", "ts"),
]
# Spark gives these over the rows above in every zone: ours must be equal, row by row
EXACT = ["cast(ts AS string)", "concat(ts, '|')", "cast(ts AS date)", "year(ts)", "day(ts)",
         "cast(day AS timestamp)", "cast(ntz AS timestamp)", "TIMESTAMP '2024-03-31 02:30:00'",
         "TIMESTAMP '2024-10-27 02:30:00'", "cast(ts AS timestamp_ntz)", "cast(ntz AS string)"]


def _rows() -> list[tuple[Any, ...]]:
    return [(i, _TS[i], _NTZ[i], _DAY[i], _C[i]) for i in range(len(_TS))]


@contextlib.contextmanager
def session_zone(spark: Any, zone: str) -> Iterator[None]:
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


@pytest.fixture(scope="module")
def rows(spark: Any) -> pa.Table:
    frame = spark.createDataFrame(_rows(), SCHEMA)
    frame.createOrReplaceTempView("dml_zones")
    return pa.table({"id": pa.array(range(len(_TS)), pa.int64()),
                     "ts": pa.array(_TS, pa.timestamp("us", tz="UTC")),
                     "ntz": pa.array(_NTZ, pa.timestamp("us")), "day": pa.array(_DAY, pa.date32()),
                     "c": pa.array(_C, pa.string())})


def _shown(expr: str, kind: str) -> str:
    """Spark's value as the test compares it: an instant in microseconds, a date in days
    (dates past 9999 have no Python date)."""
    if kind == "ntz":  # the wall time in microseconds
        return (f"unix_date(cast({expr} AS date)) * 86400000000 + (cast(hour({expr}) AS long) * 3600 + "
                f"minute({expr}) * 60) * 1000000 + cast(date_part('SECOND', {expr}) * 1000000 AS long)")
    return f"unix_micros({expr})" if kind == "ts" else f"unix_date({expr})" if kind == "date" else expr


def _spark_value(spark: Any, expr: str, kind: str, i: int) -> Any:
    """Spark's value of ``expr`` on row ``i``; "fails" when Spark fails (ANSI)."""
    shown = _shown(expr, kind)
    try:
        return spark.sql(f"SELECT {shown} AS v FROM dml_zones WHERE id = {i}").collect()[0][0]
    except Exception:  # noqa: BLE001 - Spark refuses the value (ANSI)
        return "fails"


def _ours(rows: pa.Table, expr: str, kind: str, zone: str) -> list[Any] | str:
    """Our values of ``expr`` over ``rows``; "fails" when the statement fails."""
    import duckdb

    try:
        con = duckdb_connection(zone)
        con.register("__rows", rows)
        sql = to_duckdb(expr, "UPDATE SET v", Types(con, "FROM __rows AS t"))
    except UserError as err:
        assert "\n" not in str(err)
        return "fails"
    try:
        col = con.execute(f"SELECT ({sql}) AS v FROM __rows AS t ORDER BY id").to_arrow_table().column(0)
    except duckdb.Error:
        return "fails"
    finally:
        con.close()
    if kind == "ts":
        col = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    if kind == "date":
        col = col.cast(pa.int32())
    if kind == "ntz":
        col = col.cast(pa.int64())
    return col.to_pylist()


EDGES = (8, 9)  # years 1 and 9999: Spark's layout of years past 9999 differs; may be refused


@pytest.mark.parametrize("zone", ZONES)
def test_timestamp_expressions_give_sparks_values_in_the_session_zone(
        spark: Any, rows: pa.Table, zone: str) -> None:
    wrong = []
    core = rows.filter(pa.array([i not in EDGES for i in range(rows.num_rows)]))
    with session_zone(spark, zone):
        for expr, kind in EXPRS:
            shown = _shown(expr, kind)
            try:
                want = [r[0] for r in spark.sql(f"SELECT {shown} FROM dml_zones ORDER BY id").collect()]
            except Exception:  # noqa: BLE001 - a row fails in Spark: row by row
                want = [_spark_value(spark, expr, kind, i) for i in range(rows.num_rows)]
            if expr in EXACT:  # no refusal allowed away from the edges
                got = _ours(core, expr, kind, zone)
                if got != [w for i, w in enumerate(want) if i not in EDGES]:
                    wrong.append((expr, "exact", got))
            got = _ours(rows, expr, kind, zone)
            if got == "fails":
                got = [_ours(rows.slice(i, 1), expr, kind, zone) for i in range(rows.num_rows)]
                got = [g if g == "fails" else g[0] for g in got]
            for i, (w, g) in enumerate(zip(want, got, strict=True)):
                if g != w and g != "fails":
                    wrong.append((expr, i, rows.column("ts")[i].as_py(), w, g))
    assert not wrong


def _comparable(ddl: str) -> list[str]:
    """Columns of ``ddl`` as compared: instants in microseconds, dates in days (a Python
    datetime cannot hold year 0, which year 1 in a zone east of UTC is)."""
    out = []
    for part in ddl.split(", "):
        name, kind = part.split()[:2]
        out.append(f"unix_micros({name})" if kind == "timestamp" else
                   f"unix_date({name})" if kind == "date" else name)
    return out


def _read(spark: Any, location: str, table: str, ddl: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.read.format("carbonstore").option(
        "store", location).load(table).selectExpr(*_comparable(ddl)).collect())


def _oracle(spark: Any, tmp_path: Path, ddl: str, select: str) -> list[tuple[Any, ...]] | str:
    """Spark's INSERT of ``select`` (over dml_zones) into a Parquet table of ``ddl``: the
    rows it stores, or "refused"."""
    name = f"zone_oracle_{abs(hash((ddl, select))) % 10**8}"
    spark.sql(f"CREATE TABLE {name} ({ddl}) USING parquet LOCATION '{tmp_path / name}'")
    try:
        try:
            spark.sql(f"INSERT INTO {name} {select}")
        except Exception as err:  # noqa: BLE001 - Spark's store assignment refuses it
            assert "TABLE_OR_VIEW_NOT_FOUND" not in str(err)
            return "refused"
        return sorted(tuple(r) for r in spark.table(name).selectExpr(*_comparable(ddl)).collect())
    finally:
        spark.sql(f"DROP TABLE {name}")


@pytest.mark.parametrize("zone", ["Europe/Paris", "America/Los_Angeles"])
def test_update_merge_delete_store_what_spark_stores(spark: Any, rows: pa.Table, store: Any,
                                                     tmp_path: Path, zone: str) -> None:
    from carbonstore import Store
    from tests.indexfiles.segbuild import add_segments

    st = Store(store.location, conf=store.conf)
    t = st.create_table("db.z", "id long not null, ts timestamp, day date, s string, s2 string, "
                        "d2 date, t2 timestamp, t3 timestamp")
    n = len(_TS) - 3  # rows every zone can show (no year 1 / 9999 edges)
    keep = [0, 1, 2, 3, 4, 5, 6, 7, 11]
    ts = pa.array([_TS[i] for i in keep], pa.timestamp("us", tz="UTC"))
    assert n == len(keep)
    add_segments(t, [pa.table({"id": pa.array(keep, pa.int64()), "ts": ts,
                               "day": pa.array([_DAY[i] for i in keep], pa.date32()),
                               "s": ["x"] * n, "s2": ["x"] * n, "d2": pa.array([None] * n, pa.date32()),
                               "t2": pa.array([None] * n, pa.timestamp("us", tz="UTC")),
                               "t3": pa.array([None] * n, pa.timestamp("us", tz="UTC"))})])
    with session_zone(spark, zone):
        # the zone comes from the active Spark session (no time_zone given)
        t.update({"s": "ts", "s2": "concat(ts, '|', day)", "d2": "ts", "t2": "day",
                  "t3": "TIMESTAMP '2024-03-31 02:30:00'"}, where="id >= 0")
        want = _oracle(spark, tmp_path, "id long, s string, s2 string, d2 date, t2 timestamp, t3 timestamp",
                       "SELECT id, ts, concat(ts, '|', day), ts, day, TIMESTAMP '2024-03-31 02:30:00' "
                       f"FROM dml_zones WHERE id IN ({', '.join(map(str, keep))})")
        got = _read(spark, st.location, "db.z", "id long, s string, s2 string, d2 date, t2 timestamp, t3 timestamp")
        assert got == want
        # MERGE of a Spark source with a TIMESTAMP_NTZ column: read in the source's session zone
        src = spark.sql("SELECT id, ntz AS t2, cast(ntz AS string) AS s FROM dml_zones WHERE id IN (0, 1, 2, 3, 10)")
        t.merge(src, on=["id"], when_matched_update={"t2": "s.t2", "s": "s.s"},
                when_not_matched_insert={"id": "s.id", "t2": "s.t2", "s": "s.s"})
        want = _oracle(spark, tmp_path, "id long, s string, t2 timestamp",
                       "SELECT id, cast(ntz AS string), ntz FROM dml_zones WHERE id IN (0, 1, 2, 3, 10)")
        got = [r for r in _read(spark, st.location, "db.z", "id long, s string, t2 timestamp")
               if r[0] in (0, 1, 2, 3, 10)]
        assert got == want
        # DELETE: a residual over the text and a filter with a timestamp literal, both in the zone
        t.delete("cast(ts AS string) LIKE '2024-07-01%' OR ts < TIMESTAMP '1900-01-01 00:00:00'")
        left = [r[0] for r in _read(spark, st.location, "db.z", "id long")]
        kept = [r[0] for r in spark.sql(
            "SELECT id FROM dml_zones WHERE NOT coalesce(cast(ts AS string) LIKE '2024-07-01%' "
            f"OR ts < TIMESTAMP '1900-01-01 00:00:00', false) AND id IN ({', '.join(map(str, keep))})"
        ).collect()]
        assert left == sorted([*kept, 10])  # row 10 was inserted without ts: NULL is kept


def test_store_assignment_datetimes_like_spark(spark: Any, rows: pa.Table, store: Any,
                                               tmp_path: Path) -> None:
    """Into date / timestamp / string columns from each other, in a non-UTC zone: Spark's
    INSERT is the oracle (stored values, or a refusal that must be ours too)."""
    from carbonstore import Store
    from tests.indexfiles.segbuild import add_segments

    st = Store(store.location, conf=store.conf)
    t = st.create_table("db.sa", "id long not null, ts timestamp, day date, s string, d2 date, t2 timestamp")
    keep = [0, 1, 2, 3, 4, 5, 6, 7]
    k = len(keep)
    add_segments(t, [pa.table({"id": pa.array(keep, pa.int64()),
                               "ts": pa.array([_TS[i] for i in keep], pa.timestamp("us", tz="UTC")),
                               "day": pa.array([_DAY[i] for i in keep], pa.date32()), "s": ["x"] * k,
                               "d2": pa.array([None] * k, pa.date32()),
                               "t2": pa.array([None] * k, pa.timestamp("us", tz="UTC"))})])
    cases = [("s", "string", "day"), ("d2", "date", "ts"), ("t2", "timestamp", "day"),
             ("s", "string", "ts"), ("t2", "timestamp", "cast(ts AS timestamp_ntz)"),
             ("d2", "date", "cast(ts AS timestamp_ntz)"), ("t2", "timestamp", "s")]
    ids = ", ".join(map(str, keep))
    with session_zone(spark, "Asia/Kolkata"):
        for col, ddl_type, value in cases:
            want = _oracle(spark, tmp_path, f"id long, v {ddl_type}",
                           f"SELECT id, {value.replace('s', 'c') if value == 's' else value} "
                           f"FROM dml_zones WHERE id IN ({ids})")
            before = t.status.read().version
            try:
                t.update({col: value}, where="id >= 0")
            except UserError as err:
                assert "\n" not in str(err)
                assert want == "refused", (col, value, str(err))
                assert t.status.read().version == before
                continue
            assert want != "refused", (col, value)
            assert _read(spark, st.location, "db.sa", f"id long, {col} {ddl_type}") == want, (col, value)
        # midnight of 0001-01-01 in Kolkata is an instant of year 0: Spark holds it, the
        # store's writer does not: refused in one line, nothing changes
        before = t.status.read().version
        with pytest.raises(UserError, match="outside the years 1 to 9999") as err:
            t.update({"t2": "DATE '0001-01-01'"}, where="id >= 0")
        assert "\n" not in str(err.value)
        assert t.status.read().version == before
