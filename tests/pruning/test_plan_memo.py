"""Plans kept with their index view: a reused handle's repeated plan is the plan planned anew.

prune() keeps each plan with the cached view it was planned over, under the filter (text and
bound expression), the segment choice, ``explain`` and the tablestatus version, and reissues
it while the tablestatus entries are the same objects. These tests compare every reissued
plan with one planned from nothing (cache cleared, table opened again).
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store, Table
from carbonstore.errors import SegmentNotFoundError
from carbonstore.pruning.cache import clear_cache
from carbonstore.pruning.plan import TablePlan, prune
from carbonstore.segments.dml import delete_rows
from carbonstore.segments.manage import delete_segments
from tests.dml.rows import SCHEMA, load, rows


def _same(plan: TablePlan) -> dict:
    """Everything a plan says but how long it took."""
    j = plan.to_json()
    del j["planning_ms"]
    return {
        "json": j, "segments": plan.segments, "version": plan.version, "expr": plan.expr,
        "deleted_rows": plan.deleted_rows, "dropped": plan.dropped, "files": plan.files,
        "explain": plan.explain().split("\n", 1)[1:],
    }


def _anew(table: Table, where: str | None, **kw: object) -> TablePlan:
    clear_cache()
    fresh = Store(table.store.location).table(str(table.name))
    return prune(fresh, where, **kw)


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    for k in range(4):
        load(t, rows(range(k * 300, k * 300 + 300)), tasks=2)
    return t


def test_a_repeated_plan_is_a_new_object_with_the_same_content(table: Table) -> None:
    first = prune(table, "id between 100 and 420", explain=True)
    again = prune(table, "id between 100 and 420", explain=True)
    assert again is not first and again.levels is not first.levels
    assert _same(again) == _same(first)
    levels = dict(first.levels)
    first.levels["rows"] = again.levels["files"] = None  # type: ignore[assignment]
    assert prune(table, "id between 100 and 420", explain=True).levels == levels  # callers' changes stay theirs
    assert again.files is first.files  # built once, shared: FilePlans are immutable


def test_the_text_and_options_of_each_call_are_reported(table: Table) -> None:
    a = prune(table, "id = 5")
    b = prune(table, "id=5")
    c = prune(table, "id = 5", segments="1")
    d = prune(table, "id = 5", explain=True)
    assert (a.where, b.where) == ("id = 5", "id=5")
    assert a.segments == ("0",) and c.segments == () and a.levels["segments"].total == 4
    assert c.levels["segments"].total == 1
    assert not a.dropped and d.dropped


def test_loads_and_deletes_are_seen_by_the_next_plan(table: Table) -> None:
    where = "id >= 250 and id < 1300"
    before = prune(table, where)
    load(table, rows(range(1200, 1500)))
    after_load = prune(table, where)
    assert after_load.version > before.version and "4" in after_load.segments
    assert _same(after_load) == _same(_anew(table, where))
    delete_rows(table, "id = 260")  # same segments and merge indexes: the same cached view
    after_delete = prune(table, where)
    assert after_delete.deleted_rows == 1 and before.deleted_rows == 0
    assert any(f.delete_delta for f in after_delete.files)
    assert _same(after_delete) == _same(_anew(table, where))
    delete_segments(table, "0")
    after_drop = prune(table, where)
    assert "0" not in after_drop.segments
    assert _same(after_drop) == _same(_anew(table, where))


def test_time_travel_handles_plan_their_own_version(table: Table) -> None:
    v = table.status.read().version
    delete_rows(table, "id < 10")
    old, new = table.as_of(v), table
    for _ in range(2):
        assert prune(old, "id < 20").deleted_rows == 0
        assert prune(new, "id < 20").deleted_rows == 10


def test_dictionary_columns_plan_against_the_dictionary_of_each_version(store: Store) -> None:
    t = store.create_table("db.d", SCHEMA, properties={"dictionary_include": "name"})
    load(t, rows(range(0, 100)))
    assert prune(t, "name = 'z1'").levels["rows"].kept == 0  # not in the dictionary
    assert prune(t, "name = 'z1'").levels["rows"].kept == 0
    load(t, rows(range(100, 200), tag="z"))
    got = prune(t, "name = 'z1'")
    assert got.levels["rows"].kept > 0
    assert _same(got) == _same(_anew(t, "name = 'z1'"))


FILTERS = ["id = 5", "id between 100 and 420", "id > 800 or id < 3", "name = 'n3'",
           "score > 100.5", "name is null", None, "id = 5 and name = 'n5'"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(
    st.sampled_from(["plan", "plan", "plan", "load", "delete", "drop"]),
    st.sampled_from(FILTERS), st.sampled_from([None, "1", "0,2"]), st.booleans(),
), min_size=1, max_size=6))
def test_reused_handle_plans_equal_plans_from_nothing(ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(tmp)
        t = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
        for k in range(3):
            load(t, rows(range(k * 300, k * 300 + 300)))
        nxt = 900
        for step, (op, where, segments, explain) in enumerate(ops):
            if op == "load":
                load(t, rows(range(nxt, nxt + 200)))
                nxt += 200
            elif op == "delete":
                delete_rows(t, where)
            elif op == "drop":
                live = [e.load_name for e in t.status.read().readable_in_order()]
                if len(live) > 1:
                    delete_segments(t, live[0])
            got = [_plan_or_refusal(t, where, segments, explain) for _ in range(2)]
            # the oracle: a copy of the table in another store (another view, nothing kept);
            # the plans of t keep their memos across the changes above
            copy = f"{tmp}/copy{step}"
            shutil.copytree(store.location, copy)
            want = _plan_or_refusal(Store(copy).table("db.t"), where, segments, explain)
            for g in got:  # the first maybe, the second surely reissued
                assert g == want, (op, where, segments)


def _plan_or_refusal(t: Any, where: str | None, segments: str | None, explain: bool) -> Any:
    """The plan's comparable parts, or the refusal of a segment that was dropped."""
    try:
        return _same(prune(t, where, segments=segments, explain=explain))
    except SegmentNotFoundError as err:
        return str(err)
