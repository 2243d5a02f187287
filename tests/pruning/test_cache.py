"""Driver index cache, segment bounds and the table-level index snapshot."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.pruning.cache import COUNTERS, clear_cache, driver_cache
from carbonstore.pruning.plan import prune
from carbonstore.pruning.table_index import (
    refresh_if_lagging,
    refresh_index_snapshot,
    snapshot_names,
)
from carbonstore.segments.manage import delete_segments
from tests.indexfiles.segbuild import add_segments

ROOT = Path(__file__).resolve().parents[2]


def _data(start: int, n: int = 100) -> pa.Table:
    ids = np.arange(start, start + n)
    x = ids / 4.0
    x[::7] = np.nan
    return pa.table({"id": ids, "x": x, "s": [f"v{i:05d}" for i in ids]})


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_cache()
    COUNTERS.clear()


def test_cache_sees_new_and_deleted_segments_at_once(store: Store) -> None:
    t = store.create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(0), _data(100)])
    assert prune(t, "id >= 0").levels["segments"].total == 2
    reads = COUNTERS["merge_index_reads"]
    assert prune(t, "id >= 0").levels["rows"].kept == 200
    assert COUNTERS["merge_index_reads"] == reads  # warm: nothing re-read
    add_segments(t, [_data(200)])
    plan = prune(t, "id = 250")
    assert plan.segments == ("2",) and plan.levels["segments"].total == 3
    assert COUNTERS["merge_index_reads"] == reads + 1  # only the new segment
    delete_segments(t, "2")
    assert prune(t, "id = 250").segments == ()


def test_segment_bounds_drop_whole_segments(store: Store) -> None:
    t = store.create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(k * 100) for k in range(6)], row_group_size=30)
    plan = prune(t, "s = 'v00321'")
    lv = plan.levels["segments"].to_json()
    assert lv["kept"] == 1 and lv["dropped_by_minmax"] == 5
    # NaN is greater than every number (Spark) and these files do not count NaNs: x > 1000
    # may match a NaN anywhere, x < -5 nowhere
    assert prune(t, "x > 1000").levels["segments"].kept == 6
    assert prune(t, "x < -5").levels["segments"].to_json()["dropped_by_minmax"] == 6
    assert prune(t, "x IS NULL").levels["segments"].to_json()["dropped_by_counts"] == 6


def test_lru_is_bounded_by_the_configured_size(store: Store) -> None:
    small = Store(store.location, conf=store.conf.with_overrides({"carbon.driver.index.cache.size.mb": "1"}))
    t = small.create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(k * 5000, 5000) for k in range(12)], row_group_size=100, page_rows=10)
    prune(t, "id >= 0")
    c = driver_cache()
    assert c.capacity == 1 << 20
    assert 0 < c.used <= c.capacity
    assert len(c) < 12
    # no cached table view keeps segment indexes the LRU let go of
    assert not c._views
    prune(t, "id >= 0")
    assert not c._views
    roomy = Store(store.location, conf=store.conf).table("db.t")
    prune(roomy, "id >= 0")  # within the default budget the view is kept for the next plan
    assert len(c._views) == 1


def test_snapshots_count_in_the_cache_budget(store: Store) -> None:
    """A table's decoded snapshot is counted (and recounted as arrays are decoded); over
    budget, segment indexes go first, then other tables' snapshots, never the current one."""
    clear_cache()
    conf = store.conf.with_overrides({"carbon.driver.index.cache.size.mb": "1"})
    small = Store(store.location, conf=conf)
    tables = []
    for name in ("db.a", "db.b"):
        t = small.create_table(name, "id long, x double, s string")
        add_segments(t, [_data(k * 3000, 3000) for k in range(24)], row_group_size=50, page_rows=10)
        assert refresh_index_snapshot(t) is not None
        tables.append(t)
    c = driver_cache()
    a, b = tables
    # every segment planned from a's snapshot; two columns' sections are read (a plan
    # reads only the sections of the columns it filters on)
    where = "id >= 0 OR x > 0"
    prune(a, where)
    snap_a = c.get_snapshot(a.paths.root, snapshot_names(a)[-1])
    assert snap_a is not None
    counted = c._snapshots[a.paths.root][1]
    read = sum(snap_a.source.sections[s][1] for s in snap_a.sections_read)
    assert counted == snap_a.nbytes > read  # the sections read and the flat arrays decoded from them
    assert c.used >= counted
    # a second table's snapshot of the same size pushes the first one out: both do not fit
    assert 2 * counted > c.capacity == 1 << 20
    prune(b, where)
    assert list(c._snapshots) == [b.paths.root]
    assert c.used <= c.capacity
    assert c.used == sum(size for _, size in c._snapshots.values()) + sum(
        item.nbytes for item in c._items.values())


def _fresh_process_plan(store: Store, where: str) -> dict:
    code = textwrap.dedent(f"""
        import json, sys
        from carbonstore import Store
        from carbonstore.pruning.cache import COUNTERS
        from carbonstore.pruning.plan import prune
        plan = prune(Store({store.location!r}).table("db.t"), {where!r})
        print(json.dumps({{"counters": dict(COUNTERS), "rows": plan.levels["rows"].kept,
                           "segments": list(plan.segments)}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_fresh_process_reads_the_snapshot_not_every_segment(store: Store) -> None:
    t = store.create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(k * 100) for k in range(30)], bloom_columns=["s"])
    assert refresh_index_snapshot(t) is not None
    res = _fresh_process_plan(store, "id = 1234")
    assert res["segments"] == ["12"]
    assert res["counters"].get("snapshot_reads") == 1
    assert res["counters"].get("merge_index_reads", 0) == 0
    # segments committed since the snapshot: only those merge indexes are opened
    add_segments(t, [_data(3000 + k * 100) for k in range(3)])
    res = _fresh_process_plan(store, "id = 3150")
    assert res["segments"] == ["31"]
    assert res["counters"]["merge_index_reads"] == 3
    # bloom bitsets come lazily from the merge file of the candidate only
    res = _fresh_process_plan(store, "s = 'v01234'")
    assert res["rows"] == 100 and res["counters"].get("bloom_reads", 0) <= 1


def test_fresh_process_drops_segments_on_blooms_without_decoding_them(store: Store) -> None:
    t = store.create_table("db.t", "k string, n long")
    rng = np.random.default_rng(3)
    keys = [[f"{v:016x}" for v in rng.integers(0, 2**63, 50)] for _ in range(40)]
    add_segments(t, [pa.table({"k": ks, "n": np.arange(50)}) for ks in keys], bloom_columns=["k"],
                 bloom_fpp=0.0001)
    refresh_index_snapshot(t)
    # the bloom pack written with the snapshot answers the segment probe, and the row-group
    # probe takes its answer for the survivor (one row group): no bitset read from a merge index
    res = _fresh_process_plan(store, f"k = '{keys[23][7]}'")
    assert res["segments"] == ["23"]
    c = res["counters"]
    assert c.get("merge_index_reads", 0) == 0 and c["bloom_pack_probes"] == 1 and c.get("bloom_reads", 0) == 0
    assert c["header_decodes"] == 1  # only the surviving segment's index is decoded
    for pack in Path(t.paths.index_snapshot_dir).glob("*.carbonbloom"):
        pack.unlink()  # without it: one read per candidate segment's merge index
    res = _fresh_process_plan(store, f"k = '{keys[23][7]}'")
    assert res["segments"] == ["23"]
    c = res["counters"]
    assert c.get("merge_index_reads", 0) == 0 and 30 <= c["bloom_reads"] <= 40  # min/max drop a few
    assert c["header_decodes"] == 1  # only the surviving segment's index is decoded


def test_lagging_snapshot_is_refreshed_by_the_writers_step(store: Store) -> None:
    t = store.create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(k * 100) for k in range(4)])
    assert refresh_if_lagging(t) is None  # 4 segments: within the lag of 8
    add_segments(t, [_data(400 + k * 100) for k in range(6)])
    clear_cache()
    prune(t, None)
    assert COUNTERS.get("snapshot_writes", 0) == 0  # planning never writes
    assert refresh_if_lagging(t) is not None
    assert COUNTERS["snapshot_writes"] == 1
    names = snapshot_names(t)
    assert len(names) == 1 and names[0].split("_")[2] == "10"
    res = _fresh_process_plan(store, "id >= 0")
    assert res["rows"] == 1000 and res["counters"].get("merge_index_reads", 0) == 0


def test_broken_snapshot_only_costs_speed(store: Store) -> None:
    t = store.create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(k * 100) for k in range(3)])
    name = refresh_index_snapshot(t)
    assert name is not None
    Path(t.paths.index_snapshot_dir, name).write_bytes(b"garbage")
    clear_cache()
    COUNTERS.clear()
    assert prune(t, "id = 150").segments == ("1",)
    assert COUNTERS["snapshot_errors"] == 1 and COUNTERS["merge_index_reads"] == 3
