"""Planning time of two source trees taking turns: the code before a change and after it.

Each round runs one process per tree (in alternating order), each timing on bench/prune_bench
data (bench/data/n<N>_r25000, made by bench/prune_bench.py): the first plan after opening
the table (fresh: imports done before, as prune_bench's fresh process), the median of
``--plans`` plans with the table reopened (warm) and with one handle (reused). The median of
the rounds is printed per tree, with the survivors at every level (they must be equal).
Usage::

    .venv/bin/python bench/plan_ab.py --before /tmp/old-tree --after . --segments 400,1600 \\
        --predicate "k = key" --rounds 5
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

HERE = Path(__file__).resolve().parent
TABLE = "db.bench"


def _where(meta: dict[str, object], predicate: str) -> str:
    total = int(meta["n"]) * int(meta["rows"])  # type: ignore[call-overload]
    return {
        "k = key": f"k = '{meta['key']}'",
        "id = x": f"id = {total // 2 + 123}",
        "cat_42": "cat = 'cat_42'",
        "v > 0.999": "v > 0.999",
    }[predicate]


def _child(meta_path: str, predicate: str, plans: int) -> None:
    import sqlglot.dialects.spark  # noqa: F401 - imports are start-up, not planning

    from carbonstore import Store
    from carbonstore.pruning.plan import prune

    meta = json.loads(Path(meta_path).read_text())
    where = _where(meta, predicate)
    t0 = time.perf_counter()
    plan = prune(Store(meta["store"]).table(TABLE), where)
    fresh = (time.perf_counter() - t0) * 1000
    warm, reused = [], []
    for _ in range(plans):
        t0 = time.perf_counter()
        prune(Store(meta["store"]).table(TABLE), where)
        warm.append((time.perf_counter() - t0) * 1000)
    handle = Store(meta["store"]).table(TABLE)
    for _ in range(plans):
        t0 = time.perf_counter()
        prune(handle, where)
        reused.append((time.perf_counter() - t0) * 1000)
    kept = {k: v.kept for k, v in plan.levels.items()}
    print(json.dumps({"fresh": fresh, "warm": statistics.median(warm), "reused": statistics.median(reused),
                      "kept": kept}))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--segments", default="400,1600")
    p.add_argument("--predicate", action="append")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--plans", type=int, default=7)
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args.child[0], args.child[1], int(args.child[2]))
        return
    trees = {"before": str(Path(args.before).resolve()), "after": str(Path(args.after).resolve())}
    print(f"load average at start: {os.getloadavg()}", file=sys.stderr)
    for n in [int(x) for x in args.segments.split(",")]:
        meta_path = str(HERE / "data" / f"n{n}_r25000" / "meta.json")
        for predicate in args.predicate or ["k = key"]:
            got: dict[str, list[dict[str, object]]] = {k: [] for k in trees}
            for r in range(args.rounds):
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                for name in order:
                    env = {**os.environ, "PYTHONPATH": trees[name]}
                    out = subprocess.run(
                        [sys.executable, __file__, "--before", "-", "--after", "-", "--child", meta_path,
                         predicate, str(args.plans)],
                        env=env, capture_output=True, text=True, check=True, cwd=trees[name])
                    got[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            for name, runs in got.items():
                med = {k: statistics.median(float(r[k]) for r in runs)  # type: ignore[arg-type]
                       for k in ("warm", "reused", "fresh")}
                kept = {json.dumps(r["kept"], sort_keys=True) for r in runs}
                print(f"| {n} | {predicate} | {name} | {med['warm']:.1f} / {med['reused']:.1f} / "
                      f"{med['fresh']:.1f} | {' '.join(sorted(kept))} |")
    print(f"load average at end: {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
