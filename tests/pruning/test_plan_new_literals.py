"""A reused handle planning a new literal every plan: the plan planned anew.

Segments the index snapshot covers are planned from arrays of their whole layout group,
kept with the view; a plan whose filter keeps some of them takes their row-group and page
statistics (and page layouts) from those arrays by index (``SnapshotArrays(within=...)``).
These tests compare such plans with plans of the same table without a snapshot (a copy
whose segments are planned from their merge indexes: nothing is selected there).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store, Table
from carbonstore.pruning.cache import clear_cache
from carbonstore.pruning.plan import TablePlan, prune
from carbonstore.pruning.table_index import readable_segments, refresh_index_snapshot, table_index
from tests.dml.rows import SCHEMA, rows
from tests.indexfiles.segbuild import add_segments

SEGMENTS = 5
ROWS = 300


def _same(plan: TablePlan) -> dict:
    """Everything a plan says but how long it took."""
    j = plan.to_json()
    del j["planning_ms"]
    return {"json": j, "segments": plan.segments, "files": plan.files, "dropped": plan.dropped,
            "explain": plan.explain().split("\n", 1)[1:]}


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[Table, Table]:
    """The table with its index snapshot, and a copy without one (fewer segments than
    ``carbon.index.snapshot.max.lag``: planning does not write one)."""
    root = tmp_path_factory.mktemp("stores")
    store = Store(str(root / "s"))
    t = store.create_table("db.t", SCHEMA)
    half = ROWS // 2  # two files a segment, row groups of 60 rows, pages of 15
    add_segments(t, [[rows(range(k * ROWS, k * ROWS + half)), rows(range(k * ROWS + half, (k + 1) * ROWS))]
                     for k in range(SEGMENTS)], row_group_size=60, page_rows=15, bloom_columns=["name"])
    shutil.copytree(store.location, root / "copy")
    assert refresh_index_snapshot(t) is not None
    return t, Store(str(root / "copy")).table("db.t")


def test_a_filter_keeping_some_segments_is_planned_from_the_whole_group(tables: tuple[Table, Table]) -> None:
    table, _ = tables
    clear_cache()
    handle = Store(table.store.location).table("db.t")
    prune(handle, "id = 5")
    view = table_index(handle, readable_segments(handle.status.read()))
    parts, _ = view.units(np.array([1, 3], dtype=np.intp))
    assert len(parts) == 1 and parts[0].whole is not None  # selected, not gathered again
    column = parts[0].column("id")
    assert column.selection is not None and column.pages.selection is not None
    whole, _ = view.units(np.arange(SEGMENTS, dtype=np.intp))
    assert whole[0].whole is None  # every segment: the group's arrays themselves


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(
    st.integers(-10, SEGMENTS * ROWS + 10).map(lambda x: f"id = {x}"),
    st.tuples(st.integers(0, SEGMENTS * ROWS), st.integers(0, 2 * ROWS)).map(
        lambda t: f"id >= {t[0]} and id <= {t[0] + t[1]}"),
    st.integers(0, 8).map(lambda x: f"name = 'n{x}'"),
    st.floats(0, SEGMENTS * ROWS / 4).map(lambda x: f"score > {x:.2f}"),
    st.tuples(st.integers(0, SEGMENTS * ROWS), st.integers(0, 6)).map(
        lambda t: f"id > {t[0]} or name = 'n{t[1]}'"),
), min_size=1, max_size=8), st.booleans())
def test_new_literals_on_a_reused_handle_plan_as_from_merge_indexes(
    tables: tuple[Table, Table], filters: list[str], explain: bool,
) -> None:
    table, plain = tables
    clear_cache()
    handle = Store(table.store.location).table("db.t")
    prune(handle, "id >= 0")  # the group's arrays: built by a plan that keeps everything
    got = [_same(prune(handle, where, explain=explain)) for where in filters]
    assert got == [_same(prune(plain, where, explain=explain)) for where in filters]
