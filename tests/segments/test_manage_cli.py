"""The compact / delete-segments / clean-files commands (local engine, no Spark)."""

from __future__ import annotations

import orjson
import pytest
from test_compaction import SCHEMA, add_segment, rows, statuses

from carbonstore import Store, Table
from carbonstore.cli import main


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("t", SCHEMA, properties={"sort_columns": "id"})
    for i in range(3):
        add_segment(t, rows(i * 10, 10))
    return t


def run(store: Store, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--store", store.location])
    out, err = capsys.readouterr()
    return code, out, err


def test_compact_delete_clean_round(store: Store, table: Table,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(store, capsys, "compact", "t", "--type", "custom", "--segments", "0,1",
                       "--engine", "local", "--json")
    merged = orjson.loads(out)["merged"]
    assert code == 0 and len(merged) == 1
    assert (merged[0]["output"], merged[0]["sources"], merged[0]["rows"]) == ("0.1", ["0", "1"], 20)
    code, _, err = run(store, capsys, "delete-segments", "t", "--ids", "1")
    assert code == 2 and "compacted into 0.1" in err
    code, out, _ = run(store, capsys, "delete-segments", "t", "--ids", "2", "--json")
    assert code == 0 and [r["id"] for r in orjson.loads(out)] == ["2"]
    assert statuses(table)["2"] == "Marked for Delete"
    code, out, _ = run(store, capsys, "clean-files", "t", "--dry-run", "--json")
    report = orjson.loads(out)
    assert code == 0 and report["dryRun"] and report["items"] == [] and len(report["skipped"]) == 3
    code, _, err = run(store, capsys, "clean-files", "t", "--force")
    assert code == 2 and "carbon.clean.files.force.allowed" in err
    code, out, _ = run(store, capsys, "clean-files", "t")
    assert code == 0 and "freed 0 bytes" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compact", "t", "--type", "custom", "--engine", "local"], "Segment ids should not be empty"),
        (["compact", "t", "--type", "custom", "--segments", "1,9", "--engine", "local"],
         "segment 9 does not exist"),
        (["delete-segments", "t", "--ids", ","], "Segment ids should not be empty"),
        (["delete-segments", "t", "--before", "last week"], "yyyy-MM-dd HH:mm:ss"),
    ],
)
def test_user_errors_are_one_line(store: Store, table: Table, capsys: pytest.CaptureFixture[str],
                                  argv: list[str], message: str) -> None:
    code, _, err = run(store, capsys, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_delete_before(store: Store, table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(store, capsys, "delete-segments", "t", "--before", "2999-01-01 00:00:00")
    assert code == 0 and "0, 1, 2" in out
    assert set(statuses(table).values()) == {"Marked for Delete"}
