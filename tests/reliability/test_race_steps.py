"""Races of writers and clean files found under load, each made deterministic.

A pause registered at a crash point (``carbonstore.store.faults.on_point``) runs the other
operation exactly there, in one process, so each test fails the same way every time
without the fix. The property is always the one of the concurrency suites: a load that
returned success keeps all its rows, a load that did not fails with a clear error
(a ``CarbonStoreError``, never an ``OSError`` from a folder removed under it) and leaves
nothing, and clean files never fails because a writer removed its own files meanwhile.
"""

from __future__ import annotations

import time

import pytest

from carbonstore import Store
from carbonstore.segments.clean import clean_files
from carbonstore.segments.commit import begin_segment
from carbonstore.store import load_conf
from carbonstore.store.faults import on_point
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import IN_PROGRESS, now_ms
from tests.reliability.workload import SCHEMA, committed_ids, load, rows

LEASE_S = 1


@pytest.fixture
def table(tmp_path) -> Table:  # type: ignore[no-untyped-def]
    conf = load_conf(None).with_overrides({"carbon.segment.lease.seconds": str(LEASE_S)})
    t = Store(str(tmp_path / "store"), conf=conf).create_table("db.t", SCHEMA)
    load(t, rows(0, 20), tasks=1)
    return t


def test_a_slow_begin_commits_a_lease_that_runs_from_its_commit(table: Table) -> None:
    """The In Progress entry's lease was computed before the commit loop: a begin that
    waited (the courtesy lock, a lost race, a stalled process) longer than the lease
    committed an entry already expired, and the next clean files marked the live load dead."""
    other: list[str] = []

    def slow_attempt_loses_the_race() -> None:
        time.sleep(LEASE_S * 1.2)  # longer than the lease
        other.append(load(table, rows(1000, 5), tasks=1))

    with on_point("tablestatus.before_write", slow_attempt_loses_the_race):
        entry, keeper = begin_segment(table)
    try:
        snap = table.status.read()
        mine = snap.get(entry.load_name)
        assert mine.status == IN_PROGRESS
        assert mine.extra["leaseExpiryMs"] > snap.timestamp, "committed with a spent lease"
        report = clean_files(table, dry_run=False, stale_inprogress=True)
        assert entry.load_name not in report.removed_entries
        assert table.status.read().get(entry.load_name).status == IN_PROGRESS
    finally:
        keeper.release()  # type: ignore[union-attr]
    assert committed_ids(table) == [*range(20), *range(1000, 1005)]


def test_an_index_rebuild_keeps_the_old_merge_index_for_the_retention_time(table: Table) -> None:
    """Clean files aged a replaced merge index by its own mtime (when the segment was
    loaded), not by when the rebuild stopped naming it: right after a rebuild of a segment
    older than the retention time it deleted the file every earlier version still names,
    and time travel to those versions failed."""
    import os

    from carbonstore.segments.rebuild import rebuild_indexes

    before = table.status.read()
    entry = before.get("0")
    old_index = f"{table.paths.segment_dir('0')}/{entry.segment_file}"
    two_hours_ago = time.time() - 7200
    os.utime(old_index, (two_hours_ago, two_hours_ago))  # a segment loaded long ago
    rebuild_indexes(table, ["0"])
    assert table.status.read().get("0").segment_file != entry.segment_file
    report = clean_files(table, dry_run=False)
    assert old_index not in {i.path for i in report.items}
    assert table.store.sfs.exists(old_index)
    assert committed_ids(table.as_of(before.version)) == list(range(20))
    # After the retention time it goes.
    report = clean_files(table, dry_run=False, now=now_ms() + 2 * 3_600_000)
    assert old_index in {i.path for i in report.items}
    assert committed_ids(table) == list(range(20))


def _assert_no_dangling(table: Table) -> None:
    """Every readable entry's folder and merge index exist."""
    sfs = table.store.sfs
    for e in table.status.read().readable:
        assert sfs.exists(f"{table.paths.segment_dir(e.load_name)}/{e.segment_file}"), e


@pytest.mark.parametrize("clean_first", [False, True])
def test_a_compaction_never_takes_over_an_output_name_whose_abort_is_running(
    table: Table, clean_first: bool, tmp_path
) -> None:
    """Compaction A of 0,1 aborts (a source was deleted meanwhile): it commits its output
    ``0.1`` as Failure, then removes the folder, then the entry. Compaction B of 0,2 (the
    same output name) starting between A's Failure commit and A's folder removal took the
    name over, wrote and committed ``0.1`` - and A's removal then deleted the folder of the
    committed output: its rows were gone. The same when clean files removed A's Failure
    entry first (``clean_first``): B then found the name free. The abort is now one version
    written after the folder is removed, while the entry is still A's running one: B starts
    right after the first version at which A's output is no longer running (the Failure
    version of the old protocol, the abort version now)."""
    from carbonstore.errors import CarbonStoreError
    from carbonstore.segments.compaction import compact
    from carbonstore.segments.manage import delete_segments
    from carbonstore.store.tablestatus import FAILURE

    conf = load_conf(None).with_overrides({"carbon.segment.lease.seconds": "600"})
    table = Store(table.store.location, conf=conf).table("db.t")  # no lease runs out here
    # B runs as on another machine of an object store: the courtesy compaction.lock that
    # makes local compactions take turns is not shared (correctness never rests on it).
    elsewhere = conf.with_overrides({"carbon.lock.path": str(tmp_path / "other-locks")})
    b_table = Store(table.store.location, conf=elsewhere).table("db.t")
    load(table, rows(1000, 10), tasks=1)  # segment 1
    load(table, rows(2000, 10), tasks=1)  # segment 2
    outcome: list[object] = []
    seen_running: list[bool] = []

    def b_starts_while_a_aborts() -> None:
        if outcome:  # done, or running (B's own commits reach this point too)
            return
        e = table.status.read().find("0.1")
        if e is not None and e.running:
            seen_running.append(True)  # A's output, before its abort
            return
        if not seen_running or (e is not None and e.status != FAILURE):
            return
        outcome.append("running")
        try:
            if clean_first:
                clean_files(b_table, dry_run=False)
            outcome.append(compact(b_table, "custom", segment_ids=["0", "2"]))
        except CarbonStoreError as err:
            outcome.append(err)

    with on_point("compaction.before_commit", lambda: delete_segments(table, ["1"])):
        with on_point("tablestatus.after_write", b_starts_while_a_aborts, once=False):
            with pytest.raises(CarbonStoreError, match="segment 1 changed"):
                compact(table, "custom", segment_ids=["0", "1"])
    assert outcome, "the interleaving was not reached"
    _assert_no_dangling(table)
    assert committed_ids(table) == [*range(20), *range(2000, 2010)]
    # The name is free again once the abort finished: the same compaction then runs.
    if "0.1" not in {e.load_name for e in table.status.read().readable}:
        compact(table, "custom", segment_ids=["0", "2"])
    _assert_no_dangling(table)
    assert committed_ids(table) == [*range(20), *range(2000, 2010)]


def test_a_folder_removed_by_two_writers_at_once_is_no_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Clean files and a dead load's own abort remove the same segment folder at the same
    time (and clean files sizes it meanwhile): each saw the other's deletions as errors
    (FileNotFoundError out of the recursive listing or delete) and the process died."""
    import threading

    from carbonstore.store.fs import resolve_fs

    sfs = resolve_fs(str(tmp_path))
    errors: list[BaseException] = []
    for round_ in range(60):
        folder = f"{sfs.base}/Segment_{round_}"
        for sub in ("", "/p=1", "/p=2"):
            sfs.makedirs(folder + sub)
            for i in range(40):
                with open(f"{folder}{sub}/part-{i}.parquet", "wb") as f:
                    f.write(b"x" * 10)
        barrier = threading.Barrier(3)

        def run(fn, path=folder, barrier=barrier) -> None:  # type: ignore[no-untyped-def]
            barrier.wait()
            try:
                fn(path)
            except BaseException as err:  # noqa: BLE001 - collected for the assertion
                errors.append(err)

        threads = [threading.Thread(target=run, args=(fn,))
                   for fn in (sfs.delete_dir, sfs.delete_dir, sfs.tree_size)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not sfs.exists(folder)
        assert sfs.tree_size(folder) == 0 and sfs.list_dir(folder) == []
    assert not errors, errors[:3]
