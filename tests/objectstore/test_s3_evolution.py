"""ALTER TABLE, nested types and partitioned + bucketed tables on an s3:// store.

No Spark: loads go through the same task and commit functions a Spark load runs
(tests/partitioning/test_table.py ``load``), reads through the read path's row-group reader;
answers are compared with DuckDB over the same logical rows. Every schema version and every
tablestatus version must be written exactly once, with put-if-absent (the server counts).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa
import pytest
from s3fixtures import S3Store

from carbonstore import Store
from carbonstore.pruning.plan import prune
from carbonstore.segments.compaction import compact
from carbonstore.spark.reader import (
    arrow_read_schema,
    plan_partitions,
    plan_projections,
    read_row_groups,
)
from carbonstore.store.table import Table
from tests.partitioning.test_table import load as load_rows

T0 = dt.datetime(2024, 5, 1, 8, 0)
HOSTILE = ["a/b", "..", "50%", "日本語", "x=1", "%2F", "", None]


def load(table: Table, data: pa.Table, **kw: object):  # type: ignore[no-untyped-def]
    """The partitioning tests' load (no Spark), in batches of 97 rows."""
    return load_rows(table, data, chunk=97, **kw)  # type: ignore[arg-type]


def scan(table: Table, where: str | None = None) -> pa.Table:
    plan = prune(table, where)
    parts = plan_partitions(plan, projections=plan_projections(table, plan))
    batches = [b for part in parts for b in read_row_groups(table, part.slices)]
    return pa.Table.from_batches(batches, schema=arrow_read_schema(table))


def rows(data: pa.Table, where: str | None = None) -> list[tuple]:  # type: ignore[type-arg]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", data)
    sql = "SELECT * FROM t" + (f" WHERE {where}" if where else "")
    out = con.execute(sql).to_arrow_table().to_pylist()
    return sorted((tuple(r.values()) for r in out), key=repr)


def same(table: Table, reference: pa.Table, where: str | None = None) -> None:
    got = scan(table, where)
    assert got.column_names == reference.column_names
    assert rows(got, where) == rows(reference, where), where


def events(n: int, *, key0: int = 0, days: int = 3, regions: list[str | None] | None = None) -> pa.Table:
    regions = regions or HOSTILE
    return pa.table({
        "id": pa.array(range(key0, key0 + n), pa.int64()),
        "region": pa.array([regions[i % len(regions)] for i in range(n)], pa.string()),
        "ts": pa.array([T0 + dt.timedelta(days=i % days, minutes=i) for i in range(n)],
                       pa.timestamp("us", tz="UTC")),
        "v": pa.array([i % 97 for i in range(n)], pa.int32()),
    })


def check_puts(s3: S3Store, table: Table) -> None:
    """Every schema version and tablestatus version: one PUT, a put-if-absent."""
    puts, conditional = s3.puts(), s3.puts(conditional=True)
    meta = f"{s3.prefix}/{table.paths.metadata.rsplit(f'{s3.prefix}/', 1)[1]}"
    logged = {k: n for k, n in puts.items()  # versions; not the overwritten _latest hint
              if k.startswith((f"{meta}/schema_log/", f"{meta}/tablestatus_log/"))
              and k.rsplit("/", 1)[1].split(".")[0].isdigit()} | {f"{meta}/schema": puts.get(f"{meta}/schema", 0)}
    assert any("/schema_log/" in k for k in logged) and any("/tablestatus_log/" in k for k in logged)
    assert {k: n for k, n in logged.items() if n != 1} == {}
    assert {k for k in logged if conditional.get(k) != 1} == set()


def _json(capsys: pytest.CaptureFixture[str], s3: S3Store, *args: str) -> object:
    capsys.readouterr()
    assert s3.cli(*args, "--json") == 0, capsys.readouterr().err
    return orjson.loads(capsys.readouterr().out)


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_partitioned_bucketed_table_altered_on_s3(s3_store: S3Store,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    s3 = s3_store
    assert s3.cli("create", "db.p", "--schema", "id long not null, region string, ts timestamp, v int",
                  "--partition-by", "region, day(ts)", "--buckets", "4",
                  "--bucket-columns", "id") == 0, capsys.readouterr().err
    store = Store(s3.location, conf=s3.conf())
    t = store.table("db.p")
    first, second = events(240), events(120, key0=1000)
    load(t, first)
    load(t, second, tasks=3)
    ref = pa.concat_tables([first, second])
    same(t, ref)
    # hostile partition values: one folder level per field, every value back as written
    data_keys = [k for k in s3.keys() if "/Segment_" in k and k.endswith(".parquet")]
    assert data_keys
    for k in data_keys:
        region, day, _name = k.split("/Segment_", 1)[1].split("/")[1:]
        assert region.startswith("region=") and day.startswith("ts_day=2024-05-0"), k
    assert {k.split("/Segment_", 1)[1].split("/")[1] for k in data_keys} >= {
        "region=a%2Fb", "region=%2E%2E", "region=50%25", "region=%252F"}
    parts = t.partitions()
    assert {p.values["region"] for p in parts} == set(HOSTILE)
    assert sum(p.rows for p in parts) == ref.num_rows
    for value in HOSTILE:
        where = "region IS NULL" if value is None else "region = '" + value.replace("'", "''") + "'"
        same(t, ref, where)
    # a one-day predicate keeps one day's files only (every region of that day)
    where = "ts >= TIMESTAMP '2024-05-02 00:00:00' AND ts < TIMESTAMP '2024-05-03 00:00:00'"
    same(t, ref, where)
    plan = prune(t, where)
    assert plan.files and all("/ts_day=2024-05-02/" in f.path for f in plan.files)
    assert plan.to_json()["levels"]["files"]["dropped_by_partition"] > 0
    plan = prune(t, "id = 7")  # one bucket file per partition folder of each segment
    assert plan.files and len({f.path.rsplit("/", 1)[0] for f in plan.files}) == len(plan.files)
    same(t, ref, "id = 7")

    # a dynamic overwrite of one region's partitions
    before = t.status.read().version
    new = events(30, key0=5000, regions=["日本語"])
    load(t, new, options={"overwrite_partitions": "true"})
    ref_before = ref
    ref = pa.concat_tables([ref.filter(pa.compute.fill_null(
        pa.compute.not_equal(ref["region"], "日本語"), True)), new])
    same(t, ref)
    shown = _json(capsys, s3, "show-partitions", "db.p")
    assert sum(p["rows"] for p in shown) == ref.num_rows  # type: ignore[union-attr, index]
    assert {p["values"]["region"] for p in shown} == set(HOSTILE)  # type: ignore[union-attr, index]
    old = _json(capsys, s3, "show-partitions", "db.p", "--as-of", str(before))
    assert sum(p["rows"] for p in old) == ref_before.num_rows  # type: ignore[union-attr, index]
    same(t.as_of(before), ref_before)  # time travel reads the replaced files

    # ALTER through the CLI and SQL: add, rename, widen, drop; reads equal the reference
    v_before_alter = t.status.read().version
    assert s3.cli("alter", "db.p", "add-column", "note string default 'n/a'") == 0
    assert s3.cli("alter", "db.p", "rename-column", "v", "amount") == 0
    assert s3.cli("sql", "ALTER TABLE db.p ALTER COLUMN amount TYPE bigint") == 0
    assert s3.cli("sql", "ALTER TABLE db.p ADD COLUMNS (score double)") == 0
    assert s3.cli("alter", "db.p", "drop-column", "note") == 0, capsys.readouterr().err
    t = store.table("db.p")
    assert t.schema.schema_version == 6
    assert t.schema.column_names == ["id", "region", "ts", "amount", "score"]
    ref = pa.table({"id": ref["id"], "region": ref["region"], "ts": ref["ts"],
                    "amount": ref["v"].cast(pa.int64()),
                    "score": pa.nulls(ref.num_rows, pa.float64())})
    same(t, ref)
    same(t, ref, "amount > 90")
    after = events(50, key0=9000, regions=["eu", None]).rename_columns(["id", "region", "ts", "amount"])
    after = after.set_column(3, "amount", after["amount"].cast(pa.int64())).append_column(
        "score", pa.array([i / 4 for i in range(50)], pa.float64()))
    load(t, after)
    ref = pa.concat_tables([ref, after])
    same(t, ref)
    same(t, ref, "score > 5")
    old = t.as_of(v_before_alter)  # time travel: the schema of then
    assert old.schema.column_names == ["id", "region", "ts", "v"]
    assert scan(old).num_rows == ref.num_rows - after.num_rows

    # compaction keeps the partitions, the altered columns and the answers
    compact(t, "major")
    t = store.table("db.p")
    assert len(t.status.read().readable) == 1
    same(t, ref)
    same(t, ref, where)
    check_puts(s3, t)


def test_nested_types_on_s3(s3_store: S3Store, capsys: pytest.CaptureFixture[str]) -> None:
    s3 = s3_store
    assert s3.cli("create", "db.n", "--schema",
                  "id long, s struct<a:int,b:string>, xs array<string>, m map<string,int>",
                  "--partition-by", "id") == 0, capsys.readouterr().err
    store = Store(s3.location, conf=s3.conf())
    t = store.table("db.n")
    n = 40
    data = pa.table({
        "id": pa.array([i % 4 for i in range(n)], pa.int64()),
        "s": pa.array([None if i % 7 == 0 else {"a": i, "b": f"é{i}/x"} for i in range(n)],
                      pa.struct([("a", pa.int32()), ("b", pa.string())])),
        "xs": pa.array([None if i % 5 == 0 else [f"v{j}" for j in range(i % 3)] for i in range(n)],
                       pa.list_(pa.string())),
        "m": pa.array([None if i % 6 == 0 else [(f"k{j}", j) for j in range(i % 4)] for i in range(n)],
                      pa.map_(pa.string(), pa.int32())),
    })
    load(t, data)
    load(t, data.slice(0, 10))
    ref = pa.concat_tables([data, data.slice(0, 10)])
    got = scan(t)
    assert got.schema == ref.schema
    key = lambda r: repr(r)  # noqa: E731
    assert sorted(got.to_pylist(), key=key) == sorted(ref.to_pylist(), key=key)
    assert s3.cli("sql", "ALTER TABLE db.n ALTER COLUMN s.a TYPE bigint") == 0, capsys.readouterr().err
    t = store.table("db.n")
    compact(t, "major")
    t = store.table("db.n")
    got = scan(t)
    want = [{**r, "s": None if r["s"] is None else {**r["s"]}} for r in ref.to_pylist()]
    assert sorted(got.to_pylist(), key=key) == sorted(want, key=key)
    assert got.schema.field("s").type == pa.struct([("a", pa.int64()), ("b", pa.string())])
    check_puts(s3, t)


def test_a_listing_that_lags_an_alter_still_finds_the_newest_schema(
        s3_store: S3Store, capsys: pytest.CaptureFixture[str]) -> None:
    """Schema versions are found by listing Metadata/schema_log; a listing need not show a
    just-written file yet. Opening the table, a load and the next ALTER must still use the
    newest version (a load with the old schema would drop the added column's values)."""
    s3 = s3_store
    assert s3.cli("create", "db.l", "--schema", "id long, v int") == 0
    store = Store(s3.location, conf=s3.conf())
    t = store.table("db.l")
    assert s3.cli("alter", "db.l", "add-column", "w string") == 0
    assert s3.cli("alter", "db.l", "rename-column", "v", "x") == 0
    s3.hide_from_list(f"{t.paths.metadata.rsplit(f'{s3.prefix}/', 1)[1]}/schema_log/{2:020d}.json")
    s3.hide_from_list(f"{t.paths.metadata.rsplit(f'{s3.prefix}/', 1)[1]}/schema_log/{3:020d}.json")
    try:
        assert not any("schema_log" in i.path for i in store.sfs.list_dir(t.paths.metadata)
                       if i.is_file)  # the server does hide them
        t = store.table("db.l")
        assert t.schema.schema_version == 3 and t.schema.column_names == ["id", "x", "w"]
        data = pa.table({"id": pa.array([1, 2], pa.int64()), "x": pa.array([5, 6], pa.int32()),
                         "w": ["a", None]})
        load(t, data, tasks=1)
        assert scan(store.table("db.l")).to_pylist() == data.to_pylist()
        assert s3.cli("alter", "db.l", "drop-column", "w") == 0, capsys.readouterr().err
        assert store.table("db.l").schema.schema_version == 4
    finally:
        s3.hide_from_list(None)
    assert [v.version for v in store.table("db.l").schema_versions()] == [1, 2, 3, 4]
    check_puts(s3, store.table("db.l"))


@pytest.mark.spark
def test_spark_load_and_query_of_an_altered_partitioned_table_on_s3(
        spark: object, s3_store: S3Store, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    s3 = s3_store
    csv = tmp_path / "a.csv"
    csv.write_text("id,region,ts,v\n1,a/b,2024-05-01 08:00:00,10\n2,..,2024-05-02 09:00:00,20\n"
                   "3,50%,2024-05-02 10:00:00,30\n4,,2024-05-03 11:00:00,40\n", encoding="utf-8")
    assert s3.cli("create", "db.s", "--schema", "id long, region string, ts timestamp, v int",
                  "--partition-by", "region, day(ts)", "--buckets", "2",
                  "--bucket-columns", "id") == 0
    assert s3.cli("load", "db.s", "--input", str(csv)) == 0, capsys.readouterr().err
    assert s3.cli("sql", "ALTER TABLE db.s RENAME COLUMN v TO amount") == 0
    assert s3.cli("alter", "db.s", "add-column", "note string default 'x'") == 0
    rows = _json(capsys, s3, "query", "db.s", "--select", "id,region,amount,note",
                 "--where", "ts >= TIMESTAMP '2024-05-02 00:00:00' AND ts < TIMESTAMP '2024-05-03 00:00:00'")
    assert sorted((r["id"], r["region"], r["amount"], r["note"]) for r in rows) == [  # type: ignore[union-attr, index]
        (2, "..", 20, "x"), (3, "50%", 30, "x")]
    rows = _json(capsys, s3, "sql", "SELECT sum(amount) AS s, count(*) AS n FROM db.s")
    assert rows == [{"s": 100, "n": 4}]
