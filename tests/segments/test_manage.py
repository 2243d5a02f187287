"""Delete segments by id / by start time; choose segments for reads."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from test_compaction import SCHEMA, add_segment, read_segments, rows, statuses

from carbonstore import Store, Table
from carbonstore.errors import SegmentNotFoundError, UserError
from carbonstore.segments.compaction import compact
from carbonstore.segments.manage import (
    delete_segments,
    delete_segments_before,
    parse_time,
    resolve_read_segments,
)
from carbonstore.store.tablestatus import (
    COMPACTED,
    IN_PROGRESS,
    MARKED_FOR_DELETE,
    SUCCESS,
    LoadEntry,
    TableStatusSnapshot,
)


@pytest.fixture
def table(store: Store) -> Table:
    return store.create_table("t", SCHEMA)


def test_delete_by_ids_hides_at_once(table: Table) -> None:
    for i in range(3):
        add_segment(table, rows(i * 10, 10))
    marked = delete_segments(table, "0,2")
    assert [e.load_name for e in marked] == ["0", "2"]
    assert all(e.modification_or_deletion_timestamp for e in marked)
    assert statuses(table) == {"0": MARKED_FOR_DELETE, "1": SUCCESS, "2": MARKED_FOR_DELETE}
    assert read_segments(table)["id"].to_pylist() == list(range(10, 20))


def test_deleting_a_compacted_segment_fails_and_it_stays_compacted(table: Table) -> None:
    for i in range(3):
        add_segment(table, rows(i * 10, 10))
    compact(table, "custom", segment_ids=["0", "1"])
    with pytest.raises(SegmentNotFoundError, match="compacted into 0.1") as info:
        delete_segments(table, ["1", "2"])
    assert isinstance(info.value, UserError)
    assert statuses(table) == {"0": COMPACTED, "1": COMPACTED, "2": SUCCESS, "0.1": SUCCESS}


@pytest.mark.parametrize(
    ("ids", "message"),
    [("7", "segment 7 does not exist"), ("", "Segment ids should not be empty"),
     ("1", "has status 'In Progress'"), ("0", "already marked for delete")],
)
def test_delete_errors(table: Table, ids: str, message: str) -> None:
    add_segment(table, rows(0, 10))
    table.status.allocate()  # segment 1 is loading
    if ids == "0":
        delete_segments(table, "0")
    with pytest.raises(UserError, match=message):
        delete_segments(table, ids)


def test_delete_before_start_time_hides_older_segments(table: Table) -> None:
    add_segment(table, rows(0, 10))
    add_segment(table, rows(10, 10))
    time.sleep(1.1)  # the time format has whole seconds
    cut = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    time.sleep(0.01)
    add_segment(table, rows(20, 10))
    marked = delete_segments_before(table, cut)
    assert sorted(e.load_name for e in marked) == ["0", "1"]
    assert read_segments(table)["id"].to_pylist() == list(range(20, 30))
    assert statuses(table)["2"] == SUCCESS


def test_delete_before_leaves_compacted_and_loading(table: Table) -> None:
    for i in range(2):
        add_segment(table, rows(i * 10, 10))
    compact(table, "custom", segment_ids=["0", "1"])
    table.status.allocate()
    delete_segments_before(table, parse_time("2999-01-01 00:00:00"))
    assert statuses(table) == {
        "0": COMPACTED, "1": COMPACTED, "0.1": MARKED_FOR_DELETE, "2": IN_PROGRESS,
    }


def test_parse_time_errors() -> None:
    with pytest.raises(UserError, match="yyyy-MM-dd HH:mm:ss"):
        parse_time("yesterday")
    assert parse_time("2024-01-31 23:59:00") < parse_time("2024-02-01 00:00:00")


def _e(name: str, status: str = SUCCESS) -> LoadEntry:
    return LoadEntry(load_name=name, status=status, load_start_time=0)


def test_resolve_read_segments() -> None:
    snap = TableStatusSnapshot(
        (_e("0", COMPACTED), _e("1", COMPACTED), _e("2"), _e("0.1"), _e("3", IN_PROGRESS),
         _e("10"), _e("4", MARKED_FOR_DELETE)),
        "v",
    )
    names = [e.load_name for e in resolve_read_segments(snap, None)]
    assert names == ["0.1", "2", "10"]
    assert [e.load_name for e in resolve_read_segments(snap, "*")] == names
    assert [e.load_name for e in resolve_read_segments(snap, "10,0.1")] == ["0.1", "10"]
    assert resolve_read_segments(snap, ["0", "3", "4", "99"]) == []
    with pytest.raises(UserError, match="invalid segment id"):
        resolve_read_segments(snap, "../x")
    with pytest.raises(UserError, match="should not be empty"):
        resolve_read_segments(snap, " , ")
