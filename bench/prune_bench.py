"""Driver-side planning benchmark: carbonstore vs pyarrow.dataset, pyiceberg and delta-rs.

Dataset: N loads x 25,000 rows (id and ts increasing, k a random 16-hex key with a bloom
filter, cat one of 100 values, v double with 1 % NaN, n long with 5 % nulls), written by the
product's own load task (carbonstore.segments.writer.write_task: Parquet with page index and
blooms, .carbonindex, then the segment's .carbonindexmerge) without Spark, under
bench/data/ (gitignored). The peers plan over the SAME Parquet files:

- pyarrow.dataset: footer-based row-group pruning (``split_by_row_group(filter)``);
- pyiceberg: ``scan(row_filter).plan_files()`` after ``add_files`` (one manifest for all
  files, and one manifest per load up to 400 loads);
- delta-rs (deltalake): one commit of add actions (with file statistics) per load, then a
  checkpoint; its planning call ``DeltaTable.file_uris(file_pruning_predicate=...)``
  (``--peers delta-dataset``: ``to_pyarrow_dataset(file_pruning_predicate=...)``, which
  adds building a pyarrow dataset).

Planning time is measured warm (table reopened in the same process), with a reused handle,
and in a fresh process (timed inside it, from table open to plan; interpreter start-up and
every system's imports excluded; the systems' fresh processes take turns, ``max(3, --repeat)`` each, median). Survivors are counted per level. Usage::

    .venv/bin/python bench/prune_bench.py --segments 100,400 [--spark]
    .venv/bin/python bench/prune_bench.py --segments 1600 --repeat 3
    .venv/bin/python bench/prune_bench.py --segments 100 --lookup-phases  # a lookup's steps

Each size's data (and the peers' tables) is generated once and reused by later runs; delete
bench/data/n<N>_r<rows> to regenerate it. Each run first takes the writers' step a load's
commit takes (``refresh_if_lagging``: the carbonstore index snapshot is written when the
store has none of the current format, or it lags), so fresh processes always read one;
planning itself never writes.

Peers are optional (``pip install -e .[bench]``); a missing one is reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
ROWS = 25_000
SCHEMA = "id long not null, ts timestamp not null, k string, cat string, v double, n long"
TABLE = "db.bench"
ROWS_PER_FILE = [ROWS]


# ---- data -----------------------------------------------------------------------------------
def _load_data(seg: int, rows: int, rng: np.random.Generator) -> pa.Table:
    ids = np.arange(seg * rows, (seg + 1) * rows, dtype=np.int64)
    v = rng.random(rows)
    v[rng.random(rows) < 0.01] = np.nan
    n = rng.integers(0, 1_000_000, rows)
    keys = rng.integers(0, 2**63, rows, dtype=np.int64)
    return pa.table({
        "id": ids,
        "ts": pa.array(1_700_000_000_000_000 + ids * 1_000_000, pa.timestamp("us", tz="UTC")),
        "k": pa.array([f"{x:016x}" for x in keys.tolist()]),
        "cat": pa.array([f"cat_{x}" for x in rng.integers(0, 100, rows).tolist()]),
        "v": v,
        "n": pa.array(n, mask=rng.random(rows) < 0.05),
    })


def generate(n_segments: int, rows: int = ROWS) -> dict[str, Any]:
    """Build (or reuse) the store with ``n_segments`` loads; returns its description."""
    from carbonstore import Store
    from carbonstore.indexfiles.indexfile import merge_indexes
    from carbonstore.pruning.table_index import refresh_if_lagging
    from carbonstore.segments.load import parse_load_options, write_settings
    from carbonstore.segments.writer import write_task
    from carbonstore.store.tablestatus import SUCCESS, LoadEntry, TableStatusSnapshot, now_ms

    root = DATA / f"n{n_segments}_r{rows}"
    meta_path = root / "meta.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        refresh_if_lagging(Store(meta["store"]).table(TABLE))  # data of an older format
        return meta
    store = Store(str(root / "store"))
    table = store.create_table(TABLE, SCHEMA, properties={"bloom_columns": "k"})
    rng = np.random.default_rng(42)
    opts = parse_load_options(table, {})
    entries: list[LoadEntry] = []
    files: list[str] = []
    keys: dict[int, str] = {}
    t0 = time.perf_counter()
    for seg in range(n_segments):
        sid = str(seg)
        data = _load_data(seg, rows, rng)
        keys[seg] = data.column("k")[rows // 3].as_py()
        settings = replace(write_settings(table, sid, opts), page_rows=2_500, statistics=False)
        table.store.sfs.makedirs(settings.segment_dir)
        res = write_task(data.to_batches(max_chunksize=rows), settings, task_id="00000-0")
        merge = f"{sid}_{now_ms()}.carbonindexmerge"
        size = merge_indexes(store.sfs.fs, [f"{settings.segment_dir}/{res.index_file}"],
                             f"{settings.segment_dir}/{merge}", segment_id=sid)
        files.extend(f"{settings.segment_dir}/{f}" for f in res.files)
        entries.append(LoadEntry(
            load_name=sid, status=SUCCESS, load_start_time=now_ms(), timestamp=now_ms(),
            row_count=res.rows, data_size=res.data_bytes, index_size=size + res.index_bytes,
            segment_file=merge,
        ))
        if seg % 100 == 99:
            print(f"  generated {seg + 1}/{n_segments} loads", file=sys.stderr)

    def add(snap: TableStatusSnapshot) -> list[LoadEntry]:
        return [*snap.entries, *entries]

    table.status.update(add)
    refresh_if_lagging(table)  # what the loads' commits leave
    meta = {"n": n_segments, "rows": rows, "store": str(root / "store"), "root": str(root),
            "files": files, "key": keys[n_segments // 2 + 1 if n_segments > 2 else 0],
            "generate_s": round(time.perf_counter() - t0, 1)}
    meta_path.write_text(json.dumps(meta))
    return meta


def predicates(meta: dict[str, Any]) -> list[tuple[str, str]]:
    total = meta["n"] * meta["rows"]
    x = total // 2 + 123
    lo = total // 3
    hi = lo + total // 100 - 1
    return [
        ("id = x", f"id = {x}"),
        ("id between (1 %)", f"id >= {lo} and id <= {hi}"),
        ("k = key", f"k = '{meta['key']}'"),
        ("cat = 'cat_42'", "cat = 'cat_42'"),
        ("v > 0.999", "v > 0.999"),
    ]


def _pa_expr(sql: str) -> Any:
    import pyarrow.dataset as ds

    parts = [p.strip() for p in sql.split(" and ")]
    expr = None
    for p in parts:
        name, op, lit = p.split(" ", 2)
        value: Any = lit.strip("'") if lit.startswith("'") else (float(lit) if "." in lit else int(lit))
        f = ds.field(name)
        e = {"=": f == value, ">": f > value, ">=": f >= value, "<=": f <= value}[op]
        expr = e if expr is None else expr & e
    return expr


# ---- systems: each returns (open_fn, plan_fn(handle, sql) -> survivors dict) ----------------
def ours_open(meta: dict[str, Any]) -> Any:
    from carbonstore import Store

    return Store(meta["store"]).table(TABLE)


def ours_plan(handle: Any, sql: str) -> dict[str, int]:
    from carbonstore.pruning.plan import prune

    lv = prune(handle, sql).levels
    out = {k: lv[k].kept for k in ("files", "row_groups", "pages", "rows")}
    return {"segments_kept": lv["segments"].kept, **out}


def pyarrow_open(meta: dict[str, Any]) -> Any:
    import pyarrow.dataset as ds

    return ds.dataset(meta["files"], format="parquet")


def pyarrow_plan(handle: Any, sql: str) -> dict[str, int]:
    expr = _pa_expr(sql)
    files = rgs = rows = 0
    for frag in handle.get_fragments(filter=expr):
        pieces = frag.split_by_row_group(expr)
        if pieces:
            files += 1
        for p in pieces:
            rgs += len(p.row_groups)
            rows += sum(rg.num_rows for rg in p.row_groups)
    return {"files": files, "row_groups": rgs, "rows": rows}


def _iceberg_catalog(meta: dict[str, Any]) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    folder = Path(meta["root"]) / "iceberg"
    folder.mkdir(exist_ok=True)
    return SqlCatalog("bench", uri=f"sqlite:///{folder}/catalog.db", warehouse=f"file://{folder}")


def iceberg_build(meta: dict[str, Any], per_load: bool) -> str:
    cat = _iceberg_catalog(meta)
    name = f"bench.t_{'per_load' if per_load else 'one'}"
    try:
        cat.create_namespace("bench")
    except Exception:  # noqa: BLE001 - exists already
        pass
    if cat.table_exists(name):
        return name
    schema = pq.read_schema(meta["files"][0])
    t = cat.create_table(name, schema=schema)
    if per_load:
        for f in meta["files"]:
            t.add_files([f])
    else:
        t.add_files(meta["files"])
    return name


def iceberg_open(meta: dict[str, Any], name: str) -> Any:
    return _iceberg_catalog(meta).load_table(name)


def iceberg_plan(handle: Any, sql: str) -> dict[str, int]:
    tasks = list(handle.scan(row_filter=sql).plan_files())
    return {"files": len(tasks), "rows": sum(t.file.record_count for t in tasks)}


def _delta_stats(path: str) -> tuple[str, int]:
    md = pq.ParquetFile(path).metadata
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for ci in range(md.num_columns):
        name = md.schema.column(ci).name
        lo = hi = None
        nc = 0
        for r in range(md.num_row_groups):
            st = md.row_group(r).column(ci).statistics
            if st is None or not st.has_min_max:
                lo = hi = None
                break
            lo = st.min if lo is None else min(lo, st.min)
            hi = st.max if hi is None else max(hi, st.max)
            nc += st.null_count or 0
        if lo is not None:
            if hasattr(lo, "isoformat"):
                lo, hi = lo.isoformat().replace("+00:00", "Z"), hi.isoformat().replace("+00:00", "Z")
            mins[name], maxs[name] = lo, hi
        nulls[name] = nc
    stats = {"numRecords": md.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    return json.dumps(stats, default=str), md.num_rows


def delta_build(meta: dict[str, Any]) -> str:
    from deltalake import DeltaTable, Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions

    uri = meta["store"] + "/db/bench"  # the data files' table folder: paths stay relative
    done = Path(meta["root"]) / "delta.done"
    if done.exists():
        return uri
    shutil.rmtree(Path(uri) / "_delta_log", ignore_errors=True)
    schema = Schema.from_arrow(pq.read_schema(meta["files"][0]))
    dt = None
    # One commit per load up to 400 loads; beyond, a commit carries several loads (building
    # thousands of commits one by one takes many minutes). The checkpoint covers them all.
    per = max(1, -(-len(meta["files"]) // 400))
    adds = []
    for f in meta["files"]:
        stats, _ = _delta_stats(f)
        rel = os.path.relpath(f, uri)
        adds.append(AddAction(rel, os.path.getsize(f), {}, int(time.time() * 1000), True, stats))
    for i in range(0, len(adds), per):
        batch = adds[i : i + per]
        if dt is None:
            create_table_with_add_actions(uri, schema, batch, mode="error")
            dt = DeltaTable(uri)
        else:
            dt.create_write_transaction(batch, mode="append", schema=schema)
    DeltaTable(uri).create_checkpoint()
    done.write_text("ok")
    return uri


def delta_open(uri: str) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(uri)


def delta_plan(handle: Any, sql: str) -> dict[str, int]:
    """delta-rs' own planning call: the files its log statistics keep (no dataset built)."""
    uris = handle.file_uris(file_pruning_predicate=sql)
    return {"files": len(uris), "rows": len(uris) * ROWS_PER_FILE[0]}  # one file per load


def delta_dataset_plan(handle: Any, sql: str) -> dict[str, int]:
    """The same through ``to_pyarrow_dataset`` (adds building a pyarrow dataset)."""
    dset = handle.to_pyarrow_dataset(file_pruning_predicate=sql)
    frags = list(dset.get_fragments())
    return {"files": len(frags), "rows": len(frags) * ROWS_PER_FILE[0]}


# ---- measuring --------------------------------------------------------------------------------
def _median_ms(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _systems(meta: dict[str, Any], peers: set[str]) -> dict[str, tuple[Any, Any, str]]:
    """name -> (open(), plan(handle, sql), fresh-process spec)."""
    out: dict[str, tuple[Any, Any, str]] = {
        "carbonstore": (lambda: ours_open(meta), ours_plan, "ours")}
    if "pyarrow" in peers:
        out["pyarrow.dataset"] = (lambda: pyarrow_open(meta), pyarrow_plan, "pyarrow")
    if "iceberg" in peers:
        try:
            one = iceberg_build(meta, per_load=False)
            out["pyiceberg (1 manifest)"] = (lambda: iceberg_open(meta, one), iceberg_plan, f"iceberg:{one}")
            if meta["n"] <= 400:
                per = iceberg_build(meta, per_load=True)
                out["pyiceberg (manifest/load)"] = (lambda: iceberg_open(meta, per), iceberg_plan,
                                                    f"iceberg:{per}")
        except ImportError as err:
            print(f"pyiceberg unavailable: {err}", file=sys.stderr)
    if "delta" in peers or "delta-dataset" in peers:
        try:
            uri = delta_build(meta)
            out["delta-rs (checkpoint)"] = (lambda: delta_open(uri), delta_plan, f"delta:{uri}")
            if "delta-dataset" in peers:
                out["delta-rs to_pyarrow_dataset"] = (lambda: delta_open(uri), delta_dataset_plan,
                                                      f"deltads:{uri}")
        except ImportError as err:
            print(f"deltalake unavailable: {err}", file=sys.stderr)
    return out


def _fresh(meta_path: str, spec: str, sql: str) -> float:
    code = [sys.executable, __file__, "--fresh", spec, "--meta", meta_path, "--sql", sql]
    res = subprocess.run(code, capture_output=True, text=True, check=True)
    return float(res.stdout.strip().splitlines()[-1])


def open_and_plan(kind: str, meta: dict[str, Any]) -> tuple[Any, Any]:
    """A measuring process's ``(open, plan)`` functions: delta-rs' ``file_uris`` or ours."""
    if kind == "delta":
        uri = meta["store"] + "/db/bench"
        return (lambda: delta_open(uri)), delta_plan
    return (lambda: ours_open(meta)), ours_plan


def import_system(kind: str) -> None:
    """Import what a system's open and plan import (so a fresh process times its open and
    plan, not its imports: deltalake alone takes ~60 ms to import)."""
    if kind == "ours":
        import sqlglot.dialects.spark  # noqa: F401

        import carbonstore.api  # noqa: F401 - Store
        import carbonstore.pruning.plan  # noqa: F401
        import carbonstore.store.schema_log  # noqa: F401 - opening a table reads the schema log
    elif kind in ("delta", "deltads"):
        import deltalake  # noqa: F401
        import deltalake.transaction  # noqa: F401
        import pyarrow.dataset  # noqa: F401
    elif kind == "pyarrow":
        import pyarrow.dataset  # noqa: F401
    elif kind == "iceberg":
        import pyiceberg.catalog.sql  # noqa: F401


def _fresh_main(spec: str, meta_path: str, sql: str) -> None:
    meta = json.loads(Path(meta_path).read_text())
    ROWS_PER_FILE[0] = meta["rows"]
    kind, _, arg = spec.partition(":")
    fns = {
        "ours": (lambda: ours_open(meta), ours_plan),
        "pyarrow": (lambda: pyarrow_open(meta), pyarrow_plan),
        "iceberg": (lambda: iceberg_open(meta, arg), iceberg_plan),
        "delta": (lambda: delta_open(arg), delta_plan),
        "deltads": (lambda: delta_open(arg), delta_dataset_plan),
    }
    open_fn, plan_fn = fns[kind]
    import_system(kind)  # imports are start-up, not planning: for every system alike
    t0 = time.perf_counter()
    plan_fn(open_fn(), sql)
    print((time.perf_counter() - t0) * 1000)


def run_size(n: int, rows: int, peers: set[str], repeat: int, spark: bool) -> list[dict[str, Any]]:
    t0 = time.perf_counter()
    meta = generate(n, rows)
    ROWS_PER_FILE[0] = rows
    print(f"# {n} segments x {rows} rows: data ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    meta_path = str(Path(meta["root"]) / "meta.json")
    systems = _systems(meta, peers)
    results = []
    load = [os.getloadavg()[0]]
    for label, sql in predicates(meta):
        rows: dict[str, dict[str, Any]] = {}
        for name, (open_fn, plan_fn, _) in systems.items():
            handle = open_fn()
            survivors = plan_fn(handle, sql)  # also warms caches
            warm = _median_ms(lambda o=open_fn, p=plan_fn, q=sql: p(o(), q), repeat)
            reused = _median_ms(lambda h=handle, p=plan_fn, q=sql: p(h, q), repeat)
            rows[name] = {"segments": n, "predicate": label, "system": name, "warm_ms": warm,
                          "reused_ms": reused, **survivors}
        # fresh processes: the systems take turns, so a busy spell of the machine hits all
        fresh: dict[str, list[float]] = {name: [] for name in systems}
        for _ in range(max(3, repeat)):
            for name, (_, _, spec) in systems.items():
                fresh[name].append(_fresh(meta_path, spec, sql))
        for name, row in rows.items():
            row["fresh_ms"] = statistics.median(fresh[name])
            results.append(row)
            print(f"  {label:<18} {name:<26} warm {row['warm_ms']:8.1f}  reused {row['reused_ms']:8.1f}  "
                  f"fresh {row['fresh_ms']:8.1f}  {row}", file=sys.stderr)
        load.append(os.getloadavg()[0])
    print(f"# load average (1 min) during the run: {min(load):.1f}-{max(load):.1f}", file=sys.stderr)
    for row in results:
        row["load"] = [min(load), max(load)]
    if spark:
        results.extend(_spark_e2e(meta))
    return results


def _spark_e2e(meta: dict[str, Any], repeat: int = 11) -> list[dict[str, Any]]:
    """``count()`` (and for lookups ``collect()``) of the filtered table, ours vs
    ``spark.read.parquet``.

    Five warm-up runs per variant (JIT, Python workers, file listing caches), then the
    variants take turns ``repeat`` times, so a slow spell of the machine hits both sides.
    """
    from carbonstore.spark.api import to_spark
    from carbonstore.spark.session import get_spark

    s = get_spark()
    table = ours_open(meta)
    out = []
    # the JVM's first queries run interpreted: warm both sides up before any timing
    for _, sql in predicates(meta)[:3:2]:
        for _ in range(10):
            to_spark(table, s, where=sql).count()
            s.read.parquet(*meta["files"]).where(sql).count()
    for label, sql in predicates(meta):
        # lookups (id = x, k = key): count() and collect(); scans: count()
        for action in ("count", "collect") if label in ("id = x", "k = key") else ("count",):
            variants = {
                "ours": lambda q=sql, a=action: getattr(to_spark(table, s, where=q), a)(),
                "plain": lambda q=sql, a=action: getattr(s.read.parquet(*meta["files"]).where(q), a)(),
            }
            rows = {"ours": to_spark(table, s, where=sql).count(),
                    "plain": s.read.parquet(*meta["files"]).where(sql).count()}
            times: dict[str, list[float]] = {k: [] for k in variants}
            for _ in range(5):
                for fn in variants.values():
                    fn()
            for _ in range(repeat):
                for name, fn in variants.items():
                    t0 = time.perf_counter()
                    fn()
                    times[name].append((time.perf_counter() - t0) * 1000)
            ours, plain = statistics.median(times["ours"]), statistics.median(times["plain"])
            out.append({"segments": meta["n"], "predicate": label, "action": action,
                        "system": "spark end to end", "carbonstore_ms": ours,
                        "spark_parquet_ms": plain, "speedup": plain / ours,
                        "count": rows["ours"], "plain_count": rows["plain"]})
            print(f"  spark {label} {action}(): carbonstore {ours:.0f} ms ({rows['ours']} rows), "
                  f"spark.read.parquet {plain:.0f} ms ({rows['plain']} rows)",
                  file=sys.stderr)
    return out


def lookup_phases(meta: dict[str, Any], runs: int = 25) -> str:
    """Where a lookup's time goes (``--lookup-phases``): each step of ``to_spark`` and of
    the frame's actions, ``runs`` times in turn, median of the last ``runs - 5``; markdown."""
    from carbonstore.pruning.plan import bind_where, prune
    from carbonstore.spark.api import arrow_rows, to_spark
    from carbonstore.spark.reader import (
        arrow_read_schema,
        plan_partitions,
        plan_projections,
        read_row_groups,
    )
    from carbonstore.spark.session import get_spark
    from carbonstore.spark.types import schema_ddl, struct_type

    s = get_spark()
    table = ours_open(meta)
    schema = struct_type(schema_ddl(table))
    lookups = [(label, sql) for label, sql in predicates(meta) if label in ("id = x", "k = key")]
    steps: dict[str, dict[str, Any]] = {}
    for label, sql in lookups:
        expr = bind_where(table, sql)
        plan = prune(table, expr)
        slices = [sl for part in plan_partitions(plan, projections=plan_projections(table, plan))
                  for sl in part.slices]
        rows = pa.Table.from_batches(list(read_row_groups(table, slices, expr=expr)),
                                     schema=arrow_read_schema(table))
        steps[label] = {
            "`bind_where`": lambda q=sql: bind_where(table, q),
            "`prune` (plan from the indexes)": lambda e=expr: prune(table, e),
            "`plan_partitions`": lambda p=plan: plan_partitions(
                p, projections=plan_projections(table, p)),
            "`read_row_groups` (driver read + row filter)": lambda sl=slices, e=expr: list(
                read_row_groups(table, sl, expr=e)),
            "Arrow rows to `Row`s (the frame's `collect()`)": lambda r=rows: arrow_rows(r, schema),
            "`to_spark` in all": lambda q=sql: to_spark(table, s, where=q),
            "`to_spark(...).count()`": lambda q=sql: to_spark(table, s, where=q).count(),
            "`to_spark(...).collect()`": lambda q=sql: to_spark(table, s, where=q).collect(),
            "`to_spark(...).toArrow()`": lambda q=sql: to_spark(table, s, where=q).toArrow(),
            "`spark.createDataFrame` of the rows (built when Spark needs the frame)":
                lambda r=rows: s.createDataFrame(r, schema=schema),
            "`to_spark(...).select(\"*\").collect()` (through Spark)":
                lambda q=sql: to_spark(table, s, where=q).select("*").collect(),
            "Spark's floor, `spark.sql(\"SELECT 1\").collect()`": lambda: s.sql("SELECT 1").collect(),
        }
        steps[label]["_info"] = (f"{len(plan.files)} files, {plan.rows} rows planned, "
                                 f"{rows.num_rows} read")
    times: dict[tuple[str, str], list[float]] = {}
    # the driver's own steps first, then those that call Spark: the JVM's work after a Spark
    # action (cleanup, GC threads) would otherwise land on the next round's driver steps
    spark_steps = [n for n in steps[lookups[0][0]] if "Spark" in n]  # those that run Spark
    for group in (lambda n: n not in spark_steps, lambda n: n in spark_steps):
        for _ in range(runs):
            for label, fns in steps.items():
                for name, fn in fns.items():
                    if name == "_info" or not group(name):
                        continue
                    t0 = time.perf_counter()
                    fn()
                    times.setdefault((label, name), []).append((time.perf_counter() - t0) * 1000)
    labels = list(steps)
    lines = ["| step | " + " | ".join(f"`{lb}` ({steps[lb]['_info']})" for lb in labels) + " |",
             "|---|" + "---|" * len(labels)]
    for name in steps[labels[0]]:
        if name == "_info":
            continue
        cells = [f"{statistics.median(times[(lb, name)][5:]):.1f} ms" for lb in labels]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def to_markdown(results: list[dict[str, Any]]) -> str:
    lines = ["| segments | predicate | system | warm ms | reused ms | fresh ms | segments kept | files | "
             "row groups | pages | rows |", "|" + "---|" * 11]
    for r in results:
        if "warm_ms" not in r:
            continue
        cells = [r["segments"], r["predicate"], r["system"], f"{r['warm_ms']:.1f}", f"{r['reused_ms']:.1f}",
                 f"{r['fresh_ms']:.1f}"] + [r.get(k, "-") for k in ("segments_kept", "files", "row_groups",
                                                                     "pages", "rows")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    spark = [r for r in results if "speedup" in r]
    if spark:
        lines += ["", "| segments | predicate | action | carbonstore ms | spark.read.parquet ms | speedup "
                  "| count (carbonstore / plain) |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['segments']} | {r['predicate']} | {r['action']}() | {r['carbonstore_ms']:.0f} | "
                  f"{r['spark_parquet_ms']:.0f} | {r['speedup']:.1f}x | {r['count']} / {r['plain_count']} |"
                  for r in spark]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--segments", default="100,400", help="comma-separated sizes (loads)")
    p.add_argument("--rows", type=int, default=ROWS, help="rows per load")
    p.add_argument("--peers", default="pyarrow,iceberg,delta")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--spark", action="store_true", help="also time end to end through Spark")
    p.add_argument("--lookup-phases", action="store_true",
                   help="only time the steps of a lookup through Spark (first size)")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--fresh", help=argparse.SUPPRESS)
    p.add_argument("--meta", help=argparse.SUPPRESS)
    p.add_argument("--sql", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.fresh:
        _fresh_main(args.fresh, args.meta, args.sql)
        return 0
    if args.lookup_phases:
        print(lookup_phases(generate(int(args.segments.split(",")[0]), args.rows)))
        return 0
    peers = {x.strip() for x in args.peers.split(",") if x.strip()}
    results: list[dict[str, Any]] = []
    for n in (int(x) for x in args.segments.split(",")):
        results.extend(run_size(n, args.rows, peers, args.repeat, args.spark))
    print(to_markdown(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
