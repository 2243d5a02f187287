"""docs/getting-started.md's commands, run as written, in order, by a shell."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "getting-started.md"


def _commands() -> str:
    """The doc's shell block (the one that starts with ``.venv/bin/carbonstore create``)."""
    blocks = re.findall(r"```sh\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    (block,) = [b for b in blocks if "carbonstore create" in b]
    return "\n".join(line.strip() for line in block.splitlines())


def _shell_words(line: str) -> list[str] | None:
    """The words bash makes of ``line`` (None: an unquoted glob that matches nothing)."""
    done = subprocess.run(["bash", "-O", "failglob", "-c", 'printf "%s\\n" ' + line],
                          capture_output=True, text=True, check=False)
    return done.stdout.splitlines() if done.returncode == 0 else None


def test_globs_in_the_doc_are_quoted() -> None:
    """The shell leaves every --input as one word: the glob reaches carbonstore as written."""
    lines = [line for line in _commands().splitlines() if "--input" in line]
    assert lines
    for line in lines:
        words = _shell_words(line)
        assert words is not None, f"an unquoted glob: {line}"
        assert "*" in words[words.index("--input") + 1], line


@pytest.mark.spark  # the commands start Spark in their own processes
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_getting_started_commands_run_as_written(tmp_path: Path) -> None:
    events = tmp_path / "data" / "events"
    events.mkdir(parents=True)
    for f in range(2):  # two files: an unquoted glob would become two arguments
        rows = [f"{i},2024-01-0{1 + f}T10:00:{i % 60:02d}Z,{'abc' if i % 7 == 0 else 'k' + str(i)},"
                f"{i / 4}" for i in range(f * 50, f * 50 + 50)]
        (events / f"part-{f}.csv").write_text("id,ts,k,v\n" + "\n".join(rows) + "\n")
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    shim = venv_bin / "carbonstore"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m carbonstore.cli "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(["bash", "-e", "-c", _commands()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "segment 0 of mydb.events: Success, 100 rows" in out
    query = out[out.index("id,"):]  # the query's CSV: ids 10..20
    assert [line.split(",")[0] for line in query.splitlines()[1:12]] == [
        str(i) for i in range(10, 21)]
