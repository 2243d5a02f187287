"""Lookups read on the driver (``to_spark`` of a small plan): the frame's own actions answer
from the rows held on the driver, with exactly the values and types Spark returns for the
same frame after a no-op transformation (which runs in Spark) and for plain
``spark.read.parquet`` of the same files, over every column type the store supports."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Row

from carbonstore import Store
from carbonstore.segments.writer import arrow_type
from carbonstore.spark.api import to_spark
from carbonstore.store.table import Table
from tests.indexfiles.segbuild import add_segments

TYPES = (
    "id long not null, b boolean, i8 byte, i16 short, i32 int, i64 long, f float, d double, "
    "dec decimal(38,18), dec2 decimal(10,2), s string, bin binary, day date, ts timestamp, "
    "a array<int>, m map<string,timestamp>, st struct<x:int,t:timestamp,b:binary>, "
    "aa array<struct<y:date,z:array<binary>>>, md map<int,array<double>>"
)
UTC = dt.UTC


def _arrow_schema(table: Table) -> pa.Schema:
    return pa.schema([pa.field(c.name, arrow_type(c.type), nullable=c.nullable)
                      for c in table.schema.columns])


def _norm(v: Any) -> Any:
    """A value with its exact Python type, comparable with ``==`` (NaN and -0.0 by repr, dicts
    by their items: a map's order differs between Spark's paths)."""
    if isinstance(v, Row):
        return ("Row", tuple(v.__fields__), tuple(_norm(x) for x in v))
    if isinstance(v, dict):
        return ("dict", sorted((repr(_norm(k)), repr(_norm(x))) for k, x in v.items()))
    if isinstance(v, list):
        return ("list", [_norm(x) for x in v])
    if isinstance(v, tuple):
        return ("tuple", [_norm(x) for x in v])
    if isinstance(v, dt.datetime):
        return ("datetime", repr(v), v.fold)
    return (type(v).__name__, repr(v))


def _outcome(fn: Callable[[], Any]) -> Any:
    """What ``fn`` returns, normalised, or the type of what it raises (a timestamp outside
    Python's range fails the same way on both paths)."""
    try:
        return _norm(fn())
    except (ValueError, OverflowError, OSError) as err:
        return ("raises", type(err).__name__)


def _either(fn: Callable[[], Any]) -> Any:
    """What ``fn`` returns (normalised) or the error class of what it raises."""
    from pyspark.errors import PySparkException

    try:
        return _norm(fn())
    except (PySparkException, ValueError) as err:
        return f"{type(err).__name__}: {getattr(err, 'getCondition', lambda: None)()}"


def _by_id(rows: list[Any]) -> list[Any]:
    return sorted(rows, key=lambda r: r["id"])


def _actions(frame: Any) -> dict[str, Any]:
    """What each driver-side action of ``frame`` gives (normalised)."""
    return {
        "collect": _outcome(frame.collect), "take2": _outcome(lambda: frame.take(2)),
        "head": _outcome(frame.head), "head3": _outcome(lambda: frame.head(3)),
        "first": _outcome(frame.first), "tail2": _outcome(lambda: frame.tail(2)),
        "take0": _outcome(lambda: frame.take(0)), "count": frame.count(),
        "iterator": _outcome(lambda: list(frame.toLocalIterator())),
        "isEmpty": frame.isEmpty(), "arrow": _outcome(lambda: frame.toArrow().to_pylist()),
        "arrow_schema": frame.toArrow().schema, "schema": frame.schema,
    }


def _check_same(spark: Any, table: Table, where: str) -> None:
    local = to_spark(table, spark, where=where)
    assert type(local).__name__ == "LocalFrame", where  # read on the driver, exact filter
    files = sorted(str(p) for p in Path(table.paths.root).rglob("*.parquet"))
    plain = spark.read.parquet(*files).where(where)
    tracker = spark.sparkContext.statusTracker()
    group = f"lookup-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(group, "driver-local actions")
    try:
        got = _actions(local)
        assert tracker.getJobIdsForGroup(group) == [], where  # no Spark job ran
    finally:
        spark.sparkContext.setJobGroup(None, None)
    assert local._carbon_jdf is None  # and no JVM relation was built
    through = local.select("*")  # a no-op transformation: runs in Spark
    want = _actions(through)
    for key in want:
        assert got[key] == want[key], (where, key)
    _check_pandas(spark, local, through)
    assert local.where("true").schema == local.schema  # the JVM's schema is the one given
    for action in ("take", "tail"):  # a negative count: what Spark does, both ways
        assert _either(lambda a=action: getattr(local, a)(-1)) == \
            _either(lambda a=action: getattr(through, a)(-1)), where
    # plain Spark over the same files: the same rows (file order differs: sorted by id)
    assert _outcome(lambda: _by_id(local.collect())) == _outcome(lambda: _by_id(plain.collect()))
    assert _outcome(lambda: sorted(local.toArrow().to_pylist(), key=lambda r: r["id"])) == \
        _outcome(lambda: sorted(plain.toArrow().to_pylist(), key=lambda r: r["id"]))


def _check_pandas(spark: Any, local: Any, through: Any) -> None:
    """``toPandas`` (pyspark's own code, with and without Arrow) equals Spark's; pandas is
    not a dependency of the store: checked where it is installed."""
    try:
        import pandas as pd
    except ImportError:
        return
    key = "spark.sql.execution.arrow.pyspark.enabled"
    old = spark.conf.get(key)
    try:
        for arrow in ("true", "false"):
            spark.conf.set(key, arrow)
            try:  # a timestamp outside pandas' range fails the same way on both paths
                b = through.toPandas()
            except ValueError as err:
                with pytest.raises(type(err)):
                    local.toPandas()
                continue
            a = local.toPandas()
            assert list(a.dtypes) == list(b.dtypes), arrow
            assert _norm(a.to_dict("list")) == _norm(b.to_dict("list")), arrow
            pd.testing.assert_frame_equal(a, b)
    finally:
        spark.conf.set(key, old)


@pytest.fixture
def process_zone() -> Iterator[Callable[[str], None]]:
    """Set this process's time zone (pyspark gives timestamps naive in it); restored after."""
    old = os.environ.get("TZ")

    def set_zone(zone: str) -> None:
        os.environ["TZ"] = zone
        time.tzset()

    yield set_zone
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


def _corpus_rows() -> list[dict[str, Any]]:
    """Edge values of every type: extremes, NaN, -0.0, infinities, empty and null nested
    values, timestamps at DST changes (a repeated local hour) and at the ends of time."""
    ts = [dt.datetime(2024, 3, 10, 10, 30, tzinfo=UTC), dt.datetime(2024, 11, 3, 8, 30, tzinfo=UTC),
          dt.datetime(2024, 11, 3, 9, 30, tzinfo=UTC), dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
          dt.datetime(1900, 1, 1, tzinfo=UTC), dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
          dt.datetime(1, 1, 1, tzinfo=UTC), None]
    rows = []
    for i, t in enumerate(ts):
        rows.append({
            "id": i, "b": [True, False, None][i % 3], "i8": [-128, 127, None, 0][i % 4],
            "i16": [-32768, 32767, None][i % 3], "i32": [-(2**31), 2**31 - 1, None][i % 3],
            "i64": [-(2**63), 2**63 - 1, None][i % 3],
            "f": [math.nan, -0.0, math.inf, -math.inf, 0.1, None, 3.4e38, 1e-45][i],
            "d": [math.nan, -0.0, math.inf, -math.inf, 0.1, None, 1.7976931348623157e308, 5e-324][i],
            "dec": [decimal.Decimal("-99999999999999999999.999999999999999999"),
                    decimal.Decimal(0), decimal.Decimal("1.5"), None, decimal.Decimal("1E-18"),
                    decimal.Decimal("12345678901234567890.123456789012345678"), None,
                    decimal.Decimal("-0.000000000000000001")][i],
            "dec2": [decimal.Decimal("-99999999.99"), decimal.Decimal("0.00"), None,
                     decimal.Decimal("0.10"), decimal.Decimal("12.5"), None, decimal.Decimal(7),
                     decimal.Decimal("-1")][i],
            "s": ["", "héllo ✓ 日本語", None, "x" * 300, "\x00", "a'b", "NULL", "  "][i],
            "bin": [b"", b"\x00\xff", None, b"abc", bytes(range(256)), None, b"\x80", b" "][i],
            "day": [dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1), None,
                    dt.date(2024, 2, 29), dt.date(1582, 10, 15), dt.date(1969, 12, 31),
                    dt.date(2000, 1, 1)][i],
            "ts": t,
            "a": [[1, None, 3], [], None, [2**31 - 1], [None], [0] * 5, None, [-1, -2]][i],
            "m": [[("k", t)], [], None, [("a", None), ("b", t)], [("", t)], None, [("x", None)],
                  [("z", dt.datetime(2020, 1, 1, tzinfo=UTC))]][i],
            "st": [{"x": 1, "t": t, "b": b"z"}, {"x": None, "t": None, "b": None}, None,
                   {"x": -1, "t": t, "b": b""}, None, {"x": 0, "t": None, "b": b"\x00"},
                   {"x": 2, "t": t, "b": None}, None][i],
            "aa": [[{"y": dt.date(2020, 1, 1), "z": [b"a", None]}, None], [], None,
                   [{"y": None, "z": None}], [{"y": dt.date(1, 1, 1), "z": []}], None,
                   [{"y": dt.date(9999, 12, 31), "z": [b""]}], []][i],
            "md": [[(1, [0.5, math.nan])], [], None, [(2, None), (3, [])], [(-1, [-0.0])], None,
                   [(0, [None])], [(7, [math.inf])]][i],
        })
    return rows


def _write(table: Table, rows: list[dict[str, Any]], *, files: int = 1) -> None:
    schema = _arrow_schema(table)
    data = pa.Table.from_pylist(rows, schema=schema)
    step = max(1, math.ceil(len(rows) / files))
    parts = [data.slice(k, step) for k in range(0, len(rows), step)] or [data]
    add_segments(table, [parts], row_group_size=4, page_rows=2)


@pytest.mark.parametrize(("process", "session"), [
    ("UTC", "UTC"), ("America/Los_Angeles", "Asia/Kolkata"), ("Asia/Kolkata", "America/Los_Angeles"),
])
def test_lookup_frame_actions_equal_sparks_over_every_type(
    spark: Any, store: Store, process_zone: Callable[[str], None], process: str, session: str
) -> None:
    """Table-driven over the edge corpus, in several process and session time zones, with
    binary as bytes (Spark's default) and as bytearray."""
    table = store.create_table("db.corpus", TYPES)
    _write(table, _corpus_rows(), files=2)
    process_zone(process)
    spark.conf.set("spark.sql.session.timeZone", session)
    try:
        for where in ["id = 0", "id = 1", "id = 2", "id = 7", "id BETWEEN 0 AND 7",
                      "id IN (2, 5, 6)", "id < 0", "id >= 3 AND id <= 4"]:
            _check_same(spark, table, where)
        spark.conf.set("spark.sql.execution.pyspark.binaryAsBytes", "false")
        _check_same(spark, table, "id BETWEEN 0 AND 7")
    finally:
        spark.conf.set("spark.sql.execution.pyspark.binaryAsBytes", "true")
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def _opt(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values)


_TS = st.datetimes(min_value=dt.datetime(1900, 1, 2), max_value=dt.datetime(2200, 1, 1),
                   timezones=st.just(UTC))
_DEC38 = st.decimals(min_value=-10**19, max_value=10**19, places=18, allow_nan=False)
_ROW = st.fixed_dictionaries({
    "b": _opt(st.booleans()), "i8": _opt(st.integers(-128, 127)),
    "i16": _opt(st.integers(-(2**15), 2**15 - 1)), "i32": _opt(st.integers(-(2**31), 2**31 - 1)),
    "i64": _opt(st.integers(-(2**63), 2**63 - 1)),
    "f": _opt(st.floats(width=32)), "d": _opt(st.floats()),
    "dec": _opt(_DEC38), "dec2": _opt(st.decimals(min_value=-10**7, max_value=10**7, places=2,
                                                  allow_nan=False)),
    "s": _opt(st.text(max_size=8)), "bin": _opt(st.binary(max_size=6)),
    "day": _opt(st.dates()), "ts": _opt(_TS),
    "a": _opt(st.lists(_opt(st.integers(-(2**31), 2**31 - 1)), max_size=3)),
    "m": _opt(st.dictionaries(st.text(max_size=3), _opt(_TS), max_size=3).map(lambda d: list(d.items()))),
    "st": _opt(st.fixed_dictionaries({"x": _opt(st.integers(-5, 5)), "t": _opt(_TS),
                                      "b": _opt(st.binary(max_size=3))})),
    "aa": _opt(st.lists(_opt(st.fixed_dictionaries({
        "y": _opt(st.dates()), "z": _opt(st.lists(_opt(st.binary(max_size=2)), max_size=2))})),
        max_size=2)),
    "md": _opt(st.dictionaries(st.integers(-3, 3), _opt(st.lists(_opt(st.floats()), max_size=2)),
                               max_size=2).map(lambda d: list(d.items()))),
})


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(rows=st.lists(_ROW, min_size=1, max_size=12), lo=st.integers(-1, 12), span=st.integers(0, 4))
def test_lookup_frame_actions_equal_sparks_random_rows(
    spark: Any, scratch_dir: Path, rows: list[dict[str, Any]], lo: int, span: int
) -> None:
    store = Store(str(scratch_dir / f"lookup-{uuid.uuid4().hex}"))
    table = store.create_table("db.r", TYPES)
    _write(table, [{"id": i, **r} for i, r in enumerate(rows)], files=1 + len(rows) % 3)
    _check_same(spark, table, f"id BETWEEN {lo} AND {lo + span}")


def test_frames_derived_from_a_lookup_run_in_spark(spark: Any, store: Store) -> None:
    """The JVM relation is built when Spark needs it; derived frames and caching see the
    same rows, and the frame's own actions still answer without Spark afterwards."""
    table = store.create_table("db.corpus", TYPES)
    _write(table, _corpus_rows())
    df = to_spark(table, spark, where="id BETWEEN 2 AND 5")
    assert df._carbon_jdf is None
    assert sorted(r.id for r in df.where("i8 IS NOT NULL OR b").collect()) == [3, 4, 5]
    assert df._carbon_jdf is not None
    assert df.groupBy().count().collect()[0][0] == 4 == df.count()
    df.cache()
    assert df.select("id").rdd.getNumPartitions() == 1
    assert [r.id for r in df.orderBy("id").collect()] == [2, 3, 4, 5] == [r.id for r in df.collect()]
    df.unpersist()
