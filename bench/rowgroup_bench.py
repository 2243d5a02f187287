"""Would row-group selection pay in the native read? Few kept row groups of big files.

Dataset B: ``--loads`` loads x ``--rows`` rows (``id`` increasing, ``x = id / 2`` double
with 0.1 % NaN, ``cat`` one of 100 strings), written by the product's load task with 1 MB
blocklets (about 50 row groups per file), under bench/data/ (gitignored). The filter
``x = v`` keeps one row group of one file in the index, but the native read
projects float columns through ``nanvl`` (so parquet-java never skips NaN rows), so
Spark reads every row group of the kept file. Variants, interleaved, ``count()``:

- ``whole files``: ``to_spark(table, spark, where=...)`` as shipped;
- ``row groups (id range)``: the same frame with a pushable ``id BETWEEN lo AND hi``
  covering exactly the kept row groups (their exact ``id`` statistics): parquet-java then
  skips the other row groups by their statistics - what a row-group selection could do;
- ``row groups (_metadata.row_index)``: the kept rows' positions as a filter on Spark's
  hidden ``_metadata.row_index`` column (not pushed to parquet-java);
- ``spark.read.parquet``: plain Spark over the same files (parquet-java skips by ``x``).

Usage: ``.venv/bin/python bench/rowgroup_bench.py [--loads 2 --rows 2000000 --repeat 7]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
TABLE = "db.rg"


def generate(loads: int, rows: int) -> dict[str, Any]:
    from carbonstore import Store
    from carbonstore.indexfiles.indexfile import merge_indexes
    from carbonstore.segments.load import parse_load_options, write_settings
    from carbonstore.segments.writer import write_task
    from carbonstore.store.tablestatus import SUCCESS, LoadEntry, TableStatusSnapshot, now_ms

    root = DATA / f"rg_n{loads}_r{rows}"
    meta_path = root / "meta.json"
    if meta_path.exists():
        return dict(json.loads(meta_path.read_text()))
    store = Store(str(root / "store"))
    table = store.create_table(TABLE, "id long not null, x double, cat string")
    rng = np.random.default_rng(7)
    entries, files = [], []
    for seg in range(loads):
        ids = np.arange(seg * rows, (seg + 1) * rows, dtype=np.int64)
        x = ids / 2.0
        x[rng.random(rows) < 0.001] = np.nan
        data = pa.table({"id": ids, "x": x,
                         "cat": pa.array([f"cat_{v}" for v in rng.integers(0, 100, rows).tolist()])})
        sid = str(seg)
        settings = replace(write_settings(table, sid, parse_load_options(table, {})),
                           blocklet_bytes=1 << 20, statistics=False)
        table.store.sfs.makedirs(settings.segment_dir)
        res = write_task(data.to_batches(max_chunksize=65536), settings, task_id="00000-0")
        merge = f"{sid}_{now_ms()}.carbonindexmerge"
        size = merge_indexes(store.sfs.fs, [f"{settings.segment_dir}/{res.index_file}"],
                             f"{settings.segment_dir}/{merge}", segment_id=sid)
        files.extend(f"{settings.segment_dir}/{f}" for f in res.files)
        entries.append(LoadEntry(load_name=sid, status=SUCCESS, load_start_time=now_ms(),
                                 timestamp=now_ms(), row_count=res.rows, data_size=res.data_bytes,
                                 index_size=size, segment_file=merge))

    def add(snap: TableStatusSnapshot) -> list[LoadEntry]:
        return [*snap.entries, *entries]

    table.status.update(add)
    meta = {"store": str(root / "store"), "files": files, "rows": rows, "loads": loads}
    meta_path.write_text(json.dumps(meta))
    return meta


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loads", type=int, default=2)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    meta = generate(args.loads, args.rows)

    from carbonstore import Store
    from carbonstore.pruning.plan import prune
    from carbonstore.spark.api import to_spark
    from carbonstore.spark.native import native_frame
    from carbonstore.spark.session import get_spark
    from carbonstore.store import load_conf

    spark = get_spark()
    # no driver-local read of the few kept rows: measure Spark's file scan
    conf = load_conf(None).with_overrides({"carbon.read.local.rows": "0"})
    table = Store(meta["store"], conf=conf).table(TABLE)
    mid = args.rows // 2
    where = f"x = {mid / 2}"  # the index keeps one row group; x is a float, so not pushed
    plan = prune(table, where)
    kept = [(f, rg) for f in plan.files for rg in f.row_groups]
    spans: list[list[int]] = []
    positions = []
    for f, rg in kept:
        md = pq.ParquetFile(plan.absolute(f.path)).metadata
        st = md.row_group(rg.index).column(0).statistics  # id: exact, no nulls
        if spans and spans[-1][1] + 1 == st.min:
            spans[-1][1] = st.max  # neighbouring row groups: one range
        else:
            spans.append([st.min, st.max])
        first = sum(md.row_group(i).num_rows for i in range(rg.index))
        positions.append(f"(_metadata.row_index BETWEEN {first} AND {first + rg.num_rows - 1})")
    ranges = [f"(id BETWEEN {a} AND {b})" for a, b in spans]
    total_rgs = sum(pq.ParquetFile(plan.absolute(f.path)).metadata.num_row_groups for f in plan.files)
    print(f"plan keeps {len(plan.files)} file(s), {len(kept)} of {total_rgs} row groups in them; "
          f"load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    id_range = " OR ".join(ranges)

    def whole() -> int:
        return int(to_spark(table, spark, where=where).count())

    def by_id() -> int:
        return int(native_frame(spark, table, plan, pushable=id_range).where(where).count())

    def by_row_index() -> int:
        paths = ["file://" + plan.absolute(f.path) for f in plan.files]
        raw = spark.read.parquet(*paths).select("*", "_metadata.row_index")
        return int(raw.where(" OR ".join(positions).replace("_metadata.row_index", "row_index"))
                   .where(where).count())

    def plain() -> int:
        return int(spark.read.parquet(*meta["files"]).where(where).count())

    variants = {"whole files": whole, "row groups (id range)": by_id,
                "row groups (_metadata.row_index)": by_row_index, "spark.read.parquet": plain}
    answers = {k: fn() for k, fn in variants.items()}
    for _ in range(3):
        for fn in variants.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.repeat):
        for k, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            times[k].append((time.perf_counter() - t0) * 1000)
    base = statistics.median(times["whole files"])
    print("| variant | median ms | vs whole files | count |\n|---|---|---|---|")
    for k in variants:
        m = statistics.median(times[k])
        print(f"| {k} | {m:.0f} | {base / m:.2f}x | {answers[k]} |")
    print(f"load average after: {os.getloadavg()[0]:.1f}", file=sys.stderr)


if __name__ == "__main__":
    main()
