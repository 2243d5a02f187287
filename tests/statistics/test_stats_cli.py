"""analyze / stats commands (local engine) and statistics through compaction and clean files."""

from __future__ import annotations

import orjson
import pyarrow.compute as pc
import pytest
from test_stats_store import SCHEMA, add_segment, data

from carbonstore import Store, Table
from carbonstore.cli import main
from carbonstore.segments.analyze import analyze_local
from carbonstore.segments.clean import clean_files
from carbonstore.segments.compaction import compact
from carbonstore.segments.manage import delete_segments
from carbonstore.statistics.store import (
    get_segment_statistics,
    get_table_statistics,
    stats_path,
)
from carbonstore.store.tablestatus import now_ms


def run(store: Store, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--store", store.location])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("t", SCHEMA)
    add_segment(t, data(0, 1000), with_stats=False)
    add_segment(t, data(500, 1000), with_stats=False)
    return t


def test_analyze_then_stats(store: Store, table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(store, capsys, "stats", "t")
    assert code == 0 and "segments without statistics: 0, 1" in out
    code, out, _ = run(store, capsys, "analyze", "t", "--engine", "local", "--json")
    assert code == 0 and orjson.loads(out) == [
        {"segment": "0", "rows": 1000, "columns": 4}, {"segment": "1", "rows": 1000, "columns": 4}]
    code, out, _ = run(store, capsys, "analyze", "t", "--engine", "local", "--missing")
    assert code == 0 and "nothing to analyze" in out
    code, out, _ = run(store, capsys, "stats", "t", "--json")
    ts = orjson.loads(out)
    assert ts["segments"] == ["0", "1"] and ts["missingSegments"] == [] and ts["rowCount"] == 2000
    by_name = {c["column"]: c for c in ts["columns"]}
    assert by_name["id"] | {"lastAnalyzed": 0} == {
        "column": "id", "type": "long", "kind": "long", "lastAnalyzed": 0, "numNulls": 0,
        "lowValue": 0, "highValue": 1499, "numDVs": 1500}
    assert by_name["score"]["numNaNs"] == 77 + 77
    code, out, _ = run(store, capsys, "stats", "t")
    assert code == 0 and "numDVs" in out and "1499" in out
    code, out, _ = run(store, capsys, "stats", "t", "--segment", "1", "--column", "ID", "--json")
    seg = orjson.loads(out)
    assert code == 0 and [c["column"] for c in seg["columns"]] == ["id"] and "sketches" not in seg
    assert seg["columns"][0]["lowValue"] == 500


def test_stats_delete(store: Store, table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    analyze_local(table)
    code, out, _ = run(store, capsys, "stats", "t", "--delete", "--segment", "0", "--column", "name",
                       "--json")
    assert code == 0 and orjson.loads(out) == {"deleted": ["0"]}
    seg0 = get_segment_statistics(table, "0")
    assert seg0 is not None and seg0.find("name") is None
    code, out, _ = run(store, capsys, "stats", "t", "--delete")
    assert code == 0 and "of 2 segment(s)" in out
    assert get_table_statistics(table).columns == ()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["stats", "t", "--segment", "0"], "has no statistics; run 'carbonstore analyze"),
        (["stats", "t", "--column", "nope"], "has no column 'nope'"),
        (["analyze", "t", "--engine", "local", "--segments", "9"], "segment 9 of default.t does not exist"),
        (["analyze", "t", "--engine", "local", "--columns", "id,nope"], "unknown column(s)"),
        (["analyze", "t", "--engine", "local", "--segments", ","], "should not be empty"),
    ],
)
def test_user_errors(store: Store, table: Table, capsys: pytest.CaptureFixture[str],
                     argv: list[str], message: str) -> None:
    code, _, err = run(store, capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1


def test_statistics_survive_compaction_and_leave_with_deleted_segments(table: Table) -> None:
    analyze_local(table)
    result = compact(table, "custom", segment_ids=["0", "1"])
    out = result.merged[0].output
    merged = get_segment_statistics(table, out)
    assert merged is not None and merged.source == "compaction" and merged.row_count == 2000
    assert merged.column("id").num_dvs == 1500  # type: ignore[attr-defined]
    # the merged numbers are what a rescan of the output gives
    rescanned = analyze_local(table, segments=[out])[0]
    for a, b in zip(sorted(merged.columns, key=lambda c: c.column),
                    sorted(rescanned.columns, key=lambda c: c.column), strict=True):
        assert a.num_nulls == b.num_nulls
        assert getattr(a, "num_dvs", 0) == getattr(b, "num_dvs", 0)
        assert getattr(a, "low_value", None) == getattr(b, "low_value", None)
    ts = get_table_statistics(table)
    assert ts.segments == (out,) and ts.row_count == 2000
    names = pc.count_distinct(data(0, 1000).column("name")).as_py()
    assert ts.column("name").num_dvs == names  # type: ignore[attr-defined]
    # deleting the output segment removes it from the table level; clean files removes the file
    delete_segments(table, [out])
    assert get_table_statistics(table).segments == ()
    clean_files(table, dry_run=False, now=now_ms() + 365 * 86_400_000)  # past the retention
    assert not table.paths.sfs.exists(stats_path(table, out))
