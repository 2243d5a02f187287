"""Row-level DELETE, UPDATE and MERGE on an s3:// table, against a real S3 server.

Every statement runs through the CLI (in this process), SQL or the Python API; the table's
rows are then read through every path that applies on s3:// (driver-local, count(*) from
metadata, time travel, the Python data source and ``to_spark``, compaction) and compared with
a reference: the same logical rows kept in pyarrow, aggregated by DuckDB. Delete deltas must
be written once each (the server counts successful PUTs per key), by conditional puts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa
import pytest
from s3fixtures import BUCKET, S3Store

from carbonstore import Store, Table
from carbonstore.errors import CorruptMetadataError, VersionNotFoundError
from carbonstore.pruning.plan import prune
from carbonstore.segments.clean import clean_files
from carbonstore.segments.compaction import compact
from carbonstore.segments.deltas import DELTA_SUFFIX
from carbonstore.store.objectstore import request_counts
from tests.dml.rows import SCHEMA, load, read_live, rows

ROOT = Path(__file__).resolve().parents[2]


class Reference:
    """The table's logical rows, changed by the statements' meaning (not their code)."""

    def __init__(self, data: pa.Table) -> None:
        self.rows = {r["id"]: r for r in data.to_pylist()}

    def delete(self, keep: object) -> None:
        self.rows = {k: r for k, r in self.rows.items() if keep(r)}  # type: ignore[operator]

    def table(self) -> pa.Table:
        data = sorted(self.rows.values(), key=lambda r: r["id"])
        return pa.Table.from_pylist(data, schema=rows([]).schema)

    def answer(self, sql: str) -> list[tuple[object, ...]]:
        ref = self.table()  # noqa: F841 - read by DuckDB
        return duckdb.sql(sql.format(t="ref")).fetchall()


def _sorted(t: pa.Table) -> pa.Table:
    return t.select(["id", "name", "score"]).sort_by("id")


def _check(table: Table, ref: Reference) -> None:
    got = _sorted(read_live(table))
    assert got.to_pylist() == ref.table().to_pylist(), (got.num_rows, len(ref.rows))
    live = got  # noqa: F841 - read by DuckDB
    agg = "SELECT count(*), count(name), sum(score), min(id), max(id) FROM {t}"
    assert duckdb.sql(agg.format(t="live")).fetchall() == ref.answer(agg)


def _json(capsys: pytest.CaptureFixture[str], s3: S3Store, *args: str) -> object:
    capsys.readouterr()
    assert s3.cli(*args, "--json") == 0, capsys.readouterr().err
    return orjson.loads(capsys.readouterr().out)


def _deltas(s3: S3Store) -> list[str]:
    return [k for k in s3.keys() if k.endswith(DELTA_SUFFIX)]


def _requests(s3: S3Store) -> dict[str, int]:
    return s3.server.requests()


@pytest.fixture
def table(s3_store: S3Store) -> Table:
    store = Store(s3_store.location, conf=s3_store.conf())
    t = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    load(t, rows(range(0, 200)), tasks=2)
    load(t, rows(range(200, 300)))
    src = store.create_table("db.s", SCHEMA)
    load(src, rows(range(290, 310), tag="s"))
    return t


def test_dml_statements_and_reads_on_s3(table: Table, s3_store: S3Store,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    s3 = s3_store
    ref = Reference(rows(range(300)))
    _check(table, ref)
    before = table.status.read().version

    # DELETE through the CLI: deltas written once each, by conditional puts, no data rewritten
    data_files = {k for k in s3.keys() if k.endswith(".parquet")}
    asked, layer = _requests(s3), request_counts()
    r = _json(capsys, s3, "delete", "db.t", "--where", "id < 20 OR name = 'n3'")
    ref.delete(lambda row: not (row["id"] < 20 or row["name"] == "n3"))
    assert r["deleted"] == 300 - len(ref.rows) and r["files"] == 3  # type: ignore[index]
    first = int(r["version"])  # type: ignore[index]
    after = _requests(s3)
    assert after.get("PUT-IF-ABSENT", 0) - asked.get("PUT-IF-ABSENT", 0) >= 3 + 1  # deltas + commit
    # ... sent by the store's filesystem layer (it counts what it sends)
    assert request_counts().get("PUT-IF-ABSENT", 0) - layer.get("PUT-IF-ABSENT", 0) >= 3 + 1
    assert len(_deltas(s3)) == 3
    assert {k for k in s3.keys() if k.endswith(".parquet")} == data_files
    _check(table, ref)

    # DELETE in SQL (a condition the index binds whole: no JVM)
    even = ", ".join(str(k) for k in range(280, 300, 2))
    assert s3.cli("sql", f"DELETE FROM db.t WHERE id >= 280 AND id IN ({even})") == 0
    ref.delete(lambda row: not (row["id"] >= 280 and row["id"] % 2 == 0))
    _check(table, ref)
    table.delete("id = 50 OR id = 150 OR id = 250")  # a second delta of each file
    ref.delete(lambda row: row["id"] not in (50, 150, 250))
    _check(table, ref)

    # count(*) from metadata (no Spark), describe, time travel to before the first DELETE
    assert _json(capsys, s3, "sql", "SELECT count(*) AS n FROM db.t") == [{"n": len(ref.rows)}]
    assert table.describe()["rows"] == len(ref.rows)
    old = table.as_of(before)
    assert _sorted(read_live(old)).to_pylist() == rows(range(300)).to_pylist()
    assert _json(capsys, s3, "sql", "SELECT count(*) AS n FROM db.t", "--as-of", str(before)) \
        == [{"n": 300}]

    # every delta and every tablestatus version was PUT exactly once
    puts = s3.puts()
    deltas = [k for k in puts if k.endswith(DELTA_SUFFIX)]
    assert len(deltas) >= 6
    commits = [k for k in puts if re.search(r"/tablestatus_log/[^/]+/[0-9]+\.json$", k)]
    overwritten = {k: puts[k] for k in (*deltas, *commits) if puts[k] != 1}
    assert not overwritten, overwritten
    conditional = s3.puts(conditional=True)  # ... and each by a conditional put
    assert all(conditional.get(k) == 1 for k in (*deltas, *commits))

    # clean files removes superseded deltas (after the retention), keeps the live ones
    live = {d.delta_file.rsplit("/", 1)[-1]
            for e in table.status.read().readable for d in e.delete_deltas}
    assert len(_deltas(s3)) > len(live)
    later = max(e.modification_or_deletion_timestamp or 0
                for e in table.status.read().entries) + 10 * 86_400_000
    report = clean_files(table, dry_run=False, now=later)
    assert [i for i in report.items if i.kind == "delta"]
    assert {k.rsplit("/", 1)[-1] for k in _deltas(s3)} == live
    with pytest.raises(VersionNotFoundError, match="delete delta"):
        table.as_of(first)  # its deltas were superseded and cleaned
    _check(table, ref)

    # compaction applies the deltas: the output has none and the same rows
    ids = [e.load_name for e in table.status.read().readable]
    compact(table, "custom", segment_ids=ids)
    snap = table.status.read()
    assert all(not e.delete_deltas for e in snap.readable)
    assert prune(table).deleted_rows == 0
    _check(table, ref)
    assert _json(capsys, s3, "sql", "SELECT count(*) AS n FROM db.t") == [{"n": len(ref.rows)}]


@pytest.mark.spark
def test_spark_reads_and_sql_merge_on_s3(spark: object, table: Table, s3_store: S3Store,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from carbonstore.spark.api import to_spark
    from carbonstore.spark.session import register_data_source

    s3 = s3_store
    ref = Reference(rows(range(300)))
    before = table.status.read().version
    table.delete("id IN (" + ", ".join(str(k) for k in range(1, 300, 5)) + ") OR id > 290")
    ref.delete(lambda row: not (row["id"] % 5 == 1 or row["id"] > 290))
    want = sorted(ref.rows)

    # to_spark on s3:// reads in Python (no JVM reader, no _metadata.row_index)
    table.store.conf.values["carbon.read.local.rows"] = "0"  # never the driver-local shortcut
    assert sorted(r.id for r in to_spark(table, spark).select("id").collect()) == want
    sub = to_spark(table, spark, where="id >= 100 AND id < 200")
    assert sorted(r.id for r in sub.collect()) == [i for i in want if 100 <= i < 200]

    # the data source, now and as of the version before the DELETE
    register_data_source(spark)
    reader = (spark.read.format("carbonstore").option("store", s3.location)  # type: ignore[attr-defined]
              .option("carbon.s3.endpoint", s3.server.endpoint))
    assert sorted(r.id for r in reader.load("db.t").select("id").collect()) == want
    assert reader.option("versionAsOf", str(before)).load("db.t").count() == 300

    # the CLI query, now and --as-of
    rows_now = _json(capsys, s3, "query", "db.t", "--select", "id")
    assert sorted(r["id"] for r in rows_now) == want  # type: ignore[union-attr, index]
    rows_old = _json(capsys, s3, "query", "db.t", "--select", "id", "--as-of", str(before))
    assert sorted(r["id"] for r in rows_old) == list(range(300))  # type: ignore[union-attr, index]

    # MERGE from a Spark query and from a DataFrame: Spark jobs over the s3:// files
    capsys.readouterr()
    assert s3.cli("sql", "MERGE INTO db.t USING (SELECT * FROM VALUES (2, 'x', 0.5), "
                  "(1000, 'y', 1.5) AS v(id, name, score)) AS s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *") == 0
    df = spark.createDataFrame([(3, "z", 9.0), (2000, "w", 2.0)], "id long, name string, score double")  # type: ignore[attr-defined]
    r = table.merge(df, on="t.id = s.id", when_matched_update="*", when_not_matched_insert="*")
    assert (r.deleted, r.inserted) == (1, 2)
    ref.rows[2] = {"id": 2, "name": "x", "score": 0.5}
    ref.rows[3] = {"id": 3, "name": "z", "score": 9.0}
    ref.rows[1000] = {"id": 1000, "name": "y", "score": 1.5}
    ref.rows[2000] = {"id": 2000, "name": "w", "score": 2.0}
    _check(table, ref)
    got = _json(capsys, s3, "sql", "SELECT count(*) AS n, sum(score) AS s FROM db.t WHERE id < 500")
    assert got == [{"n": len(ref.rows) - 2, "s": sum(r["score"] for k, r in ref.rows.items() if k < 500)}]

    # analyze and compaction with Spark tasks (the CLI's default engine) apply the deltas
    assert s3.cli("analyze", "db.t") == 0
    stats = _json(capsys, s3, "stats", "db.t", "--column", "id")
    assert str(len(ref.rows)) in orjson.dumps(stats).decode()
    assert s3.cli("compact", "db.t", "--type", "major") == 0
    assert all(not e.delete_deltas for e in table.status.read().readable)
    _check(table, ref)
    assert s3.cli("delete", "db.t", "--where", "id >= 1000") == 0
    del ref.rows[1000], ref.rows[2000]
    (last,) = [e.load_name for e in table.status.read().readable if e.delete_deltas]
    assert s3.cli("compact", "db.t", "--type", "custom", "--segments", last) == 0  # a purge
    _check(table, ref)


@pytest.mark.spark
def test_dml_of_dictionary_columns_on_s3(spark: object, s3_store: S3Store,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    s3 = s3_store
    assert s3.cli("create", "db.d", "--schema", SCHEMA, "--dictionary", "name") == 0
    table = Store(s3.location, conf=s3.conf()).table("db.d")
    table.append(rows(range(100)))
    ref = Reference(rows(range(100)))
    assert s3.cli("delete", "db.d", "--where", "name = 'n2' OR name IS NULL") == 0
    ref.delete(lambda row: row["name"] not in ("n2", None))
    table.append(pa.table({"id": pa.array(range(1000, 1010), pa.int64()),
                           "name": ["new"] * 10, "score": [0.0] * 10}))
    for k in range(1000, 1010):
        ref.rows[k] = {"id": k, "name": "new", "score": 0.0}
    assert s3.cli("update", "db.d", "--set", "name = 'new'", "--where", "id < 10") == 0
    for k in range(10):
        if k in ref.rows:
            ref.rows[k] = {**ref.rows[k], "name": "new"}
    _check(table, ref)
    got = _json(capsys, s3, "query", "db.d", "--select", "id", "--where", "name = 'new'")
    assert sorted(r["id"] for r in got) == sorted(k for k, r in ref.rows.items()  # type: ignore[union-attr, index]
                                                  if r["name"] == "new")


def test_damaged_or_missing_delta_on_s3_fails_in_one_line(table: Table, s3_store: S3Store,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    s3 = s3_store
    table.delete("id < 5")
    (key,) = _deltas(s3)
    client = s3.server.client()
    version = table.status.read().version
    for damage in ("garbage", "gone"):
        if damage == "garbage":
            client.put_object(Bucket=BUCKET, Key=key, Body=b"CSDD garbage that is no delta")
        else:
            client.delete_object(Bucket=BUCKET, Key=key)
        with pytest.raises(CorruptMetadataError, match="delete delta"):
            read_live(table)  # never "no rows deleted"
        capsys.readouterr()
        assert s3.cli("delete", "db.t", "--where", "id = 50") == 2  # damage exits 2, like a user mistake (docs/cli.md)
        err = capsys.readouterr().err
        assert "delete delta" in err and len(err.strip().splitlines()) == 1, err
        assert table.status.read().version == version  # nothing committed


_DELETER = """
import sys
from carbonstore.segments.dml import delete_rows
from carbonstore import Store
table = Store(sys.argv[1]).table("db.t")
for k in range(int(sys.argv[2]), 4, 2):
    r = delete_rows(table, "id IN (" + ", ".join(str(i) for i in range(k, 300, 6)) + ")")
    print("deleted", k, r.deleted, flush=True)
"""


@pytest.mark.slow
def test_concurrent_deletes_on_s3_union(table: Table, s3_store: S3Store) -> None:
    """Two processes delete disjoint rows of every file at once: both deletions are there."""
    loc = table.store.location  # carries the endpoint: the workers have no conf file
    env = {k: v for k, v in os.environ.items() if k != "CARBON_CONF"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    procs = [subprocess.Popen([sys.executable, "-c", _DELETER, loc, str(k)], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in (0, 1)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr[-3000:]
        outs.append(stdout)
    deleted = sum(int(line.split()[2]) for out in outs for line in out.splitlines())
    assert deleted == len([i for i in range(300) if i % 6 < 4])
    got = read_live(Store(loc).table("db.t"))["id"].to_pylist()
    assert sorted(got) == [i for i in range(300) if i % 6 in (4, 5)] == sorted(set(got))
    puts = s3_store.puts()
    overwritten = {k: n for k, n in puts.items() if k.endswith(DELTA_SUFFIX) and n != 1}
    assert not overwritten


@pytest.mark.long  # ~45 s: keeps this file's CI run under 2 minutes
def test_deletes_loads_and_compactions_race_on_s3(s3_store: S3Store) -> None:
    """tests/dml/test_concurrency.py's race on s3:// (no courtesy lock is taken there):
    nothing lost, nothing resurrected, no duplicate."""
    from collections import Counter

    from tests.dml.workers import DELETES, LOADS, ROWS, run_race

    store = Store(s3_store.location, conf=s3_store.conf())
    t = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    for part in range(4):
        load(t, rows(range(part * ROWS // 4, (part + 1) * ROWS // 4)))
    out = run_race(store.location, str(ROOT))
    got = Counter(read_live(Store(store.location).table("db.t"))["id"].to_pylist())
    assert not [i for i, n in got.items() if n > 1], "duplicated rows"
    assert not [i for i in got if i < ROWS], "deleted rows read again"
    assert set(got) == {10_000 + 100 * j + k for j in range(LOADS) for k in range(50)}
    deleted = sum(int(line.split()[2]) for role in ("delete", "delete-odd")
                  for line in out[role].splitlines() if line.startswith("deleted"))
    assert deleted == ROWS and out["delete"].count("deleted") * 2 == DELETES
    assert "compacted" in out["compact"]  # compactions ran during the race
    puts = s3_store.puts()
    assert not {k: n for k, n in puts.items() if k.endswith(DELTA_SUFFIX) and n != 1}


def _read_evolved(table: Table) -> pa.Table:
    """The live rows, segments of older schema versions projected by column id."""
    from carbonstore.segments.arrow_read import (
        arrow_read_schema,
        plan_projections,
        plan_slices,
        read_row_groups,
    )

    plan = prune(table)
    slices = [s for p in plan_slices(plan, projections=plan_projections(table, plan)) for s in p]
    return pa.Table.from_batches(list(read_row_groups(table, slices)),
                                 schema=arrow_read_schema(table))


_STATEMENTS = (
    "UPDATE db.t SET score = score * 2, name = upper(name) WHERE id % 3 = 0",
    "MERGE INTO db.t AS t USING db.s AS s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET score = t.score + s.score, flag = 1 "
    "WHEN NOT MATCHED THEN INSERT * "
    "WHEN NOT MATCHED BY SOURCE AND t.id < 5 THEN DELETE",
    "DELETE FROM db.t WHERE id % 7 = 0",
)

# the same statements by plain Spark over a view ``v`` of the rows (and ``s``, the source)
_ORACLE = (
    "SELECT id, CASE WHEN id % 3 = 0 THEN upper(name) ELSE name END AS name, "
    "CASE WHEN id % 3 = 0 THEN score * 2 ELSE score END AS score, flag FROM v",
    "SELECT t.id, t.name, t.score + s.score AS score, 1 AS flag FROM v t JOIN s ON t.id = s.id "
    "UNION ALL SELECT s.id, s.name, s.score, CAST(NULL AS INT) FROM s LEFT ANTI JOIN v t ON t.id = s.id "
    "UNION ALL SELECT t.* FROM v t LEFT ANTI JOIN s ON t.id = s.id WHERE NOT t.id < 5",
    "SELECT * FROM v WHERE NOT id % 7 = 0",
)


@pytest.mark.spark
def test_update_merge_delete_on_s3_equal_local_and_spark(
        spark: object, table: Table, s3_store: S3Store, store: Store) -> None:
    """UPDATE, MERGE (a store table as source; NOT MATCHED BY SOURCE) and a DELETE the
    index cannot bind: Spark jobs whose target rows the tasks read in Python on s3://
    (carbonstore.spark.located), natively on a local store. Both tables end equal, and
    equal to plain Spark running the same statements over the same rows. The s3:// table
    has a delete delta and a segment of an older schema version before they run."""
    from carbonstore.sql.dml_parse import parse_dml
    from carbonstore.sql.dml_run import run_dml
    from carbonstore.store.alter import SUB_ACTIONS, alter_table

    local = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    load(local, rows(range(0, 200)), tasks=2)
    load(local, rows(range(200, 300)))
    load(store.create_table("db.s", SCHEMA), rows(range(290, 310), tag="s"))
    gone = "id IN (1, 2, 50, 150, 250, 299)"
    tables = []
    for t in (table, local):
        t.delete(gone)  # JVM-free: deltas of every file
        alter_table(t, SUB_ACTIONS["add-column"][1](["flag int"]), operation="add-column flag")
        tables.append(t.store.table("db.t"))
    s3_table, local = tables

    view = rows([i for i in range(300) if i not in (1, 2, 50, 150, 250, 299)])
    view = view.append_column("flag", pa.nulls(view.num_rows, pa.int32()))
    spark.createDataFrame(rows(range(290, 310), tag="s")).createOrReplaceTempView("s")  # type: ignore[attr-defined]
    for statement, oracle in zip(_STATEMENTS, _ORACLE, strict=True):
        spark.createDataFrame(view).createOrReplaceTempView("v")  # type: ignore[attr-defined]
        view = spark.sql(oracle).toArrow()  # type: ignore[attr-defined]
        results = []
        for t in (s3_table, local):
            if t is s3_table and statement.startswith("DELETE"):  # the CLI's path too
                assert s3_store.cli("sql", statement) == 0
                results.append(None)
                continue
            results.append(run_dml(t.store, parse_dml(statement)).deleted)  # type: ignore[arg-type]
        want = view.sort_by("id").to_pylist()
        for t in (s3_table, local):
            got = _read_evolved(t.store.table("db.t")).sort_by("id").to_pylist()
            assert got == want, statement
        assert results[0] in (None, results[1])
