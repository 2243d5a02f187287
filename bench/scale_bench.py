"""Scale benchmark: planning tables of 1,000 / 10,000 / 100,000 segments in a fresh process.

For each size, the table of bench/scale_table.py (10 files per segment, one row group per
file; generated once under ``--data`` (default $CARBONSTORE_SCALE_DATA or
/tmp/carbonstore_scale, never inside the repository) as scale_n<N>_f<F>, reused) and, for each filter of its
expected.json, ``carbonstore --store STORE prune scale.t --where W --json`` run as a new
process: wall time (interpreter start-up and imports included), the open + plan time the
command reports (``planning_ms``: from opening the table to the plan) and peak RSS,
median of ``--repeat`` runs, and whether the plan equals expected.json. Also, in fresh
processes: ``history --limit 20``, ``prune --as-of`` an old version, ``count(*)`` from
metadata (``sql "SELECT count(*) ..."``), ``clean-files --dry-run``; and the commit latency
of one more load (a LOAD BEGIN then its abort: two real commits that leave the readable
segments as they are), p50 / p99 in fresh processes.

``--delta``: delta-rs on a ``_delta_log`` with the same files and min/max statistics (one
add action per data file, the ``d`` partition as partition values; built once by this
bench with ``create_write_transaction`` commits and a checkpoint) planning the same
filters with ``DeltaTable(uri).file_uris(file_pruning_predicate=...)`` in a fresh process.

Usage::

    python bench/scale_bench.py --sizes 1000,10000,100000 [--repeat 3] [--delta]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("CARBONSTORE_SCALE_DATA", "/tmp/carbonstore_scale"))
sys.path.insert(0, str(HERE))
PY = sys.executable


def _cli(store: str, *args: str) -> tuple[float, float, str]:
    """A carbonstore CLI command in a fresh process: wall s, peak RSS MB, stdout."""
    code = ("import resource, sys; sys.argv = ['carbonstore'] + sys.argv[1:]\n"
            "try:\n    from carbonstore.cli.app import main; rc = main(sys.argv[1:])\n"
            "finally:\n    sys.stdout.flush()\n"
            "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
            "sys.exit(rc)")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.perf_counter()
    p = subprocess.run([PY, "-c", code, "--store", store, *args], capture_output=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode:
        raise RuntimeError(f"{args}: {p.stderr.decode()[-500:]}")
    rss = int(p.stderr.decode().strip().splitlines()[-1]) / 1024
    return wall, rss, p.stdout.decode()


def table_for(n: int, files: int) -> str:
    import scale_table

    out = DATA / f"scale_n{n}_f{files}"
    if not (out / "expected.json").exists():
        import shutil

        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        scale_table.generate(str(out), n, files, 1)
        print(f"generated {n} segments in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return str(out)


def plan_figures(store: str, repeat: int) -> list[dict[str, Any]]:
    exp = json.loads(Path(store, "expected.json").read_text())
    rows = []
    for f in exp["filters"]:
        walls, rss, ok, inside = [], [], True, []
        for _ in range(repeat):
            w, r, out = _cli(store, "prune", exp["table"], "--where", f["where"], "--json")
            got = json.loads(out)
            inside.append(got["planning_ms"] / 1000)
            lv = got["levels"]
            ok &= (lv["files"]["kept"], lv["row_groups"]["kept"]) == (f["files"], f["row_groups"])
            walls.append(w)
            rss.append(r)
        rows.append({"filter": f["name"], "where": f["where"], "files": f["files"],
                     "wall_s": round(statistics.median(walls), 3), "rss_mb": round(max(rss)),
                     "open_and_plan_s": round(statistics.median(inside), 3),
                     "equals_expected": ok})
    return rows


def metadata_figures(store: str, repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def med(*args: str) -> float:
        return round(statistics.median(_cli(store, *args)[0] for _ in range(repeat)), 3)

    out["history_limit_20_s"] = med("history", "scale.t", "--limit", "20")
    out["prune_as_of_version_1_s"] = med("prune", "scale.t", "--where", "id = 5", "--as-of", "1", "--json")
    out["count_star_s"] = med("sql", "SELECT count(*) FROM scale.t")
    out["clean_files_dry_run_s"] = med("clean-files", "scale.t", "--dry-run")
    commits = []
    code = ("import sys, time\nfrom carbonstore import Store\n"
            "from carbonstore.store.tablestatus import IN_PROGRESS, MARKED_FOR_DELETE, LoadEntry, now_ms\n"
            "t = Store(sys.argv[1]).table('scale.t')\nt0 = time.perf_counter()\n"
            "snap = t.status.update(lambda s: [*s.entries, LoadEntry(load_name=str(s.id_floor), "
            "status=IN_PROGRESS, load_start_time=now_ms())], operation='LOAD BEGIN')\n"
            "t1 = time.perf_counter()\nsid = str(snap.id_floor - 1)\n"
            "t.status.update(lambda s: [e.with_status(MARKED_FOR_DELETE) if e.load_name == sid else e "
            "for e in s.entries], operation='LOAD ABORT')\n"
            "print(t1 - t0, time.perf_counter() - t1)")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    for _ in range(max(repeat * 4, 10)):
        t0 = time.perf_counter()
        p = subprocess.run([PY, "-c", code, store], capture_output=True, env=env, check=True)
        wall = time.perf_counter() - t0
        begin, abort = map(float, p.stdout.split())
        commits.append((wall, begin, abort))
    walls = sorted(c[0] for c in commits)
    begins = sorted(c[1] for c in commits)
    out["commit_fresh_process_p50_s"] = round(statistics.median(walls), 3)
    out["commit_fresh_process_p99_s"] = round(walls[min(len(walls) - 1, int(0.99 * len(walls)))], 3)
    out["commit_in_process_p50_s"] = round(statistics.median(begins), 3)
    out["commit_in_process_p99_s"] = round(begins[min(len(begins) - 1, int(0.99 * len(begins)))], 3)
    code = ("import sys, time\nfrom carbonstore import Store\n"
            "from carbonstore.segments.compaction_plan import plan_compaction\n"
            "t = Store(sys.argv[1]).table('scale.t')\nt0 = time.perf_counter()\n"
            "plan_compaction(t.status.read(), t.store.conf, 'minor')\nt1 = time.perf_counter()\n"
            "plan_compaction(t.status.read(), t.store.conf, 'major')\n"
            "print(t1 - t0, time.perf_counter() - t1)")
    p = subprocess.run([PY, "-c", code, store], capture_output=True, env=env, check=True)
    minor, major = map(float, p.stdout.split())
    out["compaction_plan_minor_s"] = round(minor, 3)
    out["compaction_plan_major_s"] = round(major, 3)
    return out


def imports_only(repeat: int) -> float:
    """Wall time of a fresh process that only imports what ``prune`` imports (the floor
    every fresh-process figure above stands on)."""
    code = ("import carbonstore.cli.app, carbonstore.cli.query, carbonstore.pruning.plan, "
            "carbonstore.expressions.parser, sqlglot, pandas")  # pandas: pyarrow imports it on the first pa.array()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([PY, "-c", code], check=True, env=env)
        walls.append(time.perf_counter() - t0)
    return round(statistics.median(walls), 3)


# ---- delta-rs ---------------------------------------------------------------------------------
def delta_build(store: str, n: int, files: int, commits: int = 400) -> str:
    import datetime as dt

    import numpy as np
    import pyarrow as pa
    import scale_table
    from deltalake import DeltaTable, Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions

    uri = str(Path(store) / "delta")
    done = Path(store) / "delta.done"
    if done.exists():
        return uri
    lay = scale_table.Layout(n, files, 1, 7)
    keys = np.sort(lay.keys, axis=1)
    rows = scale_table.ROWS
    schema = Schema.from_arrow(pa.schema([
        ("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("k", pa.string()),
        ("cat", pa.string()), ("v", pa.float64()), ("d", pa.date32())]))
    adds = []
    now = int(time.time() * 1000)
    for g in range(lay.row_groups):
        s = g // files
        day = (scale_table.DAY0 + dt.timedelta(days=int(lay.seg_day[s]))).isoformat()
        ranks = [int(lay.cat_lo[g]) + i for i in range(3)]
        stats = {"numRecords": rows,
                 "minValues": {"id": g * rows, "k": f"{int(keys[g, 0]):016x}",
                               "cat": scale_table.CATS_SORTED[min(ranks)], "v": float(lay.v_lo[g])},
                 "maxValues": {"id": g * rows + rows - 1, "k": f"{int(keys[g, -1]):016x}",
                               "cat": scale_table.CATS_SORTED[max(ranks)], "v": float(lay.v_lo[g]) + 5.0},
                 "nullCount": {"id": 0, "k": 0, "cat": 0, "v": 0}}
        adds.append(AddAction(f"d={day}/part-{g:09d}.parquet", 24 * rows, {"d": day}, now, True,
                              json.dumps(stats)))
    per = max(1, -(-len(adds) // commits))  # (each commit reloads the log: few for 1M files)
    dtab = None
    for i in range(0, len(adds), per):
        batch = adds[i: i + per]
        if dtab is None:
            create_table_with_add_actions(uri, schema, batch, mode="error", partition_by=["d"])
            dtab = DeltaTable(uri)
        else:
            dtab.create_write_transaction(batch, mode="append", schema=schema, partition_by=["d"])
    DeltaTable(uri).create_checkpoint()
    done.write_text("ok")
    return uri


def _delta_where(where: str) -> str:
    return where.replace("DATE '", "'")


def delta_figures(uri: str, store: str, repeat: int) -> list[dict[str, Any]]:
    exp = json.loads(Path(store, "expected.json").read_text())
    code = ("import sys, resource\nfrom deltalake import DeltaTable\n"
            "n = len(DeltaTable(sys.argv[1]).file_uris(file_pruning_predicate=sys.argv[2]))\n"
            "print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    rows = []
    for f in exp["filters"]:
        walls, got, rss = [], 0, 0.0
        for _ in range(repeat):
            t0 = time.perf_counter()
            p = subprocess.run([PY, "-c", code, uri, _delta_where(f["where"])], capture_output=True)
            walls.append(time.perf_counter() - t0)
            if p.returncode:
                got = -1
                break
            n_files, peak = p.stdout.split()
            got, rss = int(n_files), max(rss, int(peak) / 1024)
        rows.append({"filter": f["name"], "delta_wall_s": round(statistics.median(walls), 3),
                     "delta_files": got, "delta_rss_mb": round(rss)})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--files-per-segment", type=int, default=10)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--delta", action="store_true", help="also delta-rs on the same files")
    p.add_argument("--no-metadata", action="store_true", help="only the plans")
    p.add_argument("--data", default=None, help="folder of the generated tables (default: "
                   "$CARBONSTORE_SCALE_DATA or /tmp/carbonstore_scale)")
    args = p.parse_args(argv)
    global DATA
    if args.data:
        DATA = Path(args.data)
    results = []
    for n in [int(x) for x in args.sizes.split(",")]:
        store = table_for(n, args.files_per_segment)
        res: dict[str, Any] = {"segments": n, "files": n * args.files_per_segment,
                               "imports_only_s": imports_only(args.repeat),
                               "plans": plan_figures(store, args.repeat)}
        if args.delta:
            uri = delta_build(store, n, args.files_per_segment)
            for row, d in zip(res["plans"], delta_figures(uri, store, args.repeat), strict=True):
                row.update(d)
                row["delta_over_ours"] = round(d["delta_wall_s"] / row["wall_s"], 2)
        if not args.no_metadata:
            res["metadata"] = metadata_figures(store, args.repeat)
        results.append(res)
        print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
