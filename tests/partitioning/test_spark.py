"""Partitioned and bucketed tables through Spark: the bucket hash is Spark's, loads write one
file per bucket, SQL answers equal DuckDB's, the CLI and SQL verbs work."""

from __future__ import annotations

import datetime as dt
import json
import random
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.store.partitioning import bucket_ids

pytestmark = pytest.mark.usefixtures("spark")


def test_bucket_ids_equal_spark_pmod_hash(spark) -> None:  # type: ignore[no-untyped-def]
    rnd = random.Random(11)
    n = 400
    utc = dt.UTC
    data = pa.table({
        "b": pa.array([rnd.choice([True, False, None]) for _ in range(n)]),
        "i8": pa.array([rnd.randrange(-128, 128) for _ in range(n)], pa.int8()),
        "i16": pa.array([rnd.randrange(-2**15, 2**15) for _ in range(n)], pa.int16()),
        "i": pa.array([rnd.randrange(-2**31, 2**31) for _ in range(n)], pa.int32()),
        "l": pa.array([rnd.choice([None, rnd.randrange(-2**63, 2**63)]) for _ in range(n)], pa.int64()),
        "s": pa.array([rnd.choice([None, "", "a", "日本語", "😀x", "abcdefg" * rnd.randrange(4)])
                       for _ in range(n)]),
        "bin": pa.array([bytes(rnd.randrange(256) for _ in range(rnd.randrange(7))) for _ in range(n)]),
        "d": pa.array([dt.date(1, 1, 1) + dt.timedelta(days=rnd.randrange(3_000_000)) for _ in range(n)]),
        "ts": pa.array([dt.datetime(1900, 1, 1, tzinfo=utc) + dt.timedelta(microseconds=rnd.randrange(10**16))
                        for _ in range(n)], pa.timestamp("us", tz="UTC")),
        "dec": pa.array([Decimal(rnd.randrange(-10**9, 10**9)) / 100 for _ in range(n)], pa.decimal128(10, 2)),
        "big": pa.array([Decimal(rnd.randrange(-10**24, 10**24)) / 1000 for _ in range(n)], pa.decimal128(25, 3)),
    })
    df = spark.createDataFrame(data, schema=(
        "b boolean, i8 tinyint, i16 smallint, i int, l bigint, s string, bin binary, d date, "
        "ts timestamp, dec decimal(10,2), big decimal(25,3)"))
    cols = data.column_names
    exprs = [f"pmod(hash({c}), 7) AS h_{c}" for c in cols] + ["pmod(hash(l, s, d), 13) AS multi"]
    got = df.selectExpr(*exprs).toArrow()
    back = df.toArrow()  # the values as Spark holds them (timestamps in the session zone)
    for c in cols:
        arr = back.column(c).combine_chunks()
        if pa.types.is_timestamp(arr.type):
            arr = arr.cast(pa.timestamp("us", tz="UTC"))
        assert bucket_ids([arr], 7).tolist() == got.column(f"h_{c}").to_pylist(), c
    multi = bucket_ids([back.column(c).combine_chunks() for c in ("l", "s", "d")], 13)
    assert multi.tolist() == got.column("multi").to_pylist()


def _lineitem_rows(n: int, seed: int, days: range = range(6), key0: int = 0) -> pa.Table:
    rnd = random.Random(seed)
    return pa.table({
        "l_orderkey": pa.array([key0 + rnd.randrange(5000) for _ in range(n)], pa.int64()),
        "l_quantity": pa.array([rnd.randrange(1, 51) for _ in range(n)], pa.int32()),
        "l_shipdate": pa.array([dt.date(1998, 8, 1) + dt.timedelta(days=rnd.choice(list(days)))
                                for _ in range(n)]),
        "l_shipmode": [rnd.choice(["AIR", "MAIL", "SHIP/RAIL", "..", None]) for _ in range(n)],
    })


def _duck(rows: pa.Table, sql: str) -> list[tuple]:  # type: ignore[type-arg]
    con = duckdb.connect()
    con.register("lineitem", rows)
    return [tuple(r) for r in con.execute(sql).fetchall()]


def _cli(capsys, store: Store, *args: str) -> object:  # type: ignore[no-untyped-def]
    capsys.readouterr()
    assert main(["--store", store.location, *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_spark_load_query_overwrite_and_show(spark, store: Store, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.spark.load_job import load
    from carbonstore.spark.sql import run_statement

    _cli(capsys, store, "sql", "--json",
         "CREATE TABLE tpch.lineitem (l_orderkey long, l_quantity int, l_shipdate date, "
         "l_shipmode string) STORED AS carbondata PARTITIONED BY (day(l_shipdate), l_shipmode) "
         "CLUSTERED BY (l_orderkey) INTO 4 BUCKETS")
    t = store.table("tpch.lineitem")
    a = _lineitem_rows(3000, 1)
    load(t, spark.createDataFrame(a))
    csv = tmp_path / "b.csv"
    b = _lineitem_rows(1000, 2, key0=2000)
    pacsv.write_csv(b, csv)
    load(t, str(csv), spark=spark)  # bucketed: Spark's reader, one task per bucket
    seg = t.paths.segment_dir("1")
    for part in t.partitions():
        names = [p.base_name for p in t.store.sfs.list_dir(f"{seg}/{part.partition}")
                 if p.base_name.endswith(".parquet")] if "1" in part.segments else []
        assert len(names) <= 4
        for name in names:  # task k of repartition(4, l_orderkey) holds exactly bucket k
            assert name.startswith(f"part-{int(name[-13:-8]):05d}-"), name
    rows = pa.concat_tables([a, b.cast(a.schema)])
    for sql in (
        "SELECT count(*), sum(l_quantity) FROM lineitem WHERE l_shipdate = DATE '1998-08-03'",
        "SELECT l_shipmode, count(*) FROM lineitem WHERE l_orderkey = 2042 GROUP BY l_shipmode ORDER BY 1 NULLS FIRST",
        "SELECT count(*) FROM lineitem WHERE l_shipmode = 'SHIP/RAIL' AND l_shipdate > DATE '1998-08-02'",
        "SELECT count(*) FROM lineitem WHERE l_shipmode IS NULL OR l_shipmode = '..'",
    ):
        got = [tuple(r) for r in run_statement(spark, store, sql.replace("lineitem", "tpch.lineitem")).collect()]
        assert got == _duck(rows, sql), sql
    plan = _cli(capsys, store, "prune", "tpch.lineitem", "--where",
                "l_shipdate = '1998-08-03' AND l_orderkey = 2042", "--json")
    assert {f["path"].split("/")[3] for f in plan["files"]} <= {"l_shipdate_day=1998-08-03"}  # type: ignore[index]
    version = t.status.read().version
    # dynamic partition overwrite from the command line: only 1998-08-03 partitions change
    c = _lineitem_rows(200, 3, days=range(2, 3), key0=9000)
    pacsv.write_csv(c, tmp_path / "c.csv")
    capsys.readouterr()
    assert main(["--store", store.location, "load", "tpch.lineitem", "--input", str(tmp_path / "c.csv"),
                 "--overwrite-partitions"]) == 0
    day3 = pa.compute.equal(rows["l_shipdate"], pa.scalar(dt.date(1998, 8, 3)))
    touched_modes = set(c["l_shipmode"].to_pylist())
    in_touched = pa.array([d and (m in touched_modes) for d, m in
                           zip(day3.to_pylist(), rows["l_shipmode"].to_pylist(), strict=True)])
    now = pa.concat_tables([rows.filter(pa.compute.invert(in_touched)), c.cast(a.schema)])
    sql = "SELECT l_shipdate, l_shipmode, count(*), sum(l_orderkey) FROM lineitem GROUP BY 1, 2 ORDER BY 1, 2 NULLS FIRST"
    got = [tuple(r) for r in run_statement(spark, store, sql.replace("lineitem", "tpch.lineitem")).collect()]
    assert got == _duck(now, sql)
    old = [tuple(r) for r in run_statement(spark, store, sql.replace("lineitem", "tpch.lineitem"),
                                           as_of=version).collect()]
    assert old == _duck(rows, sql)  # time travel sees the replaced partitions
    shown = _cli(capsys, store, "show-partitions", "tpch.lineitem", "--json")
    assert sum(p["rows"] for p in shown) == now.num_rows  # type: ignore[union-attr]
    verb = _cli(capsys, store, "sql", "--json", "SHOW PARTITIONS tpch.lineitem")
    assert [r["partition"] for r in verb] == [p["partition"] for p in shown]  # type: ignore[union-attr,index]
    spec = _cli(capsys, store, "partition", "tpch.lineitem", "--set-spec", "month(l_shipdate)",
                "--buckets", "0", "--json")
    assert spec == {"table": "tpch.lineitem", "partitionBy": "month(l_shipdate)", "buckets": 0,
                    "bucketColumns": []}


def test_cli_refusals(store: Store, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--store", store.location, "create", "t", "--schema", "id long, f double",
                 "--partition-by", "f"]) == 2
    assert "cannot partition by double column 'f'" in capsys.readouterr().err
    assert main(["--store", store.location, "create", "t", "--schema", "id long",
                 "--buckets", "4"]) == 2
    assert "bucket_number and bucket_columns go together" in capsys.readouterr().err
    assert main(["--store", store.location, "create", "t", "--schema", "id long"]) == 0
    assert main(["--store", store.location, "partition", "t", "--bucket-columns", "id"]) == 2
    assert main(["--store", store.location, "load", "t", "--input", "/nonexistent.csv",
                 "--overwrite-partitions"]) == 2
    assert "not partitioned" in capsys.readouterr().err


def test_dataframe_write_overwrite_partitions_option(spark, store: Store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.spark.sql import run_statement

    store.create_table("w", "k long, d date, v int", properties={"partition_by": "month(d)"})
    first = pa.table({"k": pa.array(range(6), pa.int64()),
                      "d": pa.array([dt.date(2024, m, 1) for m in (1, 1, 2, 2, 3, 3)]),
                      "v": pa.array([1] * 6, pa.int32())})
    writer = spark.createDataFrame(first).write.format("carbonstore").option("store", store.location)
    writer.mode("append").save("default.w")
    second = pa.table({"k": pa.array([10], pa.int64()), "d": pa.array([dt.date(2024, 2, 15)]),
                       "v": pa.array([2], pa.int32())})
    (spark.createDataFrame(second).write.format("carbonstore").option("store", store.location)
     .option("overwrite_partitions", "true").mode("append").save("default.w"))
    got = run_statement(spark, store, "SELECT k, v FROM default.w ORDER BY k").collect()
    assert [tuple(r) for r in got] == [(0, 1), (1, 1), (4, 1), (5, 1), (10, 2)]
    # the CSV task path (no buckets) partitions and overwrites the same way
    from carbonstore.spark.load_job import load

    csv = tmp_path / "w.csv"
    csv.write_text("k,d,v\n20,2024-03-09,3\n21,2024-04-01,3\n")
    load(store.table("w"), str(csv), spark=spark, options={"overwrite_partitions": "true"})
    got = run_statement(spark, store, "SELECT k, v FROM default.w ORDER BY k").collect()
    assert [tuple(r) for r in got] == [(0, 1), (1, 1), (10, 2), (20, 3), (21, 3)]
    via_source = (spark.read.format("carbonstore").option("store", store.location)
                  .option("where", "d >= '2024-03-01'").load("default.w"))
    assert sorted(tuple(r) for r in via_source.select("k", "v").collect()) == [(20, 3), (21, 3)]
    assert [p.partition for p in store.table("w").partitions()] == [
        "d_month=2024-01", "d_month=2024-02", "d_month=2024-03", "d_month=2024-04"]
