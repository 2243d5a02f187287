"""Opening a table in a fresh process: carbonstore source trees and delta-rs, taking turns.

Each measurement is one fresh process (imports excluded: they are start-up, the same for
every open) that times ``Store(...).table(...)`` (open) and then ``prune`` of one predicate
(plan), wall clock and CPU (``time.process_time``); delta-rs' process times
``DeltaTable(...)`` + ``file_uris(...)`` of the same predicate. Every round runs one process
per system in turn, so a busy spell of the shared machine hits all of them. A system is
``label=tree@data``: a carbonstore source tree and a folder of prune_bench data (its
``nN_r25000/meta.json``), e.g. the code before a change on the data as written before, and
the working tree on the same data and on a copy whose tablestatus is re-encoded::

    .venv/bin/python bench/open_bench.py --segments 100,400,1600 --rounds 15 \\
        --systems before=/tmp/old@bench/data,after=.@bench/data,after-cols=.@/tmp/cols

Prints, per size, the median (and lowest) open and open+plan milliseconds and CPU time of
each system, and delta-rs' fresh open+plan on the first system's data.
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


def _worker(kind: str, meta_path: str, label: str) -> None:
    """Runs inside a measuring process (its PYTHONPATH picks the tree)."""
    sys.path.insert(0, str(HERE))
    import prune_bench as pb

    meta = json.loads(Path(meta_path).read_text())
    pb.ROWS_PER_FILE[0] = meta["rows"]
    pb.import_system(kind)
    sql = dict(pb.predicates(meta))[label]
    t0, c0 = time.perf_counter(), time.process_time()
    if kind == "delta":
        pb.delta_plan(pb.delta_open(meta["store"] + "/db/bench"), sql)
        t1, c1 = t0, c0
    else:
        handle = pb.ours_open(meta)
        t1, c1 = time.perf_counter(), time.process_time()
        pb.ours_plan(handle, sql)
    t2, c2 = time.perf_counter(), time.process_time()
    print(json.dumps({"open": (t1 - t0) * 1e3, "open_cpu": (c1 - c0) * 1e3,
                      "total": (t2 - t0) * 1e3, "total_cpu": (c2 - c0) * 1e3}))


def _run(kind: str, tree: str, meta_path: str, label: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
    out = subprocess.run([sys.executable, __file__, "--worker", kind, meta_path, label],
                         env=env, check=True, capture_output=True, text=True, timeout=300).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--systems", required=True, help="label=tree@data,...")
    parser.add_argument("--segments", default="100,400,1600")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--predicate", default="cat = 'cat_42'")
    args = parser.parse_args()
    systems = []
    for item in args.systems.split(","):
        label, _, rest = item.partition("=")
        tree, _, data = rest.partition("@")
        systems.append((label, tree, Path(data)))
    print(f"load average at start: {os.getloadavg()}; predicate {args.predicate!r}")
    for n in [int(x) for x in args.segments.split(",")]:
        got: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in systems}
        got["delta-rs"] = []
        for _ in range(args.rounds):
            for label, tree, data in systems:
                got[label].append(_run("ours", tree, str(data / f"n{n}_r25000/meta.json"),
                                       args.predicate))
            first = systems[0]
            got["delta-rs"].append(_run("delta", first[1], str(first[2] / f"n{n}_r25000/meta.json"),
                                        args.predicate))
        delta = statistics.median(r["total"] for r in got["delta-rs"])
        print(f"\n{n} loads ({args.rounds} rounds, load average now {os.getloadavg()[0]:.2f}): "
              "median (min) ms")
        print(f"{'system':<12} {'open':>14} {'open cpu':>9} {'open+plan':>15} {'cpu':>7} {'vs delta-rs':>11}")
        for label, rows in got.items():
            def med(key: str, rows: list[dict[str, float]] = rows) -> str:
                vals = [r[key] for r in rows]
                return f"{statistics.median(vals):.1f} ({min(vals):.1f})"
            total = statistics.median(r["total"] for r in rows)
            print(f"{label:<12} {med('open'):>14} {statistics.median(r['open_cpu'] for r in rows):>9.1f} "
                  f"{med('total'):>15} {statistics.median(r['total_cpu'] for r in rows):>7.1f} "
                  f"{total / delta:>10.2f}x")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
