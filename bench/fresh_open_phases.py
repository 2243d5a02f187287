"""Fresh-process open + plan by phase: source trees taking turns, one process per measurement.

Each measurement is one fresh process (imports done first, as bench/open_bench.py does) that
opens prune_bench's table and plans one predicate, with ``time.process_time`` wrappers around
the phases of the open and of the snapshot's first touch. Phases nest (``open`` holds
``schema`` and ``dropped``, ``snap.open`` its core section's ``sec.read``), so the columns do
not add up. Prints the median CPU ms of each phase per tree::

    .venv/bin/python bench/fresh_open_phases.py --trees before=/tmp/before,after=. \\
        --data bench/data --segments 1600 --predicate "id = x" --rounds 9

Phases: ``store`` = ``Store(...)`` (conf, file system); ``schema`` = the schema and its log;
``dropped`` = the latest tablestatus version found and decoded (the table's entries);
``open`` = ``Store.table``; ``ts.read`` = the plan's tablestatus read; ``snap.open`` = the index
snapshot's directory and core section; ``view`` = the plan's table view; ``sec.read`` =
sections read, verified and opened; ``sec.check`` = the structure checks of a column's
sections; ``flat`` = flat arrays decoded; ``total`` = open + plan.
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


def _worker(meta_path: str, label: str) -> None:
    sys.path.insert(0, str(HERE))
    import prune_bench as pb

    meta = json.loads(Path(meta_path).read_text())
    pb.ROWS_PER_FILE[0] = meta["rows"]
    pb.import_system("ours")
    sql = dict(pb.predicates(meta))[label]
    from fresh_phases import _wrap  # process-time seconds per phase

    import carbonstore.indexfiles.snapshot as snap
    import carbonstore.indexfiles.snapshot_file as snap_file
    import carbonstore.pruning.table_index as ti
    import carbonstore.store.table as table
    import carbonstore.store.tablestatus as ts

    acc: dict[str, float] = {}
    for owner, name, phase in [
        (table.Store, "__init__", "store"), (table.Store, "_open", "schema"),
        (ts.TableStatus, "dropped", "dropped"), (table.Store, "table", "open"),
        (ts.TableStatus, "read", "ts.read"), (ti, "read_snapshot", "snap.open"),
        (ti, "TableIndex", "view"), (snap_file.SnapshotFile, "read", "sec.read"),
        (snap.Snapshot, "_check_chunk", "sec.check"), (snap.Snapshot, "values", "flat"),
    ]:
        _wrap(acc, owner, name, phase)
    t = time.process_time()
    pb.ours_plan(pb.ours_open(meta), sql)
    acc["total"] = time.process_time() - t
    print(json.dumps({phase: seconds * 1e3 for phase, seconds in acc.items()}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trees", required=True, help="label=tree,...")
    parser.add_argument("--data", default=str(HERE / "data"))
    parser.add_argument("--segments", default="1600")
    parser.add_argument("--predicate", default="id = x")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    trees = [item.split("=", 1) for item in args.trees.split(",")]
    print(f"load average at start: {os.getloadavg()}; predicate {args.predicate!r}")
    for n in [int(x) for x in args.segments.split(",")]:
        meta = str(Path(args.data, f"n{n}_r25000", "meta.json"))
        got: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
        for _ in range(args.rounds):
            for label, tree in trees:
                env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
                out = subprocess.run([sys.executable, __file__, "--worker", meta, args.predicate],
                                     env=env, check=True, capture_output=True, text=True,
                                     timeout=300).stdout
                got[label].append(json.loads(out.strip().splitlines()[-1]))
        print(f"{n} loads, median CPU ms of {args.rounds} fresh processes:")
        for label, rows in got.items():
            keys = list(rows[0])
            print(f"  {label:<8} " + "  ".join(
                f"{k} {statistics.median(r.get(k, 0.0) for r in rows):.2f}" for k in keys))
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3])
    else:
        main()
