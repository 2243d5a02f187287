"""Worker processes of the concurrency test: ``python -m tests.dml.workers ROLE STORE``."""

from __future__ import annotations

import sys
import time

from carbonstore import Store
from carbonstore.errors import CompactionError
from carbonstore.segments.compaction import compact
from carbonstore.segments.dml import delete_rows
from carbonstore.store.table import Table
from tests.dml.rows import load, rows

ROWS = 400  # initial rows: ids 0..ROWS-1
LOADS = 6
DELETES = 8


def main(role: str, location: str) -> int:
    table = Store(location).table("db.t")
    if role.startswith("delete"):
        # two deleters: even and odd residues, both touching every file of the table
        for k in range(0 if role == "delete" else 1, DELETES, 2):
            # id % DELETES = k as a condition the index binds (the JVM-free DELETE)
            ids = ", ".join(str(i) for i in range(k, ROWS, DELETES))
            r = delete_rows(table, f"id < {ROWS} AND id IN ({ids})")
            print(f"deleted {k} {r.deleted}", flush=True)
    elif role.startswith("race-"):  # race-delete / race-update / race-upsert: one row at a time
        _race(table, role.removeprefix("race-"))
    elif role == "load":
        for j in range(LOADS):
            load(table, rows(range(10_000 + 100 * j, 10_000 + 100 * j + 50)))
            print(f"loaded {j}", flush=True)
    elif role == "compact":
        deadline = time.monotonic() + 25
        done = 0
        while time.monotonic() < deadline and done < 4:
            ids = [e.load_name for e in table.status.read().readable]
            if len(ids) >= 2:
                try:
                    compact(table, "custom", segment_ids=ids)
                    done += 1
                    print(f"compacted {len(ids)}", flush=True)
                except CompactionError as err:  # a source changed: retried by the next round
                    print(f"compaction lost: {err}", flush=True)
            time.sleep(0.05)
    return 0


RACE_ROWS = 16  # rows 0..RACE_ROWS-1 of the DML race; upserted keys are 100_000 + k


def _race(table: Table, op: str) -> None:
    """DELETE, UPDATE or MERGE-upsert row k, for k = 0, 1, ...: two such processes race
    on the same row at about the same time (UPDATE: row k until it is gone)."""
    import random

    import pyarrow as pa

    from carbonstore.dml import WhenMatched, WhenNotMatched, merge_rows, update_rows

    for k in range(RACE_ROWS):
        if op == "delete":
            _updated(table, k)
            time.sleep(random.uniform(0, 0.1))  # into the middle of the UPDATEs of row k
            r = delete_rows(table, f"id = {k}")
        elif op == "update":  # row k again and again, until a DELETE took it
            for _ in range(50):
                r = update_rows(table, {"score": "score + 1"}, f"id = {k}")
                if not r.deleted:
                    break
        else:
            src = pa.table({"id": pa.array([100_000 + k], pa.int64()), "name": ["u"],
                            "score": pa.array([1.0])})
            r = merge_rows(table, src, on=["id"], matched=[WhenMatched(
                action="update", assignments={"score": "t.score + s.score"})],
                not_matched=[WhenNotMatched()])
        print(f"{op} {k} {r.deleted} {r.inserted}", flush=True)


def _updated(table: Table, k: int, limit: float = 10) -> None:
    """Wait until row k was updated (its score is no longer the loaded k / 4)."""
    from carbonstore.segments.dml import row_filter, scan_rows

    deadline = time.monotonic() + limit
    expr = row_filter(table, f"id = {k} AND score > {k / 4}")
    while time.monotonic() < deadline and not scan_rows(table, expr).count:
        time.sleep(0.01)


def run_race(location: str, root: str,
             roles: tuple[str, ...] = ("delete", "delete-odd", "load", "compact")) -> dict[str, str]:
    """Run the roles as processes against the store at ``location`` (the repository at
    ``root`` on their path); each role's output. A role that fails fails the test."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "CARBON_CONF"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    procs = {role: subprocess.Popen(
        [sys.executable, "-m", "tests.dml.workers", role, location], cwd=root, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for role in roles}
    out = {}
    for role, p in procs.items():
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, (role, stderr[-3000:])
        out[role] = stdout
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
