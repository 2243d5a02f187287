"""Reused-handle plans with a new literal every plan: CPU per plan of several source trees, in turns.

What ``bench/plan_ab.py`` reports in its second table (``new_literals``: 20 filters planned
first, then ``--plans`` timed, each text planned once, ``time.process_time`` median), with
more processes per tree and optionally more plans per process, and nothing else measured in
between: every turn runs one process per tree in turn, so a busy spell of the shared machine
hits all of them. delta-rs' ``file_uris`` may be one of the systems (``--delta``). Usage::

    .venv/bin/python bench/new_literal_ab.py --trees before=/tmp/before,after=. --segments 100 \\
        --turns 5 --plans 36 --delta

Prints per size and predicate the median over turns of each system's median CPU ms per plan,
and each tree's ratio to delta-rs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _worker(kind: str, meta_path: str, plans: int) -> None:

    sys.path.insert(0, str(HERE))
    import plan_ab
    import prune_bench as pb

    meta = json.loads(Path(meta_path).read_text())
    pb.ROWS_PER_FILE[0] = meta["rows"]
    pb.import_system(kind)
    open_fn, plan_fn = pb.open_and_plan(kind, meta)
    out = plan_ab.new_literal_cpu(meta, open_fn, plan_fn, plans)
    print(json.dumps(out))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trees", default="new=.", help="name=path,... of carbonstore source trees")
    p.add_argument("--segments", default="100")
    p.add_argument("--turns", type=int, default=5, help="processes per system")
    p.add_argument("--plans", type=int, default=36, help="timed plans per predicate and process")
    p.add_argument("--delta", action="store_true", help="also delta-rs' file_uris")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--meta", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.meta, args.plans)
        return 0
    sys.path.insert(0, str(HERE))
    import prune_bench as pb

    systems: list[tuple[str, str | None, str]] = [
        (name, path, "ours") for name, path in (t.split("=", 1) for t in args.trees.split(","))]
    if args.delta:
        systems.append(("delta-rs", None, "delta"))
    for n in (int(x) for x in args.segments.split(",")):
        meta_path = str(pb.DATA / f"n{n}_r{pb.ROWS}" / "meta.json")
        load = [os.getloadavg()[0]]
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in systems}
        for _ in range(args.turns):
            for name, tree, kind in systems:
                env = dict(os.environ)
                if tree is not None:
                    env["PYTHONPATH"] = str(Path(tree).resolve())
                cmd = [sys.executable, __file__, "--worker", kind, "--meta", meta_path,
                       "--plans", str(args.plans)]
                res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True, timeout=600)
                runs[name].append(json.loads(res.stdout.strip().splitlines()[-1]))
        load.append(os.getloadavg()[0])
        print(f"# {n} loads, {args.turns} processes per system, {args.plans} plans per predicate each; "
              f"load average (1 min) {min(load):.1f}-{max(load):.1f}")
        for label in runs[systems[0][0]][0]:
            med = {name: statistics.median(r[label] for r in rs) for name, rs in runs.items()}
            cells = " / ".join(f"{med[name]:.3f}" for name, _, _ in systems)
            ratios = ""
            if args.delta:
                ratios = "  " + " ".join(f"{name} {med[name] / med['delta-rs']:.2f}x"
                                         for name, _, kind in systems if kind == "ours")
            print(f"| {n} | {label} | {cells} |{ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
