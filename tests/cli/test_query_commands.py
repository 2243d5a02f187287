"""carbonstore prune / query / sql."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.cli.query import rewrite_table_names
from carbonstore.errors import TableNotFoundError
from tests.cli.conftest import RunCli
from tests.indexfiles.segbuild import add_segments

ROOT = Path(__file__).resolve().parents[2]


def test_prune_json_contract(run_cli: RunCli, store: Store, table: object) -> None:
    code, out, _ = run_cli(store, "prune", "db.sales", "--where", "id = 123", "--json")
    assert code == 0
    j = json.loads(out)
    assert list(j) == ["table", "where", "planning_ms", "levels", "files"]
    assert j["table"] == "db.sales" and j["where"] == "id = 123"
    assert list(j["levels"]) == ["segments", "files", "row_groups", "pages", "rows"]
    assert j["levels"]["segments"]["kept"] == 1 and j["levels"]["rows"]["kept"] == 10
    assert j["files"] == [{
        "segment": "1", "path": "Fact/Part0/Segment_1/part-00000-1.parquet",
        "row_groups": [{"index": 0, "num_rows": 50, "row_ranges": [[20, 30]]}],
    }]
    code, out, _ = run_cli(store, "prune", "db.sales", "--where", "id > 10", "--segments", "0,2",
                        "--explain")
    assert code == 0
    assert "rows [0, 10) of segment 0" in out and "read segment 2" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["prune", "db.sales", "--where", "nope = 1"], "unknown column 'nope'"),
    (["prune", "db.sales", "--where", "id = = 3"], "cannot parse filter"),
    (["prune", "db.nothing"], "does not exist"),
    (["query", "db.sales", "--select", "id,zzz"], "unknown column(s) zzz"),
    (["query", "db.sales", "--where", "cat > "], "cannot parse filter"),
    (["sql", "SELECT * FROM db.nothing"], "does not exist"),
    (["prune", "db.sales", "--time-zone", "Mars/Olympus"], "is not a time zone"),
    (["query", "db.sales", "--limit", "99999999999999999999999"], "--limit: must be an integer from 0 to 2147483647"),
    (["query", "db.sales", "--limit", "-1"], "--limit: must be an integer from 0 to"),
    (["sql", "SELECT * FROM db.sales", "--limit", "2147483648"], "--limit: must be an integer from 0 to"),
])
def test_user_mistakes_exit_2_with_one_line(
    run_cli: RunCli, store: Store, table: object, argv: list[str], message: str
) -> None:
    code, out, err = run_cli(store, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


def test_prune_exit_code_in_a_real_process(store: Store, table: object) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", "--store", store.location, "prune", "db.sales",
         "--where", "v > 'x'"], cwd=ROOT, capture_output=True, text=True,
    )
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("carbonstore: error:") and len(res.stderr.strip().splitlines()) == 1


def test_rewrite_table_names(store: Store, table: object) -> None:
    sql, views = rewrite_table_names(
        "WITH x AS (SELECT * FROM db.sales s WHERE s.id > 1) SELECT count(*) FROM x JOIN sales2 ON 1=1",
        store,
    )
    assert set(views) == {"db_sales__0"} and "FROM db_sales__0 AS s" in sql and "FROM x" in sql
    with pytest.raises(TableNotFoundError):
        rewrite_table_names("SELECT 1 FROM other.t", store)


def test_query_and_sql(run_cli: RunCli, spark: object, store: Store, table: object) -> None:
    code, out, _ = run_cli(store, "query", "db.sales", "--select", "id,cat", "--where",
                        "id >= 140 AND id < 143", "--json")
    assert code == 0
    assert sorted(json.loads(out), key=lambda r: r["id"]) == [
        {"id": 140, "cat": "cat_0"}, {"id": 141, "cat": "cat_1"}, {"id": 142, "cat": "cat_2"},
    ]
    code, out, _ = run_cli(store, "query", "db.sales", "--segments", "2", "--limit", "5", "--csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert code == 0 and rows[0] == ["id", "cat", "v"] and len(rows) == 6
    assert all(200 <= int(r[0]) < 300 for r in rows[1:])
    code, out, _ = run_cli(store, "sql",
                        "SELECT cat, count(*) AS n FROM db.sales WHERE id < 70 GROUP BY cat ORDER BY cat",
                        "--json")
    assert code == 0
    assert json.loads(out)[:2] == [{"cat": "cat_0", "n": 10}, {"cat": "cat_1", "n": 10}]
    code, _, err = run_cli(store, "sql", "SELECT nope FROM db.sales")
    assert code == 2 and len(err.strip().splitlines()) == 1
    # a filter the index cannot decide (cat_3 rows in every row group): counted by Spark
    code, out, err = run_cli(store, "query", "db.sales", "--where", "cat = 'cat_3'",
                          "--count", "--json")
    assert code == 0 and json.loads(out) == [{"count": sum(1 for i in range(300) if i % 7 == 3)}], err


def test_query_shows_timestamps_in_the_session_zone_whatever_the_process_zone(
    run_cli: RunCli, spark: object, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime as dt
    import time

    t = store.create_table("db.events", "id long not null, at timestamp")
    at = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
    add_segments(t, [pa.table({"id": pa.array([1], pa.int64()),
                               "at": pa.array([at], pa.timestamp("us", tz="UTC"))})])
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        code, out, _ = run_cli(store, "query", "db.events", "--csv")
        jcode, jout, _ = run_cli(store, "sql", "SELECT at FROM db.events", "--json")
    finally:
        monkeypatch.undo()
        time.tzset()
    assert code == 0 and list(csv.reader(io.StringIO(out)))[1] == ["1", "2024-03-01 00:00:00+00:00"]
    assert jcode == 0 and json.loads(jout) == [{"at": "2024-03-01T00:00:00+00:00"}]


@pytest.mark.spark  # the query in the child process starts Spark
def test_a_limit_ends_the_scan_without_a_traceback(store: Store, tmp_path: Path) -> None:
    t = store.create_table("db.big", "id long not null, s string")
    ids = np.arange(0, 200_000)
    add_segments(t, [pa.table({"id": ids, "s": [f"row {i}" for i in ids]})], row_group_size=5000)
    env = {**os.environ, "SPARK_MASTER": "local[1]", "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", "--store", store.location, "query", "db.big",
         "--limit", "3", "--csv"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(res.stdout.splitlines()) == 4
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    # Spark's own logging is quiet: no start-up warnings, no stage bars on a pipe (the JVM's
    # own notice about its incubator modules is printed before any Spark code runs)
    lines = [ln for ln in res.stderr.splitlines() if "incubator modules" not in ln]
    assert lines == [], res.stderr[-3000:]


def test_json_keeps_nan_and_null_apart(
    run_cli: RunCli, spark: object, store: Store
) -> None:
    t = store.create_table("db.f", "id long not null, v double")
    add_segments(t, [pa.table({"id": [0, 1, 2, 3, 4],
                               "v": [float("nan"), None, float("inf"), -float("inf"), 1.5]})])
    code, out, _ = run_cli(store, "query", "db.f", "--json")
    assert code == 0
    got = {r["id"]: r["v"] for r in json.loads(out)}
    assert got == {0: "NaN", 1: None, 2: "Infinity", 3: "-Infinity", 4: 1.5}
    code, out, _ = run_cli(store, "sql", "SELECT id, v FROM db.f ORDER BY id", "--csv")
    assert out.splitlines()[1:] == ["0,NaN", "1,", "2,Infinity", "3,-Infinity", "4,1.5"]


def test_prune_reads_timestamps_in_the_given_time_zone(
    run_cli: RunCli, store: Store
) -> None:
    import datetime as dt

    t = store.create_table("db.ev", "id long not null, ts timestamp")
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    add_segments(t, [pa.table({"id": [h], "ts": [start + dt.timedelta(hours=h)]}) for h in range(24)])
    where = "ts < TIMESTAMP '2024-01-01 02:00:00'"

    def kept(*extra: str) -> int:
        code, out, _ = run_cli(store, "prune", "db.ev", "--where", where, "--json", *extra)
        assert code == 0
        return int(json.loads(out)["levels"]["segments"]["kept"])

    assert kept() == 2  # 00:00 and 01:00 UTC
    assert kept("--time-zone", "+05:00") == 0  # 02:00 at +05:00 is 21:00 UTC the day before
    assert kept("--time-zone", "America/New_York") == 7  # 07:00 UTC


def test_carbondata_sql_verbs_run_the_cli_code(run_cli: RunCli, store: Store) -> None:
    """No Spark: the verbs are answered by the same code as the CLI commands."""
    code, out, err = run_cli(store, "sql", "CREATE TABLE db.v (id long NOT NULL, c string) "
                          "STORED AS carbondata TBLPROPERTIES ('sort_columns'='id')", "--json")
    assert code == 0, err
    assert json.loads(out) == [{"table": "db.v", "created": True}]
    assert list(store.table("db.v").schema.column_names) == ["id", "c"]
    add_segments(store.table("db.v"), [pa.table({"id": [1, 2], "c": ["a", "b"]})] * 3)
    code, out, _ = run_cli(store, "sql", "show segments for table db.v", "--json")
    assert [r["id"] for r in json.loads(out)] == ["0", "1", "2"]
    code, out, _ = run_cli(store, "sql", "DELETE FROM TABLE db.v WHERE SEGMENT.ID IN (1)", "--json")
    assert code == 0 and json.loads(out) == [{"id": "1", "status": "Marked for Delete"}]
    code, out, _ = run_cli(store, "sql", "SHOW SEGMENTS FOR TABLE db.v", "--json")
    assert {r["id"]: r["status"] for r in json.loads(out)}["1"] == "Marked for Delete"
    code, out, _ = run_cli(store, "sql", "CLEAN FILES FOR TABLE db.v OPTIONS('dryrun'='true')", "--json")
    assert code == 0
    code, out, _ = run_cli(store, "sql", "DROP TABLE db.v")
    assert code == 0 and not store.exists("db.v")


@pytest.mark.parametrize(("statement", "message"), [
    ("DROP TABLE some_temp_view", "no such table"),
    ("INSERT INTO db.nothing VALUES (1, 'a', 1.0)", "does not exist"),
    ("INSERT INTO db.sales (id, nope) VALUES (1, 'a')", "unknown column(s) nope"),
    ("GRANT SELECT ON db.sales TO bob", "this GRANT statement is not one of them"),
    ("CREATE TABLE db.x (a int) USING parquet", "this CREATE statement is not one of them"),
    ("ALTER TABLE db.sales COMPACT 'SIDEWAYS'", "use 'MINOR', 'MAJOR', 'CUSTOM' or 'CLUSTER'"),
    ("DELETE FROM TABLE db.sales WHERE SEGMENT.ID IN ()", "Segment ids should not be empty"),
])
def test_statements_we_cannot_honour_are_one_line_errors(
    run_cli: RunCli, store: Store, table: object, statement: str, message: str
) -> None:
    code, out, err = run_cli(store, "sql", statement)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_count_star_is_answered_from_the_index_without_spark(
    run_cli: RunCli, store: Store, table: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    import carbonstore.spark.session as session

    def no_spark(**_: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "get_spark", no_spark)
    code, out, err = run_cli(store, "sql", "SELECT count(*) AS n, COUNT(1) FROM db.sales", "--json")
    assert code == 0, err
    assert json.loads(out) == [{"n": 300, "count(1)": 300}]
    from carbonstore.segments.manage import delete_segments

    delete_segments(store.table("db.sales"), ["1"])
    code, out, _ = run_cli(store, "sql", "select count(*) from db.sales", "--csv")
    assert out.splitlines() == ["count(1)", "200"]


def test_count_where_min_max_and_query_count_without_spark(
    run_cli: RunCli, store: Store, table: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    import carbonstore.spark.session as session

    def no_spark(**_: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "get_spark", no_spark)
    code, out, err = run_cli(store, "sql", "SELECT count(*) AS n, min(id), MAX(cat) "
                          "FROM db.sales WHERE id >= 100", "--json")
    assert code == 0, err
    assert json.loads(out) == [{"n": 200, "min(id)": 100, "max(cat)": "cat_6"}]  # as Spark names it
    code, out, err = run_cli(store, "sql", "SELECT min(id) lo FROM db.sales WHERE id < 0", "--csv")
    assert code == 0 and out.splitlines() == ["lo", '""'], err  # one empty field
    code, out, err = run_cli(store, "query", "db.sales", "--where", "id < 150", "--count", "--json")
    assert code == 0 and json.loads(out) == [{"count": 150}], err
