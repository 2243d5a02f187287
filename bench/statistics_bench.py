"""Cost of column statistics during a load, per 1M rows.

    .venv/bin/python bench/statistics_bench.py --rows 1000000

Data: the load benchmark's columns (bench/load_bench.py): a unique long id, an int of 2000
values, a double with 1 % NaN, a date of 2000 values, a string code of 100k values and a
unique ~45-character note. Measured in one process, best of ``--repeat``:

1. ``pyarrow.parquet`` writing the rows (page index on, snappy, 64 MB row groups): the floor
   of what a load task does.
2. ``StatsAccumulator.update`` over the same row groups (what a load task adds).
3. ``write_task`` (the executor side of a load: Parquet, page index, NaN counts,
   .carbonindex) with ``statistics`` on and off.

The ratios printed are statistics time / write time.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

WORDS = np.array(
    ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
)
SCHEMA = "id long not null, qty int, price double, day date, code string, note string"


def make_rows(n: int, seed: int = 42) -> pa.Table:
    rng = np.random.default_rng(seed)
    price = rng.normal(100, 30, n).round(2)
    price[rng.random(n) < 0.01] = np.nan
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "qty": pa.array(rng.integers(-1000, 1000, n).astype(np.int32)),
        "price": pa.array(price),
        "day": pa.array(rng.integers(18000, 20000, n).astype(np.int32)).cast(pa.date32()),
        "code": pa.array(np.char.add("C", rng.integers(0, 100_000, n).astype(str))),
        "note": pa.array(np.char.add(
            np.char.add(WORDS[rng.integers(0, 10, n)], " lorem ipsum dolor sit amet "),
            rng.integers(0, 1 << 40, n).astype(str))),
    })


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    from carbonstore import Store
    from carbonstore.segments.load import parse_load_options, write_settings
    from carbonstore.segments.writer import write_task
    from carbonstore.statistics.accumulator import StatsAccumulator

    rows = make_rows(args.rows)
    per_m = 1_000_000 / args.rows
    tmp = Path(tempfile.mkdtemp(prefix="statsbench-"))
    try:
        def pq_write() -> None:
            pq.write_table(rows, tmp / "plain.parquet", row_group_size=args.rows,
                           write_page_index=True, compression="snappy")

        def stats_only() -> None:
            acc = StatsAccumulator(rows.schema)
            for batch in rows.to_batches(max_chunksize=1 << 20):
                acc.update(batch)
            acc.to_bytes()

        per_column = {}
        for name in rows.column_names:
            def one(name: str = name) -> None:
                acc = StatsAccumulator(rows.select([name]).schema)
                acc.update(rows.select([name]))
            per_column[name] = best(one, args.repeat)

        store = Store(str(tmp / "store"))
        table = store.create_table("bench.stats", SCHEMA)
        base = write_settings(table, "0", parse_load_options(table, None))
        table.paths.sfs.makedirs(base.segment_dir)
        batches = rows.to_batches(max_chunksize=10_000)  # Spark's Arrow batch size

        def task(on: bool) -> Callable[[], object]:
            settings = dataclasses.replace(base, statistics=on)
            return lambda: write_task(batches, settings, task_id=f"{int(on)}{time.time_ns()}")

        t_pq = best(pq_write, args.repeat)
        t_stats = best(stats_only, args.repeat)
        t_off = best(task(False), args.repeat)
        t_on = best(task(True), args.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"rows: {args.rows}; times per 1M rows, best of {args.repeat}")
    print(f"pyarrow.parquet write          {t_pq * per_m:7.3f} s")
    print(f"statistics (all 6 columns)     {t_stats * per_m:7.3f} s   "
          f"= {t_stats / t_pq:6.1%} of the pyarrow write")
    for name, t in per_column.items():
        print(f"  {name:<8} {t * per_m:7.3f} s")
    print(f"write_task, statistics off     {t_off * per_m:7.3f} s")
    print(f"write_task, statistics on      {t_on * per_m:7.3f} s   "
          f"(+{(t_on - t_off) / t_off:6.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
