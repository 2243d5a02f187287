"""Cost of reading segments of an older schema version (store/evolution.py), driver-local.

Builds one table of SEGMENTS segments x ROWS rows, then measures (median of REPEATS):
open + plan + read of every row, and a selective lookup, before any ALTER and after a
rename + widen + add column (every segment then read through a projection). Prints the
ratios measured in this run::

    PYTHONPATH=. python bench/alter_read_bench.py [SEGMENTS] [ROWS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

import pyarrow as pa

sys.path.insert(0, "tests/schema")
from schema_helpers import load, read  # noqa: E402

from carbonstore import Store  # noqa: E402
from carbonstore.pruning.cache import clear_cache  # noqa: E402
from carbonstore.store.alter import SUB_ACTIONS, alter_table  # noqa: E402

REPEATS = 5


def _timed(fn: object) -> float:
    out = []
    for _ in range(REPEATS):
        clear_cache()
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    segments = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 50_000
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"{tmp}/s")
        t = store.create_table("b", "id long not null, v int, name string, f float",
                               properties={"sort_columns": "id"})
        for s in range(segments):
            base = s * rows
            load(t, pa.table({
                "id": pa.array(range(base, base + rows), pa.int64()),
                "v": pa.array([i % 1000 for i in range(rows)], pa.int32()),
                "name": pa.array([f"n{i % 97}" for i in range(rows)]),
                "f": pa.array([i / 4 for i in range(rows)], pa.float32()),
            }))
        probe = segments * rows // 2

        def full() -> None:
            read(store.table("b"))

        def lookup() -> None:
            read(store.table("b"), f"id = {probe}")

        before = (_timed(full), _timed(lookup))
        for action, args in [("rename-column", ["name", "label"]), ("widen", ["v", "long"]),
                             ("widen", ["f", "double"]), ("add-column", ["extra int default 1"])]:
            alter_table(store.table("b"), SUB_ACTIONS[action][1](args), operation=action)
        after = (_timed(full), _timed(lookup))
        print(f"{segments} segments x {rows} rows, driver-local read, median of {REPEATS}")
        print(f"full scan : {before[0]*1000:8.1f} ms unaltered, {after[0]*1000:8.1f} ms through "
              f"projections ({after[0]/before[0]:.2f}x)")
        print(f"lookup    : {before[1]*1000:8.1f} ms unaltered, {after[1]*1000:8.1f} ms through "
              f"projections ({after[1]/before[1]:.2f}x)")


if __name__ == "__main__":
    main()
