"""Versioned tablestatus benchmark: commit latency, and open + plan after thousands of versions.

1. Commit latency: W writer processes (1 and 8) commit at the same time on one table, each
   ``--commits`` tablestatus versions (an allocate, i.e. a load's begin version), timed
   around ``TableStatus.update`` (so lost races and their retries count); p50 / p99 / max
   and commits per second over all writers.
2. Open + plan in a fresh process for a table built by ``--loads`` separate loads through
   the product's commit protocol (begin version, write task, commit version: 2 versions
   per load), timed inside the process from table open to plan (interpreter start-up and
   imports excluded), median of ``--repeat``. The same table converted to the earlier
   single-file tablestatus format is timed the same way, as the baseline. Also: a cold and
   a warm ``TableStatus.read()``.

Usage::

    .venv/bin/python bench/commit_bench.py [--loads 1600] [--commits 200] [--repeat 5]

Data goes under bench/data/commit_<loads>/ (gitignored) and is reused by later runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
ROOT = HERE.parent
SCHEMA = "id long not null, k string, v double"
ROWS = 2_500

WRITER = """
import sys, time, json
from carbonstore import Store
from carbonstore.store import load_conf
conf = load_conf(None).with_overrides({"carbon.tablestatus.commit.retries": "1000"})
table = Store(sys.argv[1], conf=conf).table("db.t")
n, go = int(sys.argv[2]), sys.argv[3]
import os
while not os.path.exists(go):
    time.sleep(0.001)
out = []
for _ in range(n):
    t0 = time.perf_counter()
    table.status.allocate()
    out.append((time.perf_counter() - t0) * 1000)
print(json.dumps(out))
"""

FRESH = """
import sys, time, json
t0 = time.perf_counter()
from carbonstore import Store
from carbonstore.pruning.plan import prune
t1 = time.perf_counter()
table = Store(sys.argv[1]).table("db.t")
snap = table.status.read()
t2 = time.perf_counter()
plan = prune(table, sys.argv[2])
t3 = time.perf_counter()
print(json.dumps({"read_ms": (t2 - t1) * 1000, "plan_ms": (t3 - t1) * 1000,
                  "version": snap.version, "segments": len(snap.entries)}))
"""


def _env(root: Path = ROOT) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("CARBON_CONF", None)
    return env


def commit_latency(writers: int, commits: int, workdir: Path) -> dict[str, float]:
    from carbonstore import Store

    store_dir = workdir / f"latency_{writers}"
    shutil.rmtree(store_dir, ignore_errors=True)
    Store(str(store_dir)).create_table("db.t", SCHEMA)
    go = workdir / f"go_{writers}"
    go.unlink(missing_ok=True)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(store_dir), str(commits), str(go)],
                              stdout=subprocess.PIPE, text=True, env=_env())
             for _ in range(writers)]
    time.sleep(2.0)  # every writer imported and waiting
    t0 = time.perf_counter()
    go.touch()
    lat: list[float] = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        lat.extend(json.loads(out))
    wall = time.perf_counter() - t0
    arr = np.array(lat)
    return {"writers": writers, "commits": len(lat), "p50_ms": float(np.percentile(arr, 50)),
            "p99_ms": float(np.percentile(arr, 99)), "max_ms": float(arr.max()),
            "commits_per_s": len(lat) / wall}


def build(loads: int, workdir: Path) -> Path:
    """A table of ``loads`` separate loads, each committed through the product's protocol."""
    from carbonstore import Store
    from carbonstore.segments.commit import begin_segment, commit_segment
    from carbonstore.segments.load import parse_load_options, write_settings
    from carbonstore.segments.writer import write_task

    store_dir = workdir / "versions"
    if (workdir / "built").exists():
        return store_dir
    shutil.rmtree(store_dir, ignore_errors=True)
    table = Store(str(store_dir)).create_table("db.t", SCHEMA)
    opts = parse_load_options(table, None)
    rng = np.random.default_rng(7)
    t0 = time.perf_counter()
    for n in range(loads):
        ids = np.arange(n * ROWS, (n + 1) * ROWS, dtype=np.int64)
        data = pa.table({"id": ids, "k": [f"{x:016x}" for x in rng.integers(0, 2**62, ROWS)],
                         "v": rng.random(ROWS)})
        entry, keeper = begin_segment(table)
        settings = replace(write_settings(table, entry.load_name, opts), page_rows=250,
                           statistics=False)
        result = write_task(data.to_batches(), settings, task_id="00000-0")
        commit_segment(table, entry.load_name, [result])
        if keeper is not None:
            keeper.release()
        if n % 200 == 199:
            print(f"  {n + 1}/{loads} loads ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    (workdir / "built").write_text(str(loads))
    return store_dir


def legacy_copy(store_dir: Path, workdir: Path) -> Path:
    """The same table in the earlier format: one Metadata/tablestatus file, no version log."""
    from carbonstore import Store

    target = workdir / "legacy"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(store_dir, target)
    table = Store(str(target)).table("db.t")
    entries = table.status.read().entries
    meta = target / "db" / "t" / "Metadata"
    shutil.rmtree(meta / "tablestatus_log")
    (meta / "tablestatus").write_bytes(
        orjson.dumps([e.to_json() for e in entries], option=orjson.OPT_INDENT_2))
    schema = orjson.loads((meta / "schema").read_bytes())
    del schema["tableId"]
    (meta / "schema").write_bytes(orjson.dumps(schema, option=orjson.OPT_INDENT_2))
    return target


def fresh(store_dir: Path, where: str, repeat: int, root: Path = ROOT) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", FRESH, str(store_dir), where],
                             capture_output=True, text=True, env=_env(root), check=True).stdout
        runs.append(json.loads(out))
    return {"read_ms": statistics.median(r["read_ms"] for r in runs),
            "plan_ms": statistics.median(r["plan_ms"] for r in runs),
            "version": runs[0].get("version"), "segments": runs[0]["segments"]}


def warm_read(store_dir: Path) -> float:
    from carbonstore import Store

    table = Store(str(store_dir)).table("db.t")
    table.status.read()
    t0 = time.perf_counter()
    for _ in range(200):
        table.status.read()
    return (time.perf_counter() - t0) / 200 * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--loads", type=int, default=1600)
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", type=Path, default=None,
                    help="a checkout of the release before versions: times the single-file "
                         "table with its code (default: this code's reader of that format)")
    ap.add_argument("--skip-latency", action="store_true")
    args = ap.parse_args()
    workdir = DATA / f"commit_{args.loads}"
    workdir.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))

    print("commit latency (TableStatus.update of one version, retries included)")
    for writers in (() if args.skip_latency else (1, 8)):
        r = commit_latency(writers, args.commits if writers == 1 else args.commits // 2, workdir)
        print(f"  {writers} writer(s): {r['commits']} commits  p50 {r['p50_ms']:.2f} ms  "
              f"p99 {r['p99_ms']:.2f} ms  max {r['max_ms']:.1f} ms  "
              f"{r['commits_per_s']:.0f} commits/s")

    store_dir = build(args.loads, workdir)
    from carbonstore import Store
    from carbonstore.pruning.plan import prune

    legacy = workdir / "legacy"
    if not legacy.exists():
        legacy = legacy_copy(store_dir, workdir)
    x = args.loads * ROWS // 2 + 123
    for path in (store_dir, legacy):  # write each one's index snapshot first (as prune_bench)
        prune(Store(str(path)).table("db.t"), f"id = {x}")
    print(f"open + plan in a fresh process, {args.loads} loads (median of {args.repeat})")
    for where in (f"id = {x}", "v > 0.999"):
        new = fresh(store_dir, where, args.repeat)
        old = fresh(legacy, where, args.repeat, args.baseline or ROOT)
        print(f"  {where:<14} versions: read {new['read_ms']:6.1f} ms  open+plan "
              f"{new['plan_ms']:6.1f} ms (version {new['version']}, {new['segments']} entries)"
              f" | single file: read {old['read_ms']:6.1f} ms  open+plan {old['plan_ms']:6.1f} ms")
    print(f"  warm TableStatus.read(): versions {warm_read(store_dir):.3f} ms")


if __name__ == "__main__":
    main()
