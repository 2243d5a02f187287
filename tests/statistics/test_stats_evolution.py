"""Column statistics of a table whose schema changed: renamed columns, columns added with a
default, widened columns. ``stats`` (statistics stored at write time, merged) and ``analyze``
(recomputed from the files, local and on Spark) must both equal the values of the table's
live rows, computed by DuckDB."""

from __future__ import annotations

from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pytest

from carbonstore import Store, Table
from carbonstore.cli import main
from carbonstore.pruning.plan import prune
from carbonstore.segments.dml import delete_rows
from carbonstore.spark.reader import (
    arrow_read_schema,
    plan_partitions,
    plan_projections,
    read_row_groups,
)
from tests.dml.rows import rows


def read_live(table: Table) -> pa.Table:
    """The live rows through the read path (segments of every schema version)."""
    plan = prune(table)
    slices = [s for p in plan_partitions(plan, projections=plan_projections(table, plan))
              for s in p.slices]
    return pa.Table.from_batches(list(read_row_groups(table, slices)),
                                 schema=arrow_read_schema(table))


def _run(store: Store, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    code = main([*argv, "--store", store.location])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _insert(table: Table, data: pa.Table) -> None:
    """A segment written by the store (its statistics stored as a load's)."""
    table.merge(data, on=["id"], when_not_matched_insert="*")


@pytest.fixture
def table(store: Store, capsys: pytest.CaptureFixture[str]) -> Table:
    t = store.create_table("db.t", "id long not null, name string, score double, n int")
    _insert(t, rows(range(0, 40)).append_column("n", pa.array(range(40), pa.int32())))
    _run(store, capsys, "alter", "db.t", "rename-column", "name", "label")
    _run(store, capsys, "alter", "db.t", "add-column", "tag string default 'XX'")
    _run(store, capsys, "alter", "db.t", "add-column", "k long default 7, flag boolean")
    _run(store, capsys, "alter", "db.t", "widen", "n", "long")
    t = store.table("db.t")
    new = rows(range(40, 52)).rename_columns(["id", "label", "score"])
    new = new.append_column("n", pa.array(range(12), pa.int64()))
    new = new.append_column("tag", pa.array(["YY"] * 12))
    new = new.append_column("k", pa.array([None] * 6 + [1] * 6, pa.int64()))
    _insert(t, new.append_column("flag", pa.array([True] * 12)))
    delete_rows(t, "id IN (3, 45)")
    return store.table("db.t")


def _expected(table: Table) -> dict[str, dict[str, Any]]:
    data = read_live(table)
    con = duckdb.connect()
    con.register("t", data)
    out = {}
    for c in data.column_names:
        q = f'SELECT count(*) - count("{c}"), count(DISTINCT "{c}"), min("{c}"), max("{c}") FROM t'
        nulls, dvs, low, high = con.execute(q).fetchone()  # type: ignore[misc]
        out[c] = {"numNulls": nulls, "numDVs": dvs, "lowValue": low, "highValue": high}
    return out


def _check(stats: dict[str, Any], want: dict[str, dict[str, Any]], rows_: int) -> None:
    assert stats["rowCount"] == rows_
    by_name = {c["column"]: c for c in stats["columns"]}
    assert sorted(by_name) == sorted(want)
    for name, expect in want.items():
        got = by_name[name]
        assert got["numNulls"] == expect["numNulls"], name
        if "numDVs" in got:
            assert got["numDVs"] == expect["numDVs"], name
        if "lowValue" in got and name not in ("score",):
            assert (got["lowValue"], got["highValue"]) == (expect["lowValue"],
                                                           expect["highValue"]), name
        if "numTrues" in got:
            assert got["numTrues"] + got["numFalses"] + got["numNulls"] == rows_


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_stats_after_rename_add_column_default_and_widen(
    table: Table, capsys: pytest.CaptureFixture[str],
) -> None:
    store = table.store
    want = _expected(table)
    assert want["tag"] == {"numNulls": 0, "numDVs": 2, "lowValue": "XX", "highValue": "YY"}
    # stored at write time (the DELETE dropped the touched segments' statistics: analyze
    # --missing recomputes those), merged through each segment's schema version
    _run(store, capsys, "analyze", "db.t", "--engine", "local", "--missing")
    _check(orjson.loads(_run(store, capsys, "stats", "db.t", "--json")), want, 50)
    # recomputed from the files
    _run(store, capsys, "analyze", "db.t", "--engine", "local")
    _check(orjson.loads(_run(store, capsys, "stats", "db.t", "--json")), want, 50)


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_stored_statistics_of_old_segments_read_as_current_columns(
    store: Store, capsys: pytest.CaptureFixture[str],
) -> None:
    t = store.create_table("db.t", "id long not null, name string")
    _insert(t, rows(range(0, 30)).select(["id", "name"]))
    _run(store, capsys, "alter", "db.t", "rename-column", "name", "label")
    _run(store, capsys, "alter", "db.t", "add-column", "tag string default 'XX', k int default 7")
    t = store.table("db.t")
    stats = orjson.loads(_run(store, capsys, "stats", "db.t", "--json"))
    assert stats["missingSegments"] == []
    _check(stats, _expected(t), 30)


@pytest.mark.spark
def test_analyze_on_spark_after_rename_and_add_column(spark: Any, table: Table,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from carbonstore.spark.analyze_job import analyze

    analyze(table, spark=spark, tasks=2)
    _check(orjson.loads(_run(table.store, capsys, "stats", "db.t", "--json")),
           _expected(table), 50)
