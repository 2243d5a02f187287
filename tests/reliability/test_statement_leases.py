"""Clean files against statements that write files a later commit names (DELETE / UPDATE /
MERGE delete deltas, an index rebuild's merge index), made deterministic with a pause at
the crash point between the statement's files and its tablestatus write.

The property: a committed version never names a missing file. A statement that stalled
longer than its lease either commits with every file it names present or fails with a
``CommitConflictError`` and changes nothing (it can be run again); a statement whose lease
is renewed keeps its files whatever clean files is asked (``force`` included).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.dml import delete_rows, update_rows
from carbonstore.errors import CommitConflictError
from carbonstore.segments.clean import clean_files
from carbonstore.segments.deltas import DELTA_SUFFIX
from carbonstore.segments.rebuild import rebuild_indexes
from carbonstore.store import load_conf
from carbonstore.store.faults import on_point
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import now_ms
from tests.reliability.workload import SCHEMA, committed_ids, load, rows

LATER = 3 * 3_600_000  # clean files run "three hours later": every lease and retention ran out


@pytest.fixture
def table(tmp_path) -> Table:  # type: ignore[no-untyped-def]
    conf = load_conf(None).with_overrides({
        "carbon.segment.lease.seconds": "1", "carbon.clean.files.force.allowed": "true"})
    t = Store(str(tmp_path / "store"), conf=conf).create_table("db.t", SCHEMA)
    load(t, rows(0, 20), tasks=1)
    return t


def _files(table: Table, suffix: str) -> list[str]:
    seg = table.paths.segment_dir("0")
    return [i.path for i in table.store.sfs.list_dir(seg) if i.base_name.endswith(suffix)]


def _named_files_exist(table: Table) -> None:
    sfs = table.store.sfs
    for e in table.status.read().readable:
        seg = table.paths.segment_dir(e.load_name)
        assert sfs.exists(f"{seg}/{e.segment_file}"), e
        for d in e.delete_deltas:
            assert sfs.exists(f"{seg}/{d.delta_file}"), d


def _at_commit(fn: Callable[[], object], nth: int = 1) -> AbstractContextManager[None]:
    """Run ``fn`` when the ``nth`` tablestatus write of this process is about to happen
    (an UPDATE's first one commits its insert segment's In Progress entry)."""
    seen = [0]

    def hook() -> None:
        seen[0] += 1
        if seen[0] == nth:
            fn()

    return on_point("tablestatus.before_write", hook, once=False)


def test_a_delete_stalled_past_its_lease_fails_instead_of_committing_a_removed_delta(
    table: Table,
) -> None:
    """The DELETE wrote its delta, then stalled; clean files, long after the lease ran out,
    removed the delta no version named - and the DELETE then committed it: every later read
    failed with "delete delta ... is missing"."""
    with _at_commit(lambda: clean_files(table, dry_run=False, now=now_ms() + LATER)):
        with pytest.raises(CommitConflictError, match="marked it dead.*run it again"):
            delete_rows(table, "id < 5")
    _named_files_exist(table)
    assert committed_ids(table) == list(range(20))
    assert delete_rows(table, "id < 5").deleted == 5  # run again: it commits
    assert committed_ids(table) == list(range(5, 20))
    _named_files_exist(table)


@pytest.mark.parametrize("statement", ["delete", "update"])
@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_a_renewed_statement_keeps_its_deltas_from_a_forced_clean(
    table: Table, statement: str
) -> None:
    """A statement slower than the lease time between writing its deltas and committing
    them (a lost race re-uses them), its lease renewed all along: a forced clean removed
    the unnamed deltas older than the lease time, then the statement committed them."""
    def stall_then_clean() -> None:
        time.sleep(1.5)  # the lease is 1 s: renewed meanwhile
        report = clean_files(table, dry_run=False, force=True)
        assert not [i for i in report.items if i.kind == "delta"], report
        assert any("is running" in s for s in report.skipped), report.skipped

    with _at_commit(stall_then_clean, 1 if statement == "delete" else 2):
        if statement == "delete":
            delete_rows(table, "id < 5")
        else:
            update_rows(table, {"id": "id + 100"}, "id < 5")
    _named_files_exist(table)
    want = list(range(5, 20)) if statement == "delete" else [*range(5, 20), *range(100, 105)]
    assert committed_ids(table) == want


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_an_update_stalled_past_its_lease_changes_nothing(table: Table) -> None:
    """UPDATE: deltas and an insert segment; clean files marks both dead (the insert
    segment's In Progress entry and the statement), removes them, and nothing commits."""
    def clean_later() -> None:
        clean_files(table, dry_run=False, stale_inprogress=True, now=now_ms() + LATER)

    with _at_commit(clean_later, 2):
        with pytest.raises(CommitConflictError, match="run it again"):
            update_rows(table, {"id": "id + 100"}, "id < 5")
    _named_files_exist(table)
    assert committed_ids(table) == list(range(20))
    clean_files(table, dry_run=False, force=True, stale_inprogress=True, now=now_ms() + LATER)
    assert not _files(table, DELTA_SUFFIX)  # the dead statement's delta is gone


def test_an_index_rebuild_keeps_its_new_merge_index_from_a_forced_clean(table: Table) -> None:
    """A forced clean removed every merge index the current version did not name - also
    the one a running rebuild had just written and was about to commit: the committed
    version named a missing merge index and planning failed."""
    with _at_commit(lambda: clean_files(table, dry_run=False, force=True)):
        rebuild_indexes(table, ["0"])
    _named_files_exist(table)
    assert committed_ids(table) == list(range(20))


def test_an_index_rebuild_stalled_past_its_lease_fails_cleanly(table: Table) -> None:
    before = table.status.read().get("0").segment_file
    with _at_commit(lambda: clean_files(table, dry_run=False, force=True, now=now_ms() + LATER)):
        with pytest.raises(CommitConflictError, match="marked it dead"):
            rebuild_indexes(table, ["0"])
    assert table.status.read().get("0").segment_file == before
    _named_files_exist(table)
    assert committed_ids(table) == list(range(20))


def test_a_dry_run_marks_nothing_dead(table: Table) -> None:
    def dry() -> None:
        report = clean_files(table, dry_run=True, now=now_ms() + LATER)
        assert [i for i in report.items if i.kind == "delta"]  # would remove it

    with _at_commit(dry):
        assert delete_rows(table, "id < 5").deleted == 5
    _named_files_exist(table)
    assert committed_ids(table) == list(range(5, 20))


_STOPPED_DELETE = """
import os, signal, sys
from carbonstore.cli import main
from carbonstore.store.faults import on_point

def stop_here():
    print("ready", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # every thread, the lease renewer too

with on_point("tablestatus.before_write", stop_here):
    sys.exit(main(["--store", sys.argv[1], "--conf", sys.argv[2], "delete", "db.t",
                   "--where", "id < 5"]))
"""


def test_a_delete_process_stopped_past_its_lease_exits_2_and_commits_nothing(
    table: Table, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """A real process: the CLI DELETE stops itself (SIGSTOP) between writing its delta and
    its commit, its lease runs out for real, clean files runs, the process continues."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    conf = tmp_path / "carbon.properties"
    conf.write_text("carbon.segment.lease.seconds=1\ncarbon.clean.files.force.allowed=true\n",
                    encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-c", _STOPPED_DELETE, table.store.location,
                             str(conf)], env=env, cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while not _stopped(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(2.5)  # the 1 s lease runs out: nothing renews it
        report = clean_files(table, dry_run=False, force=True)
        assert [i for i in report.items if i.kind == "delta"], report  # it was removed
        proc.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and "marked it dead" in err, err
    _named_files_exist(table)
    assert committed_ids(table) == list(range(20))


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return True


@pytest.mark.parametrize("removed", [True, False])
def test_an_add_segment_marked_dead_fails_like_a_load_and_leaves_nothing(
    table: Table, tmp_path, removed: bool
) -> None:  # type: ignore[no-untyped-def]
    """add-segment marked dead by clean files while it copied: "segment 1 does not exist"
    (entry removed) or a ValueError "Failure -> Success is not allowed" (a traceback from
    the CLI), and the folder its copy made again was left behind."""
    import pyarrow.parquet as pq

    from carbonstore.segments.addsegment import add_segment
    from carbonstore.segments.clean import _mark_dead

    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(rows(500, 3), src / "a.parquet")

    def mark_dead() -> None:
        if removed:
            clean_files(table, dry_run=False, stale_inprogress=True, now=now_ms() + LATER)
        else:  # marked Failure, not removed yet (a crash of clean files in between)
            _mark_dead(table, [e for e in table.status.read().entries if e.running], now_ms())

    with on_point("load.after_inprogress", mark_dead):
        with pytest.raises(CommitConflictError, match="marked the load dead"):
            add_segment(table, str(src))
    assert committed_ids(table) == list(range(20))
    folders = {i.base_name for i in table.store.sfs.list_dir(table.paths.fact_dir)}
    assert folders == {"Segment_0"}, folders
    add_segment(table, str(src))
    assert committed_ids(table) == [*range(20), 500, 501, 502]


@pytest.mark.parametrize(("operation", "point"), [
    *[("load", p) for p in ("load.after_inprogress", "load.after_data", "index.before_rename",
                            "load.merge_index_written", "load.before_commit")],
    *[("compact", p) for p in ("index.before_rename", "compaction.after_output",
                               "compaction.before_commit")],
])
def test_a_writer_marked_dead_at_any_step_fails_with_the_dead_error(
    table: Table, operation: str, point: str
) -> None:
    """Clean files marks the running load or compaction dead and removes its folder at each
    of its steps: the writer fails with the one-line CommitConflictError (a compaction
    killed while writing its output failed with the FileNotFoundError of its folder)."""
    from carbonstore.segments.compaction import compact

    load(table, rows(100, 10), tasks=1)
    reached: list[str] = []

    def mark_dead() -> None:
        reached.append(point)
        clean_files(table, dry_run=False, stale_inprogress=True, now=now_ms() + LATER)

    with on_point(point, mark_dead):
        try:
            if operation == "load":
                load(table, rows(200, 10), tasks=1)
            else:
                compact(table, "custom", segment_ids=["0", "1"])
        except CommitConflictError as err:
            assert "marked" in str(err) and "dead" in str(err), err
    assert reached, point
    _named_files_exist(table)
    assert committed_ids(table) == [*range(20), *range(100, 110)]


_STEP = st.tuples(
    st.sampled_from(["delete", "update", "rebuild"]),
    st.integers(min_value=2, max_value=5),  # id % m = 0
    st.sampled_from([None, "now", "now-force", "later", "later-force"]),  # clean at commit
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEP, min_size=1, max_size=4))
@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_statements_and_clean_files_interleaved_keep_every_committed_change(
    tmp_path_factory, steps
) -> None:  # type: ignore[no-untyped-def]
    """Random DELETE / UPDATE / index rebuilds, each with clean files (now or after every
    lease and retention, forced or not) run between its files and its commit: a statement
    that returned changed the rows as it says, one that failed changed nothing, every read
    works and no version names a missing file."""
    conf = load_conf(None).with_overrides({
        "carbon.segment.lease.seconds": "1", "carbon.clean.files.force.allowed": "true"})
    store = Store(str(tmp_path_factory.mktemp("s") / "store"), conf=conf)
    table = store.create_table("db.t", SCHEMA)
    load(table, rows(0, 30), tasks=1)
    load(table, rows(100, 30), tasks=1)
    model = set(range(30)) | set(range(100, 130))
    for op, m, clean in steps:
        def run_clean(clean: str | None = clean) -> None:
            if clean is not None:
                later = now_ms() + (LATER if clean.startswith("later") else 0)
                clean_files(table, dry_run=False, force=clean.endswith("force"),
                            stale_inprogress=True, now=later)

        nth = 2 if op == "update" else 1
        try:
            with _at_commit(run_clean, nth):
                if op == "delete":
                    delete_rows(table, f"id % {m} = 0")
                elif op == "update":
                    update_rows(table, {"id": "id + 1000"}, f"id % {m} = 0 AND id < 1000")
                else:
                    rebuild_indexes(table, ["0"])
        except CommitConflictError:
            assert clean is not None and clean.startswith("later"), (op, clean)
        else:
            if op == "delete":
                model = {i for i in model if i % m}
            elif op == "update":
                model = {i + 1000 if i % m == 0 and i < 1000 else i for i in model}
        _named_files_exist(table)
        assert committed_ids(table) == sorted(model), (op, m, clean)


def test_a_killed_statement_is_marked_dead_once_and_its_tombstone_expires(table: Table) -> None:
    """A statement killed mid-way leaves its heartbeat: clean files marks it dead (one
    version), later runs commit nothing more for it, and its tombstone goes after the trash
    retention time."""
    import orjson

    from carbonstore.store.leases import lease_fields

    beat = {**lease_fields(1), "startMs": now_ms(), "operation": "DELETE",
            "writerPid": 2**22 + 12345}  # no such process
    table.status.leases.write_statement_lease("deadbeef", orjson.dumps(beat))
    version = table.status.read().version
    clean_files(table, dry_run=True, now=now_ms() + LATER)
    assert table.status.read().version == version  # a dry run marks nothing
    clean_files(table, dry_run=False, now=now_ms() + LATER)
    assert table.status.read().version == version + 1
    assert table.status.leases.statement_leases() == [("deadbeef", None, True)]
    clean_files(table, dry_run=False, now=now_ms() + LATER)
    assert table.status.read().version == version + 1
    clean_files(table, dry_run=False, now=now_ms() + 8 * 24 * 3_600_000)
    assert table.status.leases.statement_leases() == []
