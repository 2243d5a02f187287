"""Restore against clean files, deterministically, with real processes.

The reported race: DELETE id=1 (delta d1), DELETE id=2 (d2 supersedes d1), then ``restore``
to the first DELETE's version while ``clean-files`` runs: clean deleted d1 (superseded in
the current version) between the restore's file check and its commit, the restore
committed a version naming d1, and every read failed ("delete delta ... is missing").

Each order is made exact with a pause at a crash point (``faults.on_point``) in this
process while the other operation runs to completion as a real ``carbonstore`` process:
the restore paused just before its version is put while clean files runs; clean files
paused after judging the files (and after recording them) while a restore runs. Whatever
the order, the table stays readable, and it answers either the restored version (the
restore won: clean kept what it names) or the version before (clean won: the restore
failed with one line, ``VersionNotFoundError``, exit 2).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.errors import VersionNotFoundError
from carbonstore.segments.clean import clean_files
from carbonstore.segments.dml import delete_rows
from carbonstore.store import load_conf
from carbonstore.store.faults import on_point
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import now_ms
from tests.reliability.workload import SCHEMA, committed_ids, load, rows

ROOT = str(Path(__file__).resolve().parents[2])
LATER = 2 * 3_600_000  # a clean files run "two hours later": past the retention time

# clean files as its own process; argv: store, conf file, force (0/1), clock offset in ms
_CLEAN = """
import sys
from carbonstore import Store
from carbonstore.segments.clean import clean_files
from carbonstore.store import load_conf
from carbonstore.store.tablestatus import now_ms
store, conf, force, later = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
table = Store(store, conf=load_conf(conf)).table("db.t")
report = clean_files(table, dry_run=False, force=force, now=now_ms() + later)
print(" ".join(sorted(i.path.rsplit("/", 1)[-1] for i in report.items if i.kind == "delta")))
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CARBONSTORE_CRASH_AT"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture
def conf_file(tmp_path: Path) -> Path:
    path = tmp_path / "carbon.properties"
    path.write_text("carbon.clean.files.force.allowed=true\n"
                    "carbon.segment.retention.minutes=1\n"
                    "carbon.segment.lease.seconds=1\n", encoding="utf-8")
    return path


@pytest.fixture
def table(tmp_path: Path, conf_file: Path) -> Table:
    store = Store(str(tmp_path / "store"), conf=load_conf(str(conf_file)))
    t = store.create_table("db.t", SCHEMA)
    load(t, rows(0, 20), tasks=1)
    return t


def _two_deletes(table: Table) -> tuple[int, int, str]:
    """DELETE id=1, DELETE id=2: (the first DELETE's version, the second's, d1's name)."""
    delete_rows(table, "id = 1")
    first = table.status.read()
    d1 = first.get("0").delete_deltas[0].delta_file
    delete_rows(table, "id = 2")
    second = table.status.read()
    assert d1 not in {d.delta_file for d in second.get("0").delete_deltas}  # superseded
    time.sleep(1.2)  # past the 1 s lease: no statement may still be about to commit d1
    return first.version, second.version, d1


def _clean_process(table: Table, conf_file: Path, *, force: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CLEAN, table.store.location, str(conf_file),
         "1" if force else "0", "0" if force else str(LATER)],
        env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def _restore_process(table: Table, conf_file: Path, version: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", "--store", table.store.location, "--conf",
         str(conf_file), "restore", "db.t", "--to-version", str(version)],
        env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def _clean_here(table: Table, *, force: bool) -> object:
    return clean_files(table, dry_run=False, force=force, now=now_ms() + (0 if force else LATER))


def _readable_now_and_then(table: Table) -> list[int]:
    """The latest version's rows; every version the restore or clean wrote reads too."""
    answer = committed_ids(table)
    sfs = table.store.sfs
    for e in table.status.read().readable:
        seg = table.paths.segment_dir(e.load_name)
        for d in e.delete_deltas:
            assert sfs.exists(f"{seg}/{d.delta_file}"), f"the latest version names {d}"
    return answer


WITHOUT_1 = [i for i in range(20) if i != 1]
WITHOUT_1_2 = [i for i in range(20) if i not in (1, 2)]


@pytest.mark.parametrize("force", [True, False], ids=["forced", "after-retention"])
def test_clean_between_the_restores_check_and_its_commit(
    table: Table, conf_file: Path, force: bool
) -> None:
    """The reported interleaving: the restore checked d1 exists, then clean files (a real
    process) deleted it, then the restore put its version. Now the restore finds clean's
    record of d1 when its put loses to clean's version and fails with one line."""
    v1, _v2, d1 = _two_deletes(table)
    cleaned: list[subprocess.CompletedProcess[str]] = []

    def clean_runs() -> None:
        cleaned.append(_clean_process(table, conf_file, force=force))

    with on_point("tablestatus.before_write", clean_runs):
        with pytest.raises(VersionNotFoundError, match=f"{d1}.*clean files"):
            table.restore(v1)
    assert cleaned and cleaned[0].returncode == 0, cleaned[0].stderr if cleaned else None
    assert d1 in cleaned[0].stdout  # clean files did delete d1
    assert _readable_now_and_then(table) == WITHOUT_1_2
    with pytest.raises(VersionNotFoundError, match="removed by clean files"):
        table.restore(v1)  # and a later restore is refused up front
    assert _readable_now_and_then(table) == WITHOUT_1_2


@pytest.mark.parametrize("force", [True, False], ids=["forced", "after-retention"])
def test_restore_between_cleans_judgement_and_its_record(
    table: Table, conf_file: Path, force: bool
) -> None:
    """Clean files judged d1 deletable (the latest version names only d2), then a restore
    (a real process) committed a version naming d1: clean's record commit re-reads the
    latest version and keeps d1; the restored version reads."""
    v1, _v2, d1 = _two_deletes(table)
    restored: list[subprocess.CompletedProcess[str]] = []

    def restore_runs() -> None:
        restored.append(_restore_process(table, conf_file, v1))

    with on_point("clean.files_chosen", restore_runs):
        report = _clean_here(table, force=force)
    assert restored, "the interleaving was not reached"
    assert restored[0].returncode == 0, restored[0].stderr
    deleted = {i.path.rsplit("/", 1)[-1] for i in report.items if i.kind == "delta"}  # type: ignore[attr-defined]
    assert d1 not in deleted
    assert _readable_now_and_then(table) == WITHOUT_1


@pytest.mark.parametrize("force", [True, False], ids=["forced", "after-retention"])
def test_restore_between_cleans_record_and_its_deletes(
    table: Table, conf_file: Path, force: bool
) -> None:
    """Clean files committed its version recording d1, nothing deleted yet, then a restore
    (a real process) to the version naming d1: d1 still exists, but the restore sees the
    record and fails with one line (exit 2); clean deletes d1 and the table reads."""
    v1, _v2, d1 = _two_deletes(table)
    restored: list[subprocess.CompletedProcess[str]] = []

    def restore_runs() -> None:
        assert table.store.sfs.exists(f"{table.paths.segment_dir('0')}/{d1}")
        restored.append(_restore_process(table, conf_file, v1))

    with on_point("clean.files_recorded", restore_runs):
        report = _clean_here(table, force=force)
    assert restored, "the interleaving was not reached"
    assert restored[0].returncode == 2, (restored[0].stdout, restored[0].stderr)
    err = restored[0].stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert d1 in err and f"version {v1}" in err
    assert d1 in {i.path.rsplit("/", 1)[-1] for i in report.items if i.kind == "delta"}  # type: ignore[attr-defined]
    assert _readable_now_and_then(table) == WITHOUT_1_2


def test_clean_keeps_what_versions_within_the_retention_time_name_after_a_restore(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clean files aged a superseded delta by its entry's modification time; a restore
    brings back an entry with its old times, so right after restoring the first DELETE
    (made two hours ago) clean files deleted d2, which the version current a moment ago
    names, and time travel to it failed within the retention time."""
    import carbonstore.segments.dml_commit as dml

    two_hours_ago = now_ms() - LATER
    monkeypatch.setattr(dml, "now_ms", lambda: two_hours_ago)  # the DELETEs' entry times
    v1, v2, _d1 = _two_deletes(table)
    monkeypatch.undo()
    d2 = table.status.read(v2).get("0").delete_deltas[0].delta_file
    table.restore(v1)
    report = clean_files(table, dry_run=False)  # within the retention time of v2
    assert d2 not in {i.path.rsplit("/", 1)[-1] for i in report.items}  # type: ignore[attr-defined]
    assert committed_ids(table.as_of(v2)) == WITHOUT_1_2
    assert _readable_now_and_then(table) == WITHOUT_1
    # A forced clean may remove it (only the latest version is kept), and then time travel
    # to v2 and its restore are refused with one line.
    report = clean_files(table, dry_run=False, force=True)
    assert d2 in {i.path.rsplit("/", 1)[-1] for i in report.items}  # type: ignore[attr-defined]
    with pytest.raises(VersionNotFoundError, match=d2):
        table.as_of(v2)
    with pytest.raises(VersionNotFoundError, match=d2):
        table.restore(v2)
    assert _readable_now_and_then(table) == WITHOUT_1


def test_clean_between_the_restores_check_and_its_commit_for_a_replaced_merge_index(
    table: Table, conf_file: Path
) -> None:
    """The same race for a merge index replaced by ``index rebuild``: the restore of the
    version before the rebuild names the old merge index, a forced clean files process
    removes it between the restore's check and its commit."""
    from carbonstore.segments.rebuild import rebuild_indexes

    before = table.status.read()
    old_index = before.get("0").segment_file
    rebuild_indexes(table, ["0"])
    assert table.status.read().get("0").segment_file != old_index
    time.sleep(1.2)  # past the 1 s lease
    cleaned: list[subprocess.CompletedProcess[str]] = []

    def clean_runs() -> None:
        cleaned.append(_clean_process(table, conf_file, force=True))

    with on_point("tablestatus.before_write", clean_runs):
        with pytest.raises(VersionNotFoundError, match=f"merge index {old_index}"):
            table.restore(before.version)
    assert cleaned and cleaned[0].returncode == 0, cleaned[0].stderr if cleaned else None
    assert not table.store.sfs.exists(f"{table.paths.segment_dir('0')}/{old_index}")
    assert _readable_now_and_then(table) == list(range(20))
    with pytest.raises(VersionNotFoundError, match="removed by clean files"):
        table.as_of(before.version)
