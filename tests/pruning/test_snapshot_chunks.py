"""The chunked index snapshot (format 7) on generated tables: written incrementally it is
the snapshot a full build writes; a stale one still plans exactly; a damaged chunk never
gives a wrong plan; a lookup reads the chunks of the segments it keeps, not the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from carbonstore import Store
from carbonstore.indexfiles.snapshot_file import SnapshotFile, snapshot_table
from carbonstore.pruning import table_index
from carbonstore.pruning.cache import COUNTERS, clear_cache
from carbonstore.pruning.plan import prune
from carbonstore.pruning.snapshot_chunks import SnapshotSource
from carbonstore.pruning.snapshot_files import snapshot_names
from carbonstore.pruning.table_index import (
    TableIndex,
    readable_segments,
    refresh_index_snapshot,
    write_snapshot,
)
from carbonstore.store.conf import load_conf
from carbonstore.store.records import replace
from carbonstore.store.table import Table
from tests.pruning.small_scale import CHUNK, SEGMENTS, scale_table
from tests.pruning.small_scale import table as _table


def _newest(t: Table) -> tuple[str, bytes]:
    name = snapshot_names(t)[-1]
    return name, Path(t.paths.index_snapshot_dir, name).read_bytes()


def _clear_snapshots(t: Table) -> None:
    for p in Path(t.paths.index_snapshot_dir).glob("*"):
        p.unlink()
    clear_cache()


def _fresh_snapshot(store: str) -> tuple[Table, Any]:
    """The generated table and its snapshot written again from its merge indexes, read
    with an empty cache."""
    t = _table(store)
    _clear_snapshots(t)
    refresh_index_snapshot(t)
    clear_cache()
    snap = table_index.read_snapshot(t)[0]
    assert snap is not None
    return t, snap


def _plans_as_expected(t: Table, res: dict[str, Any]) -> None:
    for f in res["filters"]:
        plan = prune(t, f["where"])
        got = (plan.levels["files"].kept, plan.levels["row_groups"].kept)
        assert got == (f["files"], f["row_groups"]), f


def test_incremental_build_equals_full_build(generated: tuple[str, dict[str, Any]], small_chunks: None) -> None:
    store, res = generated
    t = _table(store)
    entries = readable_segments(t.status.read())
    _clear_snapshots(t)
    full = refresh_index_snapshot(t)
    assert full is not None
    want = snapshot_table(*_newest(t))
    _clear_snapshots(t)
    # grown in steps: 6 segments (a full chunk and an open tail of 2), then 13, then all
    for n in (6, 13):
        write_snapshot(t, TableIndex(t, entries[:n], table_index.read_snapshot(t)[0]))
        clear_cache()
    COUNTERS.clear()
    refresh_index_snapshot(t)
    # the last step re-read only the merge indexes of the 8 new segments: the 3 full chunks
    # of the first 13 were copied, the open tail (segment 12) taken from the snapshot
    assert COUNTERS["merge_index_reads"] == SEGMENTS - 13
    name, data = _newest(t)
    got = snapshot_table(name, data)
    assert got.schema.metadata == want.schema.metadata
    assert got.equals(want)
    f = SnapshotFile(name, lambda off, n: data[off:off + n], len(data))
    assert json.loads(f.meta["carbonstore.chunks"]) == list(range(0, SEGMENTS, CHUNK))
    clear_cache()
    _plans_as_expected(t, res)


def test_a_stale_snapshot_plans_exactly(generated: tuple[str, dict[str, Any]], small_chunks: None) -> None:
    store, res = generated
    t = _table(store)
    entries = readable_segments(t.status.read())
    _clear_snapshots(t)
    write_snapshot(t, TableIndex(t, entries[:9], None))  # 12 segments committed since
    conf = load_conf(None).with_overrides({"carbon.index.snapshot.max.lag": "1000"})
    t = Store(store, conf=conf).table(scale_table.TABLE)
    clear_cache()
    COUNTERS.clear()
    _plans_as_expected(t, res)
    assert COUNTERS.get("snapshot_writes", 0) == 0  # planning never wrote
    assert COUNTERS["merge_index_reads"] == SEGMENTS - 9


def _flip(t: Table, section: str) -> None:
    name, data = _newest(t)
    f = SnapshotFile(name, lambda off, n: data[off:off + n], len(data))
    off, n, _ = f.sections[section]
    damaged = bytearray(data)
    damaged[f.base + off + n // 2] ^= 0x10
    Path(t.paths.index_snapshot_dir, name).write_bytes(bytes(damaged))
    clear_cache()


def _slot(t: Table, column: str) -> str:
    name, data = _newest(t)
    f = SnapshotFile(name, lambda off, n: data[off:off + n], len(data))
    return next(k for k, d in json.loads(f.meta["carbonstore.slots"]).items() if d["name"] == column)


@pytest.mark.parametrize("section", ["core", "rows#2", "id#2", "id:p#2", "k#3", "cat:p#0", "v#5"])
def test_a_damaged_chunk_never_gives_a_wrong_plan(generated: tuple[str, dict[str, Any]], small_chunks: None,
                                                  section: str) -> None:
    store, res = generated
    t = _table(store)
    _clear_snapshots(t)
    refresh_index_snapshot(t)
    column, sep, rest = section.partition(":") if ":" in section else section.partition("#")
    if column not in ("core", "rows"):
        section = f"{_slot(t, column)}{sep}{rest}"
    _flip(t, section)
    COUNTERS.clear()
    _plans_as_expected(t, res)  # the damaged part comes from the merge indexes
    assert COUNTERS["snapshot_errors"] >= 1
    clear_cache()
    _plans_as_expected(t, res)  # a new snapshot was written or the damaged one is refused


def test_a_lookup_reads_the_chunks_of_the_segments_it_keeps(generated: tuple[str, dict[str, Any]],
                                                            small_chunks: None) -> None:
    store, res = generated
    t = _table(store)
    _clear_snapshots(t)
    refresh_index_snapshot(t)
    clear_cache()
    COUNTERS.clear()
    lookup = next(f for f in res["filters"] if f["name"] == "key_lookup")
    plan = prune(t, lookup["where"])
    assert len(plan.segments) == 1 and plan.levels["row_groups"].kept == lookup["row_groups"]
    # core, then the kept segment's chunk: its files and row groups, id's row-group and page
    # statistics - nothing of the other 5 chunks
    snap = table_index.read_snapshot(t)[0]
    assert snap is not None and snap.chunks == 6
    k = int(plan.segments[0]) // CHUNK
    read = set(snap.sections_read)
    assert read <= {"core", f"rows#{k}", f"{_slot(t, 'id')}#{k}", f"{_slot(t, 'id')}:p#{k}"}, read
    assert read >= {"core", f"rows#{k}", f"{_slot(t, 'id')}#{k}"}, read
    assert COUNTERS.get("merge_index_reads", 0) == 0


def test_gather_over_chunks_equals_the_flat_arrays(generated: tuple[str, dict[str, Any]], small_chunks: None) -> None:
    """Values of any increasing set of segments, gathered chunk by chunk, are those of the
    table-wide flat array (which reads every chunk)."""
    import numpy as np

    from carbonstore.indexfiles.snapshot import flat_ranges

    store, _ = generated
    t = _table(store)
    _clear_snapshots(t)
    refresh_index_snapshot(t)
    rng = np.random.default_rng(3)
    picks = [np.sort(rng.choice(SEGMENTS, size=n, replace=False)) for n in (1, 2, 5, 9, SEGMENTS)]
    columns = ["rg_rows", f"{_slot(t, 'id')}:min", f"{_slot(t, 'k')}:p_max", f"{_slot(t, 'v')}:nans"]
    got = {}
    clear_cache()
    snap = table_index.read_snapshot(t)[0]
    assert snap is not None
    for c in columns:
        for rows in picks:
            got[(c, tuple(rows))] = snap.gather(c, rows.astype(np.intp)).tolist()
    clear_cache()
    whole = table_index.read_snapshot(t)[0]
    assert whole is not None
    for c in columns:
        flat, offs = whole.values(c), whole.offsets(c)
        for rows in picks:
            want = flat[flat_ranges(offs[rows], offs[rows + 1])].tolist()
            assert got[(c, tuple(rows))] == want, (c, rows)


def test_bloom_rows_are_the_segments_bloom_dir_finds(generated: tuple[str, dict[str, Any]], small_chunks: None) -> None:
    """Per segment, bloom_rows says whether bloom_dir finds an entry of the column (and a
    bloom region): for a bloom column, a min/max column (no bitset anywhere: answered
    without a gather) and an unknown one, over every segment and over a subset."""
    store, _ = generated
    t = _table(store)
    refresh_index_snapshot(t)
    snap = table_index.read_snapshot(t)[0]
    assert snap is not None
    names = [*(c.name for c in t.schema.columns), "no_such_column"]
    for rows in (np.arange(snap.size, dtype=np.intp), np.array([0, 3, 4, snap.size - 1], dtype=np.intp)):
        for name in names:
            want = [snap.bloom_dir(int(r), name) is not None and int(snap.bloom_base[r]) >= 0 for r in rows]
            assert snap.bloom_rows(rows, name).tolist() == want, name
    assert any(snap.bloom_rows(np.arange(snap.size, dtype=np.intp), n).any() for n in names)


def test_a_runs_page_counts_are_its_pages_per_row_group(generated: tuple[str, dict[str, Any]],
                                                        small_chunks: None) -> None:
    """A run's pages per row group, counted a chunk at a time, equal those of the table-wide
    page list (each page's row group numbered in the run, then counted), for runs of every
    shape: one segment, scattered ones, runs across chunk borders, every segment."""
    import numpy as np

    from carbonstore.indexfiles.snapshot_arrays import SnapshotArrays

    t, snap = _fresh_snapshot(generated[0])
    rng = np.random.default_rng(5)
    picks = [np.sort(rng.choice(SEGMENTS, size=n, replace=False)) for n in (1, 2, 3, 5, 9, 14)]
    picks += [np.arange(SEGMENTS), np.arange(CHUNK - 1, 2 * CHUNK + 2), np.array([0, CHUNK, 2 * CHUNK + 1])]
    seen = 0
    for rows in picks:
        groups = snap.group[rows]
        for g in np.flatnonzero(np.bincount(groups)).tolist():
            run = SnapshotArrays(snap, rows[groups == g].astype(np.intp))
            for col in run.columns:
                offs = snap.offsets(f"{col.key}:p_rg")
                flat = snap.values(f"{col.key}:p_rg").astype(np.int64)
                lens = offs[run.rows + 1] - offs[run.rows]
                glob = np.concatenate([flat[offs[r]:offs[r + 1]] for r in run.rows.tolist()]) + np.repeat(
                    run.seg_rg[:-1], lens)
                want = np.bincount(glob, minlength=run.num_row_groups)[:run.num_row_groups]
                got = col.rg_page_counts()
                assert got.dtype == np.int64 and got.tolist() == want.tolist(), (rows, col.name)
                seen += int(want.sum())
    assert seen


def test_a_runs_kept_row_groups_files_and_ordinals_are_its_arrays(generated: tuple[str, dict[str, Any]],
                                                                  small_chunks: None) -> None:
    """The files and ordinals of a few row groups of a run, taken at their flat positions
    alone (``rg_at``: a scan's kept row groups), equal the run's arrays at them - also for a
    run selected from a larger one - and the run's arrays are then not built."""
    import numpy as np

    from carbonstore.indexfiles.snapshot_arrays import SnapshotArrays
    from carbonstore.pruning.plan_files import rg_at

    t, snap = _fresh_snapshot(generated[0])
    rng = np.random.default_rng(7)
    every = np.arange(SEGMENTS, dtype=np.intp)
    whole = SnapshotArrays(snap, every)
    taken = alone = 0
    for _ in range(30):
        rows = np.sort(rng.choice(SEGMENTS, size=int(rng.integers(1, SEGMENTS + 1)), replace=False)).astype(np.intp)
        for run, fresh in ((SnapshotArrays(snap, rows), SnapshotArrays(snap, rows)),
                           (SnapshotArrays(snap, rows, within=(whole, rows)), SnapshotArrays(snap, rows))):
            n = run.num_row_groups
            idx = np.sort(rng.choice(n, size=int(rng.integers(0, max(1, n // 8) + 1)), replace=False)).astype(np.intp)
            for name in ("rg_file", "rg_index"):
                got = rg_at(run, name, idx)
                assert got.dtype == np.int32 and got.tolist() == getattr(fresh, name)[idx].tolist(), (rows, idx, name)
                taken += len(idx)
            if len(idx) * 8 <= n:  # (few of the run's row groups: taken alone)
                assert "rg_file" not in run.__dict__ and "rg_index" not in run.__dict__
                alone += 1
    assert taken and alone


def test_a_runs_unit_statistics_are_the_columns_values(generated: tuple[str, dict[str, Any]],
                                                       small_chunks: None) -> None:
    """UnitStats of a run's columns (row groups and pages, every kind) hold the columns'
    values: the counts a kind has none of are zeros and units without a null flag are not
    null - seen through read-only views of one value, not arrays per unit."""
    import numpy as np

    from carbonstore.indexfiles.snapshot_arrays import SnapshotArrays
    from carbonstore.pruning.unit_stats import UnitStats
    from carbonstore.pruning.units import value_kind

    t, snap = _fresh_snapshot(generated[0])
    run = SnapshotArrays(snap, np.arange(SEGMENTS, dtype=np.intp))
    kinds = set()
    for col in run.columns:
        ref = type("Ref", (), {"name": col.name, "type": t.schema.column(col.name).type})()
        kind = value_kind(col, ref)
        if kind is None:
            continue
        for stats, rows in ((col, run.rg_num_rows), (col.pages, col.pages.row_count)):
            s = UnitStats.from_arrays(stats, rows, kind=kind)
            n = len(rows)
            assert s.lo_ok.tolist() == np.asarray(stats.has_min, bool).tolist()
            assert s.null_count.tolist() == np.asarray(stats.null_count, np.int64).tolist()
            want_nans = np.asarray(stats.nan_count, np.int64) if kind == "FLOAT64" else np.zeros(n, np.int64)
            assert s.nan_count.tolist() == want_nans.tolist()
            null = getattr(stats, "null_page", None)
            assert s.null_unit.tolist() == (np.zeros(n, bool) if null is None else null).tolist()
            if kind != "BYTES":
                assert not s.hi_strict.any() and s.hi_ok.tolist() == np.asarray(stats.has_max, bool).tolist()
            for a in (s.nan_count if kind != "FLOAT64" else None, s.hi_strict if kind != "BYTES" else None):
                assert a is None or (not a.flags.writeable and a.strides == (0,))
            kinds.add(kind)
    assert {"INT64", "FLOAT64", "BYTES"} <= kinds


def test_a_scans_gathers_over_many_segments_of_a_chunk_equal_the_flat_arrays(
        generated: tuple[str, dict[str, Any]], small_chunks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Gathers of a chunk's many segments (here: every gather; a scan's at 100,000
    segments) take their positions per list length once: columns of one length over the
    same segments, then over others, then the first again, give the flat arrays' values."""
    import numpy as np

    from carbonstore.indexfiles import snapshot as snapshot_mod
    from carbonstore.indexfiles.snapshot import flat_ranges

    store, _ = generated
    t = _table(store)
    _clear_snapshots(t)
    refresh_index_snapshot(t)
    monkeypatch.setattr(snapshot_mod, "_PART_RUNS", 0)  # (never a few ranges decoded alone)
    clear_cache()
    snap = table_index.read_snapshot(t)[0]
    assert snap is not None
    rng = np.random.default_rng(11)
    picks = [np.sort(rng.choice(SEGMENTS, size=n, replace=False)).astype(np.intp) for n in (3, 9, 9, 15)]
    picks.append(picks[0])
    id_, v = _slot(t, "id"), _slot(t, "v")
    columns = ["rg_rows", "rg_index", f"{id_}:min", f"{id_}:nulls", f"{v}:p_rows", f"{v}:p_max", f"{id_}:p_rg"]
    for rows in picks:
        for c in columns:
            offs = snap.offsets(c)
            got = snap.gather(c, rows).tolist()
            whole = np.concatenate([snap.chunk_values(c, k) for k in range(snap.chunks)])
            want = snap.widen(c, whole[flat_ranges(offs[rows], offs[rows + 1])]).tolist()
            assert got == want, (c, rows)
    assert snap.__dict__["_takes"]  # (the positions were kept)


def _rows_one_by_one(entries: Any, snap: Any) -> list[int | None]:
    """The oracle: each segment's (id, merge index) looked up in the snapshot's rows, its
    row count agreeing (0: not known)."""
    counts = snap.bounds.num_rows
    out: list[int | None] = []
    for e in list(entries):
        row = snap.rows.get((e.load_name, e.segment_file or ""))
        out.append(row if row is not None and not (e.row_count and counts[row] != e.row_count) else None)
    return out


def test_a_writers_snapshot_rows_are_each_segments_lookup(generated: tuple[str, dict[str, Any]],
                                                           small_chunks: None) -> None:
    """The rows a snapshot writer copies from the previous snapshot: compared as bytes where
    the snapshot's rows are the view's first segments, looked up one by one otherwise; the
    same as looking each segment up, for views longer, shorter, shifted, reordered or with a
    row count that disagrees."""
    store, _ = generated
    t = _table(store)
    entries = readable_segments(t.status.read())
    _clear_snapshots(t)
    write_snapshot(t, TableIndex(t, entries[:9], None))
    clear_cache()
    snap = table_index.read_snapshot(t)[0]
    assert snap is not None and snap.size == 9
    changed = list(entries)
    changed[4] = replace(changed[4], row_count=changed[4].row_count + 1)
    views = [entries, entries[:5], entries[:9], entries[3:], list(entries), changed, changed[:9],
             list(reversed(entries)), []]
    for view in views:
        assert SnapshotSource(t, view, snap)._rows == _rows_one_by_one(view, snap)
    assert SnapshotSource(t, entries, snap)._rows == [*range(9), *[None] * (SEGMENTS - 9)]
    assert SnapshotSource(t, changed, snap)._rows[4] is None
