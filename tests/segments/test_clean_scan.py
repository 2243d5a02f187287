"""Clean files lists only the segment folders that may hold unnamed files (clean_scan.py),
and still removes every superseded delta and leftover - on real folders, no Spark."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.segments import clean_scan
from carbonstore.segments.clean import clean_files
from carbonstore.segments.dml import delete_rows
from carbonstore.store import load_conf
from carbonstore.store.fs import StoreFS
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import now_ms
from tests.reliability.workload import SCHEMA, load, rows

LATER = 2 * 3_600_000  # past the retention time


@pytest.fixture
def table(tmp_path: Path) -> Table:
    conf = tmp_path / "carbon.properties"
    conf.write_text("carbon.clean.files.force.allowed=true\ncarbon.segment.retention.minutes=1\n"
                    "carbon.segment.lease.seconds=1\n", encoding="utf-8")
    t = Store(str(tmp_path / "store"), conf=load_conf(str(conf))).create_table("db.t", SCHEMA)
    for i in range(6):
        load(t, rows(i * 10, 10), tasks=1)
    time.sleep(1.2)  # folders written within the slack (the lease time) of a scan count as new
    return t


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The segment folders clean files lists (their ids), in order."""
    out: list[str] = []
    real = StoreFS.list_dir

    def counting(self: StoreFS, path: str):  # type: ignore[no-untyped-def]
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name.startswith("Segment_"):
            out.append(name.removeprefix("Segment_"))
        return real(self, path)

    monkeypatch.setattr(StoreFS, "list_dir", counting)
    return out


def _deltas(table: Table, sid: str) -> set[str]:
    return {p.name for p in Path(table.paths.segment_dir(sid)).glob("*.deletedelta")}


def _clean(table: Table, *, later: bool = True, dry_run: bool = False):  # type: ignore[no-untyped-def]
    return clean_files(table, dry_run=dry_run, now=now_ms() + (LATER if later else 0))


def test_a_clean_lists_only_folders_written_since_the_last_one(table: Table, listed: list[str]) -> None:
    """Six segments; after a first (full) clean, two DELETEs in segment 2 leave a
    superseded delta there: the next clean lists segment 2 only and removes it (before:
    every folder, each clean)."""
    _clean(table)
    assert sorted(listed) == ["0", "1", "2", "3", "4", "5"]  # no record yet: every folder
    time.sleep(1.2)  # past the slack (the lease time) of the record's start
    delete_rows(table, "id = 21")
    d1 = _deltas(table, "2")
    delete_rows(table, "id = 22")
    assert len(_deltas(table, "2")) == 2
    time.sleep(1.2)  # past the lease: no statement may still commit d1
    listed.clear()
    report = _clean(table)
    assert listed == ["2"]
    assert [Path(i.path).name for i in report.items if i.kind == "delta"] == sorted(d1)
    assert _deltas(table, "2") == {d.delta_file for d in table.status.read().get("2").delete_deltas}
    time.sleep(1.2)
    listed.clear()
    _clean(table)
    assert listed == ["2"]  # the last clean's own delete changed that folder: once more
    listed.clear()
    _clean(table)
    assert listed == []  # nothing written since: nothing listed


def test_a_file_kept_by_one_clean_is_judged_again_by_the_next(table: Table, listed: list[str]) -> None:
    """A superseded delta that a version within the retention time still names is kept
    (and its folder recorded); the next clean, past the retention time, lists that folder
    again though nothing was written to it, and removes the delta."""
    _clean(table)
    time.sleep(1.2)
    delete_rows(table, "id = 41")
    d1 = _deltas(table, "4")
    delete_rows(table, "id = 42")
    time.sleep(1.2)
    report = _clean(table, later=False)  # the version naming d1 is within the retention time
    assert not [i for i in report.items if i.kind == "delta"] and _deltas(table, "4") >= d1
    assert clean_scan.read_record(table).pending == ("4",)  # type: ignore[union-attr]
    time.sleep(1.2)  # the folder is not touched again
    listed.clear()
    report = _clean(table)
    assert listed == ["4"]
    assert {Path(i.path).name for i in report.items if i.kind == "delta"} == d1


def test_a_killed_statements_leftover_is_found_by_its_folders_time(table: Table, listed: list[str]) -> None:
    """A statement killed after writing a delta leaves a file no version names and no
    entry change: the folder's time names it to the next clean."""
    _clean(table)
    time.sleep(1.2)
    stray = Path(table.paths.segment_dir("3")) / "part-0-0.feed.deletedelta"
    stray.write_bytes(b"left by a killed DELETE")
    time.sleep(1.2)
    listed.clear()
    report = _clean(table)
    assert listed == ["3"]
    assert [i.path for i in report.items if i.kind == "delta"] == [str(stray)]
    assert not stray.exists()


def test_a_restore_lists_the_folders_of_the_entries_it_changed(table: Table, listed: list[str]) -> None:
    """A restore changes entries without writing into their folders: the versions since
    the record name them."""
    before = table.status.read().version
    delete_rows(table, "id = 11")
    time.sleep(1.2)
    _clean(table)
    time.sleep(1.2)
    table.restore(before)  # segment 1's delta is unnamed now; its folder was not written
    listed.clear()
    report = _clean(table)
    assert listed == ["1"]
    assert len([i for i in report.items if i.kind == "delta"]) == 1


def test_a_damaged_record_lists_every_folder(table: Table, listed: list[str]) -> None:
    _clean(table)
    Path(table.status.log_dir, "_clean_scan.json").write_bytes(b"{not json")
    listed.clear()
    _clean(table, dry_run=True)
    assert sorted(listed) == ["0", "1", "2", "3", "4", "5"]


def test_old_checkpoints_go_and_every_version_still_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints every 4th version, 30 versions: clean files removes the checkpoints
    before the one the oldest retained version reads (before: they were never removed);
    every version - retained or older - reads the same entries from the files alone, and
    the next clean probes only from where the last one stopped."""
    from carbonstore.store import tablestatus, versions
    from carbonstore.store.checkpoint_arrow import checkpoint_name
    from carbonstore.store.tablestatus import SUCCESS, forget_decoded

    monkeypatch.setattr(versions, "CHECKPOINT_INTERVAL", 4)
    monkeypatch.setattr(tablestatus, "CHECKPOINT_INTERVAL", 4)
    monkeypatch.setattr("carbonstore.segments.clean.CHECKPOINT_INTERVAL", 4)
    conf = tmp_path / "carbon.properties"
    conf.write_text("carbon.clean.files.force.allowed=true\n", encoding="utf-8")
    table = Store(str(tmp_path / "s"), conf=load_conf(str(conf))).create_table("db.t", SCHEMA)
    while table.status.read().version < 30:
        table.status.allocate(status=SUCCESS, row_count=1)
    log = Path(table.status.log_dir)
    assert sorted(int(p.name[:20]) for p in log.glob("*.checkpoint.arrow")) == list(range(4, 29, 4))
    want = {v: list(table.status.read(v).entries) for v in range(31)}
    first = 21  # the oldest retained version: it reads checkpoint 20
    monkeypatch.setattr("carbonstore.segments.clean.first_in_reach", lambda *a, **k: first)
    dry = clean_files(table, dry_run=True)
    assert sorted(Path(i.path).name for i in dry.items if i.kind == "checkpoint") == [
        checkpoint_name(c) for c in (4, 8, 12, 16)]
    assert len(list(log.glob("*.checkpoint.arrow"))) == 7  # a dry run removes nothing
    clean_files(table, dry_run=False)
    assert sorted(int(p.name[:20]) for p in log.glob("*.checkpoint.arrow")) == [20, 24, 28]
    forget_decoded()
    assert {v: list(table.status.read(v).entries) for v in range(31)} == want
    (log / checkpoint_name(24)).unlink()  # a checkpoint its writer never wrote
    first = 27  # reads 20 then (24 is missing): 20 stays
    probed: list[str] = []
    real = StoreFS.exists
    monkeypatch.setattr(StoreFS, "exists", lambda self, p: probed.append(p) or real(self, p))
    assert not [i for i in clean_files(table, dry_run=False).items if i.kind == "checkpoint"]
    assert not any(checkpoint_name(c) in p for p in probed for c in (4, 8, 12, 16))
    forget_decoded()
    assert {v: list(table.status.read(v).entries) for v in range(31)} == want


def test_versions_in_reach_cost_the_judged_segments_only(table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unnamed delta makes clean files read every version in reach (none names it); each
    is asked for the entries of the delta's segment only (before: every entry
    of every version - 250 s for 52 versions of a 100,000-segment table)."""
    from carbonstore.store import checkpoint_arrow, tablestatus, versions
    from carbonstore.store.tablestatus import StatusChange, forget_decoded

    monkeypatch.setattr(versions, "CHECKPOINT_INTERVAL", 4)
    monkeypatch.setattr(tablestatus, "CHECKPOINT_INTERVAL", 4)
    stray = Path(table.paths.segment_dir("2")) / "part-0-0.feed.deletedelta"
    stray.write_bytes(b"left by a killed DELETE")  # named by no version: all are read
    for _ in range(12):  # versions in reach, read from checkpoints: their entries built on use
        table.status.update(lambda s: StatusChange(), operation="ALTER t", force=True)
    time.sleep(1.2)
    forget_decoded()
    built: list[int] = []
    real = checkpoint_arrow.build_plain
    monkeypatch.setattr(checkpoint_arrow, "build_plain", lambda *c: built.append(len(c[0])) or real(*c))
    report = _clean(table, later=False)  # within the retention time: every version is in reach
    assert [i.path for i in report.items if i.kind == "delta"] == [str(stray)]
    assert sum(built) <= 8, built  # a few entries of segment 2 (before: 6 per version read)
