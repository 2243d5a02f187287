"""Crash suite: SIGKILL a load, a compaction and a clean-files run at many points.

Every scenario runs the operation in its own OS process (tests/reliability/workload.py,
the product's driver and writer code without a JVM) with ``CARBONSTORE_CRASH_AT`` naming a
crash point (carbonstore/store/faults.py), or kills it from here mid-task. After the kill:

* the table opens and a full scan returns exactly the committed rows (no partial load,
  no duplicate after a compaction, nothing lost), dictionary values decoding right;
* ``carbonstore clean-files TABLE --stale-inprogress --force`` brings the folder back to
  no orphans: no In Progress entry, every segment folder named by a readable entry, every
  file of a segment folder named by its index, no temporary files;
* the table still takes a load (and a re-run of the killed compaction).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.dictionary import clear_cache as clear_dictionary_cache
from carbonstore.indexfiles.indexfile import read_index
from carbonstore.pruning.cache import clear_cache
from carbonstore.segments.compaction import compact
from carbonstore.store import load_conf
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import IN_PROGRESS
from tests.reliability.workload import CITIES, SCHEMA, load, rows, scan

pytestmark = pytest.mark.slow

WORKLOAD = str(Path(__file__).with_name("workload.py"))
ROOT = str(Path(__file__).resolve().parents[2])
KILLED = -signal.SIGKILL


def _env(crash_at: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CARBONSTORE_CRASH_AT"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if crash_at:
        env["CARBONSTORE_CRASH_AT"] = crash_at
    return env


def run(store: str, *args: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, WORKLOAD, store, *args], env=_env(crash_at), capture_output=True,
        text=True, timeout=120, check=False,
    )


@pytest.fixture
def table(tmp_path: Path) -> Table:
    conf = load_conf(None).with_overrides({"carbon.clean.files.force.allowed": "true"})
    store = Store(str(tmp_path / "store"), conf=conf)
    t = store.create_table("db.t", SCHEMA, properties={"dictionary_include": "city"})
    load(t, rows(0, 100), tasks=2)
    load(t, rows(100, 50), tasks=1)
    return t


@pytest.fixture
def conf_file(tmp_path: Path) -> str:
    path = tmp_path / "carbon.properties"
    path.write_text("carbon.clean.files.force.allowed=true\n")
    return str(path)


def check_rows(table: Table, expected: list[int]) -> None:
    """A fresh reader sees exactly ``expected`` (sorted, duplicates counted) with right cities."""
    clear_cache()
    clear_dictionary_cache()
    fresh = Store(table.store.location).table("db.t")
    got = scan(fresh)
    ids = got.column("id").to_pylist()
    assert sorted(ids) == expected, f"{len(ids)} rows seen, {len(expected)} committed"
    cities = got.column("city").to_pylist()
    assert all(c == CITIES[i % len(CITIES)] for i, c in zip(ids, cities, strict=True))


def clean(table: Table, conf_file: str) -> None:
    code = main(["--store", table.store.location, "--conf", conf_file, "clean-files", "db.t",
                 "--stale-inprogress", "--force", "--json"])
    assert code == 0


def assert_no_orphans(table: Table) -> None:
    sfs = table.store.sfs
    snap = table.status.read()
    assert not [e.load_name for e in snap.entries if e.status == IN_PROGRESS]
    readable = {e.load_name: e for e in snap.readable}
    folders = {i.base_name for i in sfs.list_dir(table.paths.fact_dir)}
    assert folders == {f"Segment_{sid}" for sid in readable}, (folders, sorted(readable))
    for sid, e in readable.items():
        seg_dir = table.paths.segment_dir(sid)
        names = {i.base_name for i in sfs.list_dir(seg_dir)}
        header = read_index(sfs.fs, f"{seg_dir}/{e.segment_file}").header
        data = {f.path for f in header.files or []}
        tasks = {n for n in names if n.endswith(".carbonindex")}
        assert names == data | tasks | {e.segment_file}, f"segment {sid}: {sorted(names)}"
    trash = Path(table.paths.trash_dir)
    tmp = [p for p in Path(table.paths.root).rglob("*.tmp") if trash not in p.parents]
    assert not tmp  # moved orphan folders wait in .Trash until carbon.trash.retention.days


def after_kill(table: Table, conf_file: str, expected: list[int]) -> list[int]:
    """The checks every scenario ends with; returns the ids after one more load."""
    check_rows(table, expected)
    clean(table, conf_file)
    assert_no_orphans(table)
    check_rows(table, expected)
    proc = run(table.store.location, "load", "db.t", "5000", "20")
    assert proc.returncode == 0, proc.stderr[-2000:]
    expected = sorted([*expected, *range(5000, 5020)])
    check_rows(table, expected)
    return expected


BASE = list(range(150))

LOAD_POINTS = [
    "tablestatus.before_write#1",  # before the In Progress entry is written
    "load.after_inprogress",
    "index.before_rename#1",  # a task's .carbonindex half written
    "load.after_data",  # tasks done, before the merge index
    "index.before_rename#3",  # during the merge-index write (2 task indexes first)
    "load.merge_index_written",
    "load.before_commit",
    "tablestatus.before_write#2",  # during the final tablestatus write
]


@pytest.mark.parametrize("point", LOAD_POINTS)
def test_killed_load(table: Table, conf_file: str, point: str) -> None:
    proc = run(table.store.location, "load", "db.t", "1000", "60", crash_at=point)
    assert proc.returncode == KILLED, proc.stderr[-2000:]
    after_kill(table, conf_file, BASE)


def test_load_killed_mid_task(table: Table, conf_file: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, WORKLOAD, table.store.location, "load", "db.t", "1000", "400",
         "--tasks", "1", "--slow"],
        env=_env(None), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        seg_dir = table.paths.segment_dir("2")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(i.base_name.endswith(".parquet") for i in table.store.sfs.list_dir(seg_dir)):
                break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        else:
            pytest.fail("the load wrote no data file in time")
        assert table.status.read().get("2").status == IN_PROGRESS
        time.sleep(0.5)  # a row group or two later: still well inside the task (4 s)
        names = [i.base_name for i in table.store.sfs.list_dir(seg_dir)]
        assert not any(n.endswith(".carbonindex") for n in names)  # the task is not done
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    after_kill(table, conf_file, BASE)


COMPACTION_POINTS = [
    "index.before_rename#1",  # the output's task index
    "index.before_rename#2",  # the output's merge index
    "compaction.after_output",
    "compaction.before_commit",
    "tablestatus.before_write#1",  # the commit's tablestatus write
]


@pytest.mark.parametrize("point", COMPACTION_POINTS)
def test_killed_compaction(table: Table, conf_file: str, point: str) -> None:
    load(table, rows(150, 30), tasks=1)
    expected = list(range(180))
    proc = run(table.store.location, "compact", "db.t", "0,1,2", crash_at=point)
    assert proc.returncode == KILLED, proc.stderr[-2000:]
    expected = after_kill(table, conf_file, expected)
    again = run(table.store.location, "compact", "db.t", "0,1,2")
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.strip() == "0.1"
    check_rows(table, expected)
    clean(table, conf_file)
    assert_no_orphans(table)
    check_rows(table, expected)


CLEAN_POINTS = [
    "clean.mid_delete",
    "clean.before_commit",
    "tablestatus.before_write#1",  # the tablestatus write that drops the removed entries
    "clean.after_move",
]


@pytest.mark.parametrize("point", CLEAN_POINTS)
def test_killed_clean_files(table: Table, conf_file: str, point: str) -> None:
    load(table, rows(150, 30), tasks=1)
    compact(table, "custom", segment_ids=["0", "1"])  # 0 and 1 become Compacted
    killed = run(table.store.location, "load", "db.t", "900", "10",
                 crash_at="load.before_commit")  # a stale In Progress segment 3
    assert killed.returncode == KILLED
    orphan = Path(table.paths.segment_dir("77"))  # a folder no entry names
    orphan.mkdir(parents=True)
    (orphan / "part-00000-0.parquet").write_bytes(b"x")
    expected = list(range(180))
    proc = run(table.store.location, "clean", "db.t", "--force", crash_at=point)
    assert proc.returncode == KILLED, proc.stderr[-2000:]
    after_kill(table, conf_file, expected)


def test_spark_load_killed_before_commit(table: Table, conf_file: str, tmp_path: Path) -> None:
    """The CLI load through Spark, killed where its commit writes the final tablestatus.

    The data source's commit runs in a Python worker of the driver, so the kill may take
    that worker instead of the CLI process: then Spark fails the job and the load marks
    its segment Failure. Either way no row of it may become visible.
    """
    csv = tmp_path / "in.csv"
    csv.write_text("id,x,city\n" + "".join(f"{i},{i}.5,{CITIES[i % 5]}\n" for i in range(700, 720)))
    env = _env("load.before_commit")
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    proc = subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", "--store", table.store.location, "load", "db.t",
         "--input", str(csv), "--master", "local[1]", "--json"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode != 0, proc.stdout
    after_kill(table, conf_file, BASE)
