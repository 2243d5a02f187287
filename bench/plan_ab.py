"""Planning before / after: two source trees of carbonstore and delta-rs' ``file_uris``, taking turns.

Times what bench/prune_bench.py times (warm: table reopened; reused handle; fresh process,
from table open to plan, imports excluded) over the same data (bench/data, written by
prune_bench), but for several carbonstore source trees - e.g. the code before a change
(``git archive <commit> | tar -x -C /tmp/old``) and the working tree - in turns: every round
runs one measuring process per system in turn, and the fresh processes of all systems
alternate, so a busy spell of the shared machine hits all of them. Usage::

    .venv/bin/python bench/plan_ab.py --trees old=/tmp/old,new=. --segments 100,400,1600

Prints one table row per size and predicate: the median over rounds of each system's
warm / reused / fresh milliseconds, the ratio of each tree to delta-rs, the CPU time of a
reused-handle plan (the same filter again; a second table: a new literal every plan, which
no memo of a whole plan serves) (``time.process_time``, every thread: on a busy shared machine the
wall clock also counts time spent waiting for a core), and whether the trees' survivors
at every level agree (the plans must be the same).
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


def _worker(kind: str, meta_path: str, mode: str, sql: str | None, repeat: int) -> None:
    """Runs inside a measuring process (its PYTHONPATH picks the tree)."""
    sys.path.insert(0, str(HERE))
    import prune_bench as pb

    meta = json.loads(Path(meta_path).read_text())
    pb.ROWS_PER_FILE[0] = meta["rows"]
    pb.import_system(kind)  # imports are start-up, not planning (every system alike)
    open_fn, plan_fn = pb.open_and_plan(kind, meta)
    if mode == "fresh":
        t0 = time.perf_counter()
        plan_fn(open_fn(), sql)
        print(json.dumps((time.perf_counter() - t0) * 1000))
        return
    out = {}
    for label, q in pb.predicates(meta):
        handle = open_fn()
        survivors = plan_fn(handle, q)
        for _ in range(2):
            plan_fn(handle, q)
        warm = []
        reused = []
        cpu = []
        for _ in range(repeat):  # warm and reused alternate too
            t0 = time.perf_counter()
            plan_fn(open_fn(), q)
            warm.append((time.perf_counter() - t0) * 1000)
            t0, c0 = time.perf_counter(), time.process_time()
            plan_fn(handle, q)
            reused.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)  # all threads' CPU: not the waits
        out[label] = {"warm": statistics.median(warm), "reused": statistics.median(reused),
                      "reused_cpu": statistics.median(cpu), "survivors": survivors}
    for label, cpu in new_literal_cpu(meta, open_fn, plan_fn, 4 * repeat).items():
        out[label]["new_cpu"] = cpu
    print(json.dumps(out))


def new_literal_cpu(meta: dict[str, Any], open_fn: Any, plan_fn: Any, plans: int) -> dict[str, float]:
    """Median CPU ms per predicate of ``plans`` plans on one reused handle, a new literal
    each (each text planned once), after 20 untimed ones."""
    handle = open_fn()
    out = {}
    for label, texts in new_literals(meta, 20 + plans).items():
        for q in texts[:20]:
            plan_fn(handle, q)
        cpu = []
        for q in texts[20:]:
            c0 = time.process_time()
            plan_fn(handle, q)
            cpu.append((time.process_time() - c0) * 1000)
        out[label] = statistics.median(cpu)
    return out


def new_literals(meta: dict[str, Any], count: int) -> dict[str, list[str]]:
    """Per predicate, ``count`` filters of its shape with a new literal each (the same list in
    every process): a reused handle planning lookups of other keys, other ranges."""
    import random

    rng = random.Random(7)
    total = meta["n"] * meta["rows"]
    width = total // 100
    gens = {
        "id = x": lambda: f"id = {rng.randrange(total)}",
        "id between (1 %)": lambda: (lambda lo: f"id >= {lo} and id <= {lo + width - 1}")(
            rng.randrange(total - width)),
        "k = key": lambda: f"k = '{rng.getrandbits(63):016x}'",
        "cat = 'cat_42'": lambda: f"cat = 'cat_{rng.randrange(100)}'",  # 100 values: some repeat
        "v > 0.999": lambda: f"v > {rng.uniform(0.99, 0.9999):.6f}",
    }
    return {label: [gen() for _ in range(count)] for label, gen in gens.items()}


def _run(tree: str | None, kind: str, meta_path: str, mode: str, sql: str | None, repeat: int) -> Any:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(Path(tree).resolve())
    cmd = [PY, __file__, "--worker", kind, "--meta", meta_path, "--mode", mode, "--repeat", str(repeat)]
    if sql is not None:
        cmd += ["--sql", sql]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True, timeout=600)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trees", default="new=.", help="name=path,... of carbonstore source trees")
    p.add_argument("--segments", default="100,400,1600")
    p.add_argument("--rounds", type=int, default=3, help="turns of the in-process measurements")
    p.add_argument("--repeat", type=int, default=9, help="plans per in-process measurement")
    p.add_argument("--fresh", type=int, default=5, help="fresh processes per system and predicate")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--meta", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--sql", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.meta, args.mode, args.sql, args.repeat)
        return 0
    sys.path.insert(0, str(HERE))
    import prune_bench as pb

    trees = dict(t.split("=", 1) for t in args.trees.split(","))
    systems: list[tuple[str, str | None, str]] = [(n, path, "ours") for n, path in trees.items()]
    systems.append(("delta-rs", None, "delta"))
    results: list[dict[str, Any]] = []
    for n in (int(x) for x in args.segments.split(",")):
        meta_path = str(pb.DATA / f"n{n}_r{pb.ROWS}" / "meta.json")
        meta = json.loads(Path(meta_path).read_text())
        load = [os.getloadavg()[0]]
        inproc: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in systems}
        for _ in range(args.rounds):
            for name, tree, kind in systems:
                inproc[name].append(_run(tree, kind, meta_path, "inproc", None, args.repeat))
        load.append(os.getloadavg()[0])
        for label, sql in pb.predicates(meta):
            fresh: dict[str, list[float]] = {name: [] for name, _, _ in systems}
            for _ in range(args.fresh):
                for name, tree, kind in systems:
                    fresh[name].append(_run(tree, kind, meta_path, "fresh", sql, 1))
            row: dict[str, Any] = {"segments": n, "predicate": label}
            for name, _, _ in systems:
                runs = inproc[name]
                row[name] = {
                    "warm": statistics.median(r[label]["warm"] for r in runs),
                    "reused": statistics.median(r[label]["reused"] for r in runs),
                    "reused_cpu": statistics.median(r[label]["reused_cpu"] for r in runs),
                    "new_cpu": statistics.median(r[label]["new_cpu"] for r in runs),
                    "fresh": statistics.median(fresh[name]),
                    "survivors": runs[0][label]["survivors"],
                }
            survivors = {json.dumps(row[name]["survivors"], sort_keys=True) for name in trees}
            row["same_plan"] = len(survivors) == 1
            results.append(row)
            cells = "  ".join(f"{name} {row[name]['warm']:.1f}/{row[name]['reused']:.1f}/{row[name]['fresh']:.1f}"
                              f" (cpu {row[name]['reused_cpu']:.2f}, new literal {row[name]['new_cpu']:.2f})"
                              for name, _, _ in systems)
            print(f"  {n} {label:<18} {cells}  same plan: {row['same_plan']}", file=sys.stderr)
        load.append(os.getloadavg()[0])
        print(f"# {n} loads: load average (1 min) {min(load):.1f}-{max(load):.1f}", file=sys.stderr)
        for row in results:
            if row["segments"] == n:
                row["load"] = [min(load), max(load)]
    print(to_markdown(results, list(trees)))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


def to_markdown(results: list[dict[str, Any]], trees: list[str]) -> str:
    head = ["N", "predicate", *[f"{t} warm / reused / fresh" for t in trees], "delta-rs `file_uris`",
            *[f"{t} / delta-rs" for t in trees], "reused CPU ms " + " / ".join([*trees, "delta-rs"]),
            "same plan"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cell(r: dict[str, Any]) -> str:
        return " / ".join(f"{r[k]:.1f}" if r[k] < 100 else f"{r[k]:.0f}" for k in ("warm", "reused", "fresh"))

    for row in results:
        d = row["delta-rs"]
        ratios = [" / ".join(f"{row[t][k] / d[k]:.2f}" for k in ("warm", "reused", "fresh")) for t in trees]
        cpu = " / ".join(f"{row[t]['reused_cpu']:.2f}" for t in [*trees, "delta-rs"])
        lines.append("| " + " | ".join([str(row["segments"]), row["predicate"], *[cell(row[t]) for t in trees],
                                         cell(d), *ratios, cpu, "yes" if row["same_plan"] else "NO"]) + " |")
    head = ["N", "predicate", "new-literal CPU ms " + " / ".join([*trees, "delta-rs"]),
            *[f"{t} / delta-rs" for t in trees]]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in results:
        d = row["delta-rs"]["new_cpu"]
        cpu = " / ".join(f"{row[t]['new_cpu']:.2f}" for t in [*trees, "delta-rs"])
        lines.append("| " + " | ".join([str(row["segments"]), row["predicate"], cpu,
                                         *[f"{row[t]['new_cpu'] / d:.2f}" for t in trees]]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
