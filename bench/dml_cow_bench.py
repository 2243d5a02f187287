"""DELETE, UPDATE and MERGE: carbonstore (Spark jobs, delete deltas) against a plain-Spark
copy-on-write rewrite and delta-rs, in one run over the same rows; and the latency of a
small statement with where its fixed cost goes.

The dataset is bench/dml_bench.py's (``id`` long increasing, ``k`` a 16-hex key, ``cat``,
``v`` double; a carbonstore table and a Delta table of the same rows, cached under
bench/data/). Every measurement runs in a fresh process over a fresh copy:

- ``delete1``: ``DELETE WHERE id % 100 = 7`` (1 % of the rows, every file touched; the
  index cannot bind the condition);
- ``update10``: ``SET v = v * 2 WHERE id % 10 = 3`` (10 % of the rows, every file touched);
- ``update``: ``SET v = v * 2, cat = upper(cat) WHERE id % 2 = 0`` (half the rows, every
  file touched);
- ``merge``: a ``--merge-source``-row source, half updates of ids spread over the table and
  half new ids: WHEN MATCHED UPDATE SET *, WHEN NOT MATCHED INSERT *;
- peers: plain Spark copy-on-write (read the Parquet files with ``_metadata.file_path``,
  find the touched files, rewrite them without the deleted rows or with the same
  expressions: what a Parquet table without deltas must do; the new files are written, no
  table commit) and delta-rs (``DeltaTable.delete`` / ``update`` / ``merge``, in-process
  Rust);
- ``small``: ``UPDATE ... SET v = v + 1 WHERE id = 4242`` on a ``--small-rows`` table,
  the statement alone (the session already up), split into its phases (plan and located
  frame, delta job, insert job, commit), with the session's start timed apart.

Reported per run: wall seconds of the statement (the session started before), CPU seconds
of the statement (user + system of the process tree: driver, JVM, Python workers), the
driver Python process's peak RSS (``VmHWM``; its JVM is another process), the JVM's peak
RSS, and the 1-minute load average seen while the process ran. Each work copy is removed
after its run; a run that fails or passes ``--timeout`` is recorded as failed (its process
group killed) and the others go on. ``--out`` keeps every result as a JSON line as it comes.

Usage::

    .venv/bin/python bench/dml_cow_bench.py --rows 8000000 --merge-source 1000000
    .venv/bin/python bench/dml_cow_bench.py --rows 20000000 --segments 20 \\
        --merge-source 1000000 --only delete1,update10,merge
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from dml_bench import build, clone  # noqa: E402
from dml_small_bench import _cpu  # noqa: E402  (CPU of this process's tree)
from dml_spark_bench import _source  # noqa: E402  (the same MERGE source)

# statement -> (WHERE, SET); a SET of None is a DELETE
STATEMENTS: dict[str, tuple[str, dict[str, str] | None]] = {
    "delete1": ("id % 100 = 7", None),
    "update10": ("id % 10 = 3", {"v": "v * 2"}),
    "update": ("id % 2 = 0", {"v": "v * 2", "cat": "upper(cat)"}),
}
ENGINES = ("", "cow-", "delta-")


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
    stmt = kind.removeprefix("cow-")
    if stmt in STATEMENTS:
        where, sets = STATEMENTS[stmt]
        cond = F.expr(where)
        touched = [r.f for r in target.where(cond).select("f").distinct().collect()]
        old = spark.read.parquet(*touched)
        if sets is None:  # DELETE: the touched files without the matched rows
            new = old.where(~cond)
        else:
            new = old.select(*[F.when(cond, F.expr(sets[c])).otherwise(F.col(c)).alias(c)
                               if c in sets else F.col(c) for c in ("id", "k", "cat", "v")])
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


def one(kind: str, work: Path, rows: int, arg: int, check: bool) -> dict[str, object]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if kind.startswith("delta-"):
        from deltalake import DeltaTable

        dt = DeltaTable(str(work / "delta"))
        stmt = kind.removeprefix("delta-")
        src = _arrow_source(rows, arg) if stmt == "merge" else None
        c0, t0 = _cpu(), time.perf_counter()
        if stmt in STATEMENTS:
            where, sets = STATEMENTS[stmt]
            m = (dt.delete(where) if sets is None else dt.update(updates=sets, predicate=where))
        elif stmt == "small":
            m = dt.update(updates={"v": "v + 1"}, predicate="id = 4242")
        else:
            m = (dt.merge(src, "t.id = s.id", source_alias="s", target_alias="t")
                 .when_matched_update_all().when_not_matched_insert_all().execute())
        return {"seconds": time.perf_counter() - t0, "cpu_s": round(_cpu() - c0, 2),
                "driver_peak_mb": _hwm(),
                "metrics": {k: v for k, v in m.items() if k.startswith("num_")}}
    spark, start = _spark()
    if kind.startswith("cow-"):
        c0, t0 = _cpu(), time.perf_counter()
        got = _cow(spark, work, kind, rows, arg)
        got = {"seconds": time.perf_counter() - t0, "cpu_s": round(_cpu() - c0, 2),
               "driver_peak_mb": _hwm(), "jvm_peak_mb": _hwm(_jvm_pid(spark)),
               "session_start_s": start, **got}
        if check:  # after the timing: the rows the rewrite wrote
            got["rows_written"] = spark.read.parquet(str(work / "cow_out")).count()
        return got
    from carbonstore import Store

    table = Store(str(work / "store")).table("db.t")
    spent = _phases()
    c0, t0 = _cpu(), time.perf_counter()
    if kind in STATEMENTS:
        where, sets = STATEMENTS[kind]
        r = table.delete(where) if sets is None else table.update(sets, where=where)
    elif kind == "small":
        r = table.update({"v": "v + 1"}, where="id = 4242")
    else:
        from carbonstore.dml import WhenMatched, WhenNotMatched, merge_rows

        r = merge_rows(table, _source(spark, rows, arg), on=["id"],
                       matched=[WhenMatched(action="update")], not_matched=[WhenNotMatched()])
    return {"seconds": time.perf_counter() - t0, "cpu_s": round(_cpu() - c0, 2),
            "driver_peak_mb": _hwm(), "jvm_peak_mb": _hwm(_jvm_pid(spark)),
            "session_start_s": start, "deleted": r.deleted, "inserted": r.inserted,
            "phases_s": {k: round(v, 2) for k, v in spent.items()}}


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run(kind: str, root: Path, rows: int, arg: int, timeout: float, check: bool,
        out: Path | None) -> dict[str, object]:
    """One statement in a fresh process (its own process group, so a timeout kills its JVM
    too) over a fresh copy, removed after."""
    work = clone(root, kind)
    cmd = [sys.executable, __file__, "--one", kind, "--work", str(work), "--rows", str(rows),
           "--arg", str(arg)] + (["--check"] if check else [])
    t0, loads = time.perf_counter(), [_load()]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=10)
                break
            except subprocess.TimeoutExpired:
                loads.append(_load())
                if time.perf_counter() - t0 > timeout:
                    os.killpg(proc.pid, signal.SIGKILL)
                    stdout, stderr = proc.communicate()
                    stderr = f"timed out after {timeout:.0f} s\n{stderr}"
                    break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        try:  # what the statement's process group left (its JVM, Python workers)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        shutil.rmtree(work, ignore_errors=True)
    got: dict[str, object]
    if proc.returncode or not stdout.strip():
        got = {"failed": f"exit {proc.returncode}: {stderr[-3000:]}"}
    else:
        got = json.loads(stdout.strip().splitlines()[-1])
    got["process_s"] = round(time.perf_counter() - t0, 2)
    got["load"] = [min(loads), round(statistics.median(loads), 2), max(loads)]
    print(f"  {kind:15} rows={rows} arg={arg}: {json.dumps(got)}", flush=True)
    if out is not None:
        with out.open("a") as f:
            f.write(json.dumps({"kind": kind, "rows": rows, "arg": arg, **got}) + "\n")
    return got


def _fmt(got: dict[str, object] | None, key: str = "seconds") -> str:
    if got is None:
        return "-"
    if "failed" in got:
        return "failed"
    mem = f"{got['driver_peak_mb']:.0f} MB"
    if "jvm_peak_mb" in got:
        mem += f" + JVM {got['jvm_peak_mb']:.0f} MB"
    return f"{got[key]:.1f} s ({got['cpu_s']:.0f} CPU s) / {mem}"


def _ratio(ours: dict[str, object] | None, peer: dict[str, object] | None) -> str:
    if not ours or not peer or "failed" in ours or "failed" in peer:
        return "-"
    return f"{ours['seconds'] / peer['seconds']:.1f}"


def table(results: dict[str, list[dict[str, object]]], stmts: list[str]) -> str:
    """The markdown table: per statement, the first run of each engine."""
    lines = ["| statement | carbonstore: wall (CPU) / driver RSS + JVM RSS | plain-Spark CoW | "
             "delta-rs (in-process) | ratio to CoW / to delta-rs (wall) | load |",
             "|---|---|---|---|---|---|"]
    for stmt in stmts:
        ours, cow, delta = (results.get(e + stmt, [None])[0] for e in ENGINES)
        loads = [x["load"] for x in (ours, cow, delta) if x]
        load = (f"{min(x[0] for x in loads):.1f}-{max(x[2] for x in loads):.1f}"
                if loads else "-")
        lines.append(f"| {stmt} | {_fmt(ours)} | {_fmt(cow)} | {_fmt(delta)} | "
                     f"{_ratio(ours, cow)} / {_ratio(ours, delta)} | {load} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=8_000_000)
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--merge-source", type=int, default=1_000_000)
    ap.add_argument("--small-rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="update,merge,small",
                    help="comma-separated: delete1, update10, update, merge, small")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per process")
    ap.add_argument("--check", action="store_true",
                    help="count the rows a copy-on-write rewrite wrote (after the timing)")
    ap.add_argument("--out", type=Path, help="append each result to this file (JSON lines)")
    ap.add_argument("--one")
    ap.add_argument("--work")
    ap.add_argument("--arg", type=int, default=0)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, Path(args.work), args.rows, args.arg, args.check)))
        return
    only = args.only.split(",")
    unknown = set(only) - {*STATEMENTS, "merge", "small"}
    if unknown:
        ap.error(f"unknown statements: {', '.join(sorted(unknown))}")
    big_stmts = [x for x in only if x != "small"]
    results: dict[str, list[dict[str, object]]] = {}
    if big_stmts:
        big = build(args.rows, args.segments)
        for _ in range(args.repeat):  # interleaved: the machine's drift hits each alike
            for stmt in big_stmts:
                for engine in ENGINES:
                    arg = args.merge_source if stmt == "merge" else 0
                    results.setdefault(engine + stmt, []).append(
                        run(engine + stmt, big, args.rows, arg, args.timeout, args.check,
                            args.out))
    if "small" in only:
        small = build(args.small_rows, 1)
        for _ in range(args.repeat):
            for kind in ("small", "delta-small"):
                results.setdefault(kind, []).append(
                    run(kind, small, args.small_rows, 0, args.timeout, args.check, args.out))
    print(json.dumps(results, indent=1))
    if big_stmts:
        print(table(results, big_stmts))


if __name__ == "__main__":
    main()
