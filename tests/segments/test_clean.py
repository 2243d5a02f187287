"""clean files on real segment folders (no Spark)."""

from __future__ import annotations

import multiprocessing as mp

import pytest
from test_compaction import SCHEMA, add_segment, read_segments, rows, statuses

from carbonstore import Store, Table
from carbonstore.errors import UserError
from carbonstore.segments.clean import clean_files
from carbonstore.segments.compaction import compact
from carbonstore.segments.manage import delete_segments
from carbonstore.store import load_conf
from carbonstore.store.tablestatus import FAILURE, IN_PROGRESS, SUCCESS, now_ms

HOUR = 3600 * 1000


@pytest.fixture
def table(store: Store) -> Table:
    return store.create_table("t", SCHEMA, properties={"sort_columns": "id"})


def test_retention_then_removal_moves_entries_to_history(table: Table) -> None:
    for i in range(3):
        add_segment(table, rows(i * 10, 10))
    compact(table, "custom", segment_ids=["0", "1"])
    delete_segments(table, ["2"])
    sizes = {s: table.store.sfs.tree_size(table.paths.segment_dir(s)) for s in ("0", "1", "2")}
    # Within the retention time nothing goes: queries that started earlier still read them.
    report = clean_files(table, dry_run=False)
    assert report.items == () and len(report.skipped) == 3
    later = now_ms() + 2 * HOUR
    dry = clean_files(table, dry_run=True, now=later)
    assert sorted(dry.removed_entries) == ["0", "1", "2"]
    assert dry.bytes == sum(sizes.values())
    assert table.store.sfs.exists(table.paths.segment_dir("0"))  # dry run touched nothing
    real = clean_files(table, dry_run=False, now=later)
    assert real.bytes == dry.bytes
    assert statuses(table) == {"0.1": SUCCESS}
    assert sorted(e.load_name for e in table.status.history.read()) == ["0", "1", "2"]
    for s in ("0", "1", "2"):
        assert not table.store.sfs.exists(table.paths.segment_dir(s))
    assert read_segments(table).num_rows == 20


def test_force_needs_conf(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for allowed in ("false", "true"):
        conf = load_conf(None).with_overrides({"carbon.clean.files.force.allowed": allowed})
        table = Store(str(tmp_path / allowed), conf=conf).create_table("t", SCHEMA)
        add_segment(table, rows(0, 10))
        delete_segments(table, "0")
        if allowed == "false":
            with pytest.raises(UserError, match="carbon.clean.files.force.allowed=true"):
                clean_files(table, dry_run=False, force=True)
        else:
            report = clean_files(table, dry_run=False, force=True)
            assert report.removed_entries == ("0",)
            assert statuses(table) == {}


def test_orphan_folder_goes_to_trash_and_dry_run_size_equals_freed(table: Table) -> None:
    for i in range(2):
        add_segment(table, rows(i * 10, 10))
    # Lose segment 1's entry: its folder is now named by no entry.
    table.status.update(lambda s: [e for e in s.entries if e.load_name != "1"])
    seg1 = table.paths.segment_dir("1")
    size = table.store.sfs.tree_size(seg1)
    # Changed behaviour: an orphan folder waits for the lease time (a writer marked dead
    # may still be running); before that it is only reported as kept.
    fresh = clean_files(table, dry_run=True)
    assert fresh.items == () and any("Segment_1" in s for s in fresh.skipped)
    later = now_ms() + 3 * 60_000  # past carbon.segment.lease.seconds (120)
    dry = clean_files(table, dry_run=True, now=later)
    assert [(i.kind, i.segment_id) for i in dry.items] == [("orphan", "1")]
    assert dry.bytes == size > 0
    real = clean_files(table, dry_run=False, now=later)
    assert real.bytes == dry.bytes
    assert not table.store.sfs.exists(seg1)
    trash = table.store.sfs.list_dir(table.paths.trash_dir)
    assert len(trash) == 1
    assert table.store.sfs.tree_size(f"{trash[0].path}/Segment_1") == size
    assert read_segments(table).num_rows == 10
    # The trash expires after carbon.trash.retention.days.
    assert clean_files(table, dry_run=False).items == ()
    expired = clean_files(table, dry_run=False, now=now_ms() + 8 * 24 * HOUR)
    assert [i.kind for i in expired.items] == ["trash"] and expired.bytes == size
    assert table.store.sfs.list_dir(table.paths.trash_dir) == []


def test_orphan_being_written_is_left_alone(table: Table) -> None:
    add_segment(table, rows(0, 10))
    table.store.sfs.makedirs(table.paths.segment_dir("0.1"))
    with table.locks.segment("0.1"):  # a compaction is writing its output
        report = clean_files(table, dry_run=False)
    assert report.items == () and any("0.1" in s for s in report.skipped)
    assert table.store.sfs.exists(table.paths.segment_dir("0.1"))


def test_failure_segments_removed(table: Table) -> None:
    add_segment(table, rows(0, 10))
    e = table.status.allocate()
    table.status.set_status(e.load_name, FAILURE)
    report = clean_files(table, dry_run=False)
    assert report.removed_entries == ("1",)
    assert statuses(table) == {"0": SUCCESS}


def _running_load(store_path: str, ready, stop) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.segments.commit import begin_segment

    table = Store(store_path).table("t")
    begin_segment(table)  # its lease is renewed by this process until it ends
    ready.set()
    stop.wait(30)


def test_stale_in_progress_only_when_its_load_is_dead(table: Table) -> None:
    # Changed behaviour: liveness is the entry's lease (renewed by the load), no longer a
    # segment lock; entries without a lease (earlier writers) expire a lease after they began.
    add_segment(table, rows(0, 10))
    old = now_ms() - 2 * HOUR
    table.status.update(lambda s: [*s.entries, *[
        type(s.entries[0])(load_name=str(i), status=IN_PROGRESS, load_start_time=old)
        for i in (1, 2)
    ]])
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_running_load, args=(table.store.location, ready, stop))
    proc.start()
    try:
        assert ready.wait(60)
        assert clean_files(table, dry_run=False).removed_entries == ()  # needs the flag
        report = clean_files(table, dry_run=False, stale_inprogress=True)
        assert report.removed_entries == ("1", "2")  # 3's load (the other process) is alive
        assert statuses(table) == {"0": SUCCESS, "3": IN_PROGRESS}
        # The dead ones were committed Failure before their files went.
        ops = [v.operation for v in table.status.log()]
        assert ops[-2:] == ["CLEAN FILES (mark dead)", "CLEAN FILES"]
    finally:
        proc.kill()  # dies without a word: its lease is no longer renewed
        proc.join(30)
    report = clean_files(table, dry_run=False, stale_inprogress=True)
    assert report.removed_entries == ("3",)  # same machine, process gone: dead at once


def test_stats_files_of_removed_segments_go(table: Table) -> None:
    add_segment(table, rows(0, 10))
    add_segment(table, rows(10, 10))
    sfs = table.store.sfs
    sfs.makedirs(table.paths.stats_dir)
    for sid in ("0", "1"):
        sfs.write_bytes(f"{table.paths.stats_dir}/segment_{sid}.json", b"{}")
    delete_segments(table, "0")
    clean_files(table, dry_run=False, now=now_ms() + 2 * HOUR)
    names = sorted(i.base_name for i in sfs.list_dir(table.paths.stats_dir))
    assert names == ["segment_1.json"]


def test_second_clean_fails_fast(table: Table) -> None:
    with table.locks.hold("clean_files.lock"):
        with pytest.raises(UserError, match="clean files is already running"):
            clean_files(table, dry_run=False)


def test_stats_of_segment_0_are_not_those_of_0_1(table: Table) -> None:
    add_segment(table, rows(0, 10))
    add_segment(table, rows(10, 10))
    compact(table, "custom", segment_ids=["0", "1"])
    sfs = table.store.sfs
    sfs.makedirs(table.paths.stats_dir)
    for name in ("segment_0.stats", "segment_0.1.stats", "segment_1.stats", "segment_10.stats"):
        sfs.write_bytes(f"{table.paths.stats_dir}/{name}", b"{}")
    clean_files(table, dry_run=False, now=now_ms() + 2 * HOUR)
    names = sorted(i.base_name for i in sfs.list_dir(table.paths.stats_dir))
    assert names == ["segment_0.1.stats", "segment_10.stats"]


def test_bloom_packs_beyond_the_two_newest_and_dead_temp_files_go(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Writing a pack keeps the two newest; a writer that died leaves older packs or a temp
    file, which clean files removes (the temp file only after the lease time)."""
    import pyarrow as pa

    from carbonstore.pruning.plan import prune
    from carbonstore.pruning.table_index import refresh_index_snapshot
    from tests.indexfiles.segbuild import add_segments

    t = Store(str(tmp_path / "s")).create_table("db.t", "k string, n long")
    add_segments(t, [pa.table({"k": [f"{s}-{i}" for i in range(50)], "n": list(range(50))}) for s in range(3)],
                 row_group_size=25, page_rows=25, bloom_columns=["k"], bloom_fpp=0.01)
    folder = t.paths.index_snapshot_dir
    sfs = t.store.sfs
    for _ in range(3):
        refresh_index_snapshot(t)
    packs = sorted(i.base_name for i in sfs.list_dir(folder) if i.base_name.endswith(".carbonbloom"))
    assert len(packs) == 2  # the writer deleted the oldest
    data = sfs.read_bytes(f"{folder}/{packs[0]}")
    sfs.write_bytes(f"{folder}/blooms_000000000000001_3_old.carbonbloom", data)  # a writer died before deleting
    sfs.write_bytes(f"{folder}/{packs[-1]}.0123.tmp", data[:100])  # or mid-write
    before = prune(t, "k = '1-7'").segments
    assert clean_files(t, dry_run=False).bytes == len(data)  # the temp file is within the lease time
    assert clean_files(t, dry_run=False, now=now_ms() + 2 * HOUR).bytes == 100
    left = sorted(i.base_name for i in sfs.list_dir(folder) if i.base_name.startswith("blooms_"))
    assert left == packs
    assert prune(t, "k = '1-7'").segments == before == ("1",)
