"""UPDATE SET expression evaluation (segments.merge.evaluate_assignments) over decimal
columns, CPU time per call, interleaved between source trees (e.g. before/after a change).

    python bench/dml_decimal_bench.py --trees before=/tmp/before,after=. --rows 100000 --rounds 5
    python bench/dml_decimal_bench.py --exprs '["p / 3", "d=>cast(s AS double)"]'

An expression ``column=>expr`` sets ``column`` (a text column ``s`` holds numbers between
blanks; ``d`` double, ``day`` date and ``b`` boolean columns are there to be set).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, sys, tempfile, time
from decimal import Decimal
import pyarrow as pa
from carbonstore import Store
from carbonstore.segments.merge import evaluate_assignments
rows, exprs = int(sys.argv[1]), json.loads(sys.argv[2])
t = Store(tempfile.mkdtemp()).create_table(
    "db.b", "id long not null, p decimal(10,2), q decimal(38,10), n int, c string, s string, d double, "
    "day date, b boolean")
data = pa.table({"id": pa.array(range(rows), pa.int64()),
                 "p": pa.array([Decimal(i % 10000) / 100 for i in range(rows)], pa.decimal128(10, 2)),
                 "q": pa.array([(Decimal(i) / 7).quantize(Decimal("1e-10")) for i in range(rows)],
                               pa.decimal128(38, 10)),
                 "n": pa.array([i % 1000 for i in range(rows)], pa.int32()),
                 "c": pa.array([("straße " if i % 10 == 0 else "street ") + str(i) for i in range(rows)]),
                 "s": pa.array([f" {i / 7:.4f} " for i in range(rows)]),
                 "d": pa.array([None] * rows, pa.float64()),
                 "day": pa.array([None] * rows, pa.date32()),
                 "b": pa.array([None] * rows, pa.bool_())})
out = {}
for e in exprs:
    c0, w0 = time.process_time(), time.perf_counter()
    try:
        col, _, text = e.rpartition("=>")  # "d=>cast(s AS double)": the column set
        col = col or ("c" if "(c" in e else "p" if e.startswith("p") else "q")
        evaluate_assignments(t, data, {col: text})
        out[e] = (time.process_time() - c0, time.perf_counter() - w0)
    except Exception as err:
        out[e] = str(err).splitlines()[0][:60]
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", default="after=.")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--exprs", default='["p * 2", "p + n", "q + 1", "q * q", "q - q", "q * 0.5", "upper(c)", "lower(c)"]')
    a = ap.parse_args()
    trees = dict(kv.split("=", 1) for kv in a.trees.split(","))
    results: dict[str, dict[str, list]] = {k: {} for k in trees}
    for _ in range(a.rounds):
        for name, path in trees.items():  # interleaved
            env = dict(os.environ, PYTHONPATH=os.path.abspath(path))
            # cwd: "python -c" puts the working directory first on sys.path, before PYTHONPATH
            got = json.loads(subprocess.run([sys.executable, "-c", _CHILD, str(a.rows), a.exprs],
                                            env=env, capture_output=True, text=True, cwd=path,
                                            check=True).stdout.strip().splitlines()[-1])
            for e, v in got.items():
                results[name].setdefault(e, []).append(v)
    print(f"load average {os.getloadavg()[0]:.2f}; {a.rows} rows; median CPU ms (wall ms)")
    for e in json.loads(a.exprs):
        cells = []
        for name in trees:
            vals = results[name][e]
            if isinstance(vals[0], str):
                cells.append(f"{name}: {vals[0]}")
            else:
                cpu = sorted(v[0] for v in vals)[len(vals) // 2] * 1000
                wall = sorted(v[1] for v in vals)[len(vals) // 2] * 1000
                cells.append(f"{name}: {cpu:.0f} ({wall:.0f})")
        print(f"{e:10s} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
