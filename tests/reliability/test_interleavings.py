"""Clean files against a committing load at every step, deterministically (in one process).

A pause registered at a crash point (``carbonstore.store.faults.on_point``) runs the other
operation to completion exactly there. Whatever the order, a load that returned success is
readable with all its rows, a load that was marked dead fails its commit with a clear
error and leaves nothing behind, and no entry ever names a deleted folder.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from carbonstore import Store
from carbonstore.errors import CommitConflictError
from carbonstore.segments.clean import clean_files
from carbonstore.segments.commit import begin_segment, commit_segment
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import write_task
from carbonstore.store.faults import on_point
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import FAILURE, SUCCESS, now_ms
from tests.reliability.workload import SCHEMA, committed_ids, load, rows

LATER = 3_600_000  # clean files runs "an hour later": every lease has expired by its clock


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA)
    load(t, rows(0, 50), tasks=1)
    return t


def _written_load(table: Table, first: int) -> tuple[str, Callable[[], object], object]:
    """A load whose tasks are done: (segment id, its commit, its lease keeper)."""
    entry, keeper = begin_segment(table)
    seg = entry.load_name
    settings = write_settings(table, seg, parse_load_options(table, None))
    result = write_task(iter(rows(first, 30).to_batches()), settings, task_id="00000")
    return seg, lambda: commit_segment(table, seg, [result]), keeper


def _clean(table: Table) -> object:
    return clean_files(table, dry_run=False, stale_inprogress=True, now=now_ms() + LATER)


def _assert_chain(table: Table) -> None:
    log = table.status.log()
    assert [v.version for v in log] == list(range(len(log)))
    assert [v.parent for v in log] == [None, *range(len(log) - 1)]


def _assert_no_dangling(table: Table) -> None:
    """Every readable entry's folder and index exist."""
    sfs = table.store.sfs
    for e in table.status.read().readable:
        assert sfs.exists(f"{table.paths.segment_dir(e.load_name)}/{e.segment_file}"), e


def test_issue_interleaving_load_commits_after_clean_read_its_snapshot(table: Table) -> None:
    """The exact interleaving of the data-loss report: clean reads a snapshot where the load
    is In Progress, the load commits and finishes, then clean judges the entry (here: its
    lease looks expired, the worst case). Before, the folder was deleted under a Success
    entry; now clean's Failure commit re-runs on the fresh version and leaves it alone."""
    seg, commit, keeper = _written_load(table, 1000)
    done: list[object] = []

    def load_finishes() -> None:
        done.append(commit())
        keeper.release()  # type: ignore[attr-defined]

    with on_point("clean.after_read", load_finishes):
        report = _clean(table)
    assert done and table.status.read().get(seg).status == SUCCESS
    assert seg not in report.removed_entries  # type: ignore[attr-defined]
    assert committed_ids(table) == [*range(50), *range(1000, 1030)]
    _assert_no_dangling(table)
    _assert_chain(table)


@pytest.mark.parametrize("point", ["clean.after_mark_dead", "clean.before_commit",
                                   "clean.mid_delete"])
def test_load_committing_after_clean_marked_it_dead_fails(table: Table, point: str) -> None:
    seg, commit, keeper = _written_load(table, 1000)
    errors: list[Exception] = []

    def load_commits() -> None:
        try:
            commit()
        except CommitConflictError as err:
            errors.append(err)

    try:
        with on_point(point, load_commits):
            _clean(table)
    finally:
        keeper.release()  # type: ignore[attr-defined]
    assert errors, "the dead load committed"
    assert f"segment {seg}" in str(errors[0]) and "marked the load dead" in str(errors[0])
    assert table.status.read().find(seg) is None or (
        table.status.read().get(seg).status == FAILURE
    )
    assert not table.store.sfs.exists(table.paths.segment_dir(seg))
    assert committed_ids(table) == list(range(50))
    _assert_chain(table)


def test_clean_at_the_load_commit_point_marks_it_dead_first(table: Table) -> None:
    seg, commit, keeper = _written_load(table, 1000)
    with on_point("load.before_commit", lambda: _clean(table)):
        with pytest.raises(CommitConflictError, match="marked the load dead"):
            commit()
    keeper.release()  # type: ignore[attr-defined]
    assert not table.store.sfs.exists(table.paths.segment_dir(seg))
    assert committed_ids(table) == list(range(50))


def test_clean_between_the_load_commit_and_its_end_keeps_it(table: Table) -> None:
    seg, commit, keeper = _written_load(table, 1000)
    with on_point("tablestatus.after_write", lambda: _clean(table)):
        commit()
    keeper.release()  # type: ignore[attr-defined]
    assert committed_ids(table) == [*range(50), *range(1000, 1030)]
    _assert_no_dangling(table)


def test_a_lost_race_re_runs_the_change_on_the_fresh_version(table: Table) -> None:
    """Two appends racing for one version: the loser re-reads and both land (no conflict)."""
    seg, commit, keeper = _written_load(table, 1000)
    other: list[str] = []
    with on_point("tablestatus.before_write", lambda: other.append(load(table, rows(2000, 10)))):
        commit()
    keeper.release()  # type: ignore[attr-defined]
    assert committed_ids(table) == [*range(50), *range(1000, 1030), *range(2000, 2010)]
    ops = [v.operation for v in table.status.log()]
    assert ops.count("LOAD") == 3  # the first load, the racing one and ours
    _assert_chain(table)


def test_compaction_and_delete_of_a_source_conflict(table: Table) -> None:
    from carbonstore.errors import CompactionError
    from carbonstore.segments.compaction import compact
    from carbonstore.segments.manage import delete_segments

    load(table, rows(1000, 30), tasks=1)
    with on_point("compaction.before_commit", lambda: delete_segments(table, ["1"])):
        with pytest.raises(CompactionError, match="segment 1 changed from Success"):
            compact(table, "custom", segment_ids=["0", "1"])
    assert {e.load_name: e.status for e in table.status.read().entries} == {
        "0": SUCCESS, "1": "Marked for Delete"}
    assert committed_ids(table) == list(range(50))
    assert not table.store.sfs.exists(table.paths.segment_dir("0.1"))


def test_append_during_compaction_commit_race_is_kept(table: Table) -> None:
    from carbonstore.segments.compaction import compact

    load(table, rows(1000, 30), tasks=1)
    with on_point("compaction.before_commit", lambda: load(table, rows(3000, 5))):
        compact(table, "custom", segment_ids=["0", "1"])
    assert committed_ids(table) == [*range(50), *range(1000, 1030), *range(3000, 3005)]
    assert table.status.read().get("0.1").status == SUCCESS
