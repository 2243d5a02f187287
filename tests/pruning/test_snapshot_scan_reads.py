"""What a scan's plan reads of the index snapshot (format 8) on generated tables: the
sections of what it evaluates and reports - never the byte ranges, file sizes or bloom
references a reader needs, nor another column's statistics; the kept row groups of a large
run take their pages alone; a format 7 snapshot still plans and is upgraded on write; a
damaged section a plan does not read is refused where it is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from carbonstore.indexfiles import snapshot_arrays
from carbonstore.indexfiles.snapshot_file import SnapshotFile, frame_snapshot, snapshot_table
from carbonstore.pruning import table_index
from carbonstore.pruning.cache import COUNTERS, clear_cache
from carbonstore.pruning.plan import prune
from carbonstore.pruning.snapshot_files import snapshot_names
from carbonstore.pruning.table_index import refresh_index_snapshot
from carbonstore.store.table import Table
from tests.pruning.small_scale import CHUNK
from tests.pruning.small_scale import table as _table

#: what a reader needs and a plan's answer never does
_READERS_ONLY = ("rg_offset", "rg_length", "files", ":p_offset", ":p_size", ":bloom_off", ":bloom_len")
_SCANS = ("low_cardinality_eq", "nan_double_range", "sort_range", "partition_day")




def _fresh_snapshot(t: Table) -> tuple[str, bytes]:
    for p in Path(t.paths.index_snapshot_dir).glob("*"):
        p.unlink()
    clear_cache()
    refresh_index_snapshot(t)
    clear_cache()
    name = snapshot_names(t)[-1]
    return name, Path(t.paths.index_snapshot_dir, name).read_bytes()


def _plan_json(t: Table, where: str) -> dict[str, Any]:
    out = prune(t, where).to_json()
    out.pop("planning_ms")
    return out  # type: ignore[no-any-return]


def _slot_names(f: SnapshotFile) -> dict[str, str]:
    return {k: d["name"] for k, d in orjson.loads(f.meta["carbonstore.slots"]).items()}


@pytest.mark.parametrize("name", _SCANS)
def test_a_scan_reads_what_it_evaluates_and_reports(generated: tuple[str, dict[str, Any]], small_chunks: None,
                                                    name: str) -> None:
    store, res = generated
    t = _table(store)
    snap_name, data = _fresh_snapshot(t)
    f = SnapshotFile(snap_name, lambda off, n: data[off:off + n], len(data))
    want = next(x for x in res["filters"] if x["name"] == name)
    plan = _plan_json(t, want["where"])  # the plan and its JSON, as `prune --json` prints it
    assert (len(plan["files"]), plan["levels"]["row_groups"]["kept"]) == (want["files"], want["row_groups"])
    snap = table_index.read_snapshot(t)[0]
    assert snap is not None and snap.chunks == 6 and not snap._file_objs  # no DataFile built
    columns = {c.split(" ")[0].lower() for c in want["where"].replace("(", " ").split() if c.isidentifier()}
    slots = _slot_names(f)
    for section in snap.sections_read:
        if section == "core":
            continue
        held = f.read(section).column_names
        assert not [c for c in held if c.endswith(_READERS_ONLY)], (section, held)
        # statistics of the columns the filter names only
        assert all(slots[c.split(":")[0]] in columns for c in held if ":" in c), (section, held)
    read = sum(f.sections[s][1] for s in snap.sections_read)
    assert read < 0.3 * len(data), (read, len(data))

def _plans_of_whole_runs(generated: tuple[str, dict[str, Any]],
                         monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(table, expected, each filter's plan from the runs' whole page arrays), then every
    later plan takes its row groups' pages alone."""
    store, res = generated
    t = _table(store)
    _fresh_snapshot(t)
    monkeypatch.setattr(snapshot_arrays, "_SUBSET_MIN_RGS", 10**9)
    whole = {f["name"]: _plan_json(t, f["where"]) for f in res["filters"]}
    clear_cache()
    monkeypatch.setattr(snapshot_arrays, "_SUBSET_MIN_RGS", 0)
    monkeypatch.setattr(snapshot_arrays, "_SUBSET_SHARE", 1)
    return t, res, whole



def test_few_row_groups_of_a_large_run_take_their_pages_alone(generated: tuple[str, dict[str, Any]],
                                                               small_chunks: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan whose kept row groups take their pages alone (no page array of every row group
    of the run) is the plan the run's page arrays give: ranges, levels, files."""
    t, res, whole = _plans_of_whole_runs(generated, monkeypatch)
    taken: list[int] = []
    subset = snapshot_arrays._SnapColumn.page_subset

    def counting(self: Any, rgs: Any) -> Any:
        got = subset(self, rgs)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(snapshot_arrays._SnapColumn, "page_subset", counting)
    for f in res["filters"]:
        assert _plan_json(t, f["where"]) == whole[f["name"]], f["name"]
        assert _plan_json(t, f["where"] + " AND id >= 0") == _plan_json(t, f["where"] + " AND id >= 0")
    assert any(taken)
    # pages the page level dropped are there to compare: some plan kept partial row groups
    assert any(w["levels"]["pages"]["dropped_by_stats"] for w in whole.values())


def test_a_format_7_snapshot_still_plans_and_is_upgraded_on_write(generated: tuple[str, dict[str, Any]],
                                                                   small_chunks: None) -> None:
    store, res = generated
    t = _table(store)
    name, data = _fresh_snapshot(t)
    want = {f["name"]: _plan_json(t, f["where"]) for f in res["filters"]}
    old = name.replace("snapshot8_", "snapshot7_")
    folder = Path(t.paths.index_snapshot_dir)
    table = snapshot_table(name, data)
    table = table.replace_schema_metadata({**table.schema.metadata, b"carbonstore.snapshot.version": b"7"})
    (folder / old).write_bytes(frame_snapshot(table, chunk_rows=CHUNK, version="7"))
    (folder / name).unlink()
    clear_cache()
    COUNTERS.clear()
    for f in res["filters"]:
        assert _plan_json(t, f["where"]) == want[f["name"]], f["name"]
    snap = table_index.read_snapshot(t)[0]
    assert snap is not None and snap.name == old and snap.version == "7"
    assert "rows#0" in snap.sections_read and not COUNTERS.get("merge_index_reads")
    assert not COUNTERS.get("snapshot_errors")
    new = refresh_index_snapshot(t)  # upgrade on write: every row re-encoded, none copied
    assert new is not None and new.startswith("snapshot8_") and snapshot_names(t)[-1] == new
    assert not COUNTERS.get("merge_index_reads")
    got, was = snapshot_table(new, (folder / new).read_bytes()), snapshot_table(name, data)
    assert sorted(got.column_names) == sorted(was.column_names)
    assert all(got.column(c).equals(was.column(c)) for c in was.column_names), [
        c for c in was.column_names if not got.column(c).equals(was.column(c))]
    clear_cache()
    for f in res["filters"]:
        assert _plan_json(t, f["where"]) == want[f["name"]], f["name"]


def _damage(t: Table, name: str, data: bytes, section: str) -> None:
    """Flip one bit in the middle of snapshot section ``section`` (a column name before
    ``:`` stands for its slot) and write the snapshot back."""
    f = SnapshotFile(name, lambda off, n: data[off:off + n], len(data))
    base, _, k = section.partition("#")
    column, sep, suffix = base.partition(":")
    if sep:
        section = next(s for s, c in _slot_names(f).items() if c == column) + f":{suffix}" + (f"#{k}" if k else "")
    off, n, _ = f.sections[section]
    damaged = bytearray(data)
    damaged[f.base + off + n // 2] ^= 0x10
    Path(t.paths.index_snapshot_dir, name).write_bytes(bytes(damaged))
    clear_cache()


@pytest.mark.parametrize("section", ["files#1", "rgpos#2", "paths#3", "id:q#0", "k:b#4", "cat:b#5"])
def test_a_damaged_section_is_refused_where_it_is_read(generated: tuple[str, dict[str, Any]], small_chunks: None,
                                                       section: str) -> None:
    """Damage in a section a plan does not read never changes a plan; the plan's files (byte
    ranges) or the next write (which verifies what it copies) refuse it."""
    store, res = generated
    t = _table(store)
    name, data = _fresh_snapshot(t)
    want = {f["name"]: _plan_json(t, f["where"]) for f in res["filters"]}
    _damage(t, name, data, section)
    COUNTERS.clear()
    for x in res["filters"]:
        plan = prune(t, x["where"])
        assert [rg.length > 0 for fp in plan.files for rg in fp.row_groups] == [True] * x["row_groups"]
        got = plan.to_json()
        got.pop("planning_ms")
        assert got == want[x["name"]], x["name"]
    new = refresh_index_snapshot(t)  # verifies what it copies: the damaged chunk is not copied
    assert new is not None and new != name
    assert COUNTERS["snapshot_errors"] + COUNTERS["merge_index_reads"] >= 1
    assert snapshot_table(new, Path(t.paths.index_snapshot_dir, new).read_bytes()).equals(snapshot_table(name, data))
    clear_cache()
    for x in res["filters"]:
        assert _plan_json(t, x["where"]) == want[x["name"]], x["name"]


@pytest.mark.parametrize("section", ["cat:p#2", "v:p#0", "id:p#3", "d:p#5"])
def test_a_damaged_page_section_plans_exactly_when_pages_are_taken_alone(
        generated: tuple[str, dict[str, Any]], small_chunks: None, monkeypatch: pytest.MonkeyPatch,
        section: str) -> None:
    store, res = generated
    t = _table(store)
    name, data = _fresh_snapshot(t)
    want = {f["name"]: _plan_json(t, f["where"]) for f in res["filters"]}
    monkeypatch.setattr(snapshot_arrays, "_SUBSET_MIN_RGS", 0)
    monkeypatch.setattr(snapshot_arrays, "_SUBSET_SHARE", 1)
    column = section.partition(":")[0]
    _damage(t, name, data, section)
    COUNTERS.clear()
    for x in res["filters"]:  # the damaged chunk's pages come from the merge indexes
        assert _plan_json(t, x["where"]) == want[x["name"]], x["name"]
    if column == "cat":  # (cat = 'cat_42' keeps row groups of every chunk: it read the damage)
        assert COUNTERS["snapshot_errors"] >= 1


def test_a_plan_takes_a_columns_page_subset_once(generated: tuple[str, dict[str, Any]], small_chunks: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner's surviving row groups and the page counts' kept ones are the same when the
    page level drops none: their pages are taken from the snapshot once per plan, and the plan
    is the one of the run's page arrays."""
    t, res, whole = _plans_of_whole_runs(generated, monkeypatch)
    takes: list[str] = []
    take_flat = snapshot_arrays.take_flat

    def counting(snap: Any, column: str, flat: Any) -> Any:
        takes.append(column)
        return take_flat(snap, column, flat)

    monkeypatch.setattr(snapshot_arrays, "take_flat", counting)
    once = 0
    for f in res["filters"]:
        takes.clear()
        got = _plan_json(t, f["where"])
        assert got == whole[f["name"]], f["name"]
        assert len(takes) == len(set(takes)), (f["name"], sorted(takes))
        once += bool(takes)
    assert once  # (some plan took pages alone)


def test_a_partitioned_scan_takes_its_files_paths_once(generated: tuple[str, dict[str, Any]], small_chunks: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The partition masks read the paths of the surviving segments' files; when the
    partitions drop none of them, the kept files are those files, and their paths are not
    taken from the snapshot a second time for the plan's JSON."""
    from carbonstore.indexfiles.snapshot import Snapshot

    store, res = generated
    t = _table(store)
    _fresh_snapshot(t)
    calls: list[int] = []
    file_paths = Snapshot.file_paths

    def counting(self: Any, indices: Any) -> list[str]:
        calls.append(len(indices))
        return file_paths(self, indices)

    monkeypatch.setattr(Snapshot, "file_paths", counting)
    want = next(x for x in res["filters"] if x["name"] == "partition_day")
    plan = _plan_json(t, want["where"])
    assert (len(plan["files"]), plan["levels"]["files"].get("dropped_by_partition", 0)) == (want["files"], 0)
    assert calls == [want["files"]]
    calls.clear()
    assert _plan_json(t, "d >= DATE '2024-01-01'")["files"]  # another plan asks anew
    assert calls


def test_a_scans_json_from_its_arrays_is_its_files_json(generated: tuple[str, dict[str, Any]],
                                                        small_chunks: None) -> None:
    """The kept files' JSON taken straight from a plan's arrays (one kept row group per file
    here, built in one pass) is the JSON of the plan's FilePlan objects."""
    store, res = generated
    t = _table(store)
    _fresh_snapshot(t)
    shapes = set()
    for f in res["filters"]:
        plan = prune(t, f["where"] + " ")  # (not a memoized plan: its files are not built)
        assert plan.__dict__["files"]._built is None
        from_arrays = plan.to_json()["files"]
        assert plan.__dict__["files"]._built is None
        assert from_arrays == [x.to_json() for x in plan.files], f["name"]
        assert len(from_arrays) == f["files"]
        shapes.add(max(len(x["row_groups"]) for x in from_arrays))
    assert shapes == {1, 2}  # plans keeping one row group of each file, and more
