"""The index snapshot in a fresh process: CPU time by phase, two source trees and delta-rs.

Each measuring process imports everything first (imports are start-up, not planning), then
times with ``time.process_time`` (CPU of every thread: on the shared 2-core machine the wall
clock of a 20 ms plan is mostly time spent waiting for a core):

* ``open``: ``Store(...).table(...)`` (the tablestatus read and decoded);
* ``snap``: ``read_snapshot`` (list, open, verify and decode the newest index snapshot);
* ``touch``: what the plan then spends in the snapshot - sections read and verified, flat
  arrays decoded and gathered (0 for a tree without ``Snapshot._section``: it decoded at
  open);
* ``plan``: the whole plan after ``snap`` (``touch`` included);

and delta-rs' ``DeltaTable(...).file_uris(file_pruning_predicate=...)`` from open to plan.
The processes of the trees and delta-rs alternate, ``--fresh`` of each per size and
predicate; cells are medians. Data: bench/data of prune_bench (``--data`` to point
elsewhere, e.g. a copy whose snapshots may be rewritten). Usage::

    .venv/bin/python bench/snapshot_fresh_bench.py --trees before=/tmp/before,after=. \\
        --segments 100,400,1600 --fresh 5
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _worker(kind: str, meta_path: str, label: str) -> None:
    sys.path.insert(0, str(HERE))
    import prune_bench as pb

    meta = json.loads(Path(meta_path).read_text())
    pb.ROWS_PER_FILE[0] = meta["rows"]
    sql = dict(pb.predicates(meta))[label]
    clock = time.process_time
    if kind == "delta":
        pb.import_system("delta")
        w0, c0 = time.perf_counter(), clock()
        pb.delta_plan(pb.delta_open(meta["store"] + "/db/bench"), sql)
        print(json.dumps({"cpu": 1000 * (clock() - c0), "wall": 1000 * (time.perf_counter() - w0)}))
        return
    pb.import_system("ours")
    from carbonstore.indexfiles import snapshot as snapshot_mod
    from carbonstore.pruning.table_index import read_snapshot

    touch = [0.0]
    depth = [0]

    def timed(fn: Any) -> Any:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            if depth[0]:
                return fn(*args, **kwargs)
            depth[0] += 1
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                touch[0] += clock() - t0
                depth[0] -= 1
        return inner

    for name in ("_section", "values", "gather", "_list", "offsets"):
        if hasattr(snapshot_mod.Snapshot, name):
            setattr(snapshot_mod.Snapshot, name, timed(getattr(snapshot_mod.Snapshot, name)))
    w0, c0 = time.perf_counter(), clock()
    handle = pb.ours_open(meta)
    c1 = clock()
    read_snapshot(handle)
    c2 = clock()
    touch[0] = 0.0
    pb.ours_plan(handle, sql)
    c3 = clock()
    print(json.dumps({"open": 1000 * (c1 - c0), "snap": 1000 * (c2 - c1), "touch": 1000 * touch[0],
                      "plan": 1000 * (c3 - c2), "cpu": 1000 * (c3 - c0),
                      "wall": 1000 * (time.perf_counter() - w0)}))


def _run(tree: str | None, kind: str, meta_path: str, label: str) -> dict[str, float]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(Path(tree).resolve())
    cmd = [sys.executable, __file__, "--worker", kind, "--meta", meta_path, "--predicate", label]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True, timeout=600)
    return json.loads(res.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trees", default="new=.", help="name=path,... of carbonstore source trees")
    p.add_argument("--segments", default="100,400,1600")
    p.add_argument("--fresh", type=int, default=5, help="fresh processes per system, size and predicate")
    p.add_argument("--data", default=str(HERE / "data"), help="prune_bench's data folder")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--meta", help=argparse.SUPPRESS)
    p.add_argument("--predicate", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.meta, args.predicate)
        return 0
    sys.path.insert(0, str(HERE))
    import prune_bench as pb

    trees = dict(t.split("=", 1) for t in args.trees.split(","))
    rows: list[dict[str, Any]] = []
    head = ["N", "predicate", *[f"{t} open / snap / touch / plan / total" for t in trees], "delta-rs",
            "snapshot (snap + touch) " + " / ".join(trees), "total / delta-rs " + " / ".join(trees),
            "wall " + " / ".join([*trees, "delta-rs"])]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head), flush=True)
    for n in (int(x) for x in args.segments.split(",")):
        meta_path = str(Path(args.data) / f"n{n}_r{pb.ROWS}" / "meta.json")
        meta = json.loads(Path(meta_path).read_text())
        load = [os.getloadavg()[0]]
        for label, _ in pb.predicates(meta):
            got: dict[str, list[dict[str, float]]] = {name: [] for name in [*trees, "delta-rs"]}
            for _ in range(args.fresh):
                for name, tree in trees.items():
                    got[name].append(_run(tree, "ours", meta_path, label))
                got["delta-rs"].append(_run(None, "delta", meta_path, label))
            med = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in got.items()}
            load.append(os.getloadavg()[0])
            rows.append({"segments": n, "predicate": label, "median": med, "runs": got})
            d = med["delta-rs"]
            cells = [" / ".join(f"{med[t][k]:.1f}" for k in ("open", "snap", "touch", "plan", "cpu")) for t in trees]
            print("| " + " | ".join([
                str(n), label, *cells, f"{d['cpu']:.1f}",
                " / ".join(f"{med[t]['snap'] + med[t]['touch']:.1f}" for t in trees),
                " / ".join(f"{med[t]['cpu'] / d['cpu']:.2f}" for t in trees),
                " / ".join(f"{med[t]['wall']:.0f}" for t in [*trees, "delta-rs"])]) + " |", flush=True)
        print(f"# {n} loads: load average (1 min) {min(load):.1f}-{max(load):.1f}", file=sys.stderr, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
