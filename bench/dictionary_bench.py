"""Global dictionary benchmark.

Part 1 (pure Python, no JVM): add-values commit time, encode / decode throughput and filter
translation latency for a dictionary of ``--distinct`` values.

Part 2 (``--spark``): a CSV of ``--rows`` rows with 5 long repeated string columns (20-200
distinct values each) loaded into a table with and without ``dictionary_include``: load
time and their ratio (plain / dictionary, target >= 0.7), data size, and a group-by over
the segment's Parquet files through Spark (on surrogates + a decode of the small result,
vs on the strings).

Part 3 (``--commits N``): N commits of 200 new values each, one after the other (p50 / p99
latency), then 4 processes committing N / 4 each at the same time without the OS lock (the
put-if-absent protocol alone) and with it: wall time, lost races retried.

Run: ``python bench/dictionary_bench.py [--distinct 100000] [--spark --rows 300000]
[--commits 400]``.
Numbers are from one run on the local filesystem.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from carbonstore import Store
from carbonstore.dictionary import add_values, clear_cache, decode_batch, load_dictionary
from carbonstore.dictionary import filters as F
from carbonstore.store import load_conf


def _timed(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def pure(store: Store, distinct: int) -> None:
    rng = random.Random(5)
    table = store.create_table("pure", "s string", properties={"dictionary_include": "s"})
    words = [f"{rng.getrandbits(64):016x}-value-{i}" for i in range(distinct)]
    half = distinct // 2
    _, t_first = _timed(add_values, table, "s", pa.array(words[:half]), segment_id="0")
    _, t_second = _timed(add_values, table, "s", pa.array(words), segment_id="1")
    clear_cache()
    d, t_load = _timed(load_dictionary, table, "s")
    rows = pa.array([words[i] for i in np.random.default_rng(1).integers(0, distinct, 1_000_000)])
    surr, t_enc = _timed(d.encode, rows)
    _, t_dec = _timed(d.decode, surr)
    small = pa.array([words[i] for i in np.random.default_rng(2).integers(0, 100, 1_000_000)])
    _, t_enc_small = _timed(d.encode, small)
    d.sort_index()
    _, t_eq = _timed(F.eq, d, words[123])
    _, t_range = _timed(F.range_, d, "4", True, "8", False)
    _, t_prefix = _timed(F.startswith, d, "ab")
    size = Path(d.files.dict_path).stat().st_size
    print(f"dictionary of {distinct} strings ({size / 1e6:.1f} MB .dict)")
    print(f"  add {half} new values            {t_first * 1e3:8.1f} ms")
    print(f"  add {distinct} ({half} new)        {t_second * 1e3:8.1f} ms")
    print(f"  load (cold cache)                {t_load * 1e3:8.1f} ms")
    print(f"  encode 1M rows (any value)       {t_enc * 1e3:8.1f} ms  ({1 / t_enc:.1f} M rows/s)")
    print(f"  encode 1M rows (100 values)      {t_enc_small * 1e3:8.1f} ms")
    print(f"  decode 1M rows                   {t_dec * 1e3:8.1f} ms  ({1 / t_dec:.1f} M rows/s)")
    print(f"  eq / range / startswith          {t_eq * 1e3:.2f} / {t_range * 1e3:.2f} / {t_prefix * 1e3:.2f} ms")


_COMMITTER = """
import sys, time
from carbonstore import Store
from carbonstore.store import load_conf
from carbonstore.dictionary import add_values, writer
location, me, n, lock, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
writer.COURTESY_LOCK = lock == "lock"
table = Store(location, conf=load_conf(None)).table("c")
commit = writer._commit
lost = 0
def counting(*args):
    global lost
    out = commit(*args)
    lost += out is None
    return out
writer._commit = counting
while time.time() < start:
    time.sleep(0.001)
for i in range(n):
    add_values(table, "s", [f"p{me}-{i}-{j}" for j in range(200)], segment_id=f"{me}.{i}")
print(lost)
"""


def commits(store: Store, n: int) -> None:
    import subprocess
    import sys

    table = store.create_table("c", "s string", properties={"dictionary_include": "s"})
    lat = []
    for i in range(n):
        _, t = _timed(add_values, table, "s", [f"v{i}-{j}" for j in range(200)], segment_id=str(i))
        lat.append(t)
    p50, p99 = np.percentile(lat, [50, 99]) * 1e3
    print(f"{n} commits of 200 new values, one writer: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    for mode in ("nolock", "lock"):
        start = time.time() + 3
        procs = [subprocess.Popen([sys.executable, "-c", _COMMITTER, store.location, str(k),
                                   str(n // 4), mode, str(start)], stdout=subprocess.PIPE, text=True)
                 for k in range(4)]
        lost = sum(int(p.communicate()[0].strip()) for p in procs)
        wall = time.time() - start
        clear_cache()
        d = load_dictionary(table, "s")
        assert d.size == len(set(d.values.to_pylist()))
        print(f"4 processes x {n // 4} commits, {'with' if mode == 'lock' else 'without'} the lock: "
              f"{wall:.2f} s ({wall / n * 1e3:.1f} ms per commit), {lost} lost races retried")


def _csv(path: Path, rows: int) -> None:
    rng = np.random.default_rng(3)
    cols: dict[str, pa.Array] = {"id": pa.array(np.arange(rows))}
    for i, n in enumerate((20, 50, 100, 150, 200)):
        pool = np.array([f"column{i}-{'long repeated text ' * 3}{k:04d}" for k in range(n)])
        cols[f"c{i}"] = pa.array(pool[rng.integers(0, n, rows)])
    cols["amount"] = pa.array(rng.normal(size=rows))
    pacsv.write_csv(pa.table(cols), str(path))


def spark_part(store: Store, rows: int, tmp: Path) -> None:
    from pyspark.sql import functions as SF  # noqa: N812

    from carbonstore.spark.load_job import load
    from carbonstore.spark.session import get_spark

    spark = get_spark(master="local[2]", shuffle_partitions=4)
    csv = tmp / "in.csv"
    _csv(csv, rows)
    schema = "id long, c0 string, c1 string, c2 string, c3 string, c4 string, amount double"
    plain = store.create_table("plain", schema)
    dicts = store.create_table("dict", schema, properties={"dictionary_include": "c0,c1,c2,c3,c4"})
    load(plain, str(csv), spark=spark)  # warm-up (JVM, Python workers)
    plain = store.create_table("plain2", schema)
    _, t_plain = _timed(load, plain, str(csv), spark=spark)
    _, t_dict = _timed(load, dicts, str(csv), spark=spark)
    size_plain = store.sfs.tree_size(plain.paths.fact_dir)
    size_dict = store.sfs.tree_size(dicts.paths.fact_dir)

    print(f"load of {rows} rows, 5 string columns of 20-200 values, CSV {csv.stat().st_size / 1e6:.1f} MB")
    print(f"  load time plain / dictionary     {t_plain:.2f} s / {t_dict:.2f} s  ratio {t_plain / t_dict:.2f}")
    print(f"  data size plain / dictionary     {size_plain / 1e6:.2f} MB / {size_dict / 1e6:.2f} MB")

    def group(table):  # type: ignore[no-untyped-def]
        df = spark.read.option("pathGlobFilter", "*.parquet").parquet(table.paths.segment_dir("0"))
        res = df.groupBy("c4").agg(SF.sum("amount").alias("s"), SF.count("*").alias("n"))
        out = res.toArrow()
        if table is dicts:
            out = pa.Table.from_batches([decode_batch(b, table) for b in out.to_batches()])
        return out

    group(plain)
    group(dicts)
    r_plain, t_gp = _timed(group, plain)
    r_dict, t_gd = _timed(group, dicts)
    assert sorted(r_plain.column("c4").to_pylist()) == sorted(r_dict.column("c4").to_pylist())
    print(f"  Spark group-by plain / dictionary {t_gp * 1e3:.0f} ms / {t_gd * 1e3:.0f} ms")
    spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distinct", type=int, default=100_000)
    ap.add_argument("--spark", action="store_true")
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--commits", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"{tmp}/store", conf=load_conf(None))
        pure(store, args.distinct)
        if args.commits:
            commits(store, args.commits)
        if args.spark:
            spark_part(store, args.rows, Path(tmp))


if __name__ == "__main__":
    main()
