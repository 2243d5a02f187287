"""Concurrent writer processes on one s3:// table, with no lock of any kind between them.

Six loads, a compaction and clean-files run at once as OS processes against the S3 server
(tests/reliability/workload.py: the product's driver and writer code without a JVM), while
a ninth writer is killed with SIGKILL in the middle of its load. Afterwards every committed
row is there exactly once, the global dictionary holds each value once, each tablestatus
version and dictionary record was PUT exactly once (the server counts successful PUTs per
key), and the killed load's segment is cleaned once its lease expired.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from s3fixtures import S3Store

from carbonstore import Store
from carbonstore.dictionary import clear_cache as clear_dictionary_cache
from carbonstore.dictionary import load_dictionary
from carbonstore.pruning.cache import clear_cache
from carbonstore.segments.clean import clean_files
from carbonstore.store.tablestatus import COMPACTED, IN_PROGRESS, SUCCESS

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = str(ROOT / "tests" / "reliability" / "workload.py")
sys.path.insert(0, str(ROOT / "tests" / "reliability"))
from workload import CITIES, SCHEMA, committed_ids  # noqa: E402

pytestmark = pytest.mark.slow

LOADS = 6
ROWS = 40
LEASE = "2"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CARBON_CONF"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def test_writers_on_s3_commit_each_row_once_and_survive_a_kill(s3_store: S3Store) -> None:
    store = Store(s3_store.location, conf=s3_store.conf(**{"carbon.segment.lease.seconds": LEASE}))
    table = store.create_table("db.t", SCHEMA, properties={"dictionary_include": "city"})
    loc = store.location  # carries the endpoint: the workers have no conf file

    def start(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, WORKLOAD, loc, *args, "--lease", LEASE],
                                env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    victim = start("load", "db.t", "900000", str(ROWS), "--slow")
    procs = {f"load{k}": start("load", "db.t", str(k * 1000), str(ROWS)) for k in range(LOADS)}
    procs["compact"] = start("compact", "db.t", "--wait", "4")
    procs["clean"] = start("clean", "db.t")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(
        e.status == IN_PROGRESS and e.extra.get("writerPid") == victim.pid
        for e in table.status.read().entries
    ):
        time.sleep(0.2)
    time.sleep(1.0)  # inside its slow write
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    out: dict[str, str] = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {stderr[-3000:]}"
        out[name] = stdout.strip()
    assert out["compact"], "the compaction merged nothing"

    # the killed load left an In Progress entry; the table reads every committed row once
    expected = sorted(k * 1000 + i for k in range(LOADS) for i in range(ROWS))
    assert committed_ids(table) == expected
    snap = table.status.read()
    assert {e.status for e in snap.entries} <= {SUCCESS, COMPACTED, IN_PROGRESS}

    time.sleep(float(LEASE) * 1.5)  # the killed load's lease runs out (no renewer is left)
    clean_files(table, dry_run=False, stale_inprogress=True)
    snap = table.status.read()
    assert IN_PROGRESS not in {e.status for e in snap.entries}
    assert committed_ids(table) == expected

    clear_cache()
    clear_dictionary_cache()
    assert sorted(load_dictionary(table, "city").values.to_pylist()) == sorted(CITIES)

    puts = s3_store.puts()
    versions = [k for k in puts if re.search(r"/tablestatus_log/[^/]+/[0-9]+\.json$", k)]
    records = [k for k in puts if "/dictionary/" in k and k.endswith(".commit")]
    assert len(versions) >= 2 * LOADS + 2 and records
    overwritten = {k: puts[k] for k in (*versions, *records) if puts[k] != 1}
    assert not overwritten, f"commits written more than once: {overwritten}"
