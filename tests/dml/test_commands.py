"""carbonstore delete / update / sql DELETE|UPDATE|MERGE, run as real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from carbonstore import Store
from tests.dml.rows import SCHEMA, ids, load, rows


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CARBON_CONF"}
    return subprocess.run([sys.executable, "-m", "carbonstore.cli", *args], capture_output=True,
                          text=True, env=env, timeout=600)


@pytest.fixture
def location(tmp_path: Path) -> str:
    st = Store(str(tmp_path / "store"))
    load(st.create_table("db.t", SCHEMA), rows(range(100)))
    load(st.create_table("db.s", SCHEMA), rows(range(95, 105), tag="s"))
    return st.location


@pytest.mark.spark  # the CLI processes it runs start Spark
def test_delete_update_commands(location: str) -> None:
    r = run("--store", location, "delete", "db.t", "--where", "id < 10", "--json")
    assert r.returncode == 0, r.stderr
    assert orjson.loads(r.stdout)["deleted"] == 10
    r = run("--store", location, "update", "db.t", "--set", "score = score + 1000, name = 'u'",
            "--set", "id = id + 1000", "--where", "id >= 90")
    assert r.returncode == 0, r.stderr
    assert "UPDATE" in r.stdout
    t = Store(location).table("db.t")
    assert ids(t) == [*range(10, 90), *range(1090, 1100)]
    r = run("--store", location, "sql", "SELECT count(*) AS n FROM db.t", "--json")
    assert r.returncode == 0, r.stderr
    assert orjson.loads(r.stdout) == [{"n": 90}]


@pytest.mark.spark  # the CLI processes it runs start Spark
def test_sql_dml(location: str) -> None:
    r = run("--store", location, "sql",
            "MERGE INTO db.t USING db.s ON t.id = s.id WHEN MATCHED AND s.id = 99 THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET score = t.score + s.score "
            "WHEN NOT MATCHED THEN INSERT *", "--json")
    assert r.returncode == 0, r.stderr
    assert orjson.loads(r.stdout)[0]["deleted"] == 5
    r = run("--store", location, "sql", "DELETE FROM db.t WHERE name = 'n1'")
    assert r.returncode == 0, r.stderr
    r = run("--store", location, "sql", "UPDATE db.t SET name = 'x' WHERE id = 0")
    assert r.returncode == 0, r.stderr
    t = Store(location).table("db.t")
    want = [i for i in range(105) if i != 99 and not (i < 95 and i % 11 and i % 7 == 1)]
    assert ids(t) == want


@pytest.mark.parametrize("args,message", [
    (("delete", "db.t", "--where", "nosuch = 1"), "unknown column"),
    (("delete", "db.t", "--where", " "), "give a filter"),
    (("delete", "db.nosuch", "--where", "id = 1"), "does not exist"),
    (("update", "db.t", "--set", "id ="), "column = expression"),
    (("update", "db.t", "--set", "nosuch = 1"), "unknown column"),
    (("sql", "DELETE FROM db.t WHERE"), "cannot parse"),
    (("sql", "MERGE INTO db.t USING db.s ON t.id = s.id"), "WHEN"),
])
def test_mistakes_are_one_line_exit_2(location: str, args: tuple[str, ...], message: str) -> None:
    r = run("--store", location, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr
    assert ids(Store(location).table("db.t")) == list(range(100))
