"""TPC-H through ``carbonstore sql`` against plain Spark over the same files.

Data: DuckDB's tpch extension (PyPI duckdb + duckdb-extension-tpch, offline) generates
scale factor ``--sf``; each table is loaded with the product's load task
(carbonstore.segments.writer.write_task, no Spark) into ``--segments`` segments (tables
under 100,000 rows: one), under bench/data/ (gitignored, generated once per scale and
reused). Both sides run in one warm SparkSession:

- carbonstore: ``carbonstore.spark.sql.run_statement`` (what ``carbonstore sql`` runs:
  per-occurrence planning, Spark's Parquet reader over the kept files, dictionary-free);
- plain: ``spark.read.parquet`` of exactly the same data files as temp views named like the
  tables, then ``spark.sql``.

Fairness (both sides get the same treatment, neither is favoured by its position):

- session warm-up: before the first measured query, ``--warmup`` queries (default Q1 and
  Q6) run once on each side, untimed, so the JVM's JIT compiler has warmed the Parquet
  reader, code generation and aggregation paths before anything is timed (the first
  measured query then runs in the same state as the last);
- per query: one untimed run of each side (answers compared: row count and values,
  order-insensitive; our side also creates its occurrence views there, as plain Spark's
  views were created before the run), then ``--repeat`` rounds of one run each; which side
  goes first alternates from round to round and from query to query (over a full run each
  side leads equally often); a JVM garbage collection before every timed run, so a full GC
  left over by the other side does not land inside this one;
- ratio = median plain ms / median carbonstore ms (> 1: carbonstore faster); beside it the
  ratio of the minima (the least disturbed run of each side) and the CPU ratio: median CPU
  time of a run (the JVM's, i.e. the driver's and the local executors', from /proc, plus
  this Python process's) plain / carbonstore - the work each side does, which the other
  processes on a shared machine change far less than the wall time;
- ``--aa``: both sides run plain ``spark.sql``: the noise floor of the same procedure (a
  ratio away from 1.0 there is the machine, not either reader).

Usage::

    .venv/bin/python bench/tpch_bench.py --sf 1 --repeat 5 [--queries 1,6,14] [--aa]
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
TABLES = ("lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region")
_TYPES = {"BIGINT": "long", "INTEGER": "int", "VARCHAR": "string", "DATE": "date", "DOUBLE": "double"}


def _connect() -> Any:
    import duckdb
    import duckdb_extension_tpch as ext

    path = glob.glob(os.path.join(os.path.dirname(ext.__file__), "extensions", "**",
                                  "*.duckdb_extension"), recursive=True)
    con = duckdb.connect()
    con.execute(f"LOAD '{path[0]}'")
    return con


def _column_type(duck: str) -> str:
    m = re.fullmatch(r"DECIMAL\((\d+),(\d+)\)", duck)
    return f"decimal({m.group(1)},{m.group(2)})" if m else _TYPES[duck]


def generate(sf: float, segments: int, data: str | Path | None = None) -> dict[str, Any]:
    """Load (or reuse) the store under ``data`` (default bench/data); returns {store, files:
    {table: [paths]}, queries}."""
    import pyarrow as pa

    from carbonstore import Store
    from carbonstore.segments.commit import begin_segment, commit_segment
    from carbonstore.segments.load import parse_load_options, write_settings
    from carbonstore.segments.writer import write_task

    root = Path(data or os.environ.get("CARBONSTORE_BENCH_DATA") or DATA) / f"tpch_sf{sf:g}_s{segments}"
    meta_path = root / "meta.json"
    if meta_path.exists():
        return dict(json.loads(meta_path.read_text()))
    t0 = time.perf_counter()
    con = _connect()
    con.execute(f"CALL dbgen(sf={sf})")
    print(f"dbgen sf={sf:g}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    store = Store(str(root / "store"))
    files: dict[str, list[str]] = {}
    for name in TABLES:
        cols = con.execute(f"DESCRIBE {name}").fetchall()
        schema = ", ".join(f"{c[0]} {_column_type(c[1])} NOT NULL" for c in cols)
        table = store.create_table(f"default.{name}", schema)
        data = con.execute(f"SELECT * FROM {name}").arrow()
        if not isinstance(data, pa.Table):
            data = data.read_all()
        parts = segments if data.num_rows > 100_000 else 1
        step = -(-data.num_rows // parts)
        files[name] = []
        for i in range(parts):
            entry, _ = begin_segment(table, hold_lock=False)
            settings = replace(write_settings(table, entry.load_name, parse_load_options(table, {})),
                               statistics=False)
            res = write_task(data.slice(i * step, step).to_batches(max_chunksize=65536), settings,
                             task_id="00000")
            commit_segment(table, entry.load_name, [res])
            files[name].extend(f"{settings.segment_dir}/{f}" for f in res.files)
        print(f"  loaded {name}: {data.num_rows} rows in {parts} segment(s), "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    queries = {n: con.execute(f"SELECT query FROM tpch_queries() WHERE query_nr = {n}").fetchone()[0]
               for n in range(1, 23)}
    meta = {"store": str(root / "store"), "files": files, "queries": queries, "sf": sf}
    meta_path.write_text(json.dumps(meta))
    return meta


def _norm(row: Any) -> tuple[Any, ...]:
    out = []
    for v in row:
        if isinstance(v, float) or type(v).__name__ == "Decimal":
            out.append(round(float(v), 2))
        else:
            out.append(v)
    return tuple(out)



def session_and_views(meta: dict[str, Any]) -> tuple[Any, Any]:
    """The bench's Spark session (room for SF1 joins in local mode), the store, and plain
    ``spark.read.parquet`` temp views of the TPC-H tables."""
    from pyspark.sql import SparkSession

    from carbonstore import Store
    from carbonstore.spark.session import get_spark

    if SparkSession.getActiveSession() is None:
        SparkSession.builder.config("spark.driver.memory", "4g").config(
            "spark.sql.shuffle.partitions", "4").master("local[*]").getOrCreate()
    spark = get_spark()
    for name, paths in meta["files"].items():
        spark.read.parquet(*paths).createOrReplaceTempView(name)
    return spark, Store(meta["store"])

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--segments", type=int, default=4, help="segments per table of >100,000 rows")
    p.add_argument("--repeat", type=int, default=5, help="timed rounds per query (median)")
    p.add_argument("--warmup", default="1,6",
                   help="queries run once on each side before measuring (JIT warm-up)")
    p.add_argument("--aa", action="store_true",
                   help="noise floor: both sides run plain spark.sql")
    p.add_argument("--queries", default="1-22", help="e.g. 1,6,14 or 1-22")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--data", help="directory of the generated data (default bench/data, or "
                   "$CARBONSTORE_BENCH_DATA)")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    meta = generate(args.sf, args.segments, args.data)

    import sqlglot

    from carbonstore.spark.sql import run_statement

    spark, store = session_and_views(meta)
    wanted: list[int] = []
    for part in args.queries.split(","):
        a, _, b = part.partition("-")
        wanted.extend(range(int(a), int(b or a) + 1))

    def run_query(statement: str, side: str) -> list[Any]:
        if side == "carbonstore" and not args.aa:
            return list(run_statement(spark, store, statement).collect())
        return list(spark.sql(statement).collect())

    jvm_stat = Path(f"/proc/{spark._jvm.java.lang.ProcessHandle.current().pid()}/stat")
    tick = os.sysconf("SC_CLK_TCK")

    def cpu_ms() -> float:
        """CPU time of the JVM (driver and local executors) plus this process, in ms."""
        fields = jvm_stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / tick + time.process_time() * 1000

    statements = {n: sqlglot.transpile(meta["queries"][str(n)], read="duckdb", write="spark")[0]
                  for n in range(1, 23)}
    load0 = os.getloadavg()[0]
    for n in (int(q) for q in args.warmup.split(",") if q):  # session warm-up (JIT), untimed
        for side in ("plain", "carbonstore"):
            run_query(statements[n], side)
    results = []
    for n in wanted:
        statement = statements[n]
        sides = ("carbonstore", "plain") if n % 2 else ("plain", "carbonstore")
        answers = {k: run_query(statement, k) for k in sides}  # untimed; answers compared
        same = sorted(map(_norm, answers["carbonstore"]), key=repr) == \
            sorted(map(_norm, answers["plain"]), key=repr)
        times: dict[str, list[float]] = {k: [] for k in sides}
        cpu: dict[str, list[float]] = {k: [] for k in sides}
        for i in range(args.repeat):
            for k in (sides if i % 2 == 0 else sides[::-1]):
                spark._jvm.System.gc()
                c0, t0 = cpu_ms(), time.perf_counter()
                run_query(statement, k)
                times[k].append((time.perf_counter() - t0) * 1000)
                cpu[k].append(cpu_ms() - c0)
        ours, plain = statistics.median(times["carbonstore"]), statistics.median(times["plain"])
        low = min(times["plain"]) / min(times["carbonstore"])
        cpu_ratio = statistics.median(cpu["plain"]) / statistics.median(cpu["carbonstore"])
        results.append({"query": n, "carbonstore_ms": ours, "plain_ms": plain, "ratio": plain / ours,
                        "ratio_of_minima": low, "cpu_ratio": cpu_ratio,
                        "rows": len(answers["carbonstore"]), "same_answer": same,
                        "first": sides[0], "times": times, "cpu_ms": cpu,
                        "load": os.getloadavg()[0]})
        print(f"  Q{n:02d} carbonstore {ours:7.0f} ms  plain {plain:7.0f} ms  ratio {plain / ours:5.2f}"
              f"  (minima {low:4.2f}, cpu {cpu_ratio:4.2f})  rows {len(answers['carbonstore'])}"
              f"  same {same}  load "
              f"{os.getloadavg()[0]:.1f} | first {sides[0]}; carbonstore "
              f"{' '.join(f'{t:.0f}' for t in times['carbonstore'])}; plain "
              f"{' '.join(f'{t:.0f}' for t in times['plain'])}", file=sys.stderr, flush=True)
    geo = math.exp(sum(math.log(r["ratio"]) for r in results) / len(results))
    geo_low = math.exp(sum(math.log(r["ratio_of_minima"]) for r in results) / len(results))
    geo_cpu = math.exp(sum(math.log(r["cpu_ratio"]) for r in results) / len(results))
    print("| query | carbonstore ms | spark.read.parquet ms | ratio | ratio of minima | CPU ratio "
          "| rows | same answer |\n|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| Q{r['query']} | {r['carbonstore_ms']:.0f} | {r['plain_ms']:.0f} | {r['ratio']:.2f} | "
              f"{r['ratio_of_minima']:.2f} | {r['cpu_ratio']:.2f} | {r['rows']} | "
              f"{'yes' if r['same_answer'] else 'NO'} |")
    print(f"\ngeometric mean ratio {geo:.3f} (of minima {geo_low:.3f}, CPU {geo_cpu:.3f}) over "
          f"{len(results)} "
          f"queries{' (A/A: plain against plain)' if args.aa else ''}; load average "
          f"{load0:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "geomean": geo,
                                               "geomean_of_minima": geo_low,
                                               "geomean_cpu": geo_cpu}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
