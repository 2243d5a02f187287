"""Time travel look-ups on a table with thousands of versions, in fresh processes.

Times, inside a fresh process (imports excluded), median of ``--repeat``: opening the table
(``Store.table``), opening it and reading its latest version, ``version_as_of`` of a time in the middle of the history, the full
``history()`` and the newest 20 versions (``history(limit=20)``; a baseline checkout that
has no limit slices the full history). The store is any table built by many commits, e.g.
``bench/data/commit_1600/versions`` of ``bench/commit_bench.py``.

Usage::

    .venv/bin/python bench/version_search_bench.py --store DIR [--table db.t] [--repeat 5]
        [--baseline /path/to/previous/checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
from carbonstore import Store
store, name, what = sys.argv[1:4]
t0 = time.perf_counter()
table = Store(store).table(name)
if what == "open":
    pass
elif what == "open_read":
    snap = table.status.read()
elif what == "as_of":
    s = table.status
    probe = s._read_record(s._latest() // 2).timestamp + 1
    t0 = time.perf_counter()  # the look-up alone
    table = Store(store).table(name)
    v = table.status.version_as_of(probe)
elif what == "history":
    rows = table.history()
elif what == "tail20":
    try:
        rows = table.history(limit=20)
    except TypeError:  # a checkout without the limit
        rows = table.history()[-20:]
print(json.dumps((time.perf_counter() - t0) * 1000))
"""


def run(root: Path, store: str, table: str, what: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(root)}
    # cwd=root: "python -c" puts the working folder first on sys.path
    out = subprocess.run([sys.executable, "-c", CHILD, store, table, what], env=env, cwd=root,
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return float(json.loads(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--table", default="db.t")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", type=Path, default=None)
    args = ap.parse_args()
    roots = {"this": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
    for label, root in roots.items():
        for what in ("open", "open_read", "as_of", "history", "tail20"):
            times = [run(root, args.store, args.table, what) for _ in range(args.repeat)]
            print(f"{label:9} {what:8} median {statistics.median(times):8.2f} ms  "
                  f"min {min(times):8.2f} ms")


if __name__ == "__main__":
    main()
