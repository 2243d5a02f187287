"""A compaction killed with SIGKILL at any point leaves the table readable and exact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_compaction import SCHEMA, add_segment, read_segments, rows

from carbonstore import Store
from carbonstore.segments.clean import clean_files
from carbonstore.segments.compaction import compact

pytestmark = pytest.mark.slow

CHILD = """
import sys
from carbonstore import Store
from carbonstore.segments.compaction import compact
table = Store(sys.argv[1]).table("t")
print("ready", flush=True)
compact(table, "minor")
print("done", flush=True)
"""


def test_sigkill_at_any_point(store: Store, tmp_path: Path) -> None:
    table = store.create_table(
        "t", SCHEMA, properties={"sort_columns": "id", "compaction_level_threshold": "2,2"}
    )
    n_seg, per = 4, 50_000
    for i in range(n_seg):
        add_segment(table, rows(i * per, per), tasks=2)
    expected = list(range(n_seg * per))
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    states: list[tuple[str, ...]] = []
    delay = 0.0
    while delay < 30:  # longer and longer runs until one finishes
        delay = delay * 1.3 + 0.01
        proc = subprocess.Popen(
            [sys.executable, str(script), store.location], stdout=subprocess.PIPE, env=env,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        # Readable after every kill: no duplicate and no missing row.
        ids = read_segments(table)["id"].to_pylist()
        assert ids == expected, f"after a kill at {delay}s"
        states.append(tuple(e.load_name for e in table.status.read().readable))
        if states[-1] == ("0.2",):
            break
    # Kills landed before, between and after merges (the states differ).
    assert len(set(states)) >= 2, states
    # Whatever state the kills left, a new compaction finishes the job (locks of dead
    # processes are free) and clean files takes any half-written output to the trash.
    compact(table, "minor")
    assert [e.load_name for e in table.status.read().readable] == ["0.2"]
    assert read_segments(table)["id"].to_pylist() == expected
    report = clean_files(table, dry_run=False)
    assert all(i.kind == "orphan" for i in report.items)
    named = {e.load_name for e in table.status.read().entries}
    on_disk = {i.base_name.removeprefix("Segment_")
               for i in table.store.sfs.list_dir(table.paths.fact_dir)}
    assert on_disk <= named
