"""The versioned tablestatus under real concurrent processes, with no injected delay.

* The data-loss race of the earlier format: loaders commit loads in a loop while clean
  files with ``--stale-inprogress`` runs in a loop. Every load that returned success is
  read exactly once afterwards, and the versions form a gapless chain, each naming its
  parent. A short lease makes clean files judge slow loads dead now and then: those fail
  their commit with a clear error and leave nothing.
* 12 writers at once (loads, compactions, delete-segments, clean files with a short
  retention) with queries running: every committed row present exactly once at the end,
  and no query ever saw a partial load or a duplicate (the ``query`` workload checks each
  scan).
* SIGKILL at each crash point of the commit protocol: the table stays readable and
  nothing committed is lost.

A short run of each is part of CI; ``CARBONSTORE_RACE_SECONDS`` lengthens it, and the
``slow`` variants run for minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.segments.clean import clean_files
from carbonstore.store import load_conf
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import forget_decoded, now_ms
from tests.reliability.test_crash import KILLED, WORKLOAD, _env, run
from tests.reliability.workload import SCHEMA, committed_ids, load, rows

ROWS = 20
SECONDS = float(os.environ.get("CARBONSTORE_RACE_SECONDS", "12"))
# The CI run of loaders vs clean files: every run still has dead loads (loader 0 stalls its
# first load), a few seconds of racing suffice for CI; the long variant races for minutes.
LOADERS_SECONDS = float(os.environ.get("CARBONSTORE_RACE_SECONDS", "6"))
# Clean files outlives the loaders by this much: a loader that stalled at the end waits
# for clean files to mark its load dead (with no clean files left running: its full minute).
CLEAN_GRACE = 5.0


def _start(loc: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, WORKLOAD, loc, *args], env=_env(None),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(procs: dict[str, subprocess.Popen[str]], timeout: float) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, f"{name}: {stderr[-3000:]}"
        out[name] = stdout.split("\n")
    return out


def _loaded(lines: list[str]) -> dict[str, int]:
    """segment id -> first row id of every load that returned success."""
    return {p[1]: int(p[2]) for p in (ln.split() for ln in lines) if p and p[0] == "ok"}


def assert_gapless_chain(table: Table) -> None:
    log = table.status.log()
    assert [v.version for v in log] == list(range(len(log))), "a version is missing"
    assert [v.parent for v in log] == [None, *range(len(log) - 1)]
    assert log[0].operation == "CREATE"


def _table(tmp_path: Path) -> Table:
    conf = load_conf(None).with_overrides({"carbon.clean.files.force.allowed": "true"})
    return Store(str(tmp_path / "store"), conf=conf).create_table("db.t", SCHEMA)


def _loaders_vs_clean(tmp_path: Path, seconds: float) -> None:
    table = _table(tmp_path)
    loc = table.store.location
    lease = ["--lease", "1"]  # short: clean files judges slow loads dead now and then
    # Loader 0 also stalls every 3rd load past its lease (renewal stopped until clean files
    # marked it dead), before its tasks or before its commit, so every run has dead loads
    # going on after clean removed their folders - not only when the machine is slow.
    stall = {0: ["--stall-every", "3"]}
    procs = {f"load{k}": _start(loc, "loadloop", "db.t", str(k * 10_000_000), str(seconds),
                                str(ROWS), *lease, *stall.get(k, [])) for k in range(3)}
    procs["clean"] = _start(loc, "cleanloop", "db.t", str(seconds + CLEAN_GRACE), *lease)
    out = _finish(procs, timeout=seconds + 180)
    loaded: dict[str, int] = {}
    for k in range(3):
        loaded.update(_loaded(out[f"load{k}"]))
    assert len(loaded) >= 3, out
    # A load that did not commit failed with a CarbonStoreError (never an OSError: the
    # process would have died) and the stalled ones were marked dead by clean files.
    assert any(ln.startswith("dead ") for ln in out["load0"]), out["load0"]
    expected = sorted(first + i for first in loaded.values() for i in range(ROWS))
    forget_decoded()
    assert committed_ids(table) == expected  # every successful load, exactly once
    snap = table.status.read()
    assert {e.load_name for e in snap.readable} == set(loaded)
    assert_gapless_chain(table)


def test_loaders_vs_clean_stale_inprogress(tmp_path: Path) -> None:
    _loaders_vs_clean(tmp_path, LOADERS_SECONDS)


def test_row_deletes_vs_forced_clean_with_stalls(tmp_path: Path) -> None:
    """A DELETE process (every 3rd statement stalls 2.5 lease times between its delta and
    its commit, its lease renewed) against forced clean files and a query process: a
    forced clean removed the stalled statement's unnamed delta (older than the lease
    time), the statement committed it, and every read failed from then on. Now every
    committed DELETE's row is gone, every other row is there, and every read works."""
    table = _table(tmp_path)
    load(table, rows(0, 500), tasks=1)
    load(table, rows(1000, 500), tasks=1)
    loc = table.store.location
    lease = ["--lease", "1"]
    procs = {
        "delete": _start(loc, "rowdeleteloop", "db.t", str(SECONDS), "--stall-every", "3",
                         *lease),
        "clean": _start(loc, "cleanloop", "db.t", str(SECONDS), "--force", *lease),
        "query": _start(loc, "query", "db.t", str(SECONDS)),
    }
    out = _finish(procs, timeout=SECONDS + 180)
    deleted = {int(ln.split()[1]) for ln in out["delete"] if ln.startswith("ok ")}
    assert len([ln for ln in out["delete"] if ln.startswith("ok ")]) >= 3, out["delete"]
    forget_decoded()
    expected = sorted((set(range(500)) | set(range(1000, 1500))) - deleted)
    assert committed_ids(table) == expected
    sfs = table.store.sfs
    for e in table.status.read().readable:
        for d in e.delete_deltas:
            assert sfs.exists(f"{table.paths.segment_dir(e.load_name)}/{d.delta_file}"), d
    assert_gapless_chain(table)


@pytest.mark.long
def test_loaders_vs_clean_stale_inprogress_long(tmp_path: Path) -> None:
    _loaders_vs_clean(tmp_path, 300)


def _twelve_writers(tmp_path: Path, seconds: float, *, own_locks: bool = False) -> None:
    table = _table(tmp_path)
    loc = table.store.location
    own = ["--own-locks"] if own_locks else []
    procs = {f"load{k}": _start(loc, "loadloop", "db.t", str(k * 10_000_000), str(seconds),
                                str(ROWS), *own) for k in range(6)}
    procs["compact1"] = _start(loc, "compactloop", "db.t", str(seconds), *own)
    procs["compact2"] = _start(loc, "compactloop", "db.t", str(seconds), *own)
    procs["delete"] = _start(loc, "deleteloop", "db.t", str(seconds), *own)
    # A short retention (the smallest the conf takes): queries run far shorter than it.
    for k in (1, 2, 3):
        procs[f"clean{k}"] = _start(loc, "cleanloop", "db.t", str(seconds),
                                    "--retention-minutes", "1", "--lease", "2", *own)
    procs["query1"] = _start(loc, "query", "db.t", str(seconds), str(ROWS))
    procs["query2"] = _start(loc, "query", "db.t", str(seconds), str(ROWS))
    out = _finish(procs, timeout=seconds + 240)
    loaded: dict[str, int] = {}
    for k in range(6):
        loaded.update(_loaded(out[f"load{k}"]))
    deleted = {ln.split()[1] for ln in out["delete"] if ln.startswith("deleted ")}
    assert loaded and int(out["query1"][0]) >= 1 and int(out["query2"][0]) >= 1
    expected = sorted(first + i for seg, first in loaded.items() if seg not in deleted
                      for i in range(ROWS))
    forget_decoded()
    assert committed_ids(table) == expected
    # Later, everything past its retention goes; the committed rows stay, once each.
    clean_files(table, dry_run=False, stale_inprogress=True, now=now_ms() + 7_200_000)
    forget_decoded()
    assert committed_ids(table) == expected
    assert_gapless_chain(table)
    ops = {v.operation for v in table.status.log()}
    assert {"LOAD", "CLEAN FILES"} <= ops, ops


def test_twelve_writers_with_queries(tmp_path: Path) -> None:
    _twelve_writers(tmp_path, SECONDS)


@pytest.mark.long
def test_twelve_writers_with_queries_long(tmp_path: Path) -> None:
    _twelve_writers(tmp_path, 240)


def test_twelve_writers_without_shared_locks(tmp_path: Path) -> None:
    """The same with courtesy locks no two processes share (as on an object store): two
    compactions and three clean-files runs at once, only the commit protocol between them."""
    _twelve_writers(tmp_path, SECONDS, own_locks=True)


@pytest.mark.long
def test_twelve_writers_without_shared_locks_long(tmp_path: Path) -> None:
    _twelve_writers(tmp_path, 240, own_locks=True)


# Crash points of the commit protocol: (operation, point, is the operation committed after it)
POINTS = [
    ("load", "tablestatus.before_write#1", False),  # the In Progress version
    ("load", "tablestatus.after_write#1", False),  # In Progress committed, no folder yet
    ("load", "tablestatus.before_write#2", False),  # the commit version
    ("load", "tablestatus.after_write#2", True),  # committed, the hint not yet rewritten
    ("compact", "tablestatus.after_write#1", False),  # the compaction's In Progress version
    ("compact", "tablestatus.after_write#2", True),  # the compaction committed
    ("clean", "clean.after_read", None),
    ("clean", "clean.after_mark_dead", None),
    ("clean", "tablestatus.after_write#2", None),  # entries removed, no file deleted yet
]


@pytest.mark.parametrize(("op", "point", "committed"), POINTS)
def test_sigkill_at_each_commit_step(
    tmp_path: Path, op: str, point: str, committed: bool | None
) -> None:
    table = _table(tmp_path)
    load(table, rows(0, 40), tasks=1)
    load(table, rows(1000, 40), tasks=1)
    loc = table.store.location
    base = [*range(40), *range(1000, 1040)]
    if op == "clean":  # something to clean: a dead In Progress load and a compaction
        assert run(loc, "load", "db.t", "5000", "10", crash_at="load.before_commit").returncode \
            == KILLED
        assert run(loc, "compact", "db.t", "0,1").returncode == 0
        proc = run(loc, "clean", "db.t", "--force", crash_at=point)
    elif op == "load":
        proc = run(loc, "load", "db.t", "7000", "30", crash_at=point)
    else:
        proc = run(loc, "compact", "db.t", "0,1", crash_at=point)
    assert proc.returncode == KILLED, proc.stderr[-2000:]
    forget_decoded()
    expected = sorted([*base, *range(7000, 7030)]) if op == "load" and committed else base
    assert committed_ids(table) == expected  # readable, nothing committed lost
    assert_gapless_chain(table)
    # The survivors clean up after it and the table takes new work.
    assert run(loc, "clean", "db.t", "--force").returncode == 0
    forget_decoded()
    assert committed_ids(table) == expected
    assert not [e for e in table.status.read().entries if e.running]
    assert run(loc, "load", "db.t", "9000", "5").returncode == 0
    if op == "compact":
        again = run(loc, "compact", "db.t", "0,1")
        assert again.returncode == 0 or "changed from" in again.stderr or committed
    forget_decoded()
    assert committed_ids(table) == sorted([*expected, *range(9000, 9005)])
    assert_gapless_chain(table)
