"""Planning only reads the store: a lagging index snapshot is planned around, never
rewritten by a plan; the writers keep it fresh after their commits."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from carbonstore import Store
from carbonstore.pruning.answers import Aggregate, answer
from carbonstore.pruning.cache import COUNTERS, clear_cache
from carbonstore.pruning.plan import prune
from carbonstore.pruning.table_index import (
    read_snapshot,
    refresh_if_lagging,
    refresh_index_snapshot,
)
from carbonstore.store.conf import load_conf
from tests.indexfiles.segbuild import add_segments


def _data(start: int, n: int = 100) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table({"id": ids, "x": ids / 4.0, "s": [f"v{i:05d}" for i in ids]})


def _listing(root: str) -> list[tuple[str, int, int]]:
    """Every file and folder under ``root`` with its size and modification time (ns)."""
    found = []
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            st = os.stat(os.path.join(folder, name))
            found.append((os.path.relpath(os.path.join(folder, name), root), st.st_size,
                          st.st_mtime_ns))
    return sorted(found)


def _store(location: str, lag: int) -> Store:
    return Store(location, conf=load_conf(None).with_overrides(
        {"carbon.index.snapshot.max.lag": str(lag)}))


def _answers(table, where: str) -> tuple:
    plan = prune(table, where)
    found = answer(table, [Aggregate(func="count"), Aggregate(func="max", column="id")], where)
    return plan.segments, plan.levels["rows"].kept, found


def test_a_plan_over_a_lagging_snapshot_writes_nothing(tmp_path: Path) -> None:
    location = str(tmp_path / "store")
    t = _store(location, 1000).create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(0), _data(100)])
    assert refresh_index_snapshot(t) is not None  # covers segments 0 and 1
    add_segments(t, [_data(k * 100) for k in range(2, 8)])  # 6 more: beyond a lag of 2
    reader = _store(location, 2).table("db.t")
    clear_cache()
    COUNTERS.clear()
    before = _listing(location)
    lagging = [_answers(reader, w) for w in ("id >= 150 AND id < 420", "s = 'v00733'", None)]
    assert _listing(location) == before  # no snapshot, bloom pack, lock or any other file
    assert COUNTERS.get("snapshot_writes", 0) == 0
    assert lagging[0][0] == ("1", "2", "3", "4") and lagging[0][1] == 400
    assert lagging[1][0] == ("7",) and lagging[2][2] == (800, 799)
    # the same answers once the snapshot covers every segment
    assert refresh_index_snapshot(t) is not None
    clear_cache()
    assert [_answers(reader, w) for w in ("id >= 150 AND id < 420", "s = 'v00733'", None)] == lagging


def test_loads_keep_the_snapshot_fresh(tmp_path: Path) -> None:
    t = _store(str(tmp_path / "store"), 2).create_table("db.t", "id long, x double, s string")
    t.append(_data(0))
    t.append(_data(100))
    assert read_snapshot(t)[0] is None  # 2 segments: within the lag
    t.append(_data(200))  # 3 > 2: the load's commit writes one
    snapshot = read_snapshot(t)[0]
    assert snapshot is not None and snapshot.size == 3
    t.append(_data(300))
    assert read_snapshot(t)[0].size == 3  # one segment behind: planned from its merge index
    clear_cache()
    COUNTERS.clear()
    assert prune(t, "id = 350").segments == ("3",)
    assert COUNTERS.get("merge_index_reads", 0) == 1 and COUNTERS.get("snapshot_writes", 0) == 0


def test_the_writers_check_within_the_lag_reads_no_index(tmp_path: Path) -> None:
    """After each commit the writers ask whether the snapshot lags: within the limit the
    answer comes from the segments' names and row counts, with no merge index read (at
    100,000 segments building the view for it cost a load's commit 3.5 s of CPU)."""
    t = _store(str(tmp_path / "store"), 3).create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(k * 100) for k in range(3)])
    clear_cache()
    COUNTERS.clear()
    assert refresh_if_lagging(t) is None  # no snapshot yet, 3 segments: within the limit
    assert COUNTERS.get("merge_index_reads", 0) == 0
    add_segments(t, [_data(300)])
    assert refresh_if_lagging(t) is not None  # 4 uncovered > 3: written
    add_segments(t, [_data(k * 100) for k in range(4, 7)])  # 3 uncovered: within the limit
    clear_cache()
    COUNTERS.clear()
    assert refresh_if_lagging(t) is None
    assert COUNTERS.get("merge_index_reads", 0) == 0 and COUNTERS.get("snapshot_writes", 0) == 0
    add_segments(t, [_data(700)])  # 4 > 3
    assert refresh_if_lagging(t) is not None and read_snapshot(t)[0].size == 8
