"""Load job on a real local Spark: round trip, segments, CSV options, bad records, failures."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402, N812

from carbonstore import Store  # noqa: E402
from carbonstore.errors import BadRecordError, CarbonStoreError  # noqa: E402
from carbonstore.indexfiles.indexfile import load_index  # noqa: E402
from carbonstore.spark.load_job import load  # noqa: E402
from carbonstore.store.table import Table  # noqa: E402
from carbonstore.store.tablestatus import (  # noqa: E402
    FAILURE,
    MARKED_FOR_DELETE,
    PARTIAL_SUCCESS,
    SUCCESS,
)


def segment_files(table: Table, seg: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"parquet": [], "carbonindex": [], "carbonindexmerge": []}
    for info in table.store.sfs.list_dir(table.paths.segment_dir(seg)):
        ext = info.base_name.rsplit(".", 1)[-1]
        out.setdefault(ext, []).append(info.path)
    return out


def read_segment(table: Table, seg: str) -> pa.Table:
    files = sorted(segment_files(table, seg)["parquet"])
    return pa.concat_tables([pq.read_table(f) for f in files])


def visible_rows(table: Table) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for e in table.status.read().readable:
        rows.extend(read_segment(table, e.load_name).to_pylist())
    return rows


ALL_TYPES = (
    "id long not null, b boolean, i8 byte, i16 short, i32 int, f float, d double, "
    "dec decimal(38,10), s string, bin binary, day date, ts timestamp"
)


def test_dataframe_round_trip_every_type(spark, store: Store) -> None:  # type: ignore[no-untyped-def]
    table = store.create_table("db.all", ALL_TYPES, properties={"bloom_columns": "s"})
    utc = dt.UTC
    rows = [
        (-(2**63), True, -128, -32768, -(2**31), math.nan, math.nan,
         Decimal("-9999999999999999999999999999.9999999999"), "héllo ✓ 日本語", b"\x00\xff",
         dt.date(1, 1, 1), dt.datetime(1, 1, 1, tzinfo=utc)),
        (2**63 - 1, False, 127, 32767, 2**31 - 1, -0.0, -0.0,
         Decimal("0.0000000001"), "", b"", dt.date(9999, 12, 31),
         dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=utc)),
        (0, None, None, None, None, None, None, None, None, None, None, None),
        (7, True, 1, 2, 3, float("inf"), float("-inf"), Decimal("12.5"), "x" * 1000, b"abc",
         dt.date(2024, 2, 29), dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=utc)),
    ]
    df = spark.createDataFrame(rows, ALL_TYPES.replace(" not null", "")).repartition(1)
    entry = load(table, df)
    assert (entry.status, entry.row_count) == (SUCCESS, 4)
    back = read_segment(table, entry.load_name)
    assert back.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert back.schema.field("i8").type == pa.int8() and not back.schema.field("id").nullable
    got = {r["id"]: r for r in back.to_pylist()}
    for want in rows:
        g = got[want[0]]
        for name, value in zip(table.schema.column_names, want, strict=True):
            if isinstance(value, float):
                assert repr(g[name]) == repr(value), name  # NaN stays NaN, -0.0 stays -0.0
            else:
                assert g[name] == value, name
    # and through the data source reader (Spark's NaN = NaN semantics)
    read = spark.read.format("carbonstore").option("store", store.location).load("db.all")
    assert read.count() == 4
    assert read.exceptAll(df).count() == 0 and df.exceptAll(read).count() == 0


def test_several_loads_give_segments_with_indexes(spark, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    table = store.create_table("db.seg", "id int not null, v double, s string")
    df = spark.range(0, 300, numPartitions=2).select(
        F.col("id").cast("int").alias("id"), (F.col("id") / 3).alias("v"),
        F.concat(F.lit("s"), F.col("id")).alias("s"),
    )
    entries = [load(table, df) for _ in range(2)]
    df.write.format("carbonstore").mode("append").option("store", store.location).save("db.seg")
    snap = table.status.read()
    assert [e.load_name for e in snap.entries] == ["0", "1", "2"]
    assert all(e.status == SUCCESS and e.row_count == 300 for e in snap.entries)
    for e in snap.entries:
        files = segment_files(table, e.load_name)
        assert len(files["parquet"]) == 2 and len(files["carbonindex"]) == 2
        assert [Path(p).name for p in files["carbonindexmerge"]] == [e.segment_file]
        arrays = load_index(table.store.sfs.fs, files["carbonindexmerge"][0])
        assert int(arrays.column("id").pages.row_count.sum()) == 300
        assert sorted(read_segment(table, e.load_name).column("id").to_pylist()) == list(range(300))
    assert entries[0].data_size > 0 and entries[0].index_size > 0
    # overwrite: the old segments go in the same commit that makes the new one visible
    load(table, df.limit(5), mode="overwrite")
    snap = table.status.read()
    assert [e.status for e in snap.entries] == [MARKED_FOR_DELETE] * 3 + [SUCCESS]
    assert len(visible_rows(table)) == 5


BAD_CSV = """ID|Name|Day|Amount
1|"a|b"|01/02/2024|1.5
2|b|02/02/2024
3|c|03/02/2024|2.5|extra
x|d|04/02/2024|3.5
5|e|not a date|4.5
6|NULL|06/02/2024|NULL
|g|07/02/2024|7.5
8|h|08/02/2024|8.5
"""


@pytest.mark.parametrize(
    ("action", "status", "rows", "ids"),
    [
        ("force", PARTIAL_SUCCESS, 6, [1, 2, 3, 5, 6, 8]),
        ("IGNORE", PARTIAL_SUCCESS, 3, [1, 6, 8]),
        ("Redirect", PARTIAL_SUCCESS, 3, [1, 6, 8]),
    ],
)
def test_bad_record_actions_on_csv(  # type: ignore[no-untyped-def]
    spark, store: Store, tmp_path: Path, action, status, rows, ids
) -> None:
    path = tmp_path / "in.csv"
    path.write_text(BAD_CSV)
    table = store.create_table("db.bad", "id int not null, name string, day date, amount double")
    options = {
        "DELIMITER": "|", "dateFormat": "MM/dd/yyyy", "NullValue": "NULL",
        "BAD_RECORDS_ACTION": action, "bad_record_path": str(tmp_path / "bad"),
    }
    entry = load(table, str(path), spark=spark, options=options)
    assert (entry.status, entry.row_count, entry.bad_record_count) == (status, rows, 5)
    got = sorted(visible_rows(table), key=lambda r: r["id"])
    assert [r["id"] for r in got] == ids
    assert got[0]["name"] == "a|b" and got[0]["day"] == dt.date(2024, 1, 2)
    if action == "Redirect":
        folder = tmp_path / "bad" / "db" / "bad" / entry.load_name
        lines = sorted(ln for f in folder.iterdir() for ln in f.read_text().splitlines())
        assert len(lines) == 5
        assert "x|d|04/02/2024|3.5" in lines and "3|c|03/02/2024|2.5|extra" in lines


def test_bad_records_fail_by_default(spark, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "in.csv"
    path.write_text(BAD_CSV)
    table = store.create_table("db.fail", "id int not null, name string, day date, amount double")
    with pytest.raises(BadRecordError, match="5 bad record"):
        load(table, str(path), spark=spark, options={"delimiter": "|", "dateformat": "MM/dd/yyyy",
                                                     "nullvalue": "NULL"})
    (entry,) = table.status.read().entries
    assert entry.status == FAILURE
    assert not store.sfs.exists(table.paths.segment_dir(entry.load_name))
    assert visible_rows(table) == []


def test_headerless_csv_by_position_and_parquet_by_name(spark, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    table = store.create_table("db.pos", "k int not null, ts timestamp, note string")
    csv = tmp_path / "h.csv"
    csv.write_text("1;2024-01-02 03:04:05;'semi;colon'\n# a comment\n2;2024-01-03 00:00:00;\n")
    load(table, str(csv), spark=spark, options={
        "header": "false", "delimiter": ";", "quotechar": "'", "comment": "#",
        "timestampformat": "yyyy-MM-dd HH:mm:ss",
    })
    pq_path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"NOTE": ["p"], "K": pa.array([3], pa.int64())}), pq_path)
    e2 = load(table, str(pq_path), spark=spark)
    assert e2.row_count == 1
    got = sorted(visible_rows(table), key=lambda r: r["k"])
    assert [(r["k"], r["note"]) for r in got] == [(1, "semi;colon"), (2, None), (3, "p")]
    assert got[0]["ts"] == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def test_global_sort_gives_ordered_pages(spark, store: Store) -> None:  # type: ignore[no-untyped-def]
    conf = store.conf.with_overrides({"carbon.page.rows": "50"})
    s2 = Store(store.location, conf=conf)
    table = s2.create_table("db.sorted", "k long not null, v string",
                            properties={"sort_columns": "k", "sort_scope": "global_sort"})
    df = spark.range(0, 1000, numPartitions=2).select(
        ((F.col("id") * 7919) % 1000).alias("k"), F.col("id").cast("string").alias("v")
    )
    entry = load(table, df)
    files = segment_files(table, entry.load_name)
    bounds = []
    for f in files["parquet"]:
        fi = pq.ParquetFile(f)
        ks = fi.read(columns=["k"]).column("k").to_pylist()
        assert ks == sorted(ks)
        bounds.append((ks[0], ks[-1]))
    bounds.sort()
    assert all(a[1] < b[0] for a, b in zip(bounds, bounds[1:], strict=False))
    arrays = load_index(table.store.sfs.fs, files["carbonindexmerge"][0])
    k = arrays.column("k")
    assert set(k.boundary_order.tolist()) == {1}  # ASCENDING in every row group
    assert bool(np.all(k.pages.min[1:][np.diff(k.pages.row_group) == 0] >= k.pages.max[:-1][np.diff(k.pages.row_group) == 0]))


def test_failure_inside_a_task_leaves_nothing(spark, store: Store) -> None:  # type: ignore[no-untyped-def]
    table = store.create_table("db.boom", "id long not null")

    @F.udf("long", useArrow=False)  # no pandas here: the plain Python UDF
    def explode(x: int) -> int:
        if x == 150:
            raise ValueError("boom in a task")
        return x

    df = spark.range(0, 200, numPartitions=2).select(explode("id").alias("id"))
    with pytest.raises(CarbonStoreError, match="marked Failure"):
        load(table, df)
    (entry,) = table.status.read().entries
    assert entry.status == FAILURE
    assert not store.sfs.exists(table.paths.segment_dir(entry.load_name))
    assert table.status.read().readable == []


@pytest.mark.parametrize(
    ("content", "opts", "want"),
    [
        ('"a,b",C ,d\n1,2,3\n', {}, ["a,b", "C", "d"]),
        ("# note\nx|y\n", {"sep": "|", "comment": "#"}, ["x", "y"]),
        ("\ufeffid,name\n", {}, ["id", "name"]),
    ],
)
def test_csv_header_read_without_spark(tmp_path: Path, content, opts, want) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.spark.csv_load import header_columns

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "_SUCCESS").write_text("")
    (folder / "b.csv").write_text("other,header\n")
    (folder / "a.csv").write_text(content, encoding="utf-8")
    assert header_columns([str(folder)], opts) == want
    assert header_columns([str(folder / "*.csv")], opts) == want
    assert header_columns([str(folder / "a.csv")], {**opts, "multiLine": "true"}) is None


def test_json_input_with_a_bad_row(spark, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    table = store.create_table("db.js", "id int not null, name string, amount decimal(6,2)")
    path = tmp_path / "in.json"
    path.write_text(
        '{"id": 1, "name": "a", "amount": 1.25}\n'
        '{"id": "oops", "name": "b"}\n'
        '{"id": 3, "name": "ü"}\n'
    )
    entry = load(table, str(path), spark=spark, options={"bad_records_action": "ignore"})
    assert (entry.status, entry.row_count, entry.bad_record_count) == (PARTIAL_SUCCESS, 2, 1)
    got = sorted(visible_rows(table), key=lambda r: r["id"])
    assert got == [
        {"id": 1, "name": "a", "amount": Decimal("1.25")},
        {"id": 3, "name": "ü", "amount": None},
    ]
