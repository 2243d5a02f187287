"""Open + plan of a many-segment table on an S3 server, next to the same table on local disk.

Each figure is one fresh process (imports excluded) that opens the store, opens the table
and plans a scan (``prune``), timed inside it; it also reports the object-store requests of
the filesystem layer (``request_counts()``: HEAD, LIST, GET = objects opened, PUT-IF-ABSENT
= the open's probe, ...). The S3 server (moto, tests/objectstore/s3server.py, on 127.0.0.1)
counts the HTTP requests it answered as well; both are printed.

The tables are built fast: N loads through the product's commit protocol without Spark
(tests/reliability/workload.py: In Progress entry, executor writer, merge index, commit) on
local disk, one plan to write the table's index snapshot, then the whole store folder is
copied to the bucket as it is (``pyarrow.fs.copy_files``), so both sides hold the same files.

Usage::

    .venv/bin/python bench/objectstore_bench.py [--segments 100,400] [--rows 500] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "objectstore"))
sys.path.insert(0, str(ROOT / "tests" / "reliability"))

BUCKET = "carbon-bench"
WHERES = ("id = 12345", "x > 100000")

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from carbonstore import Store
from carbonstore.pruning.plan import prune
from carbonstore.store.objectstore import request_counts
imported = time.perf_counter()
store, name, where = sys.argv[1:4]
table = Store(store).table(name)
plan = prune(table, where)
ms = (time.perf_counter() - imported) * 1000
print(json.dumps({"ms": ms, "fs": request_counts(), "kept": plan.levels["segments"].kept
                  if hasattr(plan, "levels") else None}))
"""


def _server_requests(endpoint: str, reset: bool = False) -> dict[str, int]:
    req = urllib.request.Request(f"{endpoint}/__requests", method="DELETE" if reset else "GET")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return dict(json.loads(resp.read()))


def _run(store: str, where: str, env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, store, "db.t", where], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def build(folder: Path, segments: int, rows: int) -> float:
    """``segments`` loads of ``rows`` rows into db.t of a local store; returns seconds."""
    from workload import SCHEMA, load
    from workload import rows as make_rows

    from carbonstore import Store
    from carbonstore.pruning.plan import prune

    t0 = time.perf_counter()
    table = Store(str(folder)).create_table("db.t", SCHEMA)
    for k in range(segments):
        load(table, make_rows(k * rows, rows), tasks=1)
    prune(table, WHERES[0])  # writes the index snapshot (as the first plan after loads does)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", default="100,400")
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    import pyarrow.fs as pafs
    from s3fixtures import start_server, stop_server

    server = start_server()
    work = Path(tempfile.mkdtemp(prefix="carbonstore-s3-bench-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CARBON_CONF", None)
    try:
        server.client().create_bucket(Bucket=BUCKET)
        s3fs = pafs.S3FileSystem(endpoint_override=server.endpoint.removeprefix("http://"),
                                 scheme="http", region="us-east-1")
        print(f"S3 server {server.endpoint} (moto); {args.rows} rows per segment; "
              f"median of {args.repeat} fresh processes")
        for n in (int(s) for s in args.segments.split(",")):
            local = work / f"s{n}"
            built = build(local, n, args.rows)
            t0 = time.perf_counter()
            pafs.copy_files(str(local), f"{BUCKET}/s{n}", source_filesystem=pafs.LocalFileSystem(),
                            destination_filesystem=s3fs)
            copied = time.perf_counter() - t0
            files = sum(1 for p in local.rglob("*") if p.is_file())
            print(f"\n{n} segments: built on local disk in {built:.1f} s, {files} files copied "
                  f"to the bucket in {copied:.1f} s")
            s3 = f"s3://{BUCKET}/s{n}?endpoint={server.endpoint}&region=us-east-1"
            for where in WHERES:
                for label, store in (("local", str(local)), ("s3", s3)):
                    runs = []
                    for _ in range(args.repeat):
                        _server_requests(server.endpoint, reset=True)
                        r = _run(store, where, env)
                        r["server"] = _server_requests(server.endpoint)
                        runs.append(r)
                    ms = statistics.median(float(r["ms"]) for r in runs)  # type: ignore[arg-type]
                    last = runs[-1]
                    fs = dict(sorted(dict(last["fs"]).items()))  # type: ignore[call-overload]
                    srv = dict(sorted(dict(last["server"]).items())) if label == "s3" else {}  # type: ignore[call-overload]
                    print(f"  {label:5} {where:12} open+plan median {ms:8.1f} ms  "
                          f"fs layer {fs or '-'}  server {srv or '-'}")
    finally:
        stop_server(server)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
