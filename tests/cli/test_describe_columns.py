"""``describe`` of a table with an Arrow checkpoint answers from the checkpoint's columns:
no entry of the table is built (at 100,000 segments building them all cost most of a
second of CPU), only the few that record a clustering; the totals equal those of the
entries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.segments.cluster_spec import CLUSTERING_KEY
from carbonstore.segments.manage import delete_segments
from carbonstore.store.records import replace
from carbonstore.store.status_checkpoints import checkpoint_name
from carbonstore.store.status_snapshot import StatusChange

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def location(tmp_path_factory: pytest.TempPathFactory) -> str:
    store = Store(str(tmp_path_factory.mktemp("describe") / "store"))
    table = store.create_table("db.t", "id long not null, name string")

    def cluster(name: str) -> None:  # record a clustering, as a cluster compaction does
        def change(snapshot: Any) -> StatusChange:
            e = snapshot.find(name)
            spec = {"columns": ["id"], "curve": "zorder"}
            return StatusChange(upserts=(replace(
                e, extra={**e.extra, CLUSTERING_KEY: spec}),))

        table.status.update(change, operation="TEST CLUSTER")

    for i in range(26):  # 1 + 2 versions each: past the checkpoint of version 50
        table.append(pa.table({"id": pa.array(range(i * 3, i * 3 + 3), pa.int64()),
                               "name": ["a", "b", "c"]}))
        if i == 6:
            cluster("5")  # in the checkpoint's columns
    table.delete("id = 4")  # a delete delta: live rows are not row counts
    delete_segments(table, "3")
    cluster("20")  # in a version after the checkpoint
    assert (Path(table.status.log_dir) / checkpoint_name(50)).exists()
    return store.location


# a fresh process (a process's reads share decoded versions): every entry built is
# counted, building all of them fails
_DESCRIBE = """
import json, sys
from carbonstore import Store
from carbonstore.segments.cluster_spec import CLUSTERING_KEY
from carbonstore.store.checkpoint_arrow import ArrowBase
built = []
real_row = ArrowBase.row
def row(self, i):
    built.append(i)
    return real_row(self, i)
def every(self):
    raise AssertionError("describe built every entry")
ArrowBase.all, ArrowBase.row = every, row
table = Store(sys.argv[1]).table("db.t")
info = table.describe()
clustered = [e.load_name for e in table.status.read().view.readable_with_extra(CLUSTERING_KEY)]
print(json.dumps({"info": info, "clustered": clustered, "built": len(built)}))
"""


def test_describe_builds_no_entry_of_the_checkpoint(location: str) -> None:
    out = subprocess.run([sys.executable, "-c", _DESCRIBE, location], capture_output=True,
                         text=True, timeout=120, cwd=ROOT, env={**os.environ,
                                                                "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    entries = Store(location).table("db.t").status.read().entries
    live = [e for e in entries if e.readable]
    info = got["info"]
    assert (info["segments"], info["readableSegments"], info["rows"], info["dataSize"]) == (
        len(entries), len(live), sum(e.row_count - e.deleted_rows for e in live),
        sum(e.data_size for e in live))
    assert info["rows"] == 26 * 3 - 3 - 1
    assert got["clustered"] == ["5", "20"]
    assert got["built"] == 1  # segment 5, from the checkpoint's columns


def test_describe_prints_the_clustered_segments(location: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", location, "describe", "db.t", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"clusteredSegments"' in out and '"5": "zorder(id)"' in out and '"20"' in out
    assert '"readableSegments": 25' in out
