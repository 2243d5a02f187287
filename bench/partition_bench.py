"""Partitioned tables: write cost of splitting by partition and bucket, and plan cost.

    .venv/bin/python bench/partition_bench.py [--rows 2000000] [--days 365] [--segments 4]

Writes the same lineitem-like rows (no Spark: the executor writer over Arrow batches,
one task per segment) into three tables - plain, partitioned by ``day(l_shipdate)``, and
partitioned plus 8 buckets on ``l_orderkey`` - and prints, per table, the write time and
then the planning time and files kept of a one-day and a one-key predicate (best of 5,
warm driver cache). Ratios are against the plain table in the same run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa

from carbonstore import Store
from carbonstore.pruning.plan import prune
from carbonstore.segments.commit import begin_segment, commit_segment
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import write_task

SCHEMA = "l_orderkey long, l_quantity int, l_price double, l_shipdate date, l_mode string"


def rows(n: int, days: int, seed: int) -> pa.Table:
    rnd = np.random.default_rng(seed)
    start = (dt.date(1995, 1, 1) - dt.date(1970, 1, 1)).days
    return pa.table({
        "l_orderkey": pa.array(rnd.integers(0, 10_000_000, n), pa.int64()),
        "l_quantity": pa.array(rnd.integers(1, 51, n).astype(np.int32)),
        "l_price": pa.array(rnd.random(n) * 1000),
        "l_shipdate": pa.array((start + rnd.integers(0, days, n)).astype(np.int32)).view(pa.date32()),
        "l_mode": pa.array(rnd.choice(["AIR", "MAIL", "SHIP", "RAIL"], n)),
    })


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--segments", type=int, default=4)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="partbench")
    store = Store(root)
    data = [rows(args.rows // args.segments, args.days, s) for s in range(args.segments)]
    key = int(data[0]["l_orderkey"][0].as_py())
    variants = {
        "plain": {},
        "day(l_shipdate)": {"partition_by": "day(l_shipdate)"},
        "day + 8 buckets": {"partition_by": "day(l_shipdate)", "bucket_number": "8",
                            "bucket_columns": "l_orderkey"},
    }
    base: dict[str, float] = {}
    print(f"{args.rows:,} rows, {args.days} days, {args.segments} segments")
    print(f"{'table':<18}{'write s':>9}{'x':>6}  {'predicate':<22}{'plan ms':>9}{'x':>6}"
          f"{'files kept/total':>18}")
    for n, (name, props) in enumerate(variants.items()):
        t = store.create_table(f"t{n}", SCHEMA, properties=props)
        t0 = time.perf_counter()
        for d in data:
            entry, lock = begin_segment(t)
            s = write_settings(t, entry.load_name, parse_load_options(t, {}))
            commit_segment(t, entry.load_name, [write_task(d.to_batches(65536), s, task_id="00000")],
                           partitioning=s.partitioning)
            if lock is not None:
                lock.release()
        write = time.perf_counter() - t0
        base.setdefault("write", write)
        for label, where in (("one day", "l_shipdate = DATE '1995-03-12'"),
                             ("one key", f"l_orderkey = {key}")):
            best = float("inf")
            for _ in range(5):
                t1 = time.perf_counter()
                plan = prune(t, where)
                best = min(best, (time.perf_counter() - t1) * 1000)
            base.setdefault(label, best)
            files = plan.levels["files"]
            first = label == "one day"
            ratio = write / base["write"]
            head = (f"{name:<18}{write:>9.2f}{ratio:>6.2f}" if first else " " * 33)
            kept = f"{files.kept}/{files.total}"
            print(f"{head}  {label:<22}{best:>9.1f}{best / base[label]:>6.2f}{kept:>18}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
