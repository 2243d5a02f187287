"""``carbonstore sql``: the statements a Spark / Delta user types first, scripts of several
statements, and what runs without a JVM (docs/sql.md). No Spark here: every test makes
starting one fail."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.errors import UserError
from carbonstore.sql import Catalog, Dml, Insert, Query, Verb, parse, split_script
from tests.cli.conftest import RunCli
from tests.indexfiles.segbuild import add_segments

DATE_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}")


@pytest.fixture(autouse=True)
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    import carbonstore.spark.session as session

    def refuse(**_: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "get_spark", refuse)
    monkeypatch.setattr(session, "start_spark", refuse)


@pytest.mark.parametrize(("script", "statements"), [
    ("SELECT 1", ["SELECT 1"]),
    ("SELECT 'a;b'; SELECT \"c;\" ;", ["SELECT 'a;b'", 'SELECT "c;"']),
    ("SHOW CREATE TABLE `a;b`.t; SELECT 'it\\'s;'", ["SHOW CREATE TABLE `a;b`.t", "SELECT 'it\\'s;'"]),
    ("-- first; still a comment\nSELECT 1; /* two; */ SELECT 2;\n-- trailing;\n",
     ["SELECT 1", "SELECT 2"]),
    (" ; ;\n", []),
])
def test_a_script_splits_at_semicolons_outside_quotes_and_comments(
    script: str, statements: list[str]
) -> None:
    assert split_script(script) == statements


@pytest.mark.parametrize("script", ["SELECT 'a; SELECT 2", "SELECT 1 /* x; SELECT 2"])
def test_an_unclosed_quote_or_comment_is_one_line(script: str) -> None:
    with pytest.raises(UserError, match="is not closed"):
        split_script(script)


@pytest.mark.parametrize(("statement", "kind"), [
    ("SELECT count(*) FROM db.t VERSION AS OF 4", Query),
    ("INSERT INTO db.t VALUES (1, 'a')", Insert),
    ("INSERT INTO db.t (id) SELECT id FROM db.s", Insert),
    ("DELETE FROM db.t WHERE id = 1", Dml),
    ("DESCRIBE EXTENDED db.t", Catalog),
    ("DESC HISTORY `db`.`t`", Catalog),
    ("SHOW TABLES IN db", Catalog),
    ("SHOW CREATE TABLE db.t", Catalog),
    ("CREATE TABLE db.c (id long) USING carbonstore TBLPROPERTIES ('sort_columns'='id')", Verb),
    ("CREATE TABLE `db`.`名前` (`列` long) STORED AS carbondata", Verb),
])
def test_each_statement_parses_once_into_its_kind(statement: str, kind: type) -> None:
    assert isinstance(parse(statement), kind)


def test_show_segments_and_history_print_date_times_not_epoch_ms(
    run_cli: RunCli, store: Store, table: object
) -> None:
    code, out, err = run_cli(store, "sql", "SHOW SEGMENTS FOR TABLE db.sales")
    assert code == 0, err
    lines = out.splitlines()
    assert len(DATE_TIME.findall(out)) == 3 and not re.search(r"\b1\d{12}\b", out), out
    assert lines[-1] == "3 segment(s) of db.sales"
    code, out, err = run_cli(store, "sql", "SHOW SEGMENTS FOR TABLE db.sales", "--json")
    assert all(DATE_TIME.fullmatch(r["loadStartTime"]) for r in json.loads(out))
    code, out, err = run_cli(store, "sql", "DESCRIBE HISTORY db.sales", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["version"] for r in rows] == list(range(len(rows)))
    assert all(DATE_TIME.fullmatch(r["timestamp"]) for r in rows)


def test_clean_files_dry_run_prints_a_summary(
    run_cli: RunCli, store: Store, table: object
) -> None:
    code, out, err = run_cli(store, "sql",
                             "CLEAN FILES FOR TABLE db.sales OPTIONS('dryrun'='true')")
    assert code == 0, err
    assert out.splitlines()[-1] == ("dry run: would free 0 bytes (0 item(s)) of db.sales; "
                                    "nothing was removed")


@pytest.mark.parametrize(("statement", "summary"), [
    ("DELETE FROM TABLE db.sales WHERE SEGMENT.ID IN (1)", "marked for delete: 1"),
    ("DELETE FROM db.sales WHERE id < 10",
     "DELETE db.sales: 10 row(s) deleted, 0 inserted, version 2"),
    ("ALTER TABLE db.sales ADD COLUMNS (note string)",
     "altered db.sales: ADD COLUMNS; schema version 2"),
    ("SHOW PARTITIONS db.sales", "1 partition(s)"),
    ("SHOW TABLES", "1 table(s)"),
    ("DROP TABLE db.sales", "dropped table db.sales"),
    ("ALTER TABLE db.sales COMPACT 'MINOR'", "nothing to compact (minor) in db.sales"),
])
def test_every_verb_prints_a_summary(
    run_cli: RunCli, store: Store, table: object, statement: str, summary: str
) -> None:
    code, out, err = run_cli(store, "sql", statement)
    assert code == 0, err
    assert out.splitlines()[-1] == summary


def test_describe_show_tables_and_show_create_table_round_trip(
    run_cli: RunCli, store: Store
) -> None:
    create = ("CREATE TABLE shop.orders (id long NOT NULL, `名前` string, amount decimal(10,2), "
              "tags array<string>, at timestamp) USING carbonstore "
              "PARTITIONED BY (day(at)) "
              "TBLPROPERTIES ('sort_columns'='id', 'bloom_columns'='`名前`', "
              "'dictionary_include'='名前')")
    code, out, err = run_cli(store, "sql", create)
    assert code == 0, err
    code, out, err = run_cli(store, "sql", "SHOW TABLES IN shop", "--json")
    assert json.loads(out) == [{"database": "shop", "tableName": "orders"}]
    code, out, err = run_cli(store, "sql", "DESCRIBE shop.orders", "--json")
    assert [(r["col_name"], r["data_type"]) for r in json.loads(out)] == [
        ("id", "long"), ("名前", "string"), ("amount", "decimal(10,2)"),
        ("tags", "array<string>"), ("at", "timestamp")]
    code, out, err = run_cli(store, "sql", "DESCRIBE EXTENDED shop.orders", "--json")
    detail = {r["col_name"]: r["data_type"] for r in json.loads(out)}
    assert detail["Table"] == "shop.orders" and detail["Provider"] == "carbonstore"
    code, out, err = run_cli(store, "sql", "SHOW CREATE TABLE shop.orders", "--json")
    statement = json.loads(out)[0]["createtab_stmt"]
    before = store.table("shop.orders").describe()
    code, out, err = run_cli(store, "sql", f"DROP TABLE shop.orders; {statement}")
    assert code == 0, err
    after = store.table("shop.orders").describe()
    strip = ("columnId", "location")
    assert [{k: v for k, v in c.items() if k not in strip} for c in after["columns"]] == \
        [{k: v for k, v in c.items() if k not in strip} for c in before["columns"]]
    assert after["properties"] == before["properties"]


def test_version_as_of_count_is_answered_from_the_index(
    run_cli: RunCli, store: Store, table: object
) -> None:
    from carbonstore.segments.manage import delete_segments

    version = store.table("db.sales").status.read().version
    delete_segments(store.table("db.sales"), ["1"])
    code, out, err = run_cli(
        store, "sql", f"SELECT count(*) FROM db.sales VERSION AS OF {version}; "
                      "SELECT count(*), max(id) FROM db.sales", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got[0]["rows"] == [{"count(1)": 300}]
    assert got[1]["rows"] == [{"count(1)": 200, "max(id)": 299}]


def test_a_script_from_a_file_or_stdin_runs_every_statement(
    run_cli: RunCli, store: Store, table: object, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "s.sql"
    script.write_text("CREATE TABLE db.x (id long) STORED AS carbondata;\n"
                      "SHOW TABLES;\n-- a comment; not a statement\n"
                      "DELETE FROM db.sales WHERE id >= 250;\nSELECT count(*) AS n FROM db.sales;\n"
                      "DROP TABLE db.x;\n")
    code, out, err = run_cli(store, "sql", "-f", str(script), "--json")
    assert code == 0, err
    got = json.loads(out)
    assert [g["statement"].split()[0] for g in got] == ["CREATE", "SHOW", "DELETE", "SELECT",
                                                        "DROP"]
    assert got[3]["rows"] == [{"n": 250}] and not store.exists("db.x")
    monkeypatch.setattr("sys.stdin", io.StringIO("SELECT count(*) AS n FROM db.sales; "
                                                 "SHOW TABLES"))
    code, out, err = run_cli(store, "sql", "-")
    assert code == 0, err
    assert out.splitlines()[:3] == ["n", "---", "250"] and out.splitlines()[-1] == "1 table(s)"


def test_a_bad_statement_in_a_script_stops_it_before_anything_runs(
    run_cli: RunCli, store: Store, table: object
) -> None:
    code, out, err = run_cli(store, "sql", "DROP TABLE db.sales; SELECT FROM WHERE;")
    assert code == 2 and out == "" and store.exists("db.sales")
    assert len(err.strip().splitlines()) == 1 and "statement 2 of 2" in err, err
    code, out, err = run_cli(store, "sql", "SHOW TABLES; SHOW SEGMENTS FOR TABLE db.nope")
    assert code == 2 and "statement 2 of 2 (SHOW SEGMENTS FOR TABLE db.nope)" in err
    assert out.splitlines()[-1] == "1 table(s)"  # what ran before is printed
    for argv in (["sql"], ["sql", "SELECT 1", "-f", "x.sql"], ["sql", "-f", "/no/such.sql"]):
        code, out, err = run_cli(store, *argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (argv, err)


def test_update_to_null_on_a_not_null_column_names_the_column(
    run_cli: RunCli, store: Store
) -> None:
    t = store.create_table("db.u", "id long not null, c string")
    add_segments(t, [pa.table({"id": np.arange(2, dtype=np.int64), "c": ["a", "b"]})])
    for argv in (["update", "db.u", "--set", "id = NULL"],
                 ["sql", "UPDATE db.u SET id = NULL WHERE c = 'a'"]):
        code, out, err = run_cli(store, *argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert "column id is NOT NULL" in err and '(,"' not in err, err
    assert store.table("db.u").status.read().version == 1  # nothing was changed


def test_as_of_pins_show_and_describe_and_is_refused_where_it_cannot_apply(
    run_cli: RunCli, store: Store, table: object
) -> None:
    from carbonstore.segments.manage import delete_segments

    version = store.table("db.sales").status.read().version
    delete_segments(store.table("db.sales"), ["1"])
    code, out, err = run_cli(store, "sql", "SHOW SEGMENTS FOR TABLE db.sales", "--as-of",
                             str(version), "--json")
    assert code == 0, err
    assert {r["id"]: r["status"] for r in json.loads(out)}["1"] == "Success"
    for statement in ("SHOW TABLES", "DROP TABLE db.sales", "INSERT INTO db.sales VALUES (1, 'a', 1.0)"):
        code, out, err = run_cli(store, "sql", statement, "--as-of", "1")
        assert code == 2 and out == "" and "leave out --as-of" in err, err
    assert store.exists("db.sales")
