"""Row-level DML as Spark jobs: the driver's memory and the time, against delta-rs.

Each statement runs in a fresh process (``--one``) over a fresh copy of the dataset of
bench/dml_bench.py (``id`` long increasing, ``k`` a 16-hex key, ``cat``, ``v`` double;
written without Spark, cached under bench/data/). Reported per statement: seconds, and the
driver Python process's resident memory (``/proc/self/status``: ``VmRSS`` after the Spark
session started, and ``VmHWM``, its peak, after the statement; the JVM is another process and
is not counted).

1. memory: UPDATE ``v = v * 2`` of a small set (1,000 rows), of ``--update-small`` and of
   ``--update-large`` rows (a table of that many rows, every row), MERGE of a
   ``--merge-source``-row Spark DataFrame (half updates, half inserts) into the
   ``--rows``-row table;
2. time vs delta-rs (``DeltaTable.delete / update / merge``, same rows as a Delta table):
   DELETE of 1 % with a condition the index cannot bind (``id % 100 = 7``), UPDATE of 10 %
   (``id % 10 = 3``), the MERGE above (delta-rs gets the source as a pyarrow table).

Usage::

    .venv/bin/python bench/dml_spark_bench.py --rows 2000000 --update-small 250000 \\
        --update-large 1000000 --merge-source 250000
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


def _status(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024  # MB
    return float("nan")


def _source(spark, rows: int, n: int):  # noqa: ANN001, ANN202 - a Spark DataFrame
    """Half updates of existing ids (spread over the table), half new ids."""
    half = n // 2
    step = max(1, rows // max(1, half))
    return spark.range(0, n).selectExpr(
        f"CASE WHEN id < {half} THEN id * {step} ELSE {rows} + id END AS id",
        "lpad(hex(id), 16, '0') AS k", "'c0' AS cat", "CAST(1.0 AS DOUBLE) AS v")


def one(kind: str, work: Path, rows: int, arg: int) -> dict[str, float]:
    """One statement in this process; its time and the process's memory."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if kind.startswith("delta-"):
        import pyarrow as pa
        from deltalake import DeltaTable

        dt = DeltaTable(str(work / "delta"))
        before = _status("VmRSS")
        t0 = time.perf_counter()
        if kind == "delta-delete":
            dt.delete("id % 100 = 7")
        elif kind == "delta-update":
            dt.update(updates={"v": "v * 2"}, predicate="id % 10 = 3")
        else:
            half = arg // 2
            step = max(1, rows // max(1, half))
            ids = [i * step if i < half else rows + i for i in range(arg)]
            src = pa.table({"id": pa.array(ids, pa.int64()),
                            "k": [f"{i:016x}" for i in range(arg)], "cat": ["c0"] * arg,
                            "v": pa.array([1.0] * arg, pa.float64())})
            (dt.merge(src, "t.id = s.id", source_alias="s", target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())
        return {"seconds": time.perf_counter() - t0, "rss_before_mb": before,
                "peak_mb": _status("VmHWM")}
    from carbonstore import Store
    from carbonstore.spark.session import get_spark

    spark = get_spark(master="local[2]", shuffle_partitions=4)
    table = Store(str(work / "store")).table("db.t")
    before = _status("VmRSS")
    t0 = time.perf_counter()
    if kind == "update":
        r = table.update({"v": "v * 2"}, where=f"id < {arg}")
    elif kind == "delete":
        r = table.delete("id % 100 = 7")
    elif kind == "update10":
        r = table.update({"v": "v * 2"}, where="id % 10 = 3")
    else:
        from carbonstore.dml import WhenMatched, WhenNotMatched, merge_rows

        r = merge_rows(table, _source(spark, rows, arg), on=["id"],
                       matched=[WhenMatched(action="update")], not_matched=[WhenNotMatched()])
    return {"seconds": time.perf_counter() - t0, "rss_before_mb": before,
            "peak_mb": _status("VmHWM"), "deleted": r.deleted, "inserted": r.inserted}


def run(kind: str, root: Path, rows: int, arg: int) -> dict[str, float]:
    work = clone(root, kind)
    out = subprocess.run([sys.executable, __file__, "--one", kind, "--work", str(work),
                          "--rows", str(rows), "--arg", str(arg)],
                         capture_output=True, text=True, check=False, timeout=3600)
    if out.returncode:
        raise SystemExit(f"{kind} failed: {out.stderr[-2000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  {kind:14} arg={arg:>9}: {json.dumps(got)}", flush=True)
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=8_000_000)
    ap.add_argument("--update-small", type=int, default=1_000_000)
    ap.add_argument("--update-large", type=int, default=4_000_000)
    ap.add_argument("--merge-source", type=int, default=1_000_000)
    ap.add_argument("--one")
    ap.add_argument("--work")
    ap.add_argument("--arg", type=int, default=0)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, Path(args.work), args.rows, args.arg)))
        return
    big = build(args.rows, 10)
    small = build(args.update_large, 4) if args.update_large != args.rows else big
    results = {
        "update 1k": run("update", small, args.update_large, 1000),
        f"update {args.update_small}": run("update", small, args.update_large, args.update_small),
        f"update {args.update_large}": run("update", small, args.update_large, args.update_large),
        f"merge {args.merge_source} into {args.rows}": run("merge", big, args.rows,
                                                           args.merge_source),
        "delete 1% (id % 100 = 7)": run("delete", big, args.rows, 0),
        "update 10% (id % 10 = 3)": run("update10", big, args.rows, 0),
        "delta-rs delete 1%": run("delta-delete", big, args.rows, 0),
        "delta-rs update 10%": run("delta-update", big, args.rows, 0),
        f"delta-rs merge {args.merge_source}": run("delta-merge", big, args.rows,
                                                   args.merge_source),
    }
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
