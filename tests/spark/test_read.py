"""Spark read side: schema, pushed filters feeding the pruner, segments option, row ranges."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T
from pyspark.sql.utils import AnalysisException

from carbonstore import Store
from carbonstore.errors import ExpressionError
from carbonstore.pruning.plan import prune
from carbonstore.spark.api import to_spark
from carbonstore.spark.reader import plan_partitions, read_row_groups
from tests.indexfiles.segbuild import add_segments

ALL_TYPES = (
    "b boolean, i8 byte, i16 short, i32 int not null, i64 long not null, f float, d double, "
    "dec decimal(10,2), s string not null, bin binary, dt date, ts timestamp"
)


def _typed(n: int, start: int = 0) -> pa.Table:
    r = range(start, start + n)
    return pa.table({
        "b": [i % 3 == 0 if i % 5 else None for i in r],
        "i8": [i % 100 for i in r], "i16": [i for i in r], "i32": [i for i in r],
        "i64": [i * 1_000_000_007 for i in r], "f": [i / 2 for i in r],
        "d": [float("nan") if i % 11 == 0 else i / 3 for i in r],
        "dec": [decimal.Decimal(i) / 100 for i in r], "s": [f"s{i:04d}" for i in r],
        "bin": [bytes([i % 256]) for i in r],
        "dt": [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in r],
        "ts": [dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i) for i in r],
    })


@pytest.fixture
def typed(store: Store) -> object:
    t = store.create_table("db.typed", ALL_TYPES)
    add_segments(t, [_typed(300, k * 300) for k in range(4)], row_group_size=100, page_rows=20)
    return t


def test_schema_and_nullability_are_exact(spark: object, typed: object) -> None:
    df = to_spark(typed, spark)
    want = T.StructType([
        T.StructField("b", T.BooleanType(), True), T.StructField("i8", T.ByteType(), True),
        T.StructField("i16", T.ShortType(), True), T.StructField("i32", T.IntegerType(), False),
        T.StructField("i64", T.LongType(), False), T.StructField("f", T.FloatType(), True),
        T.StructField("d", T.DoubleType(), True), T.StructField("dec", T.DecimalType(10, 2), True),
        T.StructField("s", T.StringType(), False), T.StructField("bin", T.BinaryType(), True),
        T.StructField("dt", T.DateType(), True), T.StructField("ts", T.TimestampType(), True),
    ])
    assert df.schema == want
    rows = df.orderBy("i32").collect()
    files = sorted(Path(typed.paths.root).rglob("*.parquet"))
    expected = pa.concat_tables([pq.read_table(f) for f in files]).sort_by("i32")
    assert len(rows) == expected.num_rows == 1200
    assert [r.s for r in rows] == expected.column("s").to_pylist()
    assert rows[7].dec == decimal.Decimal("0.07") and rows[5].b is None
    assert rows[3].dt == dt.date(2024, 1, 4)


def test_filters_are_pushed_and_prune_the_read(spark: object, typed: object) -> None:
    # Destroy segment 0's data file: only a scan that pruned it away can still succeed.
    seg0 = next(Path(typed.paths.segment_dir("0")).glob("*.parquet"))
    seg0.write_bytes(b"not a parquet file")
    # Spark pushes conjuncts only (an OR at the top is not pushed to Python sources)
    df = to_spark(typed, spark, where="i32 BETWEEN 650 AND 655 AND d IS NOT NULL")
    assert sorted(r.i32 for r in df.collect()) == [650, 651, 652, 653, 654, 655]
    assert [r.i32 for r in to_spark(typed, spark, where="s = 's1100'").collect()] == [1100]
    # the data source prunes by its where option (filters Spark pushes do not prune: they
    # are not safe against Spark's reader reuse, tests/spark/test_reader_reuse.py)
    df2 = spark.read.format("carbonstore").option("store", typed.store.location) \
        .option("where", "i64 = 900000006300").load("db.typed")
    assert df2.where("i64 = 900000006300").count() == 1
    with pytest.raises(Exception, match="(?i)parquet|magic"):  # noqa: PT011 - Spark wraps the executor error
        to_spark(typed, spark).count()


def test_segments_option_and_counts(spark: object, typed: object) -> None:
    df = spark.read.format("carbonstore").option("store", typed.store.location) \
        .option("segments", "1,3").load("db.typed")
    assert df.count() == 600
    assert sorted({r.i32 // 300 for r in df.select("i32").collect()}) == [1, 3]
    assert to_spark(typed, spark, segments=["2"]).where("i32 < 10").count() == 0


def test_bad_filter_and_unknown_table(spark: object, typed: object) -> None:
    with pytest.raises(ExpressionError, match="unknown column"):
        to_spark(typed, spark, where="nope = 1")
    with pytest.raises(AnalysisException):
        spark.read.format("carbonstore").option("store", typed.store.location).load("db.missing").count()


def test_read_row_groups_cuts_row_ranges(store: Store) -> None:
    t = store.create_table("db.t", "id long not null, v double")
    ids = np.arange(5000)
    add_segments(t, [pa.table({"id": ids, "v": ids * 0.5})], row_group_size=1000, page_rows=100)
    plan = prune(t, "id = 1234 or id between 3950 and 4010")
    assert plan.levels["rows"].kept == 300
    parts = plan_partitions(plan)
    batches = [b for p in parts for b in read_row_groups(t, p.slices, batch_rows=64)]
    got = pa.Table.from_batches(batches).column("id").to_pylist()
    assert got == list(range(1200, 1300)) + list(range(3900, 4100))
    assert batches[0].schema.field("id").nullable is False


@pytest.mark.parametrize(("where", "want"), [
    ("id = 1234 or id between 3950 and 4010", [1234, *range(3950, 4011)]),
    ("v > 2000.0 and id < 4010", [1271, *range(4001, 4010)]),  # NaN is above every number
    ("(id < 1250 or v = CAST('NaN' AS DOUBLE)) and id >= 1200", [*range(1200, 1250), 1271]),
    ("id between 3990 and 4003 and v >= 0 and d >= 0", list(range(3990, 4004))),  # every column
])
def test_read_row_groups_with_the_filter_keeps_the_rows_it_may_match(
    store: Store, where: str, want: list[int]
) -> None:
    """Executors read the filter columns first and pass on only the rows that may match."""
    from carbonstore.pruning.plan import bind_where

    t = store.create_table("db.t", "id long not null, v double, d decimal(9,2)")
    ids = np.arange(5000)
    v = ids * 0.5
    v[1271] = np.nan
    add_segments(t, [pa.table({"id": ids, "v": v, "d": [decimal.Decimal(int(i)) for i in ids]})],
                 row_group_size=1000, page_rows=100)
    expr = bind_where(t, where)
    slices = [sl for p in plan_partitions(prune(t, expr)) for sl in p.slices]
    batches = list(read_row_groups(t, slices, batch_rows=64, expr=expr))
    assert pa.Table.from_batches(batches).column("id").to_pylist() == want
    # a decimal leaf has no row kernel: its pages are passed on whole
    loose = bind_where(t, "d = 1234")
    whole = [sl for p in plan_partitions(prune(t, loose)) for sl in p.slices]
    assert sum(b.num_rows for b in read_row_groups(t, whole, expr=loose)) == prune(t, loose).rows == 100


def test_dictionary_columns_are_decoded(spark: object, store: Store) -> None:
    from carbonstore.dictionary import prepare_dictionaries
    from carbonstore.segments.commit import begin_segment, commit_segment
    from carbonstore.segments.load import parse_load_options, write_settings
    from carbonstore.segments.writer import write_task

    t = store.create_table("db.d", "id long not null, city string",
                           properties={"dictionary_include": "city"})
    data = pa.table({"id": list(range(100)), "city": [f"c{i % 5}" if i % 7 else None for i in range(100)]})
    entry, _ = begin_segment(t, overwrite=False, hold_lock=False)
    prepare_dictionaries(t, {"city": data.column("city")}, entry.load_name)
    res = write_task(data.to_batches(), write_settings(t, entry.load_name, parse_load_options(t, {})),
                     task_id="00000-0")
    commit_segment(t, entry.load_name, [res])
    # a filter on a dictionary column never drops anything it should not (surrogates on disk)
    plan = prune(t, "city = 'c3' AND id < 50")
    assert plan.levels["rows"].kept == 100
    batches = [b for p in plan_partitions(plan) for b in read_row_groups(t, p.slices)]
    got = pa.Table.from_batches(batches)
    assert got.schema.field("city").type == pa.string()
    assert got.column("city").to_pylist() == data.column("city").to_pylist()
    df = to_spark(t, spark, where="city = 'c3' AND id < 50")
    assert sorted(r.id for r in df.collect()) == [i for i in range(50) if i % 5 == 3 and i % 7]


def _plan_text(df: object) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())  # type: ignore[attr-defined]


@pytest.mark.parametrize("where", [
    "i32 BETWEEN 650 AND 655", "d > 390.0", "isnan(d) AND i32 < 400", "s = 's1100'",
    "ts >= '2024-01-01 00:19:00' AND b IS NULL", "i32 < 0",
])
def test_small_plans_are_read_on_the_driver_with_the_same_rows(
    spark: object, typed: object, where: str
) -> None:
    """A filter whose plan keeps few rows gives a local DataFrame (no scan at all); its
    schema and rows are those of the native read (Spark's Parquet reader over the kept
    files, no Python scan)."""
    local = to_spark(typed, spark, where=where)
    through_source = Store(typed.store.location, conf=typed.store.conf.with_overrides(  # type: ignore[attr-defined]
        {"carbon.read.local.rows": "0"})).table("db.typed")
    remote = to_spark(through_source, spark, where=where)
    assert "Scan" not in _plan_text(local).replace("LocalTableScan", "").replace("Scan ExistingRDD", "")
    assert "(Python)" not in _plan_text(remote)
    assert "FileScan parquet" in _plan_text(remote) or prune(typed, where).rows == 0
    assert local.schema == remote.schema
    want = remote.orderBy("i32").collect()
    assert repr(local.orderBy("i32").collect()) == repr(want)
    assert len(want) <= prune(typed, where).rows <= 100_000


def test_plans_above_the_local_limit_are_read_by_sparks_parquet_reader(
    spark: object, typed: object
) -> None:
    small = Store(typed.store.location, conf=typed.store.conf.with_overrides(  # type: ignore[attr-defined]
        {"carbon.read.local.rows": "20"})).table("db.typed")
    assert "FileScan" not in _plan_text(to_spark(small, spark, where="i32 = 7"))  # 1 page
    df = to_spark(small, spark, where="i32 < 50")  # 3 pages of 20 rows
    assert "FileScan parquet" in _plan_text(df) and "(Python)" not in _plan_text(df)
    assert df.count() == 50


def test_driver_reads_keep_only_rows_the_filter_may_match(spark: object, typed: object) -> None:
    """The plan keeps whole pages; the local DataFrame holds only the rows that may match."""
    from carbonstore.pruning.plan import bind_where
    from carbonstore.spark.api import local_frame

    # d > 390.0 holds for NaN too (NaN is above every number): 17 numbers and 109 NaNs
    for where, want in [("s = 's1100'", 1), ("i32 IN (3, 650, 1199)", 3), ("d > 390.0 AND i32 < 1190", 126)]:
        plan = prune(typed, where)
        assert plan.rows > want
        df = local_frame(spark, typed, plan, bind_where(typed, where))
        assert df.count() == want, where
        assert df.rdd.getNumPartitions() == 1


def test_driver_read_lookups_count_and_collect_like_spark(spark: object, typed: object) -> None:
    """A lookup read on the driver: ``count()`` of the frame (answered from the rows held on
    the driver) equals Spark's count of the same rows and of frames derived from it, and
    ``collect()`` of a one-row frame runs no Spark job."""
    tracker = spark.sparkContext.statusTracker()  # type: ignore[attr-defined]
    for where, want in [("s = 's1100'", 1), ("i32 IN (3, 650, 1199)", 3), ("i32 = -5", 0),
                        ("d > 390.0 AND i32 < 1190", 126)]:
        df = to_spark(typed, spark, where=where)
        assert "FileScan" not in _plan_text(df), where  # read on the driver
        assert df.count() == want == len(df.collect()), where
        assert df.where("true").count() == want, where
        assert df.groupBy().count().collect()[0][0] == want, where
        assert df.rdd.getNumPartitions() <= 1, where  # none when empty
    spark.sparkContext.setJobGroup("lookup", "one-row lookup")  # type: ignore[attr-defined]
    try:
        rows = to_spark(typed, spark, where="s = 's1100'").collect()
        assert len(rows) == 1 and rows[0]["s"] == "s1100"
        assert tracker.getJobIdsForGroup("lookup") == []
    finally:
        spark.sparkContext.setJobGroup(None, None)  # type: ignore[attr-defined]


@pytest.mark.parametrize("zone", ["America/Los_Angeles", "+05:30"])
def test_timestamp_literals_are_read_in_the_session_time_zone(
    spark: object, typed: object, zone: str
) -> None:
    """``ts < TIMESTAMP '2024-01-01 00:10:00'`` means 00:10 in the session zone: the driver
    path (bound here) and the data source (Spark's own filters) give Spark's rows."""
    through_source = Store(typed.store.location, conf=typed.store.conf.with_overrides(  # type: ignore[attr-defined]
        {"carbon.read.local.rows": "0"})).table("db.typed")
    spark.conf.set("spark.sql.session.timeZone", zone)  # type: ignore[attr-defined]
    try:
        for where in ["ts < TIMESTAMP '2023-12-31 16:10:00'", "ts >= '2024-01-01 05:40:00'",
                      "ts < DATE '2024-01-01'", "dt <= TIMESTAMP '2024-01-03 00:00:00'"]:
            local = sorted(r.i32 for r in to_spark(typed, spark, where=where).collect())
            remote = sorted(r.i32 for r in to_spark(through_source, spark, where=where).collect())
            assert local == remote, where
        hit = to_spark(typed, spark, where="ts < TIMESTAMP '2023-12-31 16:10:00'").count()
        assert hit == (600 if zone == "America/Los_Angeles" else 0)
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")  # type: ignore[attr-defined]
