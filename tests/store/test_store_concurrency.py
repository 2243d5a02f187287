"""Real OS processes against one tablestatus: concurrent writers, SIGKILLed writers and
lock holders. Commits take no lock (versions are written put-if-absent), so a writer
stuck or killed in the middle of its commit never blocks another."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.errors import LockTimeoutError
from carbonstore.store import load_conf
from carbonstore.store.tablestatus import IN_PROGRESS, SUCCESS

WRITERS = 8

# Each child waits for the "go" file so that all of them hit the lock at the same moment.
ALLOCATE = """
import os, sys, time
from carbonstore import Store
from carbonstore.store import load_conf
from carbonstore.store.tablestatus import SUCCESS
store_path, go, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
conf = load_conf(None).with_overrides(
    {"carbon.lock.retry.timeout.sec": "60", "carbon.lock.retries": "1"})
table = Store(store_path, conf=conf).table("t")
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.002)
entry = table.status.allocate()
with table.locks.segment(entry.load_name):
    table.status.set_status(entry.load_name, SUCCESS, row_count=rows, timestamp=entry.load_start_time)
print(entry.load_name, flush=True)
"""

# Takes tablestatus.lock inside a real read-modify-write and never lets go.
HOLD_TABLESTATUS = """
import sys, time
from carbonstore import Store
table = Store(sys.argv[1]).table("t")
def stuck(snap):
    print("locked", flush=True)
    time.sleep(120)
    return list(snap.entries)
table.status.update(stuck)
"""

HOLD_SEGMENT = """
import sys, time
from carbonstore import Store
table = Store(sys.argv[1]).table("t")
with table.locks.segment(sys.argv[2]):
    print("locked", flush=True)
    time.sleep(120)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CARBON_CONF", None)
    return env


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
    )


def _wait_line(proc: subprocess.Popen[str], expected: str) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != expected:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"child said {line!r} instead of {expected!r}: {err}")


def _fast_store(store: Store, seconds: str = "5") -> Store:
    conf = load_conf(None).with_overrides(
        {"carbon.lock.retry.timeout.sec": seconds, "carbon.lock.retries": "1"}
    )
    return Store(store.location, conf=conf)


def test_eight_processes_allocate_and_commit_at_once(store: Store, tmp_path: Path) -> None:
    table = store.create_table("t", "id long")
    go = tmp_path / "go"
    procs = [_spawn(ALLOCATE, store.location, str(go), str(100 + i)) for i in range(WRITERS)]
    for p in procs:
        _wait_line(p, "ready")
    go.touch()
    ids: dict[str, int] = {}
    for i, p in enumerate(procs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        ids[out.strip()] = 100 + i
    assert sorted(ids, key=int) == [str(n) for n in range(WRITERS)]
    # Exactly one committed entry per writer, and a gapless chain of versions: every
    # version written once, naming its parent (1 create + 2 commits per writer).
    snap = table.status.read()
    assert {e.load_name: e.row_count for e in snap.entries} == ids
    assert all(e.status == SUCCESS for e in snap.entries)
    log = table.status.log()
    assert [v.version for v in log] == list(range(2 * WRITERS + 1))
    assert [v.parent for v in log] == [None, *range(2 * WRITERS)]
    assert sorted(v.operation for v in log).count("ALLOCATE") == WRITERS
    # Every segment lock was released by its (finished) writer.
    assert all(table.locks.segment_lock_free(i) for i in ids)
    leftovers = [n for n in os.listdir(table.status.log_dir) if n.endswith(".tmp")]
    assert leftovers == []
    assert IN_PROGRESS not in {e.status for e in snap.entries}


def test_a_writer_stuck_or_killed_mid_commit_blocks_nobody(store: Store) -> None:
    # Changed behaviour: a commit no longer holds tablestatus.lock, so a stuck writer does
    # not make the next one wait, and a killed one leaves no trace.
    store.create_table("t", "id long")
    table = _fast_store(store).table("t")
    table.status.allocate(status=SUCCESS)
    before = table.status.read()
    child = _spawn(HOLD_TABLESTATUS, store.location)
    try:
        _wait_line(child, "locked")
        start = time.monotonic()
        entry = table.status.allocate()
        assert time.monotonic() - start < 2.0
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    assert entry.load_name == "1"
    assert table.status.read(before.version) == before
    assert [e.load_name for e in table.status.read().entries] == ["0", "1"]
    assert table.status.read().version == before.version + 1


def test_segment_lock_of_a_killed_load_becomes_free(store: Store) -> None:
    store.create_table("t", "id long")
    table = _fast_store(store).table("t")
    entry = table.status.allocate()
    assert table.locks.segment_lock_free(entry.load_name)
    child = _spawn(HOLD_SEGMENT, store.location, entry.load_name)
    try:
        _wait_line(child, "locked")
        assert not table.locks.segment_lock_free(entry.load_name)
        assert table.locks.segment_lock_free("99")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert table.locks.segment_lock_free(entry.load_name)
    assert os.path.basename(table.locks.segment(entry.load_name).lock_file) == "Segment_0.lock"


def test_lock_timeout_is_reported(store: Store) -> None:
    store.create_table("t", "id long")
    table = _fast_store(store, "0.2").table("t")
    child = _spawn(HOLD_SEGMENT, store.location, "5")
    try:
        _wait_line(child, "locked")
        start = time.monotonic()
        with pytest.raises(LockTimeoutError, match=r"after 1 attempt\(s\) of 0.2s"):
            with table.locks.hold("Segment_5.lock"):
                pass
        assert time.monotonic() - start < 5
    finally:
        child.kill()
        child.wait()
