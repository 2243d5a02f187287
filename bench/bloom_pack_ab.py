"""Bloom-column lookups (`k = key`) before / after the bloom pack, against delta-rs, taking turns.

Over bench/data (prune_bench's tables; the "after" tree needs a bloom pack there, written by
``--refresh``, so point bench/data at a copy, never at shared data), every round runs, for
each system in turn, one fresh process (table open + plan, imports excluded) and one
process planning on a reused handle; wall clock and CPU time (``time.process_time``) are
taken in the measuring process. Usage::

    .venv/bin/python bench/bloom_pack_ab.py --trees before=/tmp/before,after=. --segments 100,400,1600

``--refresh`` first rewrites each table's index snapshot and bloom pack with the "after"
tree (twice: built from the merge indexes, then copied from the previous pack) and prints
the time and the pack's size.
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
PY = sys.executable
SQL_LABEL = "k = key"


def _worker(kind: str, meta_path: str, mode: str, repeat: int) -> None:
    sys.path.insert(0, str(HERE))
    import prune_bench as pb

    meta = json.loads(Path(meta_path).read_text())
    pb.ROWS_PER_FILE[0] = meta["rows"]
    pb.import_system(kind)
    sql = dict(pb.predicates(meta))[SQL_LABEL]
    open_fn, plan_fn = pb.open_and_plan(kind, meta)
    if mode == "fresh":
        t0, c0 = time.perf_counter(), time.process_time()
        survivors = plan_fn(open_fn(), sql)
        print(json.dumps({"wall": (time.perf_counter() - t0) * 1000, "cpu": (time.process_time() - c0) * 1000,
                          "survivors": survivors}))
        return
    handle = open_fn()
    for _ in range(2):
        plan_fn(handle, sql)
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        plan_fn(handle, sql)
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    print(json.dumps({"wall": statistics.median(wall), "cpu": statistics.median(cpu)}))


def _refresh(meta_path: str) -> None:
    sys.path.insert(0, str(HERE))
    import prune_bench as pb

    from carbonstore.pruning.bloom_pack_write import write_bloom_pack
    from carbonstore.pruning.cache import clear_cache
    from carbonstore.pruning.segment_blooms import bloom_pack_names
    from carbonstore.pruning.table_index import (
        readable_segments,
        refresh_index_snapshot,
        table_index,
    )

    meta = json.loads(Path(meta_path).read_text())
    t = pb.ours_open(meta)
    refresh_index_snapshot(t)  # a snapshot over every segment (and a pack)
    folder = t.paths.index_snapshot_dir
    for name in bloom_pack_names(t):  # first: every segment from its merge index
        os.remove(f"{folder}/{name}")
    for how in ("from merge indexes", "copied from the previous pack"):
        clear_cache()
        view = table_index(t, readable_segments(t.status.read()))
        t0, c0 = time.perf_counter(), time.process_time()
        name = write_bloom_pack(t, view)
        wall, cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
        size = os.path.getsize(f"{folder}/{name}")
        print(f"  {len(view.entries)} segments: pack {how}: {wall:.0f} ms (CPU {cpu:.0f} ms), "
              f"{size / 2**20:.1f} MiB", file=sys.stderr)


def _run(tree: str | None, args: list[str]) -> Any:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(Path(tree).resolve())
    res = subprocess.run([PY, __file__, *args], capture_output=True, text=True, env=env, check=True, timeout=600)
    return json.loads(res.stdout.strip().splitlines()[-1]) if res.stdout.strip() else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trees", default="after=.", help="name=path,... of carbonstore source trees")
    p.add_argument("--segments", default="100,400,1600")
    p.add_argument("--rounds", type=int, default=7, help="fresh + reused processes per system")
    p.add_argument("--repeat", type=int, default=9, help="plans per reused-handle measurement")
    p.add_argument("--refresh", action="store_true", help="rewrite the snapshot and bloom pack first")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--meta", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker == "refresh":
        _refresh(args.meta)
        return 0
    if args.worker:
        _worker(args.worker, args.meta, args.mode, args.repeat)
        return 0
    sys.path.insert(0, str(HERE))
    import prune_bench as pb

    trees = dict(t.split("=", 1) for t in args.trees.split(","))
    systems = [(n, path, "ours") for n, path in trees.items()] + [("delta-rs", None, "delta")]
    rows = []
    for n in (int(x) for x in args.segments.split(",")):
        meta_path = str(pb.DATA / f"n{n}_r{pb.ROWS}" / "meta.json")
        if args.refresh:
            env = dict(os.environ, PYTHONPATH=str(Path(list(trees.values())[-1]).resolve()))
            subprocess.run([PY, __file__, "--worker", "refresh", "--meta", meta_path], env=env, check=True)
        load = [os.getloadavg()[0]]
        got: dict[str, dict[str, list[float]]] = {s: {"fw": [], "fc": [], "rw": [], "rc": []} for s, _, _ in systems}
        survivors = {}
        for _ in range(args.rounds):
            for name, tree, kind in systems:
                f = _run(tree, ["--worker", kind, "--meta", meta_path, "--mode", "fresh"])
                got[name]["fw"].append(f["wall"])
                got[name]["fc"].append(f["cpu"])
                survivors[name] = f["survivors"]
            for name, tree, kind in systems:
                r = _run(tree, ["--worker", kind, "--meta", meta_path, "--mode", "reused",
                                "--repeat", str(args.repeat)])
                got[name]["rw"].append(r["wall"])
                got[name]["rc"].append(r["cpu"])
        load.append(os.getloadavg()[0])
        med = {s: {k: statistics.median(v) for k, v in d.items()} for s, d in got.items()}
        same = len({json.dumps(survivors[t], sort_keys=True) for t in trees}) == 1
        rows.append((n, med, same, (min(load), max(load))))
        cells = "  ".join(f"{s} fresh {m['fw']:.1f} (cpu {m['fc']:.1f}) reused {m['rw']:.2f} (cpu {m['rc']:.2f})"
                          for s, m in med.items())
        print(f"  {n}: {cells}  same plan: {same}  load {min(load):.1f}-{max(load):.1f}", file=sys.stderr)
    names = [s for s, _, _ in systems]
    head = ["N", *[f"{s} fresh wall (CPU)" for s in names], *[f"{t} / delta-rs fresh wall (CPU)" for t in trees],
            *[f"{s} reused wall (CPU)" for s in names], "same plan", "load"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for n, med, same, (lo, hi) in rows:
        d = med["delta-rs"]
        print("| " + " | ".join([
            str(n), *[f"{med[s]['fw']:.1f} ({med[s]['fc']:.1f})" for s in names],
            *[f"{med[t]['fw'] / d['fw']:.2f} ({med[t]['fc'] / d['fc']:.2f})" for t in trees],
            *[f"{med[s]['rw']:.2f} ({med[s]['rc']:.2f})" for s in names],
            "yes" if same else "NO", f"{lo:.1f}-{hi:.1f}"]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
