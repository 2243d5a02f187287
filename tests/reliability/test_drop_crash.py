"""A drop killed after its DROP version committed, before its folder was removed.

``carbonstore drop`` runs in its own process with ``CARBONSTORE_CRASH_AT=drop.after_commit``
(SIGKILL, no cleanup). Afterwards the table is gone for every reader (not listed, not
opened, ``exists`` false) although its folder is still there; ``create`` of the name starts
an empty table (the leftovers go to the trash), ``drop`` finishes the removal, and
``clean-files`` says the table does not exist - one line, exit 2, no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from carbonstore import Store, Table
from carbonstore.errors import TableNotFoundError
from carbonstore.store import load_conf
from carbonstore.store.tablestatus import forget_decoded
from tests.reliability.workload import SCHEMA, load, rows, scan

ROOT = str(Path(__file__).resolve().parents[2])


def cli(store: Store, *args: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CARBONSTORE_CRASH_AT"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if crash_at:
        env["CARBONSTORE_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", "--store", store.location, *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )


def one_line_error(proc: subprocess.CompletedProcess[str], says: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and says in proc.stderr


@pytest.fixture
def half_dropped(tmp_path: Path) -> Store:
    """db.t with two loads, dropped by a process killed between the commit and the removal;
    db.u, a table next to it, untouched."""
    conf = load_conf(None).with_overrides({"carbon.clean.files.force.allowed": "true"})
    store = Store(str(tmp_path / "store"), conf=conf)
    t = store.create_table("db.t", SCHEMA)
    load(t, rows(0, 30), tasks=1)
    load(t, rows(30, 20), tasks=1)
    u = store.create_table("db.u", SCHEMA)
    load(u, rows(0, 5), tasks=1)
    proc = cli(store, "drop", "db.t", crash_at="drop.after_commit")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert os.path.exists(t.paths.schema)  # the folder is all still there
    assert os.path.isdir(t.paths.segment_dir("1"))
    forget_decoded()  # as a fresh process
    return store


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh-store", "same-store"])
def test_a_dropped_table_is_neither_listed_nor_opened(half_dropped: Store, fresh: bool) -> None:
    store = Store(half_dropped.location, conf=half_dropped.conf) if fresh else half_dropped
    assert [str(n) for n in store.tables()] == ["db.u"]
    assert not store.exists("db.t") and store.exists("db.u")
    with pytest.raises(TableNotFoundError, match="was dropped"):
        store.table("db.t")
    assert json.loads(cli(store, "tables", "--json").stdout) == ["db.u"]
    for args in (["query", "db.t"], ["show-segments", "db.t"], ["history", "db.t"],
                 ["clean-files", "db.t", "--stale-inprogress", "--force"],
                 ["describe", "db.t"]):
        one_line_error(cli(store, *args), "db.t does not exist")


def test_create_of_the_name_starts_empty_and_trashes_the_leftovers(half_dropped: Store) -> None:
    store = half_dropped
    proc = cli(store, "create", "db.t", "--schema", "x int")
    assert proc.returncode == 0, proc.stderr
    t = store.table("db.t")
    assert [c.name for c in t.schema.columns] == ["x"]
    assert t.status.read().entries == ()
    trash = os.listdir(os.path.join(store.location, ".Trash"))
    assert len(trash) == 1 and trash[0].startswith("db.t.")
    assert [str(n) for n in store.tables()] == ["db.t", "db.u"]


def test_drop_again_finishes_the_removal(half_dropped: Store) -> None:
    store = half_dropped
    root = os.path.join(store.location, "db", "t")
    proc = cli(store, "drop", "db.t")
    assert proc.returncode == 0, proc.stderr
    assert "finished an earlier drop" in proc.stdout
    assert not os.path.exists(root)
    one_line_error(cli(store, "drop", "db.t"), "db.t does not exist")
    u: Table = store.table("db.u")
    assert scan(u).num_rows == 5


def test_a_removal_cut_short_leaves_no_table(half_dropped: Store) -> None:
    """Whatever part of the folder a killed removal left (the log gone, the schema kept)."""
    store = half_dropped
    shutil.rmtree(os.path.join(store.location, "db", "t", "Metadata", "tablestatus_log"))
    forget_decoded()
    assert [str(n) for n in store.tables()] == ["db.u"]
    with pytest.raises(TableNotFoundError):
        store.table("db.t")
    assert cli(store, "drop", "db.t").returncode == 0
    assert not os.path.exists(os.path.join(store.location, "db", "t"))
