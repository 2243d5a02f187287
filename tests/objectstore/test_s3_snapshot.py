"""The index snapshot on an object store: written with one PUT, read with ranged GETs
(directory and core section at open, a chunk's sections when a plan keeps its segments and
filters on their columns)."""

from __future__ import annotations

from s3fixtures import S3Store

from carbonstore import Store
from carbonstore.pruning.cache import COUNTERS, clear_cache
from carbonstore.pruning.plan import prune
from carbonstore.pruning.table_index import read_snapshot, refresh_index_snapshot, snapshot_names
from tests.dml.rows import SCHEMA, load, rows


def test_snapshot_read_in_sections_from_s3(s3_store: S3Store) -> None:
    store = Store(s3_store.location, conf=s3_store.conf())
    t = store.create_table("db.t", SCHEMA)
    for k in range(4):
        load(t, rows(range(k * 50, (k + 1) * 50)))
    clear_cache()
    want = {w: prune(t, w).to_json() for w in ("id = 120", "name = 'n3'")}  # from the merge indexes
    name = refresh_index_snapshot(t)
    assert name is not None and snapshot_names(t) == [name]
    clear_cache()
    COUNTERS.clear()
    snap, refused = read_snapshot(t)
    assert snap is not None and not refused and snap.size == 4
    assert COUNTERS["snapshot_sections"] == 1  # the core section only
    for where, plan in want.items():
        got = prune(t, where).to_json()
        for p in (got, plan):
            p.pop("planning_ms")
        assert got == plan
    assert COUNTERS.get("merge_index_reads", 0) == 0 and COUNTERS.get("snapshot_errors", 0) == 0
    # + the chunk's row groups and its files' paths (apart since format 8), id's and name's
    # two sections (one chunk: 4 segments)
    assert COUNTERS["snapshot_sections"] == 7
