"""An ALTER killed at each of its steps: history and schema agree, the table reads.

An ALTER commits a tablestatus version (operation ``ALTER <what>``, to order its schema
version among the tablestatus versions) and then its schema file, the commit point. Killed
between the two, ``history`` listed ``ALTER add-column ...`` while the schema never changed.
Now history shows an ALTER only where a schema version applies from that version: either
the change took effect and history shows it, or neither. Each case SIGKILLs a real
``carbonstore alter`` process at a crash point (``CARBONSTORE_CRASH_AT``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.store.table import Table
from tests.reliability.workload import SCHEMA, load, rows, scan

ROOT = str(Path(__file__).resolve().parents[2])
KILLED = -signal.SIGKILL

# (crash point, whether the change took effect when the process died there)
POINTS = [
    ("tablestatus.before_write", False),  # nothing written
    ("tablestatus.after_write", False),  # the ALTER version put, its hint not rewritten
    ("alter.after_status", False),  # the ALTER version committed, no schema file
    ("alter.after_schema", True),  # the schema file written: committed
]


def _alter(table: Table, crash_at: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CARBONSTORE_CRASH_AT"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if crash_at:
        env["CARBONSTORE_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", "--store", table.store.location, "alter",
         "db.t", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
        check=False)


def committed_ids(table: Table) -> list[int]:
    """The ids the table (or the version it is pinned at) holds, read through the schema
    in force there (older segments projected: store/evolution.py)."""
    return sorted(scan(table).column("id").to_pylist())


def _history(table: Table, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["--store", table.store.location, "history", "db.t", "--json"]) == 0
    return [v["operation"] for v in orjson.loads(capsys.readouterr().out)]


def _agree(table: Table, capsys: pytest.CaptureFixture[str]) -> tuple[int, bool]:
    """History's add-column lines and whether the schema has column z: they agree."""
    fresh = Store(table.store.location).table("db.t")
    has_z = "z" in {c.name for c in fresh.schema.columns}
    adds = [op for op in _history(table, capsys) if "add-column" in op]
    assert len(adds) == len([v for v in fresh.schema_versions() if v.version > 1]), adds
    assert bool(adds) == has_z, (adds, has_z)
    assert committed_ids(fresh) == list(range(10))  # the table reads
    for info in fresh.history():  # and so does every version of it
        assert committed_ids(fresh.as_of(info.version)) == (
            list(range(10)) if info.version >= 2 else [])
    return len(adds), has_z


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA)
    load(t, rows(0, 10), tasks=1)
    return t


@pytest.mark.parametrize(("point", "took_effect"), POINTS, ids=[p for p, _ in POINTS])
def test_an_alter_killed_at_each_step_leaves_history_and_schema_agreeing(
    table: Table, capsys: pytest.CaptureFixture[str], point: str, took_effect: bool
) -> None:
    proc = _alter(table, point, "add-column", "z int")
    assert proc.returncode == KILLED, (point, proc.stdout, proc.stderr)
    assert _agree(table, capsys) == ((1, True) if took_effect else (0, False))
    # The ALTER run again takes effect once, and history shows it once.
    proc = _alter(table, None, "add-column", "z int")
    if took_effect:
        assert proc.returncode == 2 and "already has a column 'z'" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
    assert _agree(table, capsys) == (1, True)
