"""Where ``run_statement`` spends its time on TPC-H, phase by phase (driver side, before collect).

Wraps the functions ``carbonstore.spark.sql.run_statement`` calls with timers and runs each
query four times (the first, ``cold``, is the statement's first run in the session); per
run it prints ``run_statement`` (everything before the first Spark job), ``collect`` and
the time inside each phase: ``answer_frame`` (index answers), ``plan_statement``
(sqlglot), ``_scan_view`` (an occurrence's view; on a miss ``scan_frame``: binding,
pruning, ``spark.read.parquet``'s file listing, ``not_null_relation``, ``create_view``)
and ``run_sql`` (``spark.sql``: Spark's parse and analysis, paid by plain Spark too).
With ``--plain``, each run is followed by the same statement over ``spark.read.parquet``
temp views (``spark.sql`` and ``collect``). Uses the data of bench/tpch_bench.py. Usage::

    .venv/bin/python bench/tpch_phases.py --sf 0.1 --queries 14,16,22,6 [--plain]
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

T: dict[str, float] = collections.defaultdict(float)


def _wrap(owner: Any, name: str, label: str) -> None:
    f = getattr(owner, name)

    @functools.wraps(f)
    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            T[label] += time.perf_counter() - t0

    setattr(owner, name, timed)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sf", type=float, default=0.1)
    p.add_argument("--segments", type=int, default=4)
    p.add_argument("--queries", default="14,16,22,6")
    p.add_argument("--plain", action="store_true",
                   help="also time plain spark.sql over spark.read.parquet temp views after each run")
    p.add_argument("--data", help="directory of the generated data (as bench/tpch_bench.py)")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import sqlglot
    import tpch_bench
    from pyspark.sql import SparkSession

    import carbonstore.spark.api as api
    import carbonstore.spark.metadata_answers as answers
    import carbonstore.spark.native as native
    import carbonstore.spark.queries as csql
    from carbonstore import Store
    from carbonstore.spark.session import get_spark

    _wrap(answers, "answer_frame", "answer_frame")
    _wrap(csql, "plan_statement", "plan_statement")  # run_statement's own name for it
    _wrap(csql, "_scan_view", "_scan_view")
    _wrap(api, "scan_frame", "scan_frame")
    _wrap(api, "prune", "prune")
    _wrap(native, "native_frame", "native_frame")
    _wrap(native, "not_null_relation", "not_null_relation")
    from pyspark.sql.classic.dataframe import DataFrame

    _wrap(DataFrame, "createOrReplaceGlobalTempView", "create_view")
    _wrap(api, "run_sql", "run_sql")
    meta = tpch_bench.generate(args.sf, args.segments, args.data)
    SparkSession.builder.config("spark.driver.memory", "4g").config(
        "spark.sql.shuffle.partitions", "4").master("local[*]").getOrCreate()
    spark = get_spark()
    store = Store(meta["store"])
    if args.plain:
        for name, paths in meta["files"].items():
            spark.read.parquet(*paths).createOrReplaceTempView(name)
    for n in (int(q) for q in args.queries.split(",")):
        statement = sqlglot.transpile(meta["queries"][str(n)], read="duckdb", write="spark")[0]
        for rep in ("cold", 0, 1, 2):  # cold: the statement's first run in this session
            T.clear()
            t0 = time.perf_counter()
            df = csql.run_statement(spark, store, statement)
            t1 = time.perf_counter()
            df.collect()
            t2 = time.perf_counter()
            line = (f"Q{n} run {rep}: run_statement {1000 * (t1 - t0):.0f} ms, collect "
                    f"{1000 * (t2 - t1):.0f} ms | "
                    + ", ".join(f"{k} {1000 * v:.0f}" for k, v in T.items()))
            if args.plain:
                t0 = time.perf_counter()
                df = spark.sql(statement)
                t1 = time.perf_counter()
                df.collect()
                t2 = time.perf_counter()
                line += (f" || plain: spark.sql {1000 * (t1 - t0):.0f} ms, collect "
                         f"{1000 * (t2 - t1):.0f} ms")
            print(line, flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
