"""One-shot TPC-H statements in fresh processes: ``carbonstore sql`` against plain Spark.

Each run is a new Python process (interpreter start, imports, JVM start, one statement,
exit), as a user's one-shot ``carbonstore sql "..."`` is:

- ours: ``carbonstore.cli.app.main(["--store", S, "sql", "--csv", statement])`` - exactly
  what the ``carbonstore`` command runs;
- plain: the same session factory (``get_spark``, same settings), ``spark.read.parquet``
  temp views of exactly the same data files for the tables the statement names (as
  ``spark-sql`` would list them), ``spark.sql(statement)``, rows through Arrow and printed
  as CSV.

Rounds alternate which side goes first (and from query to query). Per run: wall time of
the process (``perf_counter`` around it in the parent), CPU time (the child's own
``process_time`` plus its JVM's user+system from /proc, reported by the child at exit)
and the child's phase times: ``start`` (interpreter start to the statement, i.e. imports),
``spark`` (``get_spark``: JVM start; ours may run it on a background thread, overlapping
the phases around it), ``statement`` (ours: ``run_statement``; plain: the views and
``spark.sql``), ``rest`` (ours: the command's own parsing, planning and the collect;
plain: the collect). The rows of all sides are compared. ``--base DIR`` adds a third side:
ours from an older copy of the package (before/after a change, interleaved). Uses the data
of bench/tpch_bench.py. Usage::

    .venv/bin/python bench/tpch_cold.py --sf 1 --data /tmp/x --queries 6,14,3 --repeat 3
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_MARK = "@@cold "
T: dict[str, float] = {}


def _timed(owner: Any, name: str, label: str) -> None:
    f = getattr(owner, name)

    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            T[label] = T.get(label, 0.0) + time.perf_counter() - t0

    setattr(owner, name, timed)


def _jvm_cpu_ms() -> float:
    try:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            return 0.0
        pid = spark._jvm.java.lang.ProcessHandle.current().pid()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    except Exception:  # noqa: BLE001 - no JVM: no JVM time
        return 0.0


def _report(t_start: float) -> None:
    T["total_in_child"] = time.perf_counter() - t_start
    cpu = time.process_time() * 1000 + _jvm_cpu_ms()
    print(_MARK + json.dumps({"cpu_ms": cpu, **{k: v * 1000 for k, v in T.items()}}),
          file=sys.stderr, flush=True)


def child(side: str, store: str, statement: str, files: dict[str, list[str]],
          t_start: float) -> int:
    """One run in this fresh process; imports only what the side itself needs."""
    import carbonstore.spark.session as session

    _timed(session, "get_spark", "spark")
    if side in ("ours", "base"):
        import carbonstore.sql.spark_engine as csql  # the CLI's engine runs run_statement
        from carbonstore.cli.app import main

        _timed(csql, "run_statement", "statement")
        T["start"] = time.perf_counter() - t_start
        code = main(["--store", store, "sql", "--csv", statement])
        _report(t_start)
        return code
    T["start"] = time.perf_counter() - t_start
    spark = session.get_spark()
    t0 = time.perf_counter()
    for name in sorted(files):  # the tables the statement names (given by the parent)
        spark.read.parquet(*files[name]).createOrReplaceTempView(name)
    df = spark.sql(statement)
    t1 = time.perf_counter()
    rows = df.toArrow().to_pylist()
    T["statement"], T["collect"] = t1 - t0, time.perf_counter() - t1
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(df.columns)
    for r in rows:
        w.writerow(["" if v is None else v for v in r.values()])
    _report(t_start)
    return 0


def _rows(text: str) -> list[tuple[str, ...]]:
    out = []
    for r in list(csv.reader(io.StringIO(text)))[1:]:
        norm = []
        for v in r:
            try:
                norm.append(f"{float(v):.2f}")
            except ValueError:
                norm.append(v)
        out.append(tuple(norm))
    return sorted(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--segments", type=int, default=4)
    p.add_argument("--data", help="directory of the generated data (as bench/tpch_bench.py)")
    p.add_argument("--queries", default="6,14,3")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--base", help="also run ours from the carbonstore package under this "
                   "directory (e.g. a `git archive` of the commit before a change), interleaved")
    p.add_argument("--child", choices=("ours", "base", "plain"), help=argparse.SUPPRESS)
    p.add_argument("--child-args", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        job = json.loads(Path(args.child_args).read_text())
        return child(args.child, job["store"], job["statement"], job["files"], T0)
    sys.path.insert(0, str(HERE))
    import sqlglot
    import tpch_bench
    from sqlglot import exp

    meta = tpch_bench.generate(args.sf, args.segments, args.data)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    base_env = dict(env, PYTHONPATH=os.pathsep.join(
        [args.base] + [x for x in env.get("PYTHONPATH", "").split(os.pathsep) if x])) \
        if args.base else env
    load0 = os.getloadavg()[0]
    sides_all = ("ours", "plain") + (("base",) if args.base else ())
    print("| query | " + " | ".join(f"{s} ms" for s in sides_all) + " | plain / ours | "
          "CPU plain / ours | " + " | ".join(f"{s}: start / spark / statement / rest ms"
                                            for s in sides_all) + " | same |\n|"
          + "---|" * (4 + 2 * len(sides_all)), flush=True)
    job_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"tpch_cold_{os.getpid()}.json"
    for qi, n in enumerate(int(q) for q in args.queries.split(",")):
        statement = sqlglot.transpile(meta["queries"][str(n)], read="duckdb", write="spark")[0]
        names = {t.name.lower() for t in sqlglot.parse_one(statement, read="spark").find_all(exp.Table)}
        job_path.write_text(json.dumps({"store": meta["store"], "statement": statement, "files": {
            k: v for k, v in meta["files"].items() if k in names}}))
        sides = sides_all if qi % 2 == 0 else sides_all[::-1]
        runs: dict[str, list[dict[str, float]]] = {s: [] for s in sides_all}
        outs: dict[str, str] = {}
        for i in range(args.repeat):
            for side in (sides if i % 2 == 0 else sides[::-1]):
                cmd = [sys.executable, str(Path(__file__).resolve()), "--child", side,
                       "--child-args", str(job_path)]
                t0 = time.perf_counter()
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                                     env=base_env if side == "base" else env)
                wall = (time.perf_counter() - t0) * 1000
                if res.returncode != 0:
                    print(res.stderr[-3000:], file=sys.stderr)
                    raise SystemExit(f"Q{n} {side}: exit {res.returncode}")
                mark = [ln for ln in res.stderr.splitlines() if ln.startswith(_MARK)][-1]
                run = {"wall": wall, **json.loads(mark[len(_MARK):])}
                run["rest"] = run["total_in_child"] - sum(run.get(k, 0.0) for k in (
                    "start", "spark", "statement")) if side != "plain" else run.get("collect", 0.0)
                runs[side].append(run)
                outs[side] = res.stdout
                print(f"  Q{n} {side} run {i}: {wall:.0f} ms  " + " ".join(
                    f"{k} {v:.0f}" for k, v in run.items() if k != "wall")
                    + f"  load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)

        def med(side: str, key: str, runs: dict[str, list[dict[str, float]]] = runs) -> float:
            return statistics.median(r.get(key, 0.0) for r in runs[side])

        phases = [" / ".join(f"{med(s, k):.0f}" for k in ("start", "spark", "statement", "rest"))
                  for s in sides_all]
        same = all(_rows(outs[s]) == _rows(outs["plain"]) for s in sides_all)
        print(f"| Q{n} | " + " | ".join(f"{med(s, 'wall'):.0f}" for s in sides_all)
              + f" | {med('plain', 'wall') / med('ours', 'wall'):.2f} | "
              f"{med('plain', 'cpu_ms') / med('ours', 'cpu_ms'):.2f} | " + " | ".join(phases)
              + f" | {'yes' if same else 'NO'} |", flush=True)
    job_path.unlink(missing_ok=True)
    print(f"\nload average {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    return 0


T0 = time.perf_counter()

if __name__ == "__main__":
    sys.exit(main())
