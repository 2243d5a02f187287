"""The JVM-free Python API against its peers, in one run: ratios for BENCHMARKS.md.

- ``Table.append`` of N rows (default 1M: id long sorted, k string, cat string, v double)
  vs ``deltalake.write_deltalake`` and pyiceberg ``Table.append`` of the same Arrow table;
- ``Table.scan(where="id = x").to_arrow()`` (a lookup) and ``Table.scan().to_arrow()`` (the
  full table), each opening the table first, vs ``DeltaTable(p).to_pyarrow_table(filters=...)``
  and pyiceberg ``load_table(...).scan(row_filter=...).to_arrow()``;
- a metadata command in a fresh process: ``python -m carbonstore show-segments`` / ``prune``
  vs ``python -c "import deltalake; DeltaTable(p).file_uris()"`` (``files()`` of deltalake
  < 1.0; wall time, median).

Times are the best of ``--repeat`` runs (wall and CPU of this process) for the in-process
measures. Every peer writes and reads the same Arrow table; each library is used as its
documentation shows, with its defaults.

    PYTHONPATH=. python bench/pyapi_bench.py [--rows 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from carbonstore import Store


def _data(n: int) -> pa.Table:
    rng = np.random.default_rng(3)
    ids = np.arange(n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "k": pa.array([f"key-{i:09d}" for i in rng.permutation(n)]),
        "cat": pa.array([f"cat_{i % 100}" for i in range(n)]),
        "v": rng.random(n),
    })


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """(best wall s, best CPU s, the last result) of ``repeat`` runs."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus), out


def _fresh(argv: list[str], repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds (user + system) of a fresh process running ``argv``."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    walls, cpus = [], []
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env, timeout=300)
        walls.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--root", default=None, help="work folder (default: a temporary one)")
    args = ap.parse_args()
    root = Path(args.root or tempfile.mkdtemp(prefix="pyapi-bench-"))
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    data = _data(args.rows)
    x = args.rows * 3 // 7
    rows: list[tuple[str, str, float, float, str]] = []
    print(f"load average {os.getloadavg()[0]:.1f}, {args.rows:,} rows", file=sys.stderr)

    # ---- append ---------------------------------------------------------------------------
    store = Store(str(root / "carbon"))
    table = store.create_table("db.t", "id long not null, k string, cat string, v double",
                               sort_columns="id", bloom_columns="k")
    # the first append of a process compiles the statistics sketch's numba kernels: measured
    # apart, on a scratch table, so the rows below are the steady cost
    scratch = store.create_table("db.warm", "id long not null, k string, cat string, v double",
                                 sort_columns="id", bloom_columns="k")
    ww, wc, _ = _best(lambda: scratch.append(data.slice(0, 1000)), 1)
    rows.append(("first append of a process (1,000 rows: numba compiles)", "-", ww, ww,
                 f"{wc:.2f} CPU s"))
    w, c, _ = _best(lambda: table.append(data), 1)
    from deltalake import DeltaTable, write_deltalake

    delta = str(root / "delta")
    dw, dc, _ = _best(lambda: write_deltalake(delta, data), 1)
    rows.append((f"append {args.rows:,} rows", "deltalake write_deltalake", w, dw, f"{c:.2f} / {dc:.2f} CPU s"))
    ice = _iceberg(root, data)
    if ice is not None:
        iw, ic, _ = _best(lambda: ice[0].append(data), 1)
        rows.append((f"append {args.rows:,} rows", "pyiceberg append", w, iw, f"{c:.2f} / {ic:.2f} CPU s"))

    # ---- reads ----------------------------------------------------------------------------
    def carbon(where: str | None) -> pa.Table:
        return Store(str(root / "carbon")).table("db.t").scan(where=where).to_arrow()

    def delta_read(filters: Any) -> pa.Table:
        return DeltaTable(delta).to_pyarrow_table(filters=filters)

    for label, where, filters, ice_filter in (
            (f"lookup id = {x}", f"id = {x}", [("id", "=", x)], ("id", x)),
            ("full table", None, None, None)):
        repeat = args.repeat if where else max(1, args.repeat // 2)
        w, c, got = _best(lambda wh=where: carbon(wh), repeat)
        dw, dc, want = _best(lambda f=filters: delta_read(f), repeat)
        assert got.num_rows == want.num_rows, (label, got.num_rows, want.num_rows)
        rows.append((f"scan: {label}", "DeltaTable.to_pyarrow_table", w, dw,
                     f"{c * 1000:.1f} / {dc * 1000:.1f} CPU ms"))
        if ice is not None:
            iw, ic, iwant = _best(lambda f=ice_filter: _iceberg_read(ice[1], f), repeat)
            assert got.num_rows == iwant.num_rows, (label, got.num_rows, iwant.num_rows)
            rows.append((f"scan: {label}", "pyiceberg scan().to_arrow()", w, iw,
                         f"{c * 1000:.1f} / {ic * 1000:.1f} CPU ms"))

    # ---- fresh-process metadata commands ---------------------------------------------------
    py = sys.executable
    loc = str(root / "carbon")
    peer, peer_cpu = _fresh(
        [py, "-c", f"import deltalake; deltalake.DeltaTable({delta!r}).file_uris()"], args.repeat)
    for label, argv in (
            ("show-segments", ["show-segments", "db.t"]),
            (f"prune --where 'id = {x}'", ["prune", "db.t", "--where", f"id = {x}"])):
        mine, cpu = _fresh([py, "-m", "carbonstore", "--store", loc, *argv], args.repeat)
        rows.append((f"fresh process: {label}", "python -c 'DeltaTable(p).file_uris()'", mine, peer,
                     f"{cpu:.2f} / {peer_cpu:.2f} CPU s (medians)"))

    print("| measurement | peer | carbonstore s | peer s | carbonstore / peer | CPU (carbonstore / peer) |")
    print("|---|---|---|---|---|---|")
    for what, who, mine, theirs, note in rows:
        if who == "-":  # no peer
            print(f"| {what} | - | {mine:.4f} | - | - | {note} |")
            continue
        print(f"| {what} | {who} | {mine:.4f} | {theirs:.4f} | **{mine / theirs:.2f}** | {note} |")
    shutil.rmtree(root, ignore_errors=True)


def _iceberg(root: Path, data: pa.Table) -> tuple[Any, Callable[[], Any]] | None:
    """A pyiceberg table (SQL catalog on sqlite) and its opener, or None without pyiceberg."""
    try:
        from pyiceberg.catalog.sql import SqlCatalog
    except ImportError as err:
        print(f"pyiceberg unavailable: {err}", file=sys.stderr)
        return None
    folder = root / "iceberg"
    folder.mkdir()

    def catalog() -> Any:
        return SqlCatalog("bench", uri=f"sqlite:///{folder}/catalog.db",
                          warehouse=f"file://{folder}")

    cat = catalog()
    cat.create_namespace("bench")
    tbl = cat.create_table("bench.t", schema=data.schema)
    return tbl, lambda: catalog().load_table("bench.t")


def _iceberg_read(open_table: Callable[[], Any], f: tuple[str, int] | None) -> pa.Table:
    from pyiceberg.expressions import AlwaysTrue, EqualTo

    row_filter = AlwaysTrue() if f is None else EqualTo(*f)
    return open_table().scan(row_filter=row_filter).to_arrow()


if __name__ == "__main__":
    main()
