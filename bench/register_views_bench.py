"""``spark.sql`` over :func:`carbonstore.spark.sql.register`'s views: the SQL view over a
catalog table (analyzed per statement, sees every new version) against the temp view over
one ``spark.read.format("carbonstore").load()`` relation it replaced (planned once: stale),
interleaved in one run; also ``register`` itself.

    python bench/register_views_bench.py [--loads 20] [--rows 20000] [--rounds 7]

Prints the median seconds per ``SELECT count(*)`` / ``SELECT city, sum(v) ... GROUP BY``
statement of each view and the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from carbonstore import Store  # noqa: E402
from carbonstore.spark.session import get_spark, register_data_source  # noqa: E402
from carbonstore.spark.sql import register  # noqa: E402
from carbonstore.store import load_conf  # noqa: E402
from tests.indexfiles.segbuild import add_segments  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--loads", type=int, default=20)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="register-bench-")
    store = Store(os.path.join(root, "store"), conf=load_conf(None))
    t = store.create_table("db.t", "id long not null, city string, v double")
    parts = []
    for k in range(args.loads):
        ids = np.arange(k * args.rows, (k + 1) * args.rows)
        parts.append(pa.table({"id": ids, "city": [f"c{i % 16}" for i in ids], "v": ids / 3}))
    add_segments(t, parts)
    spark = get_spark(master="local[2]", shuffle_partitions=2)
    register_data_source(spark)
    t0 = time.perf_counter()
    register(spark, store=store, tables=["db.t"])
    t_register = time.perf_counter() - t0
    t0 = time.perf_counter()
    spark.read.format("carbonstore").option("store", store.location).load("db.t") \
        .createOrReplaceTempView("db_t_onerelation")
    t_old = time.perf_counter() - t0
    statements = {
        "count": "SELECT count(*) FROM {v}",
        "group by": "SELECT city, sum(v) FROM {v} GROUP BY city",
    }
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for view in ("db_t", "db_t_onerelation"):  # interleaved
            for label, text in statements.items():
                t0 = time.perf_counter()
                spark.sql(text.format(v=view)).collect()
                times.setdefault((label, view), []).append(time.perf_counter() - t0)
    print(f"loads={args.loads} rows/load={args.rows} rounds={args.rounds} "
          f"register={t_register:.3f}s (one-relation view: {t_old:.3f}s) loadavg={os.getloadavg()}")
    for (label, view), ts in times.items():
        print(f"{label:9s} {view:18s} median {statistics.median(ts):.3f}s min {min(ts):.3f}s")
    spark.stop()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
