"""Load processes: killed with SIGKILL mid-write, and four loads at the same time.

Each test starts real OS processes, each with its own local[1] Spark (slow).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from carbonstore import Store
from carbonstore.store.leases import entry_is_dead
from carbonstore.store.tablestatus import IN_PROGRESS, SUCCESS, now_ms

pytestmark = [pytest.mark.slow, pytest.mark.spark]  # the loads in child processes start Spark

KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    from carbonstore.spark.session import get_spark
    from carbonstore import Store
    from carbonstore.store import load_conf
    from carbonstore.spark.load_job import load
    from pyspark.sql import functions as F

    spark = get_spark(master="local[1]", shuffle_partitions=1)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    # one row group per batch, so the data file exists soon after the task starts
    conf = load_conf(None).with_overrides({"carbon.blocklet.size.in.mb": "0.0001"})
    table = Store(sys.argv[1], conf=conf).table("db.k")
    load(table, spark.range(0, 200_000_000, numPartitions=1).select(F.col("id")))
    """
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def test_sigkill_mid_write_leaves_in_progress_entry(store: Store, tmp_path: Path) -> None:
    table = store.create_table("db.k", "id long not null")
    script = tmp_path / "kill_load.py"
    script.write_text(KILL_SCRIPT)
    log = (tmp_path / "load.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, str(script), store.location],
        env=_env(), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=log,
    )
    try:
        seg_dir = table.paths.segment_dir("0")
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            names = [i.base_name for i in store.sfs.list_dir(seg_dir)]
            if any(n.endswith(".parquet") for n in names):
                break
            assert proc.poll() is None, (tmp_path / "load.log").read_text()[-3000:]
            time.sleep(0.5)
        else:
            pytest.fail("the load wrote no data file in time")
        time.sleep(1.0)  # some row groups later: well inside the write
        entry = table.status.read().get("0")
        assert entry.status == IN_PROGRESS
        # Changed behaviour: liveness is the entry's lease, no longer the segment lock.
        assert not entry_is_dead(table.status, entry, now=now_ms(), lease_ms=120_000)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        log.close()
    snap = table.status.read()
    assert [e.status for e in snap.entries] == [IN_PROGRESS]
    assert snap.readable == []  # readers ignore it
    dead = snap.entries[0]  # its process is gone: clean files may remove it at once
    assert entry_is_dead(table.status, dead, now=now_ms(), lease_ms=120_000)
    assert not any(n.base_name.endswith(".carbonindexmerge") for n in store.sfs.list_dir(seg_dir))


def test_four_concurrent_loads_commit_distinct_segments(store: Store, tmp_path: Path) -> None:
    table = store.create_table("db.c", "id int not null, src string")
    procs = []
    for p in range(4):
        csv = tmp_path / f"in{p}.csv"
        csv.write_text("id,src\n" + "".join(f"{p * 100 + i},p{p}\n" for i in range(50)))
        cmd = [
            sys.executable, "-m", "carbonstore.cli", "--store", store.location, "load", "db.c",
            "--input", str(csv), "--master", "local[1]", "--json",
        ]
        procs.append(subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
    for proc in procs:
        out, err = proc.communicate(timeout=400)
        assert proc.returncode == 0, err.decode()[-3000:]
        assert b'"status": "Success"' in out
    snap = table.status.read()
    assert sorted(e.load_name for e in snap.entries) == ["0", "1", "2", "3"]
    assert all(e.status == SUCCESS and e.row_count == 50 for e in snap.entries)
    ids: list[int] = []
    for e in snap.readable:
        for info in store.sfs.list_dir(table.paths.segment_dir(e.load_name)):
            if info.base_name.endswith(".parquet"):
                ids.extend(pq.read_table(info.path).column("id").to_pylist())
    assert sorted(ids) == sorted(p * 100 + i for p in range(4) for i in range(50))
