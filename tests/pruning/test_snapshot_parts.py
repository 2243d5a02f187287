"""A plan keeping a few segments of a large snapshot chunk decodes only their values.

The row-group and page statistics of the few segments a lookup keeps are decoded alone
(``Snapshot.chunk_ranges``), not the arrays of the chunk's every row group and page
(10,000 row groups and 20,000 pages a chunk at 100,000 segments). The thresholds are
lowered here so that a small table has "large" chunks; the plans must equal those of a
copy of the table planned from its merge indexes.
"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store, Table
from carbonstore.indexfiles import snapshot as snapshot_mod
from carbonstore.indexfiles import snapshot_arrays
from carbonstore.pruning.cache import COUNTERS, clear_cache
from carbonstore.pruning.plan import prune
from carbonstore.pruning.table_index import refresh_index_snapshot
from tests.indexfiles.segbuild import add_segments

SEGMENTS = 16
ROWS = 80  # a segment: one file of 8 row groups of 10 rows, pages of 5 rows


def _segment(k: int) -> pa.Table:
    ids = list(range(k * ROWS, (k + 1) * ROWS))
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "name": pa.array([None if i % 13 == 0 else f"n{i % 29:02d}" for i in ids], pa.string()),
                     "score": pa.array([float("nan") if i % 17 == 0 else i / 8 for i in ids], pa.float64())})


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[Table, Table]:
    root = tmp_path_factory.mktemp("stores")
    t = Store(str(root / "s")).create_table("db.t", "id long not null, name string, score double")
    add_segments(t, [_segment(k) for k in range(SEGMENTS)], row_group_size=10, page_rows=5,
                 bloom_columns=["name"])
    shutil.copytree(t.store.location, root / "copy")
    assert refresh_index_snapshot(t) is not None
    return t, Store(str(root / "copy")).table("db.t")


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk of 128 row groups and 256 pages counts as large; pages of few row groups
    are taken alone (page_subset) from 64 row groups on."""
    monkeypatch.setattr(snapshot_mod, "_PART_MIN", 64)
    monkeypatch.setattr(snapshot_arrays, "_SUBSET_MIN_RGS", 64)
    clear_cache()


def _json(table: Table, where: str) -> dict:
    got = prune(Store(table.store.location).table("db.t"), where).to_json()
    del got["planning_ms"]
    return got


def test_a_lookup_decodes_its_segments_values_alone(tables: tuple[Table, Table], small_parts: None) -> None:
    table, copy = tables
    COUNTERS.clear()
    got = _json(table, "id = 333")
    assert COUNTERS["snapshot_part_decodes"] > 0
    assert COUNTERS.get("snapshot_array_decodes", 0) == 0  # no array of the chunk
    assert got["levels"]["row_groups"]["kept"] == 1 and got == _json(copy, "id = 333")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(
    st.integers(-5, SEGMENTS * ROWS + 5).map(lambda x: f"id = {x}"),
    st.tuples(st.integers(0, SEGMENTS * ROWS), st.integers(0, 3 * ROWS)).map(
        lambda t: f"id >= {t[0]} and id < {t[0] + t[1]}"),
    st.integers(0, 30).map(lambda x: f"name = 'n{x:02d}'"),
    st.integers(0, SEGMENTS * ROWS).map(lambda x: f"id = {x} or score > {x / 8 + 3}"),
    st.integers(0, SEGMENTS * ROWS).map(lambda x: f"score >= {x / 8} and score <= {x / 8 + 2}"),
), min_size=1, max_size=6))
def test_plans_from_decoded_parts_equal_plans_from_merge_indexes(
    tables: tuple[Table, Table], small_parts: None, filters: list[str],
) -> None:
    table, copy = tables
    for where in filters:
        assert _json(table, where) == _json(copy, where), where
