"""Compaction throughput vs a plain Spark read + write of the same Parquet files.

    .venv/bin/python bench/compaction_bench.py --segments 4 --rows 500000

Builds a table of ``--segments`` segments (written with the load writer, no Spark), then on
one SparkSession times, best of ``--repeat``:

* ``plain``   spark.read.parquet(<the segments' files>).write.parquet(tmp)
* ``sorted``  the same with the range repartition + sort on SORT_COLUMNS compaction does
* ``compact`` carbonstore MAJOR compaction on Spark (plan, read, sort, write through the load
  writer with page index and one .carbonindex per task, .carbonindexmerge, commit)

and the driver-side pyarrow merge (``--engine local``) once. Each compaction runs on a fresh
copy of the table. Also prints the index planning time (loading every readable segment's
merge index) before and after compaction. Ratio = peer time / our time (>= 0.8 is the target).
Sources carry statistics as loads store them (the output's are merged from them);
``--no-source-stats`` makes compaction compute them while writing instead.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from carbonstore import Store, Table
from carbonstore.indexfiles.indexfile import load_index
from carbonstore.segments.compaction import compact, segment_data_files, write_segment
from carbonstore.store import load_conf
from carbonstore.store.tablestatus import SUCCESS

SCHEMA = "id long not null, k int, amount double, day date, tag string, note string"


def make_rows(
    start: int, n: int, rng: np.random.Generator, *, stride: int = 1
) -> pa.Table:
    ids = start + np.arange(n, dtype=np.int64) * stride
    rng.shuffle(ids)
    amount = rng.normal(100, 30, n)
    amount[rng.random(n) < 0.01] = np.nan
    return pa.table({
        "id": ids,
        "k": rng.integers(0, 1000, n, dtype=np.int32),
        "amount": amount,
        "day": pa.array(rng.integers(18000, 20000, n, dtype=np.int32)).cast(pa.date32()),
        "tag": pa.array(np.array(["red", "green", "blue", "amber"])[rng.integers(0, 4, n)]),
        "note": pa.array([f"order note {i} for customer {i % 977}" for i in ids.tolist()]),
    })


def build(
    location: str, segments: int, rows: int, *, with_stats: bool = True, overlap: bool = False
) -> Table:
    store = Store(location, conf=load_conf(None))
    table = store.create_table("bench.c", SCHEMA, properties={"sort_columns": "id"})
    rng = np.random.default_rng(7)
    for s in range(segments):
        entry = table.status.allocate()
        data = (make_rows(s, rows, rng, stride=segments) if overlap
                else make_rows(s * rows, rows, rng))
        data = data.sort_by("id")  # a load sorts on SORT_COLUMNS
        out = write_segment(table, entry.load_name, [data.to_batches(max_chunksize=65536)])
        if with_stats:  # as a load does: statistics computed while writing, stored at commit
            from carbonstore.statistics.analyze import store_task_statistics

            store_task_statistics(table, entry.load_name, out.tasks, source="load")
        table.status.set_status(
            entry.load_name, SUCCESS, timestamp=entry.load_start_time + 1,
            row_count=out.row_count, data_size=out.data_size, index_size=out.index_size,
            segment_file=out.segment_file,
        )
    return table


def planning_ms(table: Table) -> float:
    t0 = time.perf_counter()
    fs = table.paths.sfs.fs
    for e in table.status.read().readable:
        load_index(fs, f"{table.paths.segment_dir(e.load_name)}/{e.segment_file}")
    return (time.perf_counter() - t0) * 1000


def best(fn: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=4)
    ap.add_argument("--rows", type=int, default=500_000, help="rows per segment")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=None, help="output tasks (default: auto)")
    ap.add_argument("--overlap", action="store_true",
                    help="interleave the segments' ids (the merge must sort); default: each "
                    "segment holds its own id range, as loads in key order do")
    ap.add_argument("--no-source-stats", action="store_true",
                    help="sources without statistics: compaction computes them while writing")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from carbonstore.spark.compact_job import spark_merger
    from carbonstore.spark.session import get_spark

    work = tempfile.mkdtemp(prefix="compaction-bench-")
    try:
        base = build(f"{work}/base", args.segments, args.rows,
                     with_stats=not args.no_source_stats, overlap=args.overlap)
        files = [p for e in base.status.read().readable for p in segment_data_files(base, e.load_name)]
        total_rows = args.segments * args.rows
        size_mb = sum(e.data_size for e in base.status.read().readable) / 2**20
        spark = get_spark(shuffle_partitions=4)
        n_tasks = args.tasks or spark.sparkContext.defaultParallelism
        spark.read.parquet(*files).write.mode("overwrite").parquet(f"{work}/warm")  # JVM warm-up

        def plain() -> None:
            spark.read.parquet(*files).write.mode("overwrite").parquet(f"{work}/plain")

        def sorted_peer() -> None:
            df = spark.read.parquet(*files)
            df.repartitionByRange(n_tasks, "id").sortWithinPartitions("id").write.mode(
                "overwrite").parquet(f"{work}/sorted")

        copies = iter(range(10_000))

        def ours(engine: str) -> Callable[[], None]:
            def run() -> None:
                dst = f"{work}/copy{next(copies)}"
                shutil.copytree(f"{work}/base", dst)
                table = Store(dst, conf=load_conf(None)).table("bench.c")
                merger = spark_merger(spark, tasks=n_tasks) if engine == "spark" else None
                t0 = time.perf_counter()
                result = compact(table, "major", merger=merger)
                run.elapsed = time.perf_counter() - t0  # type: ignore[attr-defined]
                assert result.merged and result.merged[0].row_count == total_rows
                run.table = table  # type: ignore[attr-defined]
            return run

        def timed(run: Callable[[], None], repeat: int) -> float:
            out = []
            for _ in range(repeat):
                run()
                out.append(run.elapsed)  # type: ignore[attr-defined]
            return min(out)

        t_plain = best(plain, args.repeat)
        t_sorted = best(sorted_peer, args.repeat)
        spark_run = ours("spark")
        t_ours = timed(spark_run, args.repeat)
        local_run = ours("local")
        t_local = timed(local_run, 1)
        before_ms = planning_ms(base)
        after_ms = planning_ms(spark_run.table)  # type: ignore[attr-defined]

        print(f"data: {args.segments} segments x {args.rows:,} rows = {total_rows:,} rows, "
              f"{size_mb:.1f} MB Parquet; Spark {spark.version}, {n_tasks} output tasks; "
              f"{'overlapping' if args.overlap else 'disjoint'} key ranges, source statistics "
              f"{'absent' if args.no_source_stats else 'present'}")
        print(f"{'run':<34}{'seconds':>9}{'Mrows/s':>9}{'peer/ours':>11}")
        for name, t in (
            ("plain spark read+write", t_plain),
            ("spark read+range sort+write", t_sorted),
            ("carbonstore compact (spark)", t_ours),
            ("carbonstore compact (local)", t_local),
        ):
            print(f"{name:<34}{t:>9.2f}{total_rows / t / 1e6:>9.2f}")
        print(f"ratio vs plain read+write:  {t_plain / t_ours:.2f} (target >= 0.8)")
        print(f"ratio vs read+sort+write:   {t_sorted / t_ours:.2f}")
        print(f"local merge vs plain:       {t_plain / t_local:.2f}")
        print(f"index planning: {before_ms:.1f} ms over {args.segments} segments -> "
              f"{after_ms:.1f} ms over 1")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
