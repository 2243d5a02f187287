"""The lease renewer process of a bare df.write (carbonstore/store/renewer.py), without Spark.

The renewer is started by a process that exits at once (as PySpark's planning worker may)
and watches that process's parent (standing for the worker daemon / driver JVM).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from carbonstore import Store, Table
from carbonstore.segments.clean import clean_files
from carbonstore.segments.commit import begin_segment
from carbonstore.store import load_conf
from carbonstore.store.entries import now_ms
from carbonstore.store.leases import entry_is_dead, process_start
from carbonstore.store.renewer import stop_renewer
from carbonstore.store.tablestatus import IN_PROGRESS, SUCCESS

ROOT = str(Path(__file__).resolve().parents[2])
LEASE = 1.0  # seconds: renewed every 0.25 s

# Spawns a renewer for the segment and exits: prints "<pid> <token>".
SPAWN = """
import sys
from carbonstore import Store
from carbonstore.store.renewer import spawn_renewer
location, name, segment, seconds = sys.argv[1:5]
t = Store(location).table(name)
pid, token = spawn_renewer(store_location=location, conf={}, table_name=name,
                           table_id=t.table_id, segment_id=segment, seconds=float(seconds))
print(pid, token, flush=True)
"""

# Runs SPAWN as its child (so the renewer watches this process), then waits to be killed.
MIDDLE = """
import subprocess, sys, time
out = subprocess.run([sys.executable, "-c", sys.argv[1], *sys.argv[2:]], check=True,
                     capture_output=True, text=True).stdout
print(out.strip(), flush=True)
time.sleep(600)
"""


@pytest.fixture
def table(tmp_path: Path) -> Table:
    conf = load_conf(None).with_overrides({"carbon.clean.files.force.allowed": "true"})
    return Store(str(tmp_path / "store"), conf=conf).create_table("db.t", "a long")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _wait(cond: Callable[[], bool], seconds: float = 20.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _begin(table: Table) -> str:
    entry, keeper = begin_segment(table, hold_lock=False)
    assert keeper is None
    return entry.load_name


def _spawn(table: Table, segment: str) -> tuple[int, str]:
    out = subprocess.run(
        [sys.executable, "-c", SPAWN, table.store.location, "db.t", segment, str(LEASE)],
        env=_env(), capture_output=True, text=True, timeout=60, check=True,
    ).stdout.split()
    return int(out[0]), out[1]


def _gone(pid: int) -> Callable[[], bool]:
    return lambda: process_start(pid) is None


@pytest.fixture
def renewers() -> Iterator[list[int]]:
    """Pids of renewers a test started: killed at the end whatever happened."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if process_start(pid) is not None:
            os.kill(pid, signal.SIGKILL)


def _heartbeat(table: Table, segment: str) -> dict[str, object] | None:
    return table.status.leases.read_lease(segment)


def test_the_lease_outlives_its_first_term_until_the_load_commits(
    table: Table, renewers: list[int]
) -> None:
    seg = _begin(table)
    pid, _ = _spawn(table, seg)  # the spawning process has exited
    renewers.append(pid)
    time.sleep(LEASE * 3)
    assert not entry_is_dead(table.status, table.status.read().find(seg),  # type: ignore[arg-type]
                             now=now_ms(), lease_ms=int(LEASE * 1000))
    clean_files(table, dry_run=False, stale_inprogress=True)
    assert table.status.read().find(seg).status == IN_PROGRESS  # type: ignore[union-attr]
    hb = _heartbeat(table, seg)
    assert hb is not None and hb["writerPid"] == pid
    table.status.set_status(seg, SUCCESS)  # the commit, from another process in Spark
    assert _wait(_gone(pid)), "the renewer kept running after the commit"
    assert _heartbeat(table, seg) is None


def test_stop_renewer_stops_it(table: Table, renewers: list[int]) -> None:
    seg = _begin(table)
    renewal = _spawn(table, seg)
    renewers.append(renewal[0])
    assert _wait(lambda: _heartbeat(table, seg) is not None)
    stop_renewer(renewal)
    assert _wait(_gone(renewal[0]))
    stop_renewer(renewal)  # idempotent


def test_it_stops_when_the_application_dies(table: Table, renewers: list[int]) -> None:
    seg = _begin(table)
    middle = subprocess.Popen(
        [sys.executable, "-c", MIDDLE, SPAWN, table.store.location, "db.t", seg, str(LEASE)],
        env=_env(), stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        assert middle.stdout is not None
        pid = int(middle.stdout.readline().split()[0])
        renewers.append(pid)
        assert _wait(lambda: _heartbeat(table, seg) is not None)
        time.sleep(LEASE * 2)
        assert process_start(pid) is not None
    finally:
        middle.kill()
        middle.wait()
    assert _wait(_gone(pid))
    # Its heartbeat names the exited renewer: the load is dead at once, not after the lease.
    entry = table.status.read().find(seg)
    assert entry is not None
    assert entry_is_dead(table.status, entry, now=now_ms(), lease_ms=3_600_000)


def test_it_stops_when_clean_files_marked_the_load_dead_or_the_table_was_dropped(
    table: Table, renewers: list[int]
) -> None:
    seg = _begin(table)
    pid, _ = _spawn(table, seg)
    renewers.append(pid)
    assert _wait(lambda: _heartbeat(table, seg) is not None)
    table.status.set_status(seg, "Failure")
    assert _wait(_gone(pid))

    seg2 = _begin(table)
    pid2, _ = _spawn(table, seg2)
    renewers.append(pid2)
    assert _wait(lambda: _heartbeat(table, seg2) is not None)
    table.store.drop_table("db.t")
    assert _wait(_gone(pid2))
    assert not os.path.exists(table.paths.root)  # the renewer did not bring the folder back


def test_a_torn_settings_input_starts_nothing(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "carbonstore.store.renewer", "x"],
                          input=b"{not json", env=_env(), capture_output=True, timeout=60,
                          check=False)
    assert proc.returncode == 0 and not proc.stderr
    proc = subprocess.run([sys.executable, "-m", "carbonstore.store.renewer", "x"],
                          input=orjson.dumps({"store": str(tmp_path), "table": "db.none",
                                              "tableId": "x", "segment": "0", "seconds": 1,
                                              "watchPid": os.getpid()}),
                          env=_env(), capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0
