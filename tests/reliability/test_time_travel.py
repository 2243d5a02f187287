"""Snapshot reads and time travel over the tablestatus versions.

* A query that planned on version N and reads while compaction and clean files (within
  the retention time) commit newer versions returns exactly version N's answer.
* Answers saved at every version across loads, compactions, deletes and overwrites equal
  the ``as_of`` answers afterwards (by version and by time); restore gives them back, and
  is refused once clean files removed the files a version needs.
"""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.errors import TableNotFoundError, UserError, VersionNotFoundError
from carbonstore.pruning.plan import prune
from carbonstore.segments.clean import clean_files
from carbonstore.segments.commit import begin_segment, commit_segment
from carbonstore.segments.compaction import compact
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.manage import delete_segments
from carbonstore.segments.writer import write_task
from carbonstore.spark.reader import plan_partitions, read_row_groups
from carbonstore.store import load_conf
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import forget_decoded, now_ms
from tests.reliability.workload import SCHEMA, committed_ids, load, rows

HOUR = 3_600_000


@pytest.fixture
def table(store: Store) -> Table:
    conf = load_conf(None).with_overrides({"carbon.clean.files.force.allowed": "true"})
    return Store(store.location, conf=conf).create_table("db.t", SCHEMA)


def _overwrite(table: Table, data: pa.Table) -> str:
    entry, keeper = begin_segment(table, overwrite=True)
    settings = write_settings(table, entry.load_name, parse_load_options(table, None))
    result = write_task(iter(data.to_batches()), settings, task_id="00000")
    commit_segment(table, entry.load_name, [result], overwrite=True)
    if keeper is not None:
        keeper.release()
    return entry.load_name


def _read_plan(table: Table, plan: object) -> list[int]:
    batches = [b for part in plan_partitions(plan) for b in read_row_groups(table, part.slices)]
    return sorted(i for b in batches for i in b.column(0).to_pylist())


def test_query_planned_on_a_version_reads_it_while_compaction_and_clean_commit(
    table: Table,
) -> None:
    for k in range(3):
        load(table, rows(k * 100, 40), tasks=1)
    expected = sorted(k * 100 + i for k in range(3) for i in range(40))
    version = table.status.read().version
    plan = prune(table)  # planned on `version`
    filtered = prune(table, "id >= 200")
    compact(table, "custom", segment_ids=["0", "1", "2"])
    load(table, rows(900, 5), tasks=1)
    report = clean_files(table, dry_run=False, stale_inprogress=True)  # within retention
    assert "0" not in report.removed_entries
    assert table.status.read().version > version
    assert _read_plan(table, plan) == expected  # exactly version N's answer
    assert _read_plan(table, filtered) == [i for i in expected if i >= 200]
    assert committed_ids(table.as_of(version)) == expected
    assert committed_ids(table) == sorted([*expected, *range(900, 905)])
    # After the retention time, clean files removes the old files: reading that version
    # is refused with a clear error, never answered from what is left.
    clean_files(table, dry_run=False, now=now_ms() + 2 * HOUR)
    with pytest.raises(VersionNotFoundError, match="removed by clean files"):
        table.as_of(version)


def test_answers_at_every_version_equal_the_as_of_answers(table: Table) -> None:
    saved: dict[int, list[int]] = {}

    def save() -> None:
        saved[table.status.read().version] = committed_ids(table)

    save()
    load(table, rows(0, 30), tasks=1)
    save()
    load(table, rows(100, 30), tasks=2)
    save()
    load(table, rows(200, 30), tasks=1)
    save()
    compact(table, "custom", segment_ids=["0", "1"])
    save()
    delete_segments(table, ["2"])
    save()
    load(table, rows(300, 30), tasks=1)
    save()
    _overwrite(table, rows(400, 30))
    save()
    load(table, rows(500, 30), tasks=1)
    save()
    assert len({tuple(a) for a in saved.values()}) >= 6  # the answers differ over time
    forget_decoded()  # a fresh process
    for version, answer in saved.items():
        assert committed_ids(table.as_of(version)) == answer, version
        assert committed_ids(table.as_of(str(version))) == answer
    # By time: the newest version written at or before a version's timestamp.
    for info in table.history():
        found = table.status.version_as_of(info.timestamp)
        assert found >= info.version
        assert table.status.read(found).timestamp == info.timestamp
        assert committed_ids(table.as_of(f"@{info.timestamp}")) == committed_ids(
            table.as_of(found))
    with pytest.raises(VersionNotFoundError):
        table.status.version_as_of(table.history()[0].timestamp - 1)
    # A pinned table is read-only.
    with pytest.raises(UserError, match="read-only"):
        load(table.as_of(2), rows(9000, 3))
    # Restore gives back an old version's answers, as a new version.
    latest = table.status.read().version
    two_loads = sorted(saved)[2]
    snap = table.restore(two_loads)
    assert snap.version == latest + 1
    assert committed_ids(table) == saved[two_loads]
    assert table.history()[-1].operation == f"RESTORE {two_loads}"
    # Restoring is itself undoable, and the other versions still answer as before.
    table.restore(latest)
    assert committed_ids(table) == saved[latest]
    # Once clean files removed what a version needs, restoring it is refused.
    clean_files(table, dry_run=False, now=now_ms() + 2 * HOUR)
    with pytest.raises(VersionNotFoundError, match="removed by clean files"):
        table.restore(two_loads)
    assert committed_ids(table) == saved[latest]


def test_history_restore_and_as_of_on_the_command_line(
    table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    loc = table.store.location
    load(table, rows(0, 10), tasks=1)
    load(table, rows(100, 10), tasks=1)
    assert main(["--store", loc, "history", "db.t", "--json"]) == 0
    versions = orjson.loads(capsys.readouterr().out)
    assert [v["operation"] for v in versions] == [
        "CREATE", "LOAD BEGIN", "LOAD", "LOAD BEGIN", "LOAD"]
    assert versions[2]["segmentsAdded"] == ["0"] and versions[2]["rows"] == 10
    assert versions[4]["rows"] == 20 and versions[4]["parent"] == 3
    assert main(["--store", loc, "history", "db.t"]) == 0
    assert "LOAD BEGIN" in capsys.readouterr().out
    assert main(["--store", loc, "prune", "db.t", "--as-of", "2", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["levels"]["rows"]["total"] == 10
    assert main(["--store", loc, "prune", "db.t", "--as-of", "77", "--json"]) == 2
    assert "no tablestatus version 77" in capsys.readouterr().err
    assert main(["--store", loc, "prune", "db.t", "--as-of", "yesterday"]) == 2
    assert main(["--store", loc, "restore", "db.t", "--to-version", "2"]) == 0
    assert "as version 5" in capsys.readouterr().out
    assert committed_ids(table) == list(range(10))


def test_drop_is_a_commit_and_create_never_adopts_leftovers(table: Table) -> None:
    store = table.store
    load(table, rows(0, 20), tasks=1)
    entry, keeper = begin_segment(table)  # a load still running while the table is dropped
    settings = write_settings(table, entry.load_name, parse_load_options(table, None))
    result = write_task(iter(rows(100, 20).to_batches()), settings, task_id="00000")
    store.drop_table("db.t")
    with pytest.raises(TableNotFoundError, match="dropped"):
        commit_segment(table, entry.load_name, [result])
    keeper.release()  # type: ignore[union-attr]
    with pytest.raises(TableNotFoundError):
        table.status.read()
    # A leftover folder (e.g. a writer of the dropped table) is moved away, not adopted.
    stray = f"{table.paths.segment_dir('0')}/part-stray.parquet"
    store.sfs.makedirs(table.paths.segment_dir("0"))
    store.sfs.write_bytes(stray, b"old rows")
    again = store.create_table("db.t", "a int")
    assert again.table_id != table.table_id
    assert again.status.read().entries == ()
    assert not store.sfs.exists(stray)
    # Ids continue past the leftover folders (Segment_0, and Segment_1 that the dropped
    # table's load wrote), so no segment of the new table shares a folder with them.
    assert again.status.read().next_segment_id() == "2"
    with pytest.raises(TableNotFoundError):  # the old handle never writes into the new table
        table.status.allocate()
