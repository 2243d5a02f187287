"""Clustering: what a filter keeps and costs per layout, vs delta-rs ``optimize.z_order``.

    .venv/bin/python bench/cluster_bench.py --rows 20000000 [--blocklet-mb 8] [--repeat 3]

One random table (``--rows`` rows; four candidate columns ``a`` long uniform over 1M ids,
``b`` int uniform over 100k, ``c`` string over 200k values, ``d`` date over ~3 years, plus a
double payload) is loaded as 4 segments into four carbonstore tables, each then compacted
in this process (``--engine local``'s merger):

* ``unclustered``  MAJOR compaction of a table without SORT_COLUMNS (rows in load order)
* ``sorted(a)``    MAJOR compaction with SORT_COLUMNS a
* ``zorder``       CLUSTER on (a, b, c, d), Z-order
* ``hilbert``      CLUSTER on (a, b, c, d), Hilbert

and into a Delta table written by delta-rs then ``optimize.z_order(["a","b","c","d"])``, with
its target file size set so a file holds about as many rows as a carbonstore row group
(delta-rs skips whole files by the log's min/max: "file-level skipping").

For point and range filters on each column alone and in pairs it prints, per layout: rows
kept after pruning (carbonstore: row ranges of kept pages; delta: rows of files the log's
min/max keep), row groups (files for delta) kept, and the query time (median of
``--repeat`` of ``Table.scan(where=...).count()``: plan, read of the kept pages, exact
filter; delta: pyarrow dataset over the Delta table with the filter). Then the compaction
cost as rows/s of each compaction
(and delta's z_order). All figures come from one run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from carbonstore import Store, Table
from carbonstore.pruning.plan import prune
from carbonstore.segments.compaction import compact, write_segment
from carbonstore.store.tablestatus import SUCCESS

SCHEMA = "a long, b int, c string, d date, v double"
_EPOCH = dt.date(2022, 1, 1)
_BASE = (_EPOCH - dt.date(1970, 1, 1)).days


def make_rows(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "a": rng.integers(0, 1_000_000, n),
        "b": rng.integers(0, 100_000, n).astype(np.int32),
        "c": pa.array(np.char.mod("s%06d", rng.integers(0, 200_000, n))),
        "d": pa.array(rng.integers(0, 1100, n).astype(np.int32) + _BASE, pa.int32()
                      ).cast(pa.date32()),
        "v": rng.normal(size=n),
    })


def _day(k: int) -> dt.date:
    return _EPOCH + dt.timedelta(days=k)


# (name, carbonstore filter, pyarrow expression, delta file test: min/max per column -> keep)
Filter = tuple[str, str, Any, Callable[[dict[str, tuple[Any, Any]]], bool]]


def _point(col: str, v: Any, lit: str) -> Filter:
    return (f"{col} point", f"{col} = {lit}", ds.field(col) == v,
            lambda mm: mm[col][0] <= v <= mm[col][1])


def _range(col: str, lo: Any, hi: Any, lit_lo: str, lit_hi: str) -> Filter:
    return (f"{col} range", f"{col} between {lit_lo} and {lit_hi}",
            (ds.field(col) >= lo) & (ds.field(col) <= hi),
            lambda mm: mm[col][0] <= hi and lo <= mm[col][1])


def filters() -> list[Filter]:
    single = {
        "a": (_point("a", 424_242, "424242"), _range("a", 500_000, 509_999, "500000", "509999")),
        "b": (_point("b", 4242, "4242"), _range("b", 50_000, 50_999, "50000", "50999")),
        "c": (_point("c", "s004242", "'s004242'"),
              _range("c", "s100000", "s101999", "'s100000'", "'s101999'")),
        "d": (_point("d", _day(400), f"date '{_day(400)}'"),
              _range("d", _day(500), _day(510), f"date '{_day(500)}'", f"date '{_day(510)}'")),
    }
    out: list[Filter] = []
    for col in "abcd":
        out.extend(single[col])
    for x, y in (("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")):
        rx, ry = single[x][1], single[y][1]
        out.append((f"{x}+{y} range", f"{rx[1]} and {ry[1]}", rx[2] & ry[2],
                    lambda mm, rx=rx, ry=ry: rx[3](mm) and ry[3](mm)))
    return out


def load(table: Table, data: pa.Table, segments: int) -> None:
    step = -(-data.num_rows // segments)
    for i in range(segments):
        part = data.slice(i * step, step)
        entry = table.status.allocate()
        out = write_segment(table, entry.load_name, [part.to_batches(max_chunksize=65536)])
        table.status.set_status(
            entry.load_name, SUCCESS, timestamp=entry.load_start_time + 1,
            row_count=out.row_count, data_size=out.data_size, index_size=out.index_size,
            segment_file=out.segment_file)


def kept(table: Table, f: Filter) -> tuple[int, int, int]:
    """(rows kept, row groups kept, row groups) of the plan."""
    lv = prune(table, f[1]).levels
    return lv["rows"].kept, lv["row_groups"].kept, lv["row_groups"].total


def query(table: Table, f: Filter) -> int:
    """The matching rows, counted by the JVM-free scan (``Table.scan``: plan, read the kept
    pages' rows of the filter columns, then the other columns of the rows that may match,
    exact filter)."""
    return table.scan(where=f[1]).count()


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The median time of ``repeat`` runs (a shared machine: the median, not the best)."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def delta_layout(path: str, data: pa.Table, target: int) -> tuple[Any, float, float]:
    from deltalake import DeltaTable, write_deltalake

    step = -(-data.num_rows // 4)
    for i in range(4):
        write_deltalake(path, data.slice(i * step, step), mode="append")
    t0, c0 = time.perf_counter(), time.process_time()
    DeltaTable(path).optimize.z_order(["a", "b", "c", "d"], target_size=target)
    seconds = time.perf_counter() - t0
    return DeltaTable(path), seconds, time.process_time() - c0


def delta_files(dtable: Any) -> list[tuple[int, dict[str, tuple[Any, Any]]]]:
    """(rows, column -> (min, max)) of every live file, from the Delta log."""
    actions = pa.table(dtable.get_add_actions(flatten=True))
    out = []
    for row in actions.to_pylist():
        mm = {c: (row[f"min.{c}"], row[f"max.{c}"]) for c in "abcd"}
        out.append((row["num_records"], mm))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--blocklet-mb", type=int, default=8)
    ap.add_argument("--page-rows", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--dir", default=None,
                    help="where the tables are written (default: the system's temp folder)")
    ap.add_argument("--layouts", default="unclustered,sorted(a),zorder,hilbert,delta",
                    help="the layouts to build (comma-separated; default: all five)")
    ap.add_argument("--cost-only", action="store_true",
                    help="only the compactions' rows/s (no queries)")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="cluster-bench-", dir=args.dir)
    try:
        return run(args, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace, root: str) -> int:
    print(f"# {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {args.rows:,} rows, "
          f"blocklet {args.blocklet_mb} MB, pages <= {args.page_rows} rows, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    data = make_rows(args.rows, 7)
    store = Store(os.path.join(root, "store"))
    props = {"blocklet_size_in_mb": str(args.blocklet_mb), "page_rows": str(args.page_rows)}
    layouts: dict[str, Table] = {}
    cost: dict[str, float] = {}
    cpu: dict[str, float] = {}
    plans: list[tuple[str, dict[str, str], Callable[[Table], Any]]] = [
        ("unclustered", {}, lambda t: compact(t, "major")),
        ("sorted(a)", {"sort_columns": "a"}, lambda t: compact(t, "major")),
        ("zorder", {}, lambda t: compact(t, "cluster", by=["a", "b", "c", "d"])),
        ("hilbert", {}, lambda t: compact(t, "cluster", by=["a", "b", "c", "d"],
                                          curve="hilbert")),
    ]
    wanted = set(args.layouts.split(","))
    for i, (name, extra, run_compaction) in enumerate(plans):
        if name not in wanted:
            continue
        t0 = time.perf_counter()
        table = store.create_table(f"t{i}", SCHEMA, properties={
            **props, "major_compaction_size": "100000", **extra})
        load(table, data, 4)
        print(f"{name}: loaded in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        t0, c0 = time.perf_counter(), time.process_time()
        run_compaction(table)
        cost[name] = time.perf_counter() - t0
        cpu[name] = time.process_time() - c0
        layouts[name] = table
        print(f"{name}: compacted in {cost[name]:.1f} s ({cpu[name]:.1f} s CPU)",
              file=sys.stderr, flush=True)
    ref = layouts.get("unclustered") or next(iter(layouts.values()))
    rg_total = prune(ref).levels["row_groups"].total
    rows_per_rg = args.rows / rg_total
    if "delta" not in wanted:
        print_cost(cost, args.rows, cpu)
        if not args.cost_only:
            print_tables(layouts, None, args)
        return 0
    # delta: a file per carbonstore row group (same rows), sized from a first write's bytes
    probe = os.path.join(root, "probe")
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(probe, data.slice(0, min(args.rows, 500_000)))
    sizes = pa.table(DeltaTable(probe).get_add_actions(flatten=True))["size_bytes"]
    per_row = pc.sum(sizes).as_py() / min(args.rows, 500_000)
    dtable, cost["delta z_order"], cpu["delta z_order"] = delta_layout(os.path.join(root, "delta"), data,
                                                 int(per_row * rows_per_rg))
    print(f"delta: z_order in {cost['delta z_order']:.1f} s", file=sys.stderr, flush=True)
    if args.cost_only:
        print_cost(cost, args.rows, cpu)
        return 0
    print_tables(layouts, dtable, args)
    print_cost(cost, args.rows, cpu)
    return 0


def print_tables(layouts: dict[str, Table], dtable: Any, args: argparse.Namespace) -> None:
    """The rows and row groups kept and the query times of every filter on every layout
    (and delta's, when ``dtable`` is given)."""
    ref = next(iter(layouts.values()))
    rg_total = prune(ref).levels["row_groups"].total
    rows_per_rg = args.rows / rg_total
    dfiles = delta_files(dtable) if dtable is not None else [(0, {})]
    dset = dtable.to_pyarrow_dataset() if dtable is not None else None
    print(f"row groups per carbonstore layout: {rg_total} (~{rows_per_rg:,.0f} rows each); "
          f"delta files: {len(dfiles)} (~{args.rows / len(dfiles):,.0f} rows each)")
    names = list(layouts)
    peers = ["delta"] if dset is not None else []
    header = ["filter", "matches"] + [f"{n} rows kept" for n in [*names, *peers]]
    print("\n| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    timing: list[list[str]] = []
    groups: list[list[str]] = []
    for f in filters():
        cells, tcells, gcells = [], [], []
        matches = None
        for n in names:
            seconds, hits = best(lambda n=n, f=f: query(layouts[n], f), args.repeat)
            rows, rgk, rgt = kept(layouts[n], f)
            if matches is None:
                matches = hits
            assert hits == matches, (f[0], n, hits, matches)  # every layout answers the same
            cells.append(f"{rows:,}")
            gcells.append(f"{rgk}/{rgt}")
            tcells.append(f"{seconds * 1000:.0f}")
        if dset is not None:
            keep = [rows for rows, mm in dfiles if f[3](mm)]
            seconds, hits = best(lambda f=f: dset.to_table(filter=f[2]).num_rows,
                                 args.repeat)
            assert hits == matches, (f[0], "delta", hits, matches)
            cells.append(f"{sum(keep):,}")
            gcells.append(f"{len(keep)}/{len(dfiles)}")
            tcells.append(f"{seconds * 1000:.0f}")
        print(f"| {f[0]} | {matches:,} | " + " | ".join(cells) + " |", flush=True)
        timing.append([f[0], *tcells])
        groups.append([f[0], *gcells])
    print("\n| filter | " + " | ".join(f"{n} row groups kept" for n in names)
          + " | delta files kept" * bool(peers) + " |")
    print("|" + "---|" * (len(names) + 1 + len(peers)))
    for row in groups:
        print("| " + " | ".join(row) + " |")
    print("\n| filter | " + " | ".join(f"{n} ms" for n in names) + " | delta ms" * bool(peers) + " |")
    print("|" + "---|" * (len(names) + 1 + len(peers)))
    for row in timing:
        print("| " + " | ".join(row) + " |")


def print_cost(cost: dict[str, float], rows: int, cpu: dict[str, float]) -> None:
    base = cost.get("unclustered")
    print("\n| compaction | seconds | CPU seconds | rows/s | vs major (unclustered) |")
    print("|---|---|---|---|---|")
    for n, s in cost.items():
        ratio = f"{base / s:.2f}" if base else "-"
        print(f"| {n} | {s:.1f} | {cpu.get(n, float('nan')):.1f} | {rows / s:,.0f} | {ratio} |")


if __name__ == "__main__":
    sys.exit(main())
