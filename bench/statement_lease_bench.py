"""Cost of statement leases: a small DELETE and an index rebuild, code before vs after.

A statement lease (store/leases.py) adds to each DELETE / UPDATE / MERGE and each rebuilt
segment: one heartbeat write, a renewer thread, a tombstone check and one existence check
per written delta at commit, and the heartbeat's removal. This measures that against the
same statements without it, each tree in its own fresh worker processes, interleaved
(before, after, before, ...), on a local table of ``--segments`` segments of ``--rows``
rows each (written by the load task without Spark). Per statement: median wall ms and CPU
ms (``time.process_time``, every thread of the process) over ``--statements`` statements
per round, then the median over ``--rounds`` rounds.

Usage::

    .venv/bin/python bench/statement_lease_bench.py --trees before=/tmp/before,after=. \\
        [--segments 10] [--rows 20000] [--statements 40] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

_WORKER = r"""
import json, sys, tempfile, time, statistics
import pyarrow as pa
from carbonstore import Store
from carbonstore.segments.compaction import write_segment
from carbonstore.segments.dml import delete_rows
from carbonstore.segments.rebuild import rebuild_indexes
from carbonstore.store.tablestatus import SUCCESS

segments, rows, statements = map(int, sys.argv[1:4])
t = Store(tempfile.mkdtemp(dir=sys.argv[4])).create_table("db.t", "id long not null, v double")
for s in range(segments):
    ids = list(range(s * rows, (s + 1) * rows))
    e = t.status.allocate()
    out = write_segment(t, e.load_name, [pa.table({"id": pa.array(ids, pa.int64()),
                                                   "v": pa.array([i * 0.5 for i in ids])}).to_batches()])
    t.status.set_status(e.load_name, SUCCESS, timestamp=e.load_start_time + 1, row_count=out.row_count,
                        data_size=out.data_size, index_size=out.index_size, segment_file=out.segment_file)
res = {}
for kind in ("delete", "rebuild"):
    wall, cpu = [], []
    for i in range(statements):
        w0, c0 = time.perf_counter(), time.process_time()
        if kind == "delete":
            seg = i % segments
            delete_rows(t, f"id = {seg * rows + i}")
        else:
            rebuild_indexes(t, [str(i % segments)])
        wall.append((time.perf_counter() - w0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    res[kind] = [statistics.median(wall), statistics.median(cpu)]
print(json.dumps(res))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", required=True, help="name=path,name=path")
    ap.add_argument("--segments", type=int, default=10)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--statements", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    out: dict[str, dict[str, list[list[float]]]] = {n: {} for n in trees}
    cpu0 = os.times()
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for name, path in trees.items():
                env = {**os.environ, "PYTHONPATH": os.path.abspath(path)}
                proc = subprocess.run(
                    [sys.executable, "-c", _WORKER, str(args.segments), str(args.rows),
                     str(args.statements), tmp],
                    env=env, capture_output=True, text=True, timeout=600, check=True)
                for kind, v in json.loads(proc.stdout.strip().splitlines()[-1]).items():
                    out[name].setdefault(kind, []).append(v)
    load = os.getloadavg()
    spent = os.times()
    print(f"segments {args.segments} x {args.rows} rows, {args.statements} statements x "
          f"{args.rounds} rounds; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"worker CPU {spent.children_user + spent.children_system - cpu0.children_user - cpu0.children_system:.1f} s")
    print(f"{'tree':8} {'statement':8} {'wall ms':>9} {'CPU ms':>8}")
    for name, kinds in out.items():
        for kind, vals in kinds.items():
            wall = statistics.median(v[0] for v in vals)
            cpu = statistics.median(v[1] for v in vals)
            print(f"{name:8} {kind:8} {wall:9.2f} {cpu:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
