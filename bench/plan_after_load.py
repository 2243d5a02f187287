"""The first `k = key` plan after a load (a new table view), and the one after it.

Copies the index files (not the Parquet files: planning does not read them) of
bench/data/n<N>_r25000 (bench/prune_bench.py) to a temporary store, plans twice, then three
times adds one 25,000-row segment (tests/indexfiles/segbuild.add_segments) and times the
next two plans. Prints (first ms, second ms, bloom reads of the first, segments kept) per
load. Run it with PYTHONPATH set to the source tree to time; e.g. the trees before and
after a change, one after the other::

    PYTHONPATH=OLD_TREE .venv/bin/python bench/plan_after_load.py --segments 1600
    PYTHONPATH=. .venv/bin/python bench/plan_after_load.py --segments 1600
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent))  # tests.indexfiles.segbuild (after PYTHONPATH's carbonstore)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--segments", type=int, default=1600)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    import sqlglot.dialects.spark  # noqa: F401 - imports are start-up, not planning

    from carbonstore import Store
    from carbonstore.pruning.cache import COUNTERS
    from carbonstore.pruning.plan import prune
    from tests.indexfiles.segbuild import add_segments

    meta = json.loads((HERE / "data" / f"n{args.segments}_r25000" / "meta.json").read_text())
    where = f"k = '{meta['key']}'"
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(meta["store"], f"{tmp}/store", ignore=shutil.ignore_patterns("*.parquet"))
        t = Store(f"{tmp}/store").table("db.bench")
        prune(t, where)
        prune(t, where)
        rng = np.random.default_rng(args.seed)
        out = []
        for _ in range(3):
            n = 25_000
            keys = [f"{v:016x}" for v in rng.integers(0, 2**63, n).tolist()]
            data = pa.table({"id": np.arange(n, dtype=np.int64),
                             "ts": pa.array(np.arange(n) * 1000, pa.timestamp("us", tz="UTC")),
                             "k": keys, "cat": ["cat_1"] * n, "v": np.ones(n), "n": np.arange(n)})
            add_segments(t, [data], row_group_size=n, page_rows=2_500, bloom_columns=["k"])
            COUNTERS.clear()
            t0 = time.perf_counter()
            plan = prune(t, where)
            first = (time.perf_counter() - t0) * 1000
            reads = COUNTERS.get("bloom_reads", 0)
            t0 = time.perf_counter()
            prune(t, where)
            second = (time.perf_counter() - t0) * 1000
            out.append((round(first, 1), round(second, 1), reads, plan.levels["segments"].kept))
    print(out)


if __name__ == "__main__":
    main()
