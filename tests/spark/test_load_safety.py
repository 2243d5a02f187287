"""Spark loads that must fail clearly or store exactly: a load clean files marked dead
(the same one-line error on every load path, exit status 2 from the CLI), and Parquet
inputs with hostile values (timestamps and dates beyond years 1-9999, NaN, infinities,
-0.0, decimals at full precision, long strings and binaries, nulls inside nested values):
stored and read back as plain ``spark.read.parquet`` reads them, statistics and index
bounds that never prune a matching row - never a traceback."""

from __future__ import annotations

import math
import os
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from carbonstore import Store  # noqa: E402
from carbonstore.errors import CommitConflictError  # noqa: E402
from carbonstore.segments.clean import clean_files  # noqa: E402
from carbonstore.segments.commit import marked_dead_error  # noqa: E402
from carbonstore.segments.dml import row_filter, scan_rows  # noqa: E402
from carbonstore.spark.load_job import load  # noqa: E402
from carbonstore.statistics.store import get_segment_statistics  # noqa: E402
from carbonstore.store import load_conf  # noqa: E402
from carbonstore.store.faults import on_point  # noqa: E402
from carbonstore.store.tablestatus import now_ms  # noqa: E402

LATER = 3 * 3_600_000


def _clean_later(store: Store, name: str) -> None:
    clean_files(store.table(name), dry_run=False, stale_inprogress=True, now=now_ms() + LATER)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    conf = load_conf(None).with_overrides({"carbon.lock.retry.timeout.sec": "5",
                                           "carbon.lock.retries": "2"})
    return Store(str(tmp_path / "store"), conf=conf)


def test_a_spark_load_marked_dead_gives_the_dead_load_error(  # type: ignore[no-untyped-def]
    spark, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Clean files marked the running load dead and removed its folder: the Spark load
    reported "load failed ... [Errno 2] ..." of a task instead of the error the other
    load paths give."""
    from carbonstore.cli import main

    table = store.create_table("db.t", "id long not null")
    with on_point("load.after_inprogress", lambda: _clean_later(store, "db.t")):
        with pytest.raises(CommitConflictError, match="marked the load dead"):
            load(table, spark.range(0, 100, numPartitions=2))
    assert table.status.read().readable == []
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": pa.array(range(50), pa.int64())}), src)
    capsys.readouterr()
    with on_point("load.after_inprogress", lambda: _clean_later(store, "db.t")):
        code = main(["--store", store.location, "load", "db.t", "--input", str(src)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert "marked the load dead" in err and "\n" not in err and "Traceback" not in err, err
    assert table.status.read().readable == []
    load(table, str(src))  # nothing left in the way: the same load runs again
    assert sum(e.row_count for e in table.status.read().readable) == 50


HOSTILE_SCHEMA = (
    "id long not null, ts timestamp, day date, v double, f float, dec decimal(38,10), "
    "s string, bin binary, arr array<int>, st struct<a:int,b:string>"
)
_US = 1_000_000
_EDGE_US = [
    -62135596800 * _US - 1,  # one microsecond before 0001-01-01 UTC
    253402300800 * _US,  # 10000-01-01 UTC
    9223372036854775807 - 86400 * _US * 366,  # year 294246
    -9223372036854775807 + 86400 * _US * 366,  # year -290307
    0, 1_700_000_000 * _US,
]


def _hostile() -> pa.Table:
    n = 12
    us = [_EDGE_US[i % len(_EDGE_US)] if i % 5 else None for i in range(n)]
    days = [[-800_000_000, 3_000_000, 2_932_896, -719_163, 0, 19_000][i % 6] for i in range(n)]
    v = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e308, -1e308, 5e-324, None, 1.5, 2.0, 3.0]
    dec = [Decimal("9" * 28 + "." + "9" * 10), Decimal("-" + "9" * 28 + "." + "9" * 10),
           Decimal("0E-10"), None] * 3
    big = "x" * (1 << 20)
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "ts": pa.array(us, pa.timestamp("us", tz="UTC")),
        "day": pa.array(days, pa.date32()),
        "v": pa.array(v, pa.float64()),
        "f": pa.array([None if x is None else float(x) if not math.isfinite(x) or abs(x) < 3e38
                       else 3e38 for x in v], pa.float32()),
        "dec": pa.array(dec, pa.decimal128(38, 10)),
        "s": pa.array([big if i == 3 else None if i == 4 else f"s{i}" for i in range(n)]),
        "bin": pa.array([big.encode() if i == 5 else b"\x00\xff" for i in range(n)], pa.binary()),
        "arr": pa.array([None, [], [None], [1, None, 3]] * 3, pa.list_(pa.int32())),
        "st": pa.array([None, {"a": None, "b": None}, {"a": 1, "b": None}] * 4,
                       pa.struct([("a", pa.int32()), ("b", pa.string())])),
    })


_AS_NUMBERS = ("id", "unix_micros(ts) AS ts", "unix_date(day) AS day", "cast(v AS string) AS v",
               "cast(f AS string) AS f", "cast(dec AS string) AS dec", "sha2(s, 256) AS s",
               "sha2(bin, 256) AS bin", "to_json(arr) AS arr", "to_json(st) AS st")


def _rows(df: object) -> list[tuple[object, ...]]:
    return sorted(tuple(r) for r in df.selectExpr(*_AS_NUMBERS).collect())  # type: ignore[attr-defined]


@pytest.mark.parametrize("full", [
    False,  # CI: one load (the API over the file); every case through the DML scan, the
    #         data source's pushed filters for one of them
    pytest.param(True, marks=pytest.mark.long),  # + the CLI and a DataFrame load, every
    #                                             pushed filter through the data source
])
def test_hostile_values_load_and_read_back_as_spark_reads_them(  # type: ignore[no-untyped-def]
    spark, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], full: bool
) -> None:
    from carbonstore.cli import main

    src = tmp_path / "hostile.parquet"
    data = _hostile()
    pq.write_table(data, src)
    table = store.create_table("db.h", HOSTILE_SCHEMA)
    load(table, str(src))  # the API
    loads = 1
    if full:
        capsys.readouterr()
        code = main(["--store", store.location, "load", "db.h", "--input", str(src)])  # the CLI
        assert code == 0, capsys.readouterr().err
        load(table, spark.read.parquet(str(src)))  # a DataFrame
        loads = 3
    want = _rows(spark.read.parquet(str(src))) * loads
    got = _rows(spark.read.format("carbonstore").option("store", store.location).load("db.h"))
    assert got == sorted(want)

    # Pruning and statistics never lose a row (a min/max narrower than the values would):
    # the index prunes, then rows are evaluated (the DML scan), and through the data source.
    table = store.table("db.h")
    reader = spark.read.format("carbonstore").option("store", store.location).load("db.h")
    cases = [
        ("ts > '9999-12-31 00:00:00'", "ts > timestamp'9999-12-31 00:00:00'"),
        ("ts < '0001-01-02 00:00:00'", "ts < timestamp'0001-01-02 00:00:00'"),
        ("ts = '1970-01-01 00:00:00'", "ts = timestamp'1970-01-01 00:00:00'"),
        ("day > '9999-12-31'", "day > date'9999-12-31'"),
        ("day < '0001-01-02'", "day < date'0001-01-02'"),
        ("v > 1e307", "v > 1e307"), ("v = 0", "v = 0"), ("v < -1e307", "v < -1e307"),
        ("v > 1", "v > 1"),  # NaN is larger than any number in Spark
        ("dec > 99999999999999999999999999", "dec > 99999999999999999999999999BD"),
        ("dec < -99999999999999999999999999", "dec < -99999999999999999999999999BD"),
    ]
    counts = spark.read.parquet(str(src)).selectExpr(
        *[f"count_if({theirs})" for _, theirs in cases]).collect()[0]
    pushed = ("ts >", "day <", "v > 1") if full else ("v > 1",)
    for (ours, theirs), n in zip(cases, counts, strict=True):
        assert n, theirs
        assert scan_rows(table, row_filter(table, ours)).count == n * loads, ours
        if theirs.startswith(pushed):  # pushed to the data source
            assert reader.where(theirs).count() == n * loads, theirs
    seen = 0
    for e in table.status.read().readable:
        stats = get_segment_statistics(table, e.load_name, columns=["ts", "day"])
        if stats is None:
            continue
        seen += 1
        for c in stats.columns:
            assert c.low_value is None and c.high_value is None, c  # unknown, never narrower
    assert seen, "no segment statistics were stored"


@pytest.mark.parametrize(("schema", "data"), [
    # milliseconds beyond what microseconds hold: Spark's reader fails on the file
    ("ts timestamp", pa.table({"ts": pa.array([9_300_000_000_000_000, 0], pa.timestamp("ms"))})),
    ("ts timestamp", pa.table({"ts": pa.array([2**62, 0], pa.timestamp("ns", tz="UTC"))})),
    # the same refusal met later, in the Spark job (a few seconds each): long runs only
    pytest.param("x long", pa.table({"x": pa.array([2**64 - 1, 1], pa.uint64())}),
                 marks=pytest.mark.long),
    pytest.param("x decimal(10,2)", pa.table({"x": pa.array([Decimal("9" * 36 + ".99"),
                                                             Decimal(1)], pa.decimal128(38, 2))}),
                 marks=pytest.mark.long),
])
def test_values_that_cannot_be_stored_fail_in_one_line_with_exit_2(  # type: ignore[no-untyped-def]
    spark, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], schema, data
) -> None:
    """A timestamp in milliseconds beyond year 294247 failed the load with exit status 1
    and a CarbonStoreError ("load ... failed ... FAILED_READ_FILE"), as if the product had
    failed, not the input."""
    from carbonstore.cli import main

    src = tmp_path / "in.parquet"
    pq.write_table(data, src)
    table = store.create_table("db.x", schema)
    capsys.readouterr()
    code = main(["--store", store.location, "load", "db.x", "--input", str(src)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert table.status.read().readable == []


def test_a_bare_dataframe_write_marked_dead_gives_the_dead_load_error(  # type: ignore[no-untyped-def]
    spark, store: Store
) -> None:
    """``df.write.format("carbonstore")`` (no ``load()``): clean files marks its segment dead
    while its tasks run (they sleep first); the tasks then found their folder removed and the
    write failed with the FileNotFoundError of a task, later with the dead-load error inside
    Spark's task failure (a PythonException carrying the worker's traceback). Now the driver
    raises it: one line, the load paths' CommitConflictError text, no traceback."""
    import threading
    import time

    from pyspark.sql import functions as F  # noqa: N812

    table = store.create_table("db.w", "id long not null")

    @F.udf("long", useArrow=False)
    def slow(x: int) -> int:
        import time as t

        t.sleep(4 if x == 0 else 0)
        return x

    cleaned: list[bool] = []

    def clean_when_running() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any(e.running for e in table.status.read().entries):
                time.sleep(0.5)
                _clean_later(store, "db.w")
                cleaned.append(True)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=clean_when_running, daemon=True)
    watcher.start()
    df = spark.range(0, 10, numPartitions=1).select(slow("id").alias("id"))
    with pytest.raises(Exception, match="marked the load dead") as info:  # noqa: PT011 - Spark wraps it
        df.write.format("carbonstore").mode("append").option("store", store.location).save("db.w")
    watcher.join(timeout=60)
    assert cleaned
    message = str(info.value)
    assert "[Errno 2]" not in message.split("marked the load dead")[0][-300:]
    expected = marked_dead_error(table, "0")
    assert expected is not None
    assert f"carbonstore.errors.CommitConflictError: {expected}" in message, message
    assert "Traceback" not in message and len(message.strip().splitlines()) <= 2, message
    assert table.status.read().readable == []
    assert not os.path.exists(table.paths.segment_dir("0"))  # nothing a task wrote is left
