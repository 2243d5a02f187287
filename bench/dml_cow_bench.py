"""UPDATE and MERGE: carbonstore (Spark jobs, delete deltas) against a plain-Spark
copy-on-write rewrite and delta-rs, in one run over the same rows; and the latency of a
small statement with where its fixed cost goes.

The dataset is bench/dml_bench.py's (``id`` long increasing, ``k`` a 16-hex key, ``cat``,
``v`` double; a carbonstore table and a Delta table of the same rows, cached under
bench/data/). Every measurement runs in a fresh process over a fresh copy:

- ``update``: ``SET v = v * 2, cat = upper(cat) WHERE id % 2 = 0`` (half the rows, every
  file touched);
- ``merge``: a ``--merge-source``-row source, half updates of ids spread over the table and
  half new ids: WHEN MATCHED UPDATE SET *, WHEN NOT MATCHED INSERT *;
- peers: plain Spark copy-on-write (read the Parquet files with ``_metadata.file_path``,
  find the touched files, rewrite them with the same expressions: what a Parquet table
  without deltas must do; the new files are written, no table commit) and delta-rs
  (``DeltaTable.update`` / ``merge``, in-process Rust);
- ``small``: ``UPDATE ... SET v = v + 1 WHERE id = 4242`` on a ``--small-rows`` table,
  the statement alone (the session already up), split into its phases (plan and located
  frame, delta job, insert job, commit), with the session's start timed apart.

Reported per run: wall seconds of the statement (the session started before), the driver
Python process's peak RSS (``VmHWM``; its JVM is another process) and the JVM's peak RSS.

Usage::

    .venv/bin/python bench/dml_cow_bench.py --rows 8000000 --merge-source 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from dml_bench import build, clone  # noqa: E402
from dml_spark_bench import _source  # noqa: E402  (the same MERGE source)

UPDATE_WHERE = "id % 2 = 0"
UPDATE_SET = {"v": "v * 2", "cat": "upper(cat)"}


def _hwm(pid: str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # MB
    return float("nan")


def _arrow_source(rows: int, n: int):  # noqa: ANN202 - a pyarrow table
    import pyarrow as pa

    half = n // 2
    step = max(1, rows // max(1, half))
    ids = [i * step if i < half else rows + i for i in range(n)]
    return pa.table({"id": pa.array(ids, pa.int64()), "k": [f"{i:016X}" for i in range(n)],
                     "cat": ["c0"] * n, "v": pa.array([1.0] * n, pa.float64())})


def _spark():  # noqa: ANN202
    from carbonstore.spark.session import get_spark

    t0 = time.perf_counter()
    spark = get_spark(master="local[2]", shuffle_partitions=4)
    return spark, time.perf_counter() - t0


def _jvm_pid(spark) -> str:  # noqa: ANN001
    return str(spark._jvm.java.lang.ProcessHandle.current().pid())


def _cow(spark, work: Path, kind: str, rows: int, arg: int) -> dict[str, int]:  # noqa: ANN001
    """Plain Spark copy-on-write over the Delta table's Parquet files (no Delta log)."""
    from pyspark.sql import functions as F

    files = sorted(str(p) for p in (work / "delta").glob("*.parquet"))
    target = spark.read.parquet(*files).select("*", F.col("_metadata.file_path").alias("f"))
    out = str(work / "cow_out")
    if kind == "cow-update":
        touched = [r.f for r in target.where(UPDATE_WHERE).select("f").distinct().collect()]
        cond = F.expr(UPDATE_WHERE)
        new = spark.read.parquet(*touched).select(
            "id", "k", F.when(cond, F.upper("cat")).otherwise(F.col("cat")).alias("cat"),
            F.when(cond, F.col("v") * 2).otherwise(F.col("v")).alias("v"))
        new.write.mode("overwrite").parquet(out)
        return {"files_rewritten": len(touched)}
    src = _source(spark, rows, arg)
    touched = [r.f for r in target.join(src.select("id"), "id").select("f").distinct().collect()]
    old = spark.read.parquet(*touched).alias("t")
    s = src.alias("s")
    kept = old.join(s, F.col("t.id") == F.col("s.id"), "left").select(
        F.col("t.id").alias("id"),
        *[F.when(F.col("s.id").isNotNull(), F.col(f"s.{c}")).otherwise(F.col(f"t.{c}")).alias(c)
          for c in ("k", "cat", "v")])
    inserted = src.join(target.select("id"), "id", "left_anti").select("id", "k", "cat", "v")
    kept.unionByName(inserted).write.mode("overwrite").parquet(out)
    return {"files_rewritten": len(touched)}


def _phases() -> dict[str, float]:
    """Time the phases of a carbonstore statement (wrapping the engine's steps)."""
    import carbonstore.dml.engine as engine

    spent: dict[str, float] = {}

    def timed(name: str, fn):  # noqa: ANN001, ANN202
        def run(*a, **k):  # noqa: ANN002, ANN003, ANN202
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
        return run

    engine.write_deltas = timed("delta job", engine.write_deltas)
    engine.write_rows = timed("insert job", engine.write_rows)
    engine.apply_changes = timed("commit", engine.apply_changes)
    init = engine.Target.__init__
    engine.Target.__init__ = timed("plan + located frame", init)
    return spent


def one(kind: str, work: Path, rows: int, arg: int) -> dict[str, object]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if kind.startswith("delta-"):
        from deltalake import DeltaTable

        dt = DeltaTable(str(work / "delta"))
        t0 = time.perf_counter()
        if kind == "delta-update":
            dt.update(updates={"v": "v * 2", "cat": "upper(cat)"}, predicate=UPDATE_WHERE)
        elif kind == "delta-small":
            dt.update(updates={"v": "v + 1"}, predicate="id = 4242")
        else:
            (dt.merge(_arrow_source(rows, arg), "t.id = s.id", source_alias="s",
                      target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())
        return {"seconds": time.perf_counter() - t0, "driver_peak_mb": _hwm()}
    spark, start = _spark()
    if kind.startswith("cow-"):
        t0 = time.perf_counter()
        got = _cow(spark, work, kind, rows, arg)
        return {"seconds": time.perf_counter() - t0, "driver_peak_mb": _hwm(),
                "jvm_peak_mb": _hwm(_jvm_pid(spark)), "session_start_s": start, **got}
    from carbonstore import Store

    table = Store(str(work / "store")).table("db.t")
    spent = _phases()
    t0 = time.perf_counter()
    if kind == "update":
        r = table.update(UPDATE_SET, where=UPDATE_WHERE)
    elif kind == "small":
        r = table.update({"v": "v + 1"}, where="id = 4242")
    else:
        from carbonstore.dml import WhenMatched, WhenNotMatched, merge_rows

        r = merge_rows(table, _source(spark, rows, arg), on=["id"],
                       matched=[WhenMatched(action="update")], not_matched=[WhenNotMatched()])
    return {"seconds": time.perf_counter() - t0, "driver_peak_mb": _hwm(),
            "jvm_peak_mb": _hwm(_jvm_pid(spark)), "session_start_s": start,
            "deleted": r.deleted, "inserted": r.inserted,
            "phases_s": {k: round(v, 2) for k, v in spent.items()}}


def run(kind: str, root: Path, rows: int, arg: int) -> dict[str, object]:
    work = clone(root, kind)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--one", kind, "--work", str(work),
                          "--rows", str(rows), "--arg", str(arg)],
                         capture_output=True, text=True, check=False, timeout=3600)
    if out.returncode:
        raise SystemExit(f"{kind} failed: {out.stderr[-3000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    got["process_s"] = round(time.perf_counter() - t0, 2)
    print(f"  {kind:13} rows={rows} arg={arg}: {json.dumps(got)}", flush=True)
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=8_000_000)
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--merge-source", type=int, default=1_000_000)
    ap.add_argument("--small-rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="update,merge,small")
    ap.add_argument("--one")
    ap.add_argument("--work")
    ap.add_argument("--arg", type=int, default=0)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, Path(args.work), args.rows, args.arg)))
        return
    only = set(args.only.split(","))
    results: dict[str, list[dict[str, object]]] = {}
    if only & {"update", "merge"}:
        big = build(args.rows, args.segments)
        for _ in range(args.repeat):  # interleaved: the machine's drift hits each alike
            if "update" in only:
                for kind in ("update", "cow-update", "delta-update"):
                    results.setdefault(kind, []).append(run(kind, big, args.rows, 0))
            if "merge" in only:
                for kind in ("merge", "cow-merge", "delta-merge"):
                    results.setdefault(kind, []).append(run(kind, big, args.rows,
                                                            args.merge_source))
    if "small" in only:
        small = build(args.small_rows, 1)
        for _ in range(args.repeat):
            for kind in ("small", "delta-small"):
                results.setdefault(kind, []).append(run(kind, small, args.small_rows, 0))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
