"""count / min / max answered from the index, end to end, against reading the data.

Dataset A of bench/prune_bench.py (N loads x 25,000 rows, one file each; generated there
and reused). In one warm process (a SparkSession started first, every variant run once
before timing, then the variants take turns ``--repeat`` times, median):

- ``run_statement(spark, store, sql).collect()`` - the Python API and ``carbonstore sql``'s
  path, through a one-row Spark DataFrame;
- ``answer_statement(store, sql)`` - what ``carbonstore sql`` prints, without Spark;
- peers: ``spark.read.parquet(files)`` with the same statement (Spark answers ``count(*)``
  from the Parquet footers, min/max by reading the column), and delta-rs' count from its
  log (``DeltaTable.get_add_actions()``: the sum of ``num_records``; reused handle) when
  bench/prune_bench.py built the Delta table.

Also the fresh CLI: ``carbonstore sql "SELECT count(*) ..."`` as a new process, wall time
(interpreter start-up and imports included). Usage::

    .venv/bin/python bench/metadata_bench.py --segments 1600 [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _median_ms(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--segments", type=int, default=1600)
    p.add_argument("--rows", type=int, default=25_000)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--no-plain", action="store_true", help="leave out spark.read.parquet (slow)")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import prune_bench

    meta = prune_bench.generate(args.segments, args.rows)
    from carbonstore import Store
    from carbonstore.spark.metadata_answers import answer_statement
    from carbonstore.spark.session import get_spark
    from carbonstore.spark.sql import run_statement

    spark = get_spark()
    store = Store(meta["store"])
    half = args.segments * args.rows // 2
    statements = {
        "count(*)": "SELECT count(*) FROM db.bench",
        "count(*) WHERE id >= half": f"SELECT count(*) FROM db.bench WHERE id >= {half}",
        "min(id), max(ts), count(*)": "SELECT min(id), max(ts), count(*) FROM db.bench",
    }
    delta = Path(meta["root"]) / "delta.done"
    dt_handle = None
    if delta.exists():
        from deltalake import DeltaTable

        dt_handle = DeltaTable(meta["store"] + "/db/bench")
    files = ["file://" + f for f in meta["files"]]
    plain = spark.read.parquet(*files)
    plain.createOrReplaceTempView("plain_bench")
    rows = []
    print(f"load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    for label, sql in statements.items():
        variants: dict[str, Any] = {
            "run_statement().collect()": lambda q=sql: run_statement(spark, store, q).collect(),
            "answer_statement()": lambda q=sql: answer_statement(store, q),
        }
        if label == "count(*)":  # the floor: Spark's cost of any one-row query
            variants["spark.sql('SELECT 1').collect()"] = lambda: spark.sql("SELECT 1").collect()
        if not args.no_plain:
            variants["spark.read.parquet"] = lambda q=sql: spark.sql(
                q.replace("db.bench", "plain_bench")).collect()
        if dt_handle is not None and label == "count(*)":
            variants["delta-rs log count"] = lambda: sum(
                dt_handle.get_add_actions(flatten=True).column("num_records").to_pylist())
        answers = {k: fn() for k, fn in variants.items()}
        times: dict[str, list[float]] = {k: [] for k in variants}
        reps = args.repeat
        for i in range(reps):
            for k, fn in variants.items() if i % 2 == 0 else reversed(list(variants.items())):
                if k == "spark.read.parquet" and i >= 5:
                    continue  # seconds per run: five are enough
                t0 = time.perf_counter()
                fn()
                times[k].append((time.perf_counter() - t0) * 1000)
        for k in variants:
            rows.append((label, k, statistics.median(times[k]), answers[k]))
            print(f"  {label:<28} {k:<28} {statistics.median(times[k]):9.1f} ms  {answers[k]}",
                  file=sys.stderr)
    fresh = []
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "carbonstore.cli", "--store", meta["store"], "sql",
                        "SELECT count(*) FROM db.bench", "--csv"], check=True, env=env,
                       capture_output=True)
        fresh.append((time.perf_counter() - t0) * 1000)
    print("| statement | variant | median ms | answer |\n|---|---|---|---|")
    for label, k, ms, ans in rows:
        print(f"| {label} | {k} | {ms:.1f} | {ans} |")
    print(f"\nfresh process `carbonstore sql \"SELECT count(*) FROM db.bench\"`: "
          f"{statistics.median(fresh):.0f} ms wall (start-up included); load average "
          f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
