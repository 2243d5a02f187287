"""``to_spark(where=)`` with filters mixing terms the index binds and terms it cannot
(``id % 3 = 0``, ``abs(n) > 10``, ...) against plain ``spark.read.parquet`` of the same files
with the same ``where``, in one warm session, interleaved.

    python bench/partial_where_bench.py [--segments 100] [--rounds 7]

Uses dataset A of bench/prune_bench.py (``bench/data/n<segments>_r25000``). Per filter and
side: the median wall ms of ``df.count()`` (planning included: ``to_spark`` / the
``spark.read`` call are inside the timing), and the median CPU ms of this process plus the
JVM's (``/proc/<pid>/stat``), and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from carbonstore import Store  # noqa: E402
from carbonstore.spark.api import to_spark  # noqa: E402
from carbonstore.spark.session import get_spark  # noqa: E402

FILTERS = [
    "id BETWEEN 1000000 AND 1024999 AND id % 3 = 0",   # one segment kept of the bound term
    "cat = 'cat_42' AND n % 2 = 0",                     # prunes little: a full scan
    "v > 0.999 AND abs(n) > 10",                        # NaN rows count (v > x keeps NaN)
    "id < 50000 OR n % 2 = 0",                          # an OR with an unbindable side: no pruning
]


def _jvm_cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    root = Path(__file__).resolve().parent / "data" / f"n{args.segments}_r25000"
    meta = json.loads((root / "meta.json").read_text())
    spark = get_spark(master="local[2]", shuffle_partitions=2)
    pid = int(spark.sparkContext._gateway.jvm.java.lang.ProcessHandle.current().pid())
    # meta.json names the paths it was generated at: read them under this data folder
    table = Store(str(root / "store")).table("db.bench")
    files = ["file://" + str(root) + f[len(meta["root"]):] for f in meta["files"]]

    sides = {
        "ours": lambda w: to_spark(table, spark, where=w).count(),
        "plain": lambda w: spark.read.parquet(*files).where(w).count(),
    }
    for w in FILTERS:  # warm both sides, and show their counts: plain Spark's Parquet
        # filter drops the NaN rows of row groups whose max is <= 0.999 (docs/semantics.md)
        got = {name: run(w) for name, run in sides.items()}
        print(f"{w!r}: rows ours {got['ours']}, plain {got['plain']}")
    print(f"segments {args.segments}, rounds {args.rounds}, load average before "
          f"{os.getloadavg()}")
    for w in FILTERS:
        wall: dict[str, list[float]] = {s: [] for s in sides}
        cpu: dict[str, list[float]] = {s: [] for s in sides}
        for _ in range(args.rounds):
            for name, run in sides.items():  # interleaved
                c0, j0, t0 = time.process_time(), _jvm_cpu_ms(pid), time.perf_counter()
                run(w)
                wall[name].append((time.perf_counter() - t0) * 1000)
                cpu[name].append((time.process_time() - c0) * 1000 + _jvm_cpu_ms(pid) - j0)
        med = {s: (statistics.median(wall[s]), statistics.median(cpu[s])) for s in sides}
        print(f"{w!r}: ours {med['ours'][0]:.0f} ms wall / {med['ours'][1]:.0f} ms CPU, "
              f"plain {med['plain'][0]:.0f} / {med['plain'][1]:.0f}, "
              f"plain/ours wall {med['plain'][0] / med['ours'][0]:.2f}x "
              f"CPU {med['plain'][1] / med['ours'][1]:.2f}x")
    print(f"load average after {os.getloadavg()}")
    spark.stop()


if __name__ == "__main__":
    main()
