"""Row-level DML benchmark: DELETE with delete deltas vs copy-on-write, scan overhead of
deleted rows, MERGE vs delta-rs.

Dataset: ``--rows`` rows (default 10M) in ``--segments`` segments (default 10) of one file
each, written by the product's load task without Spark (``write_segment``): ``id`` long
increasing, ``k`` a 16-hex key, ``cat`` one of 100 values, ``v`` double; cached under
bench/data/dml_<rows> (a pristine copy is cloned for each run, so runs do not see each
other's deltas). Measured, each median of ``--repeat``:

1. DELETE of 0.01 % of the rows (``id`` in one range: rows of one data file; and
   ``id % 10000 = 7``: rows of every file) - the DELETE commit (plan, match, delta write,
   tablestatus version) vs a copy-on-write rewrite of exactly the files it touched (read,
   drop the rows, write the file again with the same Parquet settings; index files not even
   rebuilt, which favours copy-on-write);
2. scan of the whole table (``sum(v)``) with 0 % and with 1 % of its rows deleted: the
   driver-local read (plan + read_row_groups, pyarrow) and, with ``--spark``, the native
   Spark read (anti join of ``_metadata.row_index`` with the deleted positions);
3. MERGE of 100k source rows (half of them updates of random existing ids, half inserts)
   with carbonstore (``Table.merge``, update all / insert all) and with delta-rs
   (``DeltaTable.merge(...).when_matched_update_all().when_not_matched_insert_all()``) over
   a Delta table of the same rows (written once, cloned per run).

Usage::

    .venv/bin/python bench/dml_bench.py --rows 10000000 [--spark] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from carbonstore import Store, Table  # noqa: E402
from carbonstore.pruning.plan import prune  # noqa: E402
from carbonstore.segments.compaction import write_segment  # noqa: E402
from carbonstore.store.tablestatus import SUCCESS  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
SCHEMA = "id long not null, k string, cat string, v double"


def _rows(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    keys = rng.integers(0, 2**63 - 1, n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "k": pa.array([f"{x:016x}" for x in keys.tolist()], pa.string()),
        "cat": pa.array([f"c{x}" for x in (ids % 100).tolist()], pa.string()),
        "v": rng.random(n),
    })


def build(rows: int, segments: int) -> Path:
    """The pristine dataset (carbonstore store + delta table), built once."""
    root = DATA / f"dml_{rows}"
    if (root / "done").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    store = Store(str(root / "store"))
    table = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    per = rows // segments
    t0 = time.perf_counter()
    for s in range(segments):
        data = _rows(s * per, per, s)
        entry = table.status.allocate()
        out = write_segment(table, entry.load_name, [data.to_batches(max_chunksize=1 << 20)])
        table.status.set_status(entry.load_name, SUCCESS, timestamp=entry.load_start_time + 1,
                                row_count=out.row_count, data_size=out.data_size,
                                index_size=out.index_size, segment_file=out.segment_file)
        print(f"  segment {s}: {per} rows ({time.perf_counter() - t0:.0f} s)", flush=True)
    try:
        from deltalake import write_deltalake

        for s in range(segments):
            write_deltalake(str(root / "delta"), _rows(s * per, per, s), mode="append")
    except ImportError:
        print("  deltalake not installed: no MERGE peer")
    (root / "done").write_text("ok")
    return root


_CLONES = [0]


def clone(root: Path, name: str) -> Path:
    """A fresh copy of the pristine dataset under a new path (the process caches decoded
    tablestatus versions by path: a copy at a reused path would read the last run's)."""
    _CLONES[0] += 1
    work = DATA / "dml_runs" / f"{name}_{_CLONES[0]}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(root, work)
    return work


def table_of(work: Path) -> Table:
    return Store(str(work / "store")).table("db.t")


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def copy_on_write(table: Table, where_rows: dict[str, np.ndarray]) -> float:
    """Rewrite each touched file without its deleted rows (same Parquet settings)."""
    t0 = time.perf_counter()
    for path, pos in where_rows.items():
        pf = pq.ParquetFile(path)
        data = pf.read()
        keep = np.ones(data.num_rows, bool)
        keep[pos] = False
        out = path + ".cow.parquet"
        pq.write_table(data.filter(pa.array(keep)), out, row_group_size=pf.metadata.row_group(0).num_rows,
                       write_page_index=True, compression="snappy")
    return time.perf_counter() - t0


def bench_delete(root: Path, rows: int, repeat: int) -> None:
    from carbonstore.segments.deltas import decode_delta, positions
    from carbonstore.segments.dml import delete_rows

    n = max(1, rows // 10_000)
    cases = [("one range (1 file)", f"id >= {rows // 3} AND id < {rows // 3 + n}"),
             ("id % 10000 = 7 (every file)", "id % 10000 = 7")]
    print("\n1. DELETE of 0.01 % of the rows")
    print("| rows deleted | where | files touched | DELETE (deltas) | copy-on-write of those files | ratio |")
    print("|---|---|---|---|---|---|")
    for label, where in cases:
        dels, cows, touched, deleted = [], [], 0, 0
        for i in range(repeat):
            work = clone(root, f"del{i}")
            t = table_of(work)
            t0 = time.perf_counter()
            r = delete_rows(t, where)
            dels.append(time.perf_counter() - t0)
            deleted, touched = r.deleted, r.files
            plan = prune(t)
            hit = {}
            for f in plan.files:
                if f.delete_delta:
                    hit[plan.absolute(f.path)] = positions(decode_delta(
                        t.store.sfs.read_bytes(plan.absolute(f.delete_delta)))).astype(np.int64)
            cows.append(copy_on_write(t, hit))
            shutil.rmtree(work)
        d, c = median(dels), median(cows)
        print(f"| {deleted:,} | {label} | {touched} | {d * 1000:.0f} ms | {c * 1000:.0f} ms | "
              f"{c / d:.1f}x |", flush=True)


def _scan_local(t: Table) -> tuple[float, float]:
    from carbonstore.spark.reader import plan_partitions, read_row_groups

    t0 = time.perf_counter()
    plan = prune(t)
    slices = [s for p in plan_partitions(plan) for s in p.slices]
    total = 0.0
    for b in read_row_groups(t, slices):
        total += float(pa.compute.sum(b.column(b.schema.get_field_index("v"))).as_py() or 0.0)
    return time.perf_counter() - t0, total


def bench_scan(root: Path, repeat: int, spark: bool) -> None:
    import pyarrow.compute  # noqa: F401 - pa.compute

    from carbonstore.segments.dml import delete_rows

    work = clone(root, "scan")
    t = table_of(work)
    base = [_scan_local(t)[0] for _ in range(repeat)]
    delete_rows(t, "id % 100 = 0")
    dele = [_scan_local(t)[0] for _ in range(repeat)]
    print("\n2. Full scan, sum(v): 0 % vs 1 % of rows deleted")
    print("| read path | 0 % deleted | 1 % deleted | overhead |")
    print("|---|---|---|---|")
    print(f"| driver-local (pyarrow) | {median(base):.2f} s | {median(dele):.2f} s | "
          f"{(median(dele) / median(base) - 1) * 100:+.0f} % |", flush=True)
    if spark:
        from carbonstore.spark.api import to_spark
        from carbonstore.spark.session import get_spark

        session = get_spark(conf=t.store.conf)
        clean = table_of(clone(root, "scan0"))

        def run(tab: Table) -> float:
            t0 = time.perf_counter()
            to_spark(tab, session).agg({"v": "sum"}).collect()
            return time.perf_counter() - t0

        run(clean)
        s0 = [run(clean) for _ in range(repeat)]
        s1 = [run(t) for _ in range(repeat)]
        print(f"| native Spark (bitmap filter on _metadata.row_index) | {median(s0):.2f} s | "
              f"{median(s1):.2f} s | {(median(s1) / median(s0) - 1) * 100:+.0f} % |", flush=True)
    shutil.rmtree(work)


def bench_merge(root: Path, rows: int, repeat: int) -> None:
    rng = np.random.default_rng(7)
    half = 50_000
    upd = rng.choice(rows, half, replace=False).astype(np.int64)
    new = np.arange(rows, rows + half, dtype=np.int64)
    ids = np.concatenate([upd, new])
    src = _rows(0, len(ids), 99)
    src = src.set_column(0, "id", pa.array(ids))
    ours, theirs = [], []
    for i in range(repeat):
        work = clone(root, f"merge{i}")
        t = table_of(work)
        t0 = time.perf_counter()
        r = t.merge(src, on=["id"], when_matched_update="*", when_not_matched_insert="*")
        ours.append(time.perf_counter() - t0)
        assert r.deleted == half and r.inserted == 2 * half, r
        if (work / "delta").exists():
            from deltalake import DeltaTable

            dt = DeltaTable(str(work / "delta"))
            t0 = time.perf_counter()
            (dt.merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())
            theirs.append(time.perf_counter() - t0)
        shutil.rmtree(work)
    print(f"\n3. MERGE of {len(ids):,} rows ({half:,} updates, {half:,} inserts) into {rows:,}")
    print("| engine | time | ratio |")
    print("|---|---|---|")
    print(f"| carbonstore Table.merge | {median(ours):.2f} s | 1.0x |")
    if theirs:
        print(f"| delta-rs DeltaTable.merge | {median(theirs):.2f} s | "
              f"{median(theirs) / median(ours):.2f}x |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--segments", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spark", action="store_true", help="also the native Spark scan")
    ap.add_argument("--only", choices=["delete", "scan", "merge"], action="append")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    t0 = time.perf_counter()
    root = build(args.rows, args.segments)
    print(f"dataset: {args.rows:,} rows in {args.segments} segments ({time.perf_counter() - t0:.0f} s)")
    only = set(args.only or ["delete", "scan", "merge"])
    if "delete" in only:
        bench_delete(root, args.rows, args.repeat)
    if "scan" in only:
        bench_scan(root, args.repeat, args.spark)
    if "merge" in only:
        bench_merge(root, args.rows, args.repeat)
    shutil.rmtree(DATA / "dml_runs", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
