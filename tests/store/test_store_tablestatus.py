"""tablestatus: entries, transitions, versions written once, history, corruption."""

from __future__ import annotations

import os
import shutil

import orjson
import pytest

from carbonstore import Store, Table
from carbonstore.errors import CorruptMetadataError, SegmentNotFoundError
from carbonstore.store import LoadEntry
from carbonstore.store.tablestatus import (
    ALL_STATUSES,
    COMPACTED,
    FAILURE,
    IN_PROGRESS,
    MARKED_FOR_DELETE,
    OVERWRITE_IN_PROGRESS,
    PARTIAL_SUCCESS,
    SUCCESS,
    TableStatusSnapshot,
    forget_decoded,
    next_compacted_name,
    segment_sort_key,
)

# The allowed moves, written out independently of the implementation's table.
ALLOWED = {
    (IN_PROGRESS, SUCCESS), (IN_PROGRESS, PARTIAL_SUCCESS), (IN_PROGRESS, FAILURE),
    (IN_PROGRESS, MARKED_FOR_DELETE),
    (OVERWRITE_IN_PROGRESS, SUCCESS), (OVERWRITE_IN_PROGRESS, PARTIAL_SUCCESS),
    (OVERWRITE_IN_PROGRESS, FAILURE), (OVERWRITE_IN_PROGRESS, MARKED_FOR_DELETE),
    (SUCCESS, COMPACTED), (SUCCESS, MARKED_FOR_DELETE),
    (PARTIAL_SUCCESS, COMPACTED), (PARTIAL_SUCCESS, MARKED_FOR_DELETE),
    (FAILURE, MARKED_FOR_DELETE),
}
PAIRS = [(a, b) for a in ALL_STATUSES for b in ALL_STATUSES if a != b]


def test_status_strings_are_carbondatas() -> None:
    assert ALL_STATUSES == (
        "Success", "Partial Success", "Failure", "In Progress", "Marked for Delete",
        "Compacted", "Overwrite In Progress",
    )


@pytest.fixture
def table(store: Store) -> Table:
    return store.create_table("t", "id long")


def _versions(table: Table) -> list[str]:
    return sorted(n for n in os.listdir(table.status.log_dir) if n[0].isdigit())


def _raw(table: Table) -> bytes:
    """The latest version file's bytes."""
    with open(f"{table.status.log_dir}/{_versions(table)[-1]}", "rb") as f:
        return f.read()


def _on_disk(table: Table) -> list[dict[str, object]]:
    """The entries the latest version file changes (CarbonData's keys)."""
    return orjson.loads(_raw(table))["upserts"]


@pytest.mark.parametrize(("old", "new"), sorted(ALLOWED))
def test_allowed_transitions_on_disk(table: Table, old: str, new: str) -> None:
    entry = table.status.allocate(status=old)
    changed = table.status.set_status(entry.load_name, new, row_count=5)
    assert (changed.status, changed.row_count) == (new, 5)
    on_disk = table.status.read().get(entry.load_name)
    assert on_disk == changed
    assert _on_disk(table)[0]["loadStatus"] == new


@pytest.mark.parametrize(("old", "new"), sorted(set(PAIRS) - ALLOWED))
def test_refused_transitions(table: Table, old: str, new: str) -> None:
    entry = table.status.allocate(status=old)
    with pytest.raises(ValueError, match=f"{old} -> {new} is not allowed"):
        entry.with_status(new)
    before = _versions(table)
    with pytest.raises(ValueError, match="is not allowed"):
        table.status.set_status(entry.load_name, new)
    assert _versions(table) == before  # a refused change writes nothing
    assert table.status.read().get(entry.load_name).status == old


def test_transition_to_an_unknown_status_is_refused() -> None:
    e = LoadEntry(load_name="0", status=IN_PROGRESS, load_start_time=1)
    with pytest.raises(ValueError, match="not allowed"):
        e.with_status("Done")


@pytest.mark.parametrize("status", ALL_STATUSES)
def test_same_status_updates_fields(status: str) -> None:
    e = LoadEntry(load_name="0", status=status, load_start_time=1)
    assert e.with_status(status, data_size=9).data_size == 9


def test_set_status_of_missing_segment(table: Table) -> None:
    table.status.allocate()
    with pytest.raises(SegmentNotFoundError, match="segment 7 does not exist"):
        table.status.set_status("7", SUCCESS)
    with pytest.raises(SegmentNotFoundError):
        table.status.read().get("7")
    assert table.status.read().find("7") is None


def test_entry_json_uses_carbondata_keys_and_round_trips() -> None:
    e = LoadEntry(
        load_name="3.1", status=PARTIAL_SUCCESS, load_start_time=10, timestamp=25,
        data_size=100, index_size=7, row_count=42, bad_record_count=2,
        merged_load_name=None, modification_or_deletion_timestamp=30, visibility=False,
        major_compacted=True, file_format="parquet", segment_file="3.1_25.carbonindexmerge",
        extra={"custom": "x"},
    )
    obj = e.to_json()
    assert {
        "loadName", "loadStatus", "loadStartTime", "timestamp", "dataSize", "indexSize",
        "mergedLoadName", "modificationOrDeletionTimestamp", "visibility", "majorCompacted",
        "fileFormat", "segmentFile", "rowCount", "badRecordCount",
    } <= set(obj)
    assert obj["loadStatus"] == "Partial Success"
    assert obj["visibility"] == "false" and obj["majorCompacted"] == "true"
    assert obj["custom"] == "x"
    assert LoadEntry.from_json(orjson.loads(orjson.dumps(obj))) == e
    assert e.time_taken_ms == 15
    assert not e.readable  # invisible
    assert LoadEntry(load_name="1", status=SUCCESS, load_start_time=0).readable


def test_segment_ids_and_compacted_names(table: Table) -> None:
    ids = [table.status.allocate().load_name for _ in range(3)]
    assert ids == ["0", "1", "2"]
    table.status.update(
        lambda s: [*s.entries, LoadEntry(load_name="7.2", status=SUCCESS, load_start_time=0)]
    )
    assert table.status.allocate().load_name == "8"
    assert next_compacted_name("3") == "3.1"
    assert next_compacted_name("3.1") == "3.2"
    assert next_compacted_name("12.9") == "12.10"
    assert sorted(["10", "2", "2.1", "1", "2.10", "2.2"], key=segment_sort_key) == [
        "1", "2", "2.1", "2.2", "2.10", "10"
    ]
    assert TableStatusSnapshot(()).next_segment_id() == "0"


def test_readable_uses_only_success_and_partial_success(table: Table) -> None:
    for status in ALL_STATUSES:
        table.status.allocate(status=status)
    snap = table.status.read()
    assert sorted(e.status for e in snap.readable) == [PARTIAL_SUCCESS, SUCCESS]


def test_every_write_is_a_new_version_and_old_ones_never_change(table: Table) -> None:
    # Changed behaviour: the single rewritten file with its backup became a version chain.
    assert table.status.read().version == 0
    table.status.allocate()
    v1 = _raw(table)
    table.status.set_status("0", SUCCESS)
    table.status.allocate()
    names = _versions(table)
    assert len(names) == 4  # version 0 is the table's creation
    with open(f"{table.status.log_dir}/{names[1]}", "rb") as f:
        assert f.read() == v1
    files = sorted(os.listdir(table.status.log_dir))
    assert not [n for n in files if n.endswith(".tmp")]
    assert not os.path.exists(table.paths.tablestatus)  # no single mutable file any more


def test_versions_change_with_every_write(table: Table) -> None:
    versions = {table.status.read().version}
    for _ in range(3):
        table.status.allocate()
        versions.add(table.status.read().version)
    assert versions == {0, 1, 2, 3}


def test_a_version_is_decoded_once_and_a_fresh_process_reads_damage(table: Table) -> None:
    from carbonstore.store.tablestatus import forget_decoded

    table.status.allocate()
    first = table.status.read()
    assert table.status.read().entries is first.entries  # same version: no second decode
    path = f"{table.status.log_dir}/{_versions(table)[-1]}"
    raw = _raw(table)
    with open(path, "wb") as f:
        f.write(raw[: len(raw) // 2])
    forget_decoded()  # a fresh process
    with pytest.raises(CorruptMetadataError, match=_versions(table)[-1]):
        table.status.read()


def test_history_receives_removed_entries(table: Table) -> None:
    for _ in range(4):
        table.status.allocate(status=SUCCESS)
    table.status.set_status("1", MARKED_FOR_DELETE)
    table.status.set_status("3", MARKED_FOR_DELETE)
    snap = table.status.update(
        lambda s: list(s.entries), remove=lambda e: e.status == MARKED_FOR_DELETE
    )
    assert [e.load_name for e in snap.entries] == ["0", "2"]
    history = table.status.history.read()
    assert [(e.load_name, e.status) for e in history] == [
        ("1", MARKED_FOR_DELETE), ("3", MARKED_FOR_DELETE)
    ]
    # a second removal appends; earlier history stays
    table.status.set_status("0", MARKED_FOR_DELETE)
    table.status.update(lambda s: list(s.entries), remove=lambda e: e.load_name == "0")
    assert [e.load_name for e in table.status.history.read()] == ["1", "3", "0"]
    assert [e.load_name for e in table.status.read().entries] == ["2"]
    # the id of a removed segment is never handed out again (3 was the largest)
    assert table.status.allocate().load_name == "4"


def test_history_is_not_duplicated_when_a_removal_is_retried(table: Table) -> None:
    table.status.allocate(status=FAILURE)
    table.status.allocate(status=SUCCESS)
    # As after a crash between the history write and the tablestatus write: "0" is in both.
    table.status.update(lambda s: list(s.entries), remove=lambda e: e.load_name == "0")
    table.status.update(
        lambda s: [LoadEntry(load_name="0", status=FAILURE, load_start_time=0), *s.entries]
    )
    table.status.update(lambda s: list(s.entries), remove=lambda e: e.load_name == "0")
    assert [e.load_name for e in table.status.history.read()] == ["0"]


def test_failed_update_writes_nothing(table: Table) -> None:
    table.status.allocate()
    before = _versions(table)

    def boom(snap: TableStatusSnapshot) -> list[LoadEntry]:
        raise SegmentNotFoundError("nope")

    with pytest.raises(SegmentNotFoundError):
        table.status.update(boom)
    assert _versions(table) == before


def _good(table: Table) -> bytes:
    """A table of the earlier single-file format (a tablestatus file, no version log)."""
    entries = [
        LoadEntry(load_name="0", status=SUCCESS, load_start_time=1, row_count=3),
        LoadEntry(load_name="1", status=IN_PROGRESS, load_start_time=2),
    ]
    shutil.rmtree(table.paths.tablestatus_log)
    data = orjson.dumps([e.to_json() for e in entries], option=orjson.OPT_INDENT_2)
    with open(table.paths.tablestatus, "wb") as f:
        f.write(data)
    with open(table.paths.tablestatus_backup, "wb") as f:
        f.write(orjson.dumps([entries[0].to_json()], option=orjson.OPT_INDENT_2))
    forget_decoded()
    return data


CORRUPTIONS = {
    "truncated": lambda b: b[: len(b) // 2],
    "one byte short": lambda b: b[:-1] if b.rstrip().endswith(b"]") else b[:-2],
    "empty": lambda b: b"",
    "zeros": lambda b: b"\x00" * len(b),
    "not an array": lambda b: b'{"loadName": "0"}',
    "unknown status": lambda b: b.replace(b'"Success"', b'"Succeeded"'),
    "missing loadName": lambda b: b.replace(b'"loadName"', b'"name"'),
    "path in loadName": lambda b: b.replace(b'"loadName": "0"', b'"loadName": "../0"'),
    "bad start time": lambda b: b.replace(b'"loadStartTime"', b'"loadStartTime": null, "x"'),
    "array of numbers": lambda b: b"[1, 2]",
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corrupt_tablestatus_names_file_and_backup(legacy: Table, kind: str) -> None:
    table = legacy
    good = _good(table)
    bad = CORRUPTIONS[kind](good)
    assert bad != good
    with open(table.paths.tablestatus, "wb") as f:
        f.write(bad)
    p = table.paths
    with pytest.raises(CorruptMetadataError) as info:
        table.status.read()
    msg = str(info.value)
    assert p.tablestatus in msg and p.tablestatus_backup in msg
    # a writer refuses too, and leaves the corrupt file and the backup for recovery
    backup = open(p.tablestatus_backup, "rb").read()
    with pytest.raises(CorruptMetadataError):
        table.status.allocate()
    assert open(p.tablestatus, "rb").read() == bad
    assert open(p.tablestatus_backup, "rb").read() == backup
    assert not os.path.exists(table.paths.tablestatus_log)  # not upgraded from damage
    # describe (and so the CLI) reports it rather than showing a wrong table
    with pytest.raises(CorruptMetadataError):
        table.describe()
    # the documented recovery: copy the backup over the file
    os.replace(p.tablestatus_backup, p.tablestatus)
    assert [e.load_name for e in table.status.read().entries] == ["0"]


@pytest.fixture
def legacy(store: Store) -> Table:
    """A table whose schema predates table ids (its log folder name is derived)."""
    table = store.create_table("old", "id long")
    schema = orjson.loads(open(table.paths.schema, "rb").read())
    del schema["tableId"], schema["checksum"]  # as written before both
    with open(table.paths.schema, "wb") as f:
        f.write(orjson.dumps(schema))
    return store.table("old")


def test_corrupt_history_is_reported(table: Table) -> None:
    table.status.allocate(status=FAILURE)
    table.status.update(lambda s: list(s.entries), remove=lambda e: True)
    with open(table.paths.tablestatus_history, "wb") as f:
        f.write(b"[{")
    with pytest.raises(CorruptMetadataError, match="tablestatus.history"):
        table.status.history.read()
