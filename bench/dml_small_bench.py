"""The fixed cost of one small DML statement with the Spark session already up: wall and CPU
(this process, the JVM and every Python process Spark starts), the Spark jobs and stages it
runs and the Python processes it starts.

Statements, each on a fresh ``--rows``-row table of two segments (``id`` long, ``name``,
``score``), run ``--repeat`` times (a new table each time; the first run of a session also
pays the Python workers' first imports, reported apart as ``first``):

- ``update``: ``UPDATE SET score = score + 1 WHERE id = 4242``;
- ``delete``: ``DELETE WHERE id % 1000 = 7 AND name LIKE '%3'`` (the index cannot bind
  ``%``: a Spark job);
- ``merge``: a 4-row source (2 updates, 2 inserts), WHEN MATCHED UPDATE SET * / WHEN NOT
  MATCHED INSERT *.

CPU is the sum of user + system seconds of this process's tree (``/proc``: live processes
plus what their finished children used). Python processes started are the new processes
of the tree found by polling ``/proc`` every 10 ms (forked workers of PySpark's daemon and
processes the JVM starts for Python data sources).

Usage::

    .venv/bin/python bench/dml_small_bench.py --rows 5000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TICK = os.sysconf("SC_CLK_TCK")


def _tree() -> dict[int, tuple[int, float, str]]:
    """pid -> (parent, cpu seconds incl. reaped children, command) of this process's tree."""
    procs: dict[int, tuple[int, float, str]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[1].split()
        ppid = int(rest[1])
        cpu = sum(int(x) for x in rest[11:15]) / TICK
        procs[int(d)] = (ppid, cpu, cmd)
    me = os.getpid()
    keep = {me}
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _, _) in procs.items():
            if ppid in keep and pid not in keep:
                keep.add(pid)
                changed = True
    return {p: procs[p] for p in keep}


class Watch:
    """New processes of the tree while a statement runs (polled)."""

    def __init__(self) -> None:
        self.seen: dict[int, str] = {}
        self._stop = threading.Event()
        self._base = set(_tree())
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid, (ppid, _, cmd) in _tree().items():
                if pid not in self._base:
                    self.seen.setdefault(pid, f"{ppid} {cmd}")
            time.sleep(0.01)

    def stop(self) -> dict[int, str]:
        self._stop.set()
        self._thread.join()
        return self.seen


def _cpu() -> float:
    return sum(c for _, c, _ in _tree().values())


def _table(store, name: str, rows: int):  # noqa: ANN001, ANN202
    from tests.dml.rows import SCHEMA, load
    from tests.dml.rows import rows as make

    t = store.create_table(name, SCHEMA, properties={"sort_columns": "id"})
    half = rows // 2
    load(t, make(range(0, half)))
    load(t, make(range(half, rows)))
    return t


def _statement(kind: str, t, rows: int):  # noqa: ANN001, ANN202
    import pyarrow as pa

    if kind == "update":
        return t.update({"score": "score + 1"}, where="id = 4242")
    if kind == "delete":
        return t.delete("id % 1000 = 7 AND name LIKE '%3'")
    src = pa.table({"id": pa.array([10, 20, rows + 1, rows + 2], pa.int64()),
                    "name": ["a", "b", "c", "d"], "score": [1.0, 2.0, 3.0, 4.0]})
    return t.merge(src, on=["id"], when_matched_update="*", when_not_matched_insert="*")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="update,delete,merge")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from carbonstore import Store
    from carbonstore.spark.session import get_spark

    t0 = time.perf_counter()
    spark = get_spark(master="local[2]", shuffle_partitions=2)  # as the tests' session
    start = time.perf_counter() - t0
    tracker = spark.sparkContext.statusTracker()
    for kv in os.environ.get("DML_BENCH_CONF", "").split(","):
        if kv:
            spark.conf.set(*kv.split("=", 1))
    root = Path(tempfile.mkdtemp(prefix="dml-small-"))
    store = Store(str(root / "store"))
    out: dict[str, list[dict[str, object]]] = {}
    n = 0
    for run in range(args.repeat):
        for kind in args.only.split(","):
            n += 1
            t = _table(store, f"db.t{n}", args.rows)
            group = f"stmt{n}"
            spark.sparkContext.setJobGroup(group, group)
            watch = Watch()
            cpu0, w0 = _cpu(), time.perf_counter()
            if os.environ.get("DML_BENCH_PROFILE") and run == args.repeat - 1:
                import cProfile
                import pstats

                prof = cProfile.Profile()
                result = prof.runcall(_statement, kind, t, args.rows)
                pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
            else:
                result = _statement(kind, t, args.rows)
            wall, cpu = time.perf_counter() - w0, _cpu() - cpu0
            started = watch.stop()
            jobs = sorted(tracker.getJobIdsForGroup(group))
            stages = [s for j in jobs for s in (tracker.getJobInfo(j).stageIds or [])]
            kinds = {}
            for cmd in started.values():
                key = "daemon-fork" if "daemon" in cmd else cmd.split(" -m ")[-1][:60]
                kinds[key] = kinds.get(key, 0) + 1
            out.setdefault(kind, []).append({
                "run": run, "wall": round(wall, 2), "cpu": round(cpu, 2), "jobs": len(jobs),
                "stages": len(stages), "python_starts": kinds,
                "deleted": result.deleted, "inserted": result.inserted})
            print(json.dumps({kind: out[kind][-1]}), flush=True)
            if os.environ.get("DML_BENCH_PROCS"):
                print(json.dumps(started, indent=0), flush=True)
                for j in jobs:
                    for sid in tracker.getJobInfo(j).stageIds or []:
                        info = tracker.getStageInfo(sid)
                        print(f"  job {j} stage {sid}: {info.name if info else '?'} "
                              f"tasks {info.numTasks if info else '?'}")
    print(f"session start {start:.1f} s")
    print("| statement | first wall | first CPU | later wall (median) | later CPU (median) "
          "| jobs | stages | Python processes started (later runs) |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, runs in out.items():
        later = runs[1:] or runs
        print(f"| {kind} | {runs[0]['wall']} | {runs[0]['cpu']} "
              f"| {statistics.median(r['wall'] for r in later):.2f} "
              f"| {statistics.median(r['cpu'] for r in later):.2f} | {later[-1]['jobs']} "
              f"| {later[-1]['stages']} | {later[-1]['python_starts']} |")


if __name__ == "__main__":
    main()
