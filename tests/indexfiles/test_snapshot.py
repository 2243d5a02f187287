"""The table-level index snapshot: column-oriented arrays of all segments, planned as one."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.concat import COLUMN_ARRAYS, PAGE_ARRAYS, ConcatArrays
from carbonstore.indexfiles.snapshot import (
    SNAPSHOT_VERSION,
    SnapshotFile,
    frame_snapshot,
    snapshot_table,
)
from carbonstore.indexfiles.snapshot_arrays import SnapshotArrays
from carbonstore.pruning.cache import COUNTERS, clear_cache
from carbonstore.pruning.plan import TablePlan, bind_where, prune
from carbonstore.pruning.rows import evaluate_rows
from carbonstore.pruning.segment_index import load_segment
from carbonstore.pruning.table_index import (
    read_snapshot,
    readable_segments,
    refresh_if_lagging,
    refresh_index_snapshot,
    snapshot_names,
)
from carbonstore.segments.manage import delete_segments
from carbonstore.store.table import Table
from tests.indexfiles.segbuild import add_segments
from tests.pruning.test_cache import _fresh_process_plan
from tests.pruning.test_plan import _PRED, _ROW, SCHEMA, _check_levels, _table


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_cache()
    COUNTERS.clear()


ALL_TYPES = ("id long not null, b boolean, i int, dec decimal(10,2), big decimal(30,3), x double, "
             "f float, s string, bin binary, d date, ts timestamp")


def _all_types(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n)
    x = rng.normal(size=n)
    x[::5] = np.nan
    x[1::7] = -0.0

    def maybe(values: list[Any], every: int) -> list[Any]:
        return [None if k % every == 3 else v for k, v in enumerate(values)]

    return pa.table({
        "id": ids,
        "b": maybe([bool(v % 2) for v in ids], 4),
        "i": maybe([int(v) - 50 for v in ids], 6),
        "dec": maybe([Decimal(int(v)).scaleb(-2) for v in ids], 5),
        "big": maybe([Decimal(10**25 + int(v) * 7).scaleb(-3) for v in ids], 9),
        "x": x, "f": maybe([float(v) / 3 for v in ids], 8),
        "s": maybe([f"v{v:05d}" + "z" * int(v % 70) for v in ids], 7),  # some longer than truncation
        "bin": maybe([bytes([v % 256, 0, v % 7]) for v in ids.tolist()], 10),
        "d": [dt.date(2024, 1, 1) + dt.timedelta(days=int(v % 400)) for v in ids],
        "ts": [dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=int(v) * 37) for v in ids],
    })


def _same(a: Any, b: Any, what: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, what
    if a.dtype == object or b.dtype == object:
        assert a.tolist() == b.tolist(), what
    elif a.dtype.kind == "f":  # bit for bit: -0.0 and NaN included
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint64), b.view(np.uint64)), what
    else:
        assert np.array_equal(a.astype(np.int64), b.astype(np.int64)), what


def _assert_same_arrays(got: Any, want: Any) -> None:
    assert got.num_row_groups == want.num_row_groups
    assert [f.path for f in got.files] == [f.path for f in want.files]
    for name in ("rg_file", "rg_index", "rg_num_rows", "rg_offset", "rg_length"):
        _same(getattr(got, name), getattr(want, name), name)
    assert [c.desc for c in got.columns] == [c.desc for c in want.columns]
    for g, w in zip(got.columns, want.columns, strict=True):
        assert (g.name, g.kind) == (w.name, w.kind)
        for name in COLUMN_ARRAYS:
            if name != "pages":
                _same(getattr(g, name), getattr(w, name), f"{g.name}.{name}")
        for name in PAGE_ARRAYS:
            _same(getattr(g.pages, name), getattr(w.pages, name), f"{g.name}.pages.{name}")


def _segments(t: Table) -> list[Any]:
    entries = readable_segments(t.status.read())
    return [load_segment(t, e).arrays for e in entries]


def test_snapshot_arrays_equal_the_merge_index_arrays(store: Store) -> None:
    t = store.create_table("db.t", ALL_TYPES)
    for k in range(6):  # segment 3 has another column layout (no column ids)
        add_segments(t, [_all_types(k * 300, 300 - 40 * k, k)], row_group_size=70, page_rows=9,
                     bloom_columns=["s", "id"], with_column_ids=k != 3)
    refresh_index_snapshot(t)
    snap, _ = read_snapshot(t)
    assert snap is not None and snap.size == 6
    merged = _segments(t)
    for rows in ([0], [5], [0, 1, 2], [4, 5], [0, 2, 5], [5, 4, 0], [3], [0, 1, 2, 4, 5]):
        got = SnapshotArrays(snap, np.array(rows, dtype=np.intp))
        want = merged[rows[0]] if len(rows) == 1 else ConcatArrays([merged[r] for r in rows])
        _assert_same_arrays(got, want)
        _same(got.rg_part, np.repeat(np.arange(len(rows)), [merged[r].num_row_groups for r in rows]), "rg_part")
        for rg in range(got.num_row_groups):
            for name in ("s", "id"):
                assert got.bloom_bitset(rg, name) == want.bloom_bitset(rg, name)
    with pytest.raises(ValueError, match="one layout"):
        SnapshotArrays(snap, np.array([2, 3], dtype=np.intp))


def _plain_plan(plan: TablePlan) -> tuple[Any, str]:
    out = plan.to_json()
    del out["planning_ms"]
    return out, plan.explain().split("\n", 1)[-1]


def _check_sound(t: Table, plan: TablePlan, where: str, datas: dict[str, pa.Table], rg: int) -> None:
    kept = {(f.segment, r.index): r.row_ranges for f in plan.files for r in f.row_groups}
    expr = bind_where(t, where)
    for sid, data in datas.items():
        for r in np.flatnonzero(evaluate_rows(expr, data)).tolist():
            ranges = kept.get((sid, r // rg))
            assert ranges is not None and any(a <= r % rg < b for a, b in ranges), (where, sid, r)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    segs=st.lists(st.tuples(st.lists(_ROW, min_size=1, max_size=30), st.booleans()), min_size=1, max_size=5),
    later=st.integers(0, 2), where=_PRED, rg=st.integers(2, 12), page=st.integers(1, 5),
    deleted=st.booleans(),
)
def test_snapshot_plans_like_the_merge_indexes(
    segs: list[tuple[list[tuple], bool]], later: int, where: str, rg: int, page: int, deleted: bool
) -> None:
    """Same plan from the snapshot (plus segments committed since) as from the merge indexes."""
    folder = tempfile.mkdtemp()
    try:
        t = Store(folder + "/store").create_table("db.t", SCHEMA)
        datas: dict[str, pa.Table] = {}

        def add(rows: list[tuple], with_ids: bool) -> None:
            data = _table(rows)
            (sid,) = add_segments(t, [data], row_group_size=rg, page_rows=page, bloom_columns=["s", "id"],
                                  with_column_ids=with_ids)
            datas[sid] = data

        for rows, with_ids in segs:
            add(rows, with_ids)
        assert refresh_index_snapshot(t) is not None
        for k in range(later):
            add(segs[k % len(segs)][0], k % 2 == 0)
        if deleted and len(datas) > 1:
            gone = next(iter(datas))
            delete_segments(t, gone)
            del datas[gone]
        clear_cache()
        COUNTERS.clear()
        from_snapshot = prune(t, where, explain=True)
        assert COUNTERS["snapshot_reads"] == 1 and COUNTERS.get("snapshot_errors", 0) == 0
        assert COUNTERS["merge_index_reads"] == later
        _check_levels(from_snapshot)
        _check_sound(t, from_snapshot, where, datas, rg)
        shutil.rmtree(t.paths.index_snapshot_dir)
        clear_cache()
        from_merges = prune(t, where, explain=True)
        assert _plain_plan(from_snapshot) == _plain_plan(from_merges)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _data(start: int, n: int = 100) -> pa.Table:
    ids = np.arange(start, start + n)
    x = ids / 4.0
    x[::7] = np.nan
    return pa.table({"id": ids, "x": x, "s": [f"v{i:05d}" for i in ids]})


@pytest.mark.parametrize("where", ["s = 'v00123'", "x > 1000", "id >= 0", "id = 250"])
def test_a_fresh_process_decodes_a_constant_number_of_arrays(store: Store, where: str) -> None:
    t = store.create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(k * 100) for k in range(10)], row_group_size=30, bloom_columns=["s"])
    refresh_index_snapshot(t)
    small = _fresh_process_plan(store, where)
    add_segments(t, [_data(k * 100) for k in range(10, 40)], row_group_size=30, bloom_columns=["s"])
    refresh_index_snapshot(t)
    large = _fresh_process_plan(store, where)
    for res in (small, large):
        assert res["counters"].get("merge_index_reads", 0) == 0
        assert res["counters"]["header_decodes"] == len(res["segments"])
    assert small["counters"]["snapshot_array_decodes"] == large["counters"]["snapshot_array_decodes"]


def _rewrite(path: Path, change: Any) -> None:
    """Change a snapshot's payload and sign it again (a valid checksum over bad content:
    these cases test the structure checks behind the checksum)."""
    t = change(snapshot_table(path.name, path.read_bytes()))
    path.write_bytes(frame_snapshot(t))


def test_a_snapshot_of_another_version_is_ignored_and_rewritten(store: Store) -> None:
    t = store.create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(k * 100) for k in range(10)])
    name = refresh_index_snapshot(t)
    assert name is not None
    older = Path(t.paths.index_snapshot_dir, name)

    def version_2(tab: pa.Table) -> pa.Table:
        return tab.replace_schema_metadata({**tab.schema.metadata, b"carbonstore.snapshot.version": b"2"})

    _rewrite(older, version_2)
    clear_cache()
    COUNTERS.clear()
    assert prune(t, "id = 150").segments == ("1",)
    assert COUNTERS["snapshot_errors"] == 1 and COUNTERS["merge_index_reads"] == 10
    assert COUNTERS.get("snapshot_writes", 0) == 0  # planning never writes
    # ten segments uncovered (more than the lag of 8): the writers' step writes a current one
    assert refresh_if_lagging(t) is not None
    assert COUNTERS["snapshot_writes"] == 1
    newest = snapshot_names(t)[-1]
    assert newest != name
    meta = snapshot_table(newest, Path(t.paths.index_snapshot_dir, newest).read_bytes()).schema.metadata
    assert meta[b"carbonstore.snapshot.version"] == SNAPSHOT_VERSION.encode()
    res = _fresh_process_plan(store, "id = 150")
    assert res["segments"] == ["1"] and res["counters"].get("merge_index_reads", 0) == 0


def _shift_first_list(column: str) -> Any:
    def change(tab: pa.Table) -> pa.Table:
        arr = tab.column(column).combine_chunks()
        offs = arr.offsets.to_numpy().copy()
        offs[1] += 1  # the first segment claims one element of the second
        fixed = pa.ListArray.from_arrays(pa.array(offs, pa.int32()), arr.values)
        return tab.set_column(tab.schema.get_field_index(column), column, fixed)

    return change


def _id_slot(tab: pa.Table) -> str:
    """The slot of column ``id`` (the one the test's filter reads: a slot's sections are
    only read, and checked, when a plan needs them)."""
    slots = json.loads(tab.schema.metadata[b"carbonstore.slots"])
    return next(k for k, d in slots.items() if d["name"] == "id")


def _shift_slot_list(suffix: str) -> Any:
    def change(tab: pa.Table) -> pa.Table:
        return _shift_first_list(f"{_id_slot(tab)}:{suffix}")(tab)

    return change


def _reverse_pages(tab: pa.Table) -> pa.Table:
    column = f"{_id_slot(tab)}:p_rg"
    arr = tab.column(column).combine_chunks()
    values = arr.values.to_numpy()[::-1].copy()
    fixed = pa.ListArray.from_arrays(arr.offsets, pa.array(values, pa.int32()))
    return tab.set_column(tab.schema.get_field_index(column), column, fixed)


@pytest.mark.parametrize("change", [_shift_first_list("rg_rows"), _shift_first_list("rg_offset"),
                                    _shift_slot_list("nulls"), _shift_slot_list("max"),
                                    _shift_slot_list("p_first"), _shift_slot_list("p_rg"), _reverse_pages],
                         ids=["row groups do not match", "a row-group array does not match",
                              "a column's row-group stats do not match", "a column's maxima do not match",
                              "a page array does not match", "the page list does not match", "pages out of order"])
def test_a_snapshot_with_inconsistent_arrays_only_costs_speed(store: Store, change: Any) -> None:
    t = store.create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(k * 100) for k in range(3)], row_group_size=50, page_rows=10)
    name = refresh_index_snapshot(t)
    assert name is not None
    _rewrite(Path(t.paths.index_snapshot_dir, name), change)
    clear_cache()
    COUNTERS.clear()
    plan = prune(t, "id = 150")
    assert plan.segments == ("1",) and plan.levels["rows"].kept == 10
    assert [rg.length > 0 for f in plan.files for rg in f.row_groups] == [True]  # byte ranges: a reader's
    # found when opened (row-group lists: the core section), when the plan reads the slot or
    # when its files' byte ranges are read (then the arrays of the surviving segment come
    # from its merge index)
    assert COUNTERS["snapshot_errors"] == 1 and COUNTERS["merge_index_reads"] in (1, 3)
    again = prune(t, "id = 150")  # not taken again
    assert _plain_plan(again) == _plain_plan(plan)
    assert COUNTERS.get("snapshot_writes", 0) == 0  # planning never writes
    assert refresh_if_lagging(t) is not None  # the writers' step: refused, so rewritten
    assert COUNTERS["snapshot_errors"] == 1 and COUNTERS["snapshot_writes"] == 1
    assert snapshot_names(t)[-1] != name


def test_arrays_are_decoded_once_per_process(store: Store) -> None:
    t = store.create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(k * 100) for k in range(12)], row_group_size=30)
    refresh_index_snapshot(t)
    clear_cache()
    COUNTERS.clear()
    assert prune(t, "x > 10").levels["segments"].kept == 12
    first = COUNTERS["snapshot_array_decodes"]
    assert first > 0
    assert prune(t, "x > 20 AND x < 1000").levels["segments"].kept == 12
    assert COUNTERS["snapshot_array_decodes"] == first  # the x arrays are kept
    assert prune(t, "id = 250").segments == ("2",)
    with_id = COUNTERS["snapshot_array_decodes"]
    assert with_id > first
    assert prune(t, "id = 350 OR x < 0").segments == ("3",)
    assert COUNTERS["snapshot_array_decodes"] == with_id
    assert COUNTERS["snapshot_reads"] == 1 and COUNTERS.get("merge_index_reads", 0) == 0


def test_a_damaged_section_is_read_only_when_needed_and_never_used(store: Store) -> None:
    """Since format 6: a plan reads (and verifies) only the sections of the columns it filters on;
    a damaged one is found before use - its arrays come from the merge indexes (same plan),
    the next plan does not take the snapshot and writes a new one."""
    t = store.create_table("db.t", "id long, x double, s string")
    add_segments(t, [_data(k * 100) for k in range(10)], row_group_size=30, page_rows=10)
    name = refresh_index_snapshot(t)
    assert name is not None
    path = Path(t.paths.index_snapshot_dir, name)
    data = path.read_bytes()
    wheres = ("id = 150", "s = 'v00321'", "x > 10")
    clear_cache()
    want = {w: _plain_plan(prune(t, w)) for w in wheres}
    f = SnapshotFile(name, lambda off, n: data[off:off + n], len(data))
    slots = json.loads(f.meta["carbonstore.slots"])
    s_key = next(k for k, d in slots.items() if d["name"] == "s")
    off, n, _ = f.sections[f"{s_key}:p#0"]  # (one chunk: ten segments)
    damaged = bytearray(data)
    damaged[f.base + off + n // 2] ^= 0x01
    path.write_bytes(bytes(damaged))
    clear_cache()
    COUNTERS.clear()
    assert _plain_plan(prune(t, "id = 150")) == want["id = 150"]  # s's pages are not read
    assert COUNTERS["snapshot_errors"] == 0 and COUNTERS.get("merge_index_reads", 0) == 0
    assert _plain_plan(prune(t, "s = 'v00321'")) == want["s = 'v00321'"]  # the cached view: found now
    assert COUNTERS["snapshot_errors"] == 1 and COUNTERS["merge_index_reads"] >= 1
    assert COUNTERS.get("snapshot_writes", 0) == 0
    assert _plain_plan(prune(t, "x > 10")) == want["x > 10"]
    assert COUNTERS.get("snapshot_writes", 0) == 0  # planning never writes
    assert refresh_if_lagging(t) is not None  # the writers' step: refused, so rewritten
    assert COUNTERS["snapshot_writes"] == 1 and snapshot_names(t)[-1] != name
    # a cut anywhere is refused when the file is opened, before any section is read
    for cut in range(0, len(data), max(1, len(data) // 300)):
        with pytest.raises(CorruptIndexError):
            SnapshotFile(name, lambda off, n: data[off:off + n], cut)
