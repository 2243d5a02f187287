"""Reads across schema versions through Spark: native path, local frame, data source, time travel."""

from __future__ import annotations

import decimal
from typing import Any

import pytest

from carbonstore import Store
from carbonstore.spark.api import collect_rows, to_spark
from carbonstore.spark.load_job import load
from carbonstore.store.alter import SUB_ACTIONS, alter_table

pytestmark = pytest.mark.spark


def _alter(store: Store, action: str, *args: str) -> None:
    alter_table(store.table("db.ev"), SUB_ACTIONS[action][1](list(args)), operation=action)


def _key(r: dict[str, Any]) -> Any:
    return r["ident"]


def test_every_spark_read_path_maps_by_column_id(spark: Any, store: Store) -> None:
    t = store.create_table("db.ev", "id int not null, cat string, score float, gone string",
                           properties={"dictionary_include": "cat"})
    rows1 = [(1, "x", 1.5, "g1"), (2, "y", None, "g2"), (3, None, 2.5, None)]
    df = spark.createDataFrame(rows1, "id int, cat string, score float, gone string")  # type: ignore[attr-defined]
    load(t, df, spark=spark)  # type: ignore[arg-type]
    v1 = store.table("db.ev").status.read().version
    _alter(store, "rename-column", "id", "ident")
    _alter(store, "rename-column", "cat", "kind")
    _alter(store, "widen", "ident", "long")
    _alter(store, "widen", "score", "double")
    _alter(store, "drop-column", "gone")
    _alter(store, "add-column", "gone int default 5")  # same name, another column
    _alter(store, "add-column", "amount decimal(8,2)")
    t = store.table("db.ev")
    df2 = spark.createDataFrame(  # type: ignore[attr-defined]
        [(2**40, "y", 0.25, None, decimal.Decimal("12.50"))],
        "ident long, kind string, score double, gone int, amount decimal(8,2)")
    load(t, df2, spark=spark)  # type: ignore[arg-type]
    expected = [
        {"ident": 1, "kind": "x", "score": 1.5, "gone": 5, "amount": None},
        {"ident": 2, "kind": "y", "score": None, "gone": 5, "amount": None},
        {"ident": 3, "kind": None, "score": 2.5, "gone": 5, "amount": None},
        {"ident": 2**40, "kind": "y", "score": 0.25, "gone": None,
         "amount": decimal.Decimal("12.50")},
    ]
    native = sorted(collect_rows(to_spark(t, spark)), key=_key)
    assert native == expected
    src = spark.read.format("carbonstore").option("store", store.location).load("db.ev")  # type: ignore[attr-defined]
    assert sorted(collect_rows(src), key=_key) == expected
    assert str(src.schema["ident"].dataType) == "LongType()"
    # filters: on a renamed dictionary column, on the re-added name, on a widened column
    for where, want in [
        ("kind = 'y'", [2, 2**40]),
        ("gone = 5", [1, 2, 3]),
        ("gone is null", [2**40]),
        ("ident > 2", [3, 2**40]),
        ("score = 1.5", [1]),
        ("amount > 10", [2**40]),
    ]:
        got = sorted(r["ident"] for r in collect_rows(to_spark(t, spark, where=where)))
        assert got == want, where
        got = sorted(r["ident"] for r in collect_rows(src.where(where)))
        assert got == want, where
    # time travel: the schema and rows of version v1
    old = spark.read.format("carbonstore").option("store", store.location) \
        .option("versionAsOf", str(v1)).load("db.ev")  # type: ignore[attr-defined]
    assert old.columns == ["id", "cat", "score", "gone"]
    assert sorted(r["id"] for r in collect_rows(old)) == [1, 2, 3]
    assert sorted(collect_rows(to_spark(t.as_of(v1), spark)), key=lambda r: r["id"])[0] == {
        "id": 1, "cat": "x", "score": 1.5, "gone": "g1"}


def test_unicode_names_through_sql_and_query(
    spark: Any, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    import orjson

    from carbonstore.cli import main

    loc = store.location
    assert main(["--store", loc, "sql",
                 "CREATE TABLE db.u (id int, `名前` string, `unit price` decimal(6,2)) "
                 "STORED AS carbondata"]) == 0
    t = store.table("db.u")
    df = spark.createDataFrame(  # type: ignore[attr-defined]
        [(1, "x", decimal.Decimal("1.50")), (2, "y", None), (3, "x", decimal.Decimal("2.00"))],
        "id int, `名前` string, `unit price` decimal(6,2)")
    load(t, df, spark=spark)  # type: ignore[arg-type]
    assert main(["--store", loc, "sql",
                 "ALTER TABLE db.u RENAME COLUMN `名前` TO `ラベル`"]) == 0
    assert main(["--store", loc, "sql", "ALTER TABLE db.u ADD COLUMNS (`新しい` int default 7)"]) == 0
    capsys.readouterr()
    assert main(["--store", loc, "sql",
                 "SELECT `ラベル`, count(*) AS n, sum(`unit price`) AS s, min(`新しい`) AS d "
                 "FROM db.u WHERE `ラベル` = 'x' GROUP BY `ラベル`", "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert out == [{"ラベル": "x", "n": 2, "s": "3.50", "d": 7}] or \
        out == [{"ラベル": "x", "n": 2, "s": 3.5, "d": 7}]
    assert main(["--store", loc, "query", "db.u", "--where", "`unit price` > 1.6", "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert [r["id"] for r in out] == [3]
