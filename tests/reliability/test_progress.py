"""Progress bars: drawn on a terminal, never in pipes or with --json."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from carbonstore import Store
from carbonstore.progress import progress, progress_enabled
from tests.reliability.test_crash import ROOT
from tests.reliability.workload import SCHEMA, load, rows


def test_no_output_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert not progress_enabled()
    with progress(3, "working") as step:
        step()
        step(2)
    assert capsys.readouterr() == ("", "")


def _stderr_on_a_terminal(args: list[str]) -> tuple[int, bytes]:
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=ROOT, COLUMNS="100", TERM="xterm")
    proc = subprocess.Popen([sys.executable, "-m", "carbonstore.cli", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks)


@pytest.mark.parametrize("json", [False, True])
def test_index_rebuild_draws_progress_only_on_a_terminal(store: Store, json: bool) -> None:
    table = store.create_table("db.t", SCHEMA)
    load(table, rows(0, 50), tasks=2)
    args = ["--store", store.location, "index", "rebuild", "db.t"] + (["--json"] if json else [])
    code, err = _stderr_on_a_terminal(args)
    assert code == 0, err.decode(errors="replace")
    assert (b"rebuilding indexes of db.t" in err) is not json


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["compact", "db.t", "--type", "major", "--engine", "local"], b"compacting db.t"),
        (["analyze", "db.t", "--engine", "local"], b"analyzing db.t"),
    ],
)
def test_compaction_and_analyze_draw_progress_on_a_terminal(
    store: Store, command: list[str], shown: bytes
) -> None:
    table = store.create_table("db.t", SCHEMA)
    for i in range(2):
        load(table, rows(i * 50, 50), tasks=1)
    code, err = _stderr_on_a_terminal(["--store", store.location, *command])
    assert code == 0, err.decode(errors="replace")
    assert shown in err
    code, err = _stderr_on_a_terminal(["--store", store.location, *command, "--json"])
    assert code == 0 and shown not in err


@pytest.mark.slow
@pytest.mark.spark  # the load in the child process starts Spark
def test_a_load_draws_progress_on_a_terminal(store: Store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store.create_table("db.t", "id long not null, city string")
    csv = tmp_path / "in.csv"
    csv.write_text("id,city\n" + "".join(f"{i},c{i % 7}\n" for i in range(500)))
    code, err = _stderr_on_a_terminal(
        ["--store", store.location, "load", "db.t", "--input", str(csv), "--master", "local[1]"]
    )
    assert code == 0, err.decode(errors="replace")[-3000:]
    assert b"loading into db.t" in err
