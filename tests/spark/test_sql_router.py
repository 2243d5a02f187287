"""One statement language: every statement ``carbonstore sql`` accepts is accepted by
``carbonstore.spark.sql(spark, statement, store=...)`` with the same result and the same
effect on the store; a script runs in one JVM (docs/sql.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import carbonstore.spark.sql as spark_sql
from carbonstore import Store
from carbonstore.cli import main
from carbonstore.sql import Alter, Catalog, Dml, Insert, Query, Verb, parse
from carbonstore.sql.verbs import VERBS
from tests.indexfiles.segbuild import add_segments

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]

STATEMENTS = [
    "SELECT cat, count(*) AS n, sum(v) AS s FROM db.sales WHERE id < 70 GROUP BY cat ORDER BY cat",
    "SELECT a.id, b.cat FROM db.sales a JOIN db.sales b ON a.id = b.id WHERE a.id < 3 ORDER BY a.id",
    "SELECT count(*) FROM db.sales",
    "SELECT count(*), min(id), max(v) FROM db.sales VERSION AS OF 1 WHERE id >= 20",
    "SELECT count(*) FROM db.sales TIMESTAMP AS OF '2999-01-01 00:00:00'",
    "INSERT INTO db.sales VALUES (1000, 'x', 1.5), (1001, NULL, 2.0)",
    "INSERT INTO db.sales (id, v) SELECT id + 1000, v FROM db.sales WHERE id < 5",
    "DELETE FROM db.sales WHERE id < 10",
    "UPDATE db.sales SET v = v * 2 WHERE id = 5",
    "MERGE INTO db.sales t USING db.sales s ON t.id = s.id AND s.id < 3 "
    "WHEN MATCHED THEN UPDATE SET v = 0",
    "MERGE INTO db.sales t USING (SELECT 5000L AS id, 'm' AS cat, 1.0D AS v) s ON t.id = s.id "
    "WHEN NOT MATCHED THEN INSERT *",
    "CREATE TABLE db.c1 (id long NOT NULL, s string) STORED AS carbondata",
    "CREATE TABLE IF NOT EXISTS db.sales (id long) STORED AS carbondata",
    "CREATE TABLE db.c2 (id long, s string) USING carbonstore TBLPROPERTIES ('sort_columns'='id')",
    "CREATE TABLE db.c3 (id long, d date) STORED AS carbondata PARTITIONED BY (d)",
    "DROP TABLE db.sales",
    "DROP TABLE IF EXISTS db.none",
    "ALTER TABLE db.sales ADD COLUMNS (note string)",
    "ALTER TABLE db.sales SET TBLPROPERTIES ('bloom_columns'='cat')",
    "DESCRIBE db.sales",
    "DESCRIBE EXTENDED db.sales",
    "DESCRIBE HISTORY db.sales",
    "SHOW TABLES",
    "SHOW TABLES IN db",
    "SHOW CREATE TABLE db.sales",
    "SHOW SEGMENTS FOR TABLE db.sales LIMIT 2",
    "SHOW PARTITIONS db.sales",
    "CLEAN FILES FOR TABLE db.sales OPTIONS('dryrun'='true')",
    "ALTER TABLE db.sales COMPACT 'CUSTOM' WHERE SEGMENT.ID IN (0, 1)",
    "OPTIMIZE db.sales ZORDER BY (id, v)",
    "DELETE FROM TABLE db.sales WHERE SEGMENT.ID IN (1)",
    "DELETE FROM TABLE db.sales WHERE SEGMENT.STARTTIME BEFORE '2999-01-01 00:00:00'",
]
# columns whose values depend on the clock or the folder, not on the statement
_VOLATILE = {"loadStartTime", "timestamp", "seconds", "timeTakenMs", "writer"}


def test_the_statement_list_covers_the_whole_language() -> None:
    parsed = [parse(s) for s in STATEMENTS]
    kinds = {type(p) for p in parsed}
    assert kinds == {Query, Insert, Dml, Verb, Catalog, Alter}
    assert {p.verb for p in parsed if isinstance(p, Verb)} == set(VERBS)
    assert {p.what for p in parsed if isinstance(p, Catalog)} == {
        "describe", "history", "show_tables", "show_create"}
    assert {p.dml.verb for p in parsed if isinstance(p, Dml) and p.dml} == {
        "DELETE", "UPDATE", "MERGE"}


def _sales(location: Path) -> Store:
    store = Store(str(location))
    t = store.create_table("db.sales", "id long not null, cat string, v double")
    for k in range(3):
        ids = np.arange(k * 100, (k + 1) * 100)
        add_segments(t, [pa.table({"id": ids, "cat": [f"cat_{i % 7}" for i in ids],
                                   "v": ids / 2})], row_group_size=50, page_rows=10)
    return store


def _state(store: Store) -> list[Any]:
    out: list[Any] = []
    for name in store.tables():
        t = store.table(name)
        out.append((str(name), [(c["name"], c["type"], c["nullable"])
                                for c in t.describe()["columns"]],
                    t.schema.properties,
                    [(e.load_name, e.status, e.row_count, e.deleted_rows)
                     for e in t.status.read().entries]))
    return out


def _norm(rows: list[dict[str, Any]], store: Store) -> list[dict[str, Any]]:
    def value(v: Any) -> Any:
        return v.replace(store.location, "<store>") if isinstance(v, str) else v

    return [{k: value(v) for k, v in r.items() if k not in _VOLATILE} for r in rows]


@pytest.mark.parametrize("statement", STATEMENTS)
def test_the_library_runs_what_the_cli_runs_with_the_same_result(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], statement: str
) -> None:
    cli, lib = _sales(tmp_path / "cli"), _sales(tmp_path / "lib")
    code = main(["--store", cli.location, "sql", statement, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    df = spark_sql(spark, statement, store=lib)  # the module is callable: carbonstore.spark.sql
    got = [r.asDict(recursive=True) for r in df.collect()]
    assert _norm(got, lib) == _norm(json.loads(out), cli)
    assert list(df.columns) == list(json.loads(out)[0]) if got else True
    assert _state(lib) == _state(cli)


def test_run_statement_takes_a_store_location(spark: Any, tmp_path: Path) -> None:
    store = _sales(tmp_path / "s")
    df = spark_sql.run_statement(spark, store.location, "SELECT count(*) AS n FROM db.sales")
    assert df.collect()[0].n == 300
    assert spark_sql.sql(spark, "SHOW TABLES", store=store.location).collect()[0].tableName == "sales"


_COUNT_JVMS = """
import runpy, sys
import pyspark.core.context as context

launch = context.launch_gateway
log = sys.argv[1]

def counted(*args, **kwargs):
    with open(log, "a") as f:
        f.write("jvm\\n")
    return launch(*args, **kwargs)

context.launch_gateway = counted
sys.argv = ["carbonstore", *sys.argv[2:]]
runpy.run_module("carbonstore.cli", run_name="__main__")
"""


def test_a_five_statement_script_runs_in_one_jvm_started_when_needed(tmp_path: Path) -> None:
    store = _sales(tmp_path / "s")
    script = tmp_path / "five.sql"
    script.write_text(
        "SHOW TABLES;\n"  # metadata: no JVM yet
        "INSERT INTO db.sales VALUES (1000, 'x', 1.5);\n"  # starts it
        "UPDATE db.sales SET v = 0 WHERE id = 1000;\n"
        "SELECT cat, count(*) AS n FROM db.sales WHERE cat = 'x' GROUP BY cat;\n"
        "SELECT count(*) AS n FROM db.sales;\n")
    jvms = tmp_path / "jvms"
    res = subprocess.run(
        [sys.executable, "-c", _COUNT_JVMS, str(jvms), "--store", store.location, "sql", "-f",
         str(script), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert [g["rows"] for g in got[3:]] == [[{"cat": "x", "n": 1}], [{"n": 301}]]
    assert jvms.read_text().splitlines() == ["jvm"]
