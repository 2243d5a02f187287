"""``Table.scan().to_batches()`` streams: a table larger than the memory bound is read with
bounded RSS, in a process without a JVM (JAVA_HOME unset)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from carbonstore import Store

ROOT = Path(__file__).resolve().parents[2]
ROWS, WIDTH, BATCH = 800_000, 250, 8_000  # ~190 MB of incompressible strings

_READ = textwrap.dedent("""
    import os, sys
    from carbonstore import Store

    def rss():  # the resident set now, in bytes (/proc: Linux)
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    table = Store(sys.argv[1]).table("db.big")
    scan = table.scan(where="id >= 0", batch_rows=8192)
    scan.plan  # planned (index read) before the baseline
    base = peak = rss()
    if sys.argv[2] == "stream":
        rows = 0
        for b in scan.to_batches():
            rows += b.num_rows
            peak = max(peak, rss())
    else:
        data = scan.to_arrow()
        rows, peak = data.num_rows, rss()
    print(rows, (peak - base) >> 20, "pyspark" in sys.modules)
""")


def _batches() -> Iterator[pa.RecordBatch]:
    rng = np.random.default_rng(7)
    for lo in range(0, ROWS, BATCH):
        raw = rng.integers(0, 256, size=(BATCH, WIDTH // 2), dtype=np.uint8)
        text = pa.array([r.tobytes().hex() for r in raw])
        yield pa.record_batch({"id": pa.array(np.arange(lo, lo + BATCH)), "payload": text})


def _read(location: str, how: str) -> tuple[int, int]:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", _READ, location, how], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows, grown_mb, spark = out.stdout.split()
    assert spark == "False"
    return int(rows), int(grown_mb)


def test_streaming_read_holds_a_batch_not_the_table(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "s"))
    table = store.create_table("db.big", "id long not null, payload string",
                               properties={"blocklet_size_in_mb": "2"})
    schema = pa.schema([("id", pa.int64()), ("payload", pa.string())])
    table.append(pa.RecordBatchReader.from_batches(schema, _batches()))
    data_mb = ROWS * WIDTH // (1 << 20)
    rows, streamed = _read(store.location, "stream")
    assert rows == ROWS
    rows, whole = _read(store.location, "whole")
    assert rows == ROWS
    # the measure sees a whole-table read (it holds every row) ...
    assert whole >= data_mb * 0.8, (whole, data_mb)
    # ... and the stream holds a row group and a batch at a time: measured 50-95 MB for
    # tables of 38 and 190 MB alike (Arrow's mimalloc pool keeps freed pages for reuse;
    # jemalloc: 25 MB), a third or less of what the whole read holds
    assert streamed <= whole / 3, (streamed, whole, data_mb)
