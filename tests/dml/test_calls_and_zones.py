"""DML expressions without Spark: calls with an argument count Spark refuses are refused in
one line (sqlglot would drop or fill arguments), and the session time zone decides the text,
date and reading of timestamps (segments/timezones.py). The comparisons with Spark itself are
tests/spark/test_wrong_answers_dml_zones.py."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.errors import ConfigError, UserError
from carbonstore.expressions.expr import AlwaysTrue
from carbonstore.segments.dml import scan_rows
from carbonstore.segments.merge import Types, duckdb_connection, to_duckdb
from carbonstore.segments.timezones import duckdb_zone
from tests.indexfiles.segbuild import add_segments

WRONG_CALLS = [
    "if(b, 1)", "if(b, 1, 2, 3)", "coalesce()", "substr(c, 1, 2, 3)", "substring(c)",
    "nullif(c)", "greatest(n)", "least(n)", "abs()", "abs(n, 1)", "upper(c, c)", "concat(c) || if(b, c)",
    "lpad(c)", "lpad(c, 1, 'x', 'y')", "replace(c)", "left(c)", "right(c, 1, 2)", "pmod(n)",
    "nanvl(n)", "nvl(n)", "ifnull(n, 1, 2)", "instr(c)", "locate(c)", "repeat(c)", "sha2(c)",
    "pow(n)", "int(n, 1)", "string()", "cast(if(b, 1) AS string)", "year(d, 1)", "to_date()",
    "trim(c, 'a', 'b')", "btrim()", "weekday()", "sign(n, 1)", "md5()", "coalesce(if(b, n), 0)",
]
NOT_SPARK = ["strpos(c, 'a')", "iif(b, 1, 2)", "charindex('a', c)", "is_nan(n)", "leftpad(c, 2, 'x')"]
RIGHT_CALLS = [
    "if(b, 1, 2)", "coalesce(n)", "coalesce(n, 1, 2)", "substr(c, 1)", "substr(c, 1, 2)",
    "greatest(n, 1, 2)", "concat(c, c, c)", "trim(BOTH 'x' FROM c)", "substring(c FROM 2 FOR 3)",
    "cast(n AS decimal(10, 2))", "lpad(c, 3)", "replace(c, 'a')", "btrim(c)", "upper((c))",
    "if(b, if(b, 1, 2), coalesce(n, 3))", "`if` + 1", "t.n + 1",
]


@pytest.mark.parametrize("expr", WRONG_CALLS + NOT_SPARK)
def test_call_spark_refuses_is_refused_in_one_line(expr: str) -> None:
    with pytest.raises(UserError) as err:
        to_duckdb(expr, "UPDATE SET v")
    assert "\n" not in str(err.value)
    assert "argument" in str(err.value) or "not a Spark function" in str(err.value)


@pytest.mark.parametrize("expr", RIGHT_CALLS)
def test_call_spark_takes_is_not_refused_for_its_count(expr: str) -> None:
    try:
        to_duckdb(expr, "UPDATE SET v")
    except UserError as err:  # refused for another reason (unverified), never the count
        assert "argument" not in str(err) and "not a Spark function" not in str(err)


@pytest.mark.parametrize(("zone", "duck"), [
    ("UTC", "UTC"), ("Z", "UTC"), ("+00:00", "UTC"), ("+08:00", "Etc/GMT-8"), ("-03", "Etc/GMT+3"),
    ("GMT+2", "Etc/GMT-2"), ("Europe/Paris", "Europe/Paris"), ("America/Los_Angeles", "America/Los_Angeles"),
])
def test_spark_zone_ids_map_to_duckdb_zones(zone: str, duck: str) -> None:
    assert duckdb_zone(zone) == duck
    duckdb_connection(zone).close()


@pytest.mark.parametrize("zone", ["Mars/Olympus", "+05:30", "+25:00", ""])
def test_zone_duckdb_cannot_take_is_refused(zone: str) -> None:
    with pytest.raises(UserError, match="time zone"):
        duckdb_connection(zone or "nowhere")


def _values(zone: str, expr: str, rows: pa.Table) -> list[object]:
    con = duckdb_connection(zone)
    con.register("__rows", rows)
    sql = to_duckdb(expr, "x", Types(con, "FROM __rows AS t"))
    out = con.execute(f"SELECT ({sql}) AS v FROM __rows AS t").to_arrow_table()
    con.close()
    col = out.column(0)
    if pa.types.is_timestamp(col.type) and col.type.tz is not None:
        col = col.cast(pa.timestamp("us", tz="UTC"))
    return col.to_pylist()


TS = pa.table({"ts": pa.array([dt.datetime(2024, 7, 1, 12, 0, 0, 500000, tzinfo=dt.UTC),
                               dt.datetime(2024, 1, 1, 23, 30, tzinfo=dt.UTC), None],
                              pa.timestamp("us", tz="UTC")),
               "day": pa.array([dt.date(2024, 7, 1), dt.date(1969, 12, 31), None]),
               "c": ["2024-03-31 02:30:00", "2024-01-01", None]})


@pytest.mark.parametrize(("zone", "texts", "dates"), [
    ("UTC", ["2024-07-01 12:00:00.5", "2024-01-01 23:30:00", None],
     [dt.date(2024, 7, 1), dt.date(2024, 1, 1), None]),
    ("Europe/Paris", ["2024-07-01 14:00:00.5", "2024-01-02 00:30:00", None],
     [dt.date(2024, 7, 1), dt.date(2024, 1, 2), None]),
    ("-10:00", ["2024-07-01 02:00:00.5", "2024-01-01 13:30:00", None],
     [dt.date(2024, 7, 1), dt.date(2024, 1, 1), None]),
])
def test_timestamp_text_and_date_are_in_the_session_zone(zone: str, texts: list[object], dates: list[object]) -> None:
    assert _values(zone, "cast(ts AS string)", TS) == texts
    assert _values(zone, "concat(ts, '')", TS) == texts
    assert _values(zone, "cast(ts AS date)", TS) == dates


def test_timestamps_without_an_offset_are_read_in_the_session_zone() -> None:
    utc = dt.UTC
    assert _values("Europe/Paris", "TIMESTAMP '2024-07-01 12:00:00'", TS)[0] == dt.datetime(2024, 7, 1, 10, tzinfo=utc)
    # a wall time in the spring-forward gap is shifted by the gap (Java's ZonedDateTime)
    assert _values("Europe/Paris", "cast(c AS timestamp)", TS)[:2] == [
        dt.datetime(2024, 3, 31, 1, 30, tzinfo=utc), dt.datetime(2023, 12, 31, 23, tzinfo=utc)]
    assert _values("Europe/Paris", "cast(day AS timestamp)", TS)[:2] == [
        dt.datetime(2024, 6, 30, 22, tzinfo=utc), dt.datetime(1969, 12, 30, 23, tzinfo=utc)]
    assert _values("Asia/Tokyo", "cast(cast(ts AS timestamp_ntz) AS string)", TS)[:2] == [
        "2024-07-01 21:00:00.5", "2024-01-02 08:30:00"]


def test_update_stores_text_of_the_session_zone(tmp_path: Path) -> None:
    st = Store(str(tmp_path / "store"))
    t = st.create_table("db.z", "id long not null, ts timestamp, s string, s2 string, d date, t2 timestamp")
    add_segments(t, [pa.table({"id": pa.array([0, 1, 2], pa.int64()), "ts": TS.column("ts"),
                               "s": ["x"] * 3, "s2": ["x"] * 3, "d": TS.column("day"),
                               "t2": TS.column("ts")})])
    t.update({"s": "ts", "s2": "cast(ts AS string)", "d": "ts", "t2": "d"}, where="id >= 0",
             time_zone="America/New_York")
    rows = scan_rows(t, AlwaysTrue(), with_rows=True).rows
    got = sorted(zip(*(rows.column(c).to_pylist() for c in ("id", "s", "s2", "d", "t2")), strict=True))
    ny = dt.timezone(dt.timedelta(hours=-4)), dt.timezone(dt.timedelta(hours=-5))
    assert got[0][1:] == ("2024-07-01 08:00:00.5", "2024-07-01 08:00:00.5", dt.date(2024, 7, 1),
                          dt.datetime(2024, 7, 1, tzinfo=ny[0]))
    assert got[1][1:] == ("2024-01-01 18:30:00", "2024-01-01 18:30:00", dt.date(2024, 1, 1),
                          dt.datetime(1969, 12, 31, tzinfo=ny[1]))
    assert got[2][1:] == (None, None, None, None)


def _cli(*args: str, conf: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CARBON_CONF", "PYSPARK_GATEWAY_PORT")}
    if conf is not None:
        env["CARBON_CONF"] = str(conf)
    return subprocess.run([sys.executable, "-m", "carbonstore.cli", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_cli_takes_the_zone_of_carbon_properties_and_refuses_wrong_calls(tmp_path: Path) -> None:
    st = Store(str(tmp_path / "store"))
    t = st.create_table("db.z", "id long not null, ts timestamp, s string")
    add_segments(t, [pa.table({"id": pa.array([0, 1, 2], pa.int64()), "ts": TS.column("ts"),
                               "s": ["x"] * 3})])
    conf = tmp_path / "carbon.properties"
    conf.write_text("spark.sql.session.timeZone=Asia/Tokyo\n")
    r = _cli("--store", st.location, "update", "db.z", "--set", "s = cast(ts AS string)",
             "--where", "id = 0", conf=conf)
    assert r.returncode == 0, r.stderr
    r = _cli("--store", st.location, "sql", "UPDATE db.z SET s = concat(ts, '!') WHERE id = 1",
             conf=conf)
    assert r.returncode == 0, r.stderr
    rows = scan_rows(Store(st.location).table("db.z"), AlwaysTrue(), with_rows=True).rows
    assert sorted(zip(rows.column("id").to_pylist(), rows.column("s").to_pylist(), strict=True)) == [
        (0, "2024-07-01 21:00:00.5"), (1, "2024-01-02 08:30:00!"), (2, "x")]
    before = Store(st.location).table("db.z").status.read().version
    for args in (["update", "db.z", "--set", "s = if(id = 0, 'a')"],
                 ["sql", "UPDATE db.z SET s = if(id = 1, 'a')"],
                 ["sql", "DELETE FROM db.z WHERE substr(s, 1, 2, 3) = 'x'"]):
        r = _cli("--store", st.location, *args, conf=conf)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "argument" in r.stderr, r.stderr
    conf.write_text("spark.sql.session.timeZone=Nowhere/Else\n")
    r = _cli("--store", st.location, "update", "db.z", "--set", "s = 'y'", conf=conf)
    assert r.returncode == 2 and "time zone" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert Store(st.location).table("db.z").status.read().version == before


def test_bad_conf_zone_is_a_config_error(tmp_path: Path) -> None:
    from carbonstore.segments.timezones import conf_time_zone
    from carbonstore.store import load_conf

    conf = tmp_path / "carbon.properties"
    conf.write_text("spark.sql.session.timeZone=Nowhere/Else\n")
    with pytest.raises(ConfigError, match="time zone"):
        conf_time_zone(load_conf(conf))


def test_condition_over_no_column_is_evaluated_on_every_row(tmp_path: Path) -> None:
    """DELETE WHERE upper('aé') LIKE '%a%' is false on every row (Spark's LIKE is case
    sensitive): a condition naming no column was taken as TRUE and deleted every row."""
    st = Store(str(tmp_path / "store"))
    t = st.create_table("db.n", "id long not null, c string")
    add_segments(t, [pa.table({"id": pa.array([0, 1], pa.int64()), "c": ["a", None]})])
    assert t.delete("upper('aé') LIKE '%a%'", time_zone="UTC").deleted == 0
    assert t.delete("lower('AÉ') LIKE '%a%'", time_zone="UTC").deleted == 2


def test_set_of_a_type_the_column_refuses_fails_also_on_no_row(tmp_path: Path) -> None:
    """Spark refuses UPDATE SET int_column = a string whether or not a row matches."""
    st = Store(str(tmp_path / "store"))
    t = st.create_table("db.n", "id long not null, i int, c string")
    add_segments(t, [pa.table({"id": pa.array([0], pa.int64()), "i": pa.array([1], pa.int32()),
                               "c": ["a"]})])
    with pytest.raises(UserError, match="cannot hold"):
        t.update({"i": "upper(c)"}, where="id > 5", time_zone="UTC")
    t.update({"i": "i + 1"}, where="id > 5", time_zone="UTC")  # a type it takes: no row, no change


def test_decimal_into_a_string_column_is_sparks_text(tmp_path: Path) -> None:
    """SET s = p (decimal(38,10)) stores 0.0000000000 as Spark does (Arrow's text is 0E-10)."""
    from decimal import Decimal

    st = Store(str(tmp_path / "store"))
    t = st.create_table("db.n", "id long not null, p decimal(38,10), s string")
    add_segments(t, [pa.table({"id": pa.array([0, 1, 2], pa.int64()),
                               "p": pa.array([Decimal(0), Decimal("-1.5"), Decimal("1E-10")], pa.decimal128(38, 10)),
                               "s": ["x"] * 3})])
    t.update({"s": "p"}, where="id >= 0", time_zone="UTC")
    rows = scan_rows(t, AlwaysTrue(), with_rows=True).rows
    assert sorted(zip(rows.column("id").to_pylist(), rows.column("s").to_pylist(), strict=True)) == [
        (0, "0.0000000000"), (1, "-1.5000000000"), (2, "0.0000000001")]
