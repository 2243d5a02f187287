"""Nested columns end to end: loads from Parquet, JSON and df.write; every read path; DuckDB;
pruning on struct fields, never on lists or maps."""

from __future__ import annotations

import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from schema_helpers import read

from carbonstore import Store
from carbonstore.segments.compaction import compact, segment_data_files
from carbonstore.spark.api import collect_rows, to_spark
from carbonstore.spark.load_job import load

pytestmark = pytest.mark.spark

SCHEMA = ("id int not null, tags array<string>, attrs map<string,int>, "
          "s struct<a: int, b: string, d: decimal(10,2), t: struct<x: long>>, "
          "items array<struct<k: string, v: double>>, `名前` string")


def _rows(start: int) -> list[dict[str, Any]]:
    out = []
    for i in range(start, start + 4):
        out.append({
            "id": i,
            "tags": None if i % 4 == 3 else [f"t{i}", "x"],
            "attrs": None if i % 4 == 2 else [(f"k{i}", i)],
            "s": None if i % 4 == 1 else {"a": i * 10, "b": f"b{i}", "d": decimal.Decimal(f"{i}.25"),
                                           "t": {"x": i * 100}},
            "items": [] if i % 2 else [{"k": "a", "v": float(i)}, {"k": "b", "v": None}],
            "名前": f"名{i}",
        })
    return out


def _arrow(rows: list[dict[str, Any]], table: Any) -> pa.Table:
    from carbonstore.spark.reader import arrow_read_schema

    return pa.Table.from_pylist(rows, schema=arrow_read_schema(table))


def _norm(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def fix(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        if isinstance(v, tuple):
            return [fix(x) for x in v]
        return v
    return sorted((fix(r) for r in rows), key=lambda r: r["id"])


def test_nested_round_trip_every_format_and_path(spark: Any, store: Store, tmp_path: Path) -> None:
    t = store.create_table("db.nest", SCHEMA)
    # 1. Parquet input
    p = tmp_path / "in.parquet"
    pq.write_table(_arrow(_rows(0), t), p)
    load(t, str(p), spark=spark, format="parquet")  # type: ignore[arg-type]
    # 2. JSON input (maps as objects)
    j = tmp_path / "in.json"
    with j.open("w") as f:
        for r in _rows(4):
            obj = dict(r)
            obj["attrs"] = None if r["attrs"] is None else dict(r["attrs"])
            obj["s"] = None if r["s"] is None else {**r["s"], "d": str(r["s"]["d"])}
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")
    load(t, str(j), spark=spark, format="json")  # type: ignore[arg-type]
    # 3. df.write through the data source
    df = spark.createDataFrame(_arrow(_rows(8), t))  # type: ignore[attr-defined]
    df.write.format("carbonstore").mode("append").option("store", store.location).save("db.nest")
    expected = _norm(_rows(0) + _rows(4) + _rows(8))

    native = _norm(collect_rows(to_spark(t, spark)))
    assert native == expected
    src = spark.read.format("carbonstore").option("store", store.location).load("db.nest")  # type: ignore[attr-defined]
    assert _norm(collect_rows(src)) == expected
    local, _ = read(t)
    assert _norm(local.to_pylist()) == expected
    # DuckDB reads the data files as they are
    import duckdb

    files = [f for e in t.status.read().readable for f in segment_data_files(t, e.load_name)]
    con = duckdb.connect()
    n, deep = con.execute(
        "SELECT count(*), sum(s.t.x) FROM read_parquet(?)", [files]).fetchone()  # type: ignore[misc]
    assert n == 12 and deep == sum(r["s"]["t"]["x"] for r in expected if r["s"])

    # struct fields prune by their row-group statistics; exact answers on every path
    for where in ["s.a = 20", "s.t.x > 900", "s.b = 'b6'", "`名前` = '名5'", "s.a is null"]:
        want = sorted(r["id"] for r in expected if _truth(where, r))
        assert sorted(r["id"] for r in collect_rows(to_spark(t, spark, where=where))) == want, where
        assert sorted(r["id"] for r in collect_rows(src.where(where))) == want, where
        got, plan = read(t, where)
        assert sorted(got["id"].to_pylist()) == want, where
    _, plan = read(t, "s.a = 20")
    assert plan.levels["row_groups"].kept == 1  # three loads, one row group each
    # compaction keeps nested values exactly
    compact(t, "major")
    assert _norm(collect_rows(to_spark(store.table("db.nest"), spark))) == expected


def _truth(where: str, r: dict[str, Any]) -> bool:
    s = r["s"]
    return {
        "s.a = 20": s is not None and s["a"] == 20,
        "s.t.x > 900": s is not None and s["t"]["x"] > 900,
        "s.b = 'b6'": s is not None and s["b"] == "b6",
        "`名前` = '名5'": r["名前"] == "名5",
        "s.a is null": s is None,
    }[where]


def test_lists_and_maps_never_prune(store: Store) -> None:
    from carbonstore.pruning.table_index import table_index

    t = store.create_table("db.lm", SCHEMA)
    from schema_helpers import load as local_load

    local_load(t, _arrow(_rows(0), t))
    view = table_index(t, t.status.read().readable)
    arrays = view.segment(0).arrays
    nested = {c.name: c.desc.nested for c in arrays.columns}
    assert nested["tags.list.element"] and nested["items.list.element.k"]
    assert nested["attrs.key_value.key"]
    assert not nested["s.a"] and not nested["s.t.x"]


def test_csv_load_of_nested_table_is_refused(spark: Any, store: Store, tmp_path: Path) -> None:
    from carbonstore.errors import SchemaError

    t = store.create_table("db.nestcsv", SCHEMA)
    p = tmp_path / "in.csv"
    p.write_text("id\n1\n")
    with pytest.raises(SchemaError, match="CSV cannot hold the nested column"):
        load(t, str(p), spark=spark, format="csv")  # type: ignore[arg-type]
    assert t.status.read().entries == ()


def test_nested_widening_and_rename_on_spark_paths(spark: Any, store: Store) -> None:
    from schema_helpers import load as local_load

    from carbonstore.store.alter import SUB_ACTIONS, alter_table

    t = store.create_table("db.nw", "id int, s struct<a: int, f: float>, l array<int>")
    local_load(t, [{"id": 1, "s": {"a": 7, "f": 0.5}, "l": [1]}, {"id": 2, "s": None, "l": None}])
    for action, args in [("widen", ["s.a", "long"]), ("widen", ["l", "array<long>"]),
                         ("rename-column", ["s", "r"])]:
        alter_table(store.table("db.nw"), SUB_ACTIONS[action][1](args), operation=action)
    t = store.table("db.nw")
    want = [{"id": 1, "r": {"a": 7, "f": 0.5}, "l": [1]}, {"id": 2, "r": None, "l": None}]
    assert _norm(collect_rows(to_spark(t, spark))) == want
    src = spark.read.format("carbonstore").option("store", store.location).load("db.nw")  # type: ignore[attr-defined]
    assert _norm(collect_rows(src)) == want
    assert str(src.schema["r"].dataType) == "StructType([StructField('a', LongType(), True), StructField('f', FloatType(), True)])"
    assert [r["id"] for r in collect_rows(to_spark(t, spark, where="r.a = 7"))] == [1]
    # no row kept: the local frame of nested columns is empty, not an Arrow error
    assert collect_rows(to_spark(t, spark, where="r.a = 999")) == []
