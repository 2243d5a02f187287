"""The tablestatus version chain: checkpoints, the hint, upgrade, retries, damaged entries."""

from __future__ import annotations

import os
import shutil
import threading

import orjson
import pytest

from carbonstore import Store, Table
from carbonstore.errors import (
    CommitConflictError,
    CorruptMetadataError,
    TableNotFoundError,
    VersionNotFoundError,
)
from carbonstore.store import LoadEntry, load_conf
from carbonstore.store.tablestatus import (
    CHECKPOINT_INTERVAL,
    FAILURE,
    SUCCESS,
    TableStatusSnapshot,
    forget_decoded,
)


@pytest.fixture
def table(store: Store) -> Table:
    return store.create_table("t", "id long")


def _files(table: Table) -> list[str]:
    return sorted(n for n in os.listdir(table.status.log_dir) if n[0].isdigit() and n.endswith(".json"))


def test_checkpoints_and_cold_reads_equal_warm_ones(table: Table) -> None:
    snaps = {}
    for i in range(CHECKPOINT_INTERVAL + 12):
        table.status.allocate(status=SUCCESS, row_count=i)
        if i % 7 == 0:
            table.status.set_status(str(i), "Marked for Delete")
        if i % 11 == 0:
            table.status.update(lambda s: list(s.entries), remove=lambda e: e.status != SUCCESS)
        snap = table.status.read()
        snaps[snap.version] = snap
    # the version at a checkpoint's number is a delta; the checkpoint is an Arrow file beside it
    cp = orjson.loads(open(f"{table.status.log_dir}/{CHECKPOINT_INTERVAL:020d}.json", "rb").read())
    assert cp["checkpoint"] is False and cp["formatVersion"] == 4 and "entries" not in cp
    assert os.path.exists(f"{table.status.log_dir}/{CHECKPOINT_INTERVAL:020d}.checkpoint.arrow")
    delta = orjson.loads(open(f"{table.status.log_dir}/{1:020d}.json", "rb").read())
    assert delta["checkpoint"] is False and "entries" not in delta
    forget_decoded()  # a fresh process: every version rebuilt from checkpoints and deltas
    for version, snap in snaps.items():
        assert table.status.read(version) == snap
    assert table.status.read() == snaps[max(snaps)]


def test_the_hint_is_never_trusted_over_what_exists(table: Table) -> None:
    for _ in range(5):
        table.status.allocate()
    hint = f"{table.status.log_dir}/_latest.json"
    with open(hint, "wb") as f:
        f.write(b'{"version": 1}')  # stale: probing forward finds 5
    forget_decoded()
    assert table.status.read().version == 5
    os.remove(hint)  # lost: the folder is listed once
    forget_decoded()
    assert table.status.read().version == 5
    with open(hint, "wb") as f:
        f.write(b"garbage")
    forget_decoded()
    assert table.status.read().version == 5
    # A hint naming a version that does not exist: the newest version file was lost.
    os.remove(f"{table.status.log_dir}/{5:020d}.json")
    with open(hint, "wb") as f:
        f.write(b'{"version": 5}')
    forget_decoded()
    with pytest.raises(CorruptMetadataError, match=f"{5:020d}.json"):
        table.status.read()


def test_read_versions_and_their_limits(table: Table) -> None:
    table.status.allocate()
    assert table.status.read(0).entries == ()
    assert [e.load_name for e in table.status.read(1).entries] == ["0"]
    with pytest.raises(VersionNotFoundError, match="versions are 0 to 1"):
        table.status.read(2)


def test_concurrent_threads_never_lose_a_commit(store: Store) -> None:
    conf = load_conf(None).with_overrides({"carbon.tablestatus.commit.retries": "500"})
    table = Store(store.location, conf=conf).create_table("c", "id long")
    ids: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(15):
            e = table.status.allocate()
            with lock:
                ids.append(e.load_name)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(ids, key=int) == [str(i) for i in range(90)]
    assert len(_files(table)) == 91
    forget_decoded()
    assert len(table.status.read().entries) == 90


def test_commit_gives_up_after_the_configured_retries(store: Store) -> None:
    conf = load_conf(None).with_overrides({"carbon.tablestatus.commit.retries": "3"})
    table = Store(store.location, conf=conf).create_table("r", "id long")
    from carbonstore.store.faults import on_point

    calls: list[int] = []
    busy: list[bool] = []

    def always() -> None:  # every attempt loses: another writer commits just before it
        if busy:
            return
        calls.append(1)
        busy.append(True)
        try:
            store.table("r").status.allocate()
        finally:
            busy.clear()

    with on_point("tablestatus.before_write", always, once=False):
        with pytest.raises(CommitConflictError, match="3 attempts lost the race"):
            table.status.allocate()
    assert len(calls) >= 3


def test_legacy_table_reads_as_version_0_and_upgrades_on_first_write(store: Store) -> None:
    table = store.create_table("old", "id long")
    entries = [LoadEntry(load_name="0", status=SUCCESS, load_start_time=1, row_count=4),
               LoadEntry(load_name="1", status=FAILURE, load_start_time=2)]
    shutil.rmtree(table.paths.tablestatus_log)
    with open(table.paths.tablestatus, "wb") as f:
        f.write(orjson.dumps([e.to_json() for e in entries]))
    with open(table.paths.tablestatus_history, "wb") as f:
        f.write(orjson.dumps([LoadEntry(load_name="7", status=FAILURE,
                                        load_start_time=0).to_json()]))
    schema = orjson.loads(open(table.paths.schema, "rb").read())
    del schema["tableId"], schema["checksum"]  # as written before both
    with open(table.paths.schema, "wb") as f:
        f.write(orjson.dumps(schema))
    forget_decoded()
    old = store.table("old")
    snap = old.status.read()
    assert (snap.version, snap.entries, snap.next_segment_id()) == (0, tuple(entries), "8")
    assert not os.path.exists(old.paths.tablestatus_log)  # reading never writes
    new = old.status.allocate()
    assert new.load_name == "8"  # ids of removed entries (history) are not reused
    assert [v.operation for v in old.history()] == ["UPGRADE", "ALLOCATE"]
    forget_decoded()
    assert [e.load_name for e in store.table("old").status.read().entries] == ["0", "1", "8"]


# Damaged entries (issue: a tablestatus with a loadName twice was read twice; a string
# timestamp crashed clean files; a segmentFile of ../../.. was followed out of the store).
BAD_ENTRIES = {
    "loadName twice": lambda e: [e, e],
    "unknown status": lambda e: [{**e, "loadStatus": "Succeeded"}],
    "string size": lambda e: [{**e, "dataSize": "12kb"}],
    "float row count": lambda e: [{**e, "rowCount": 1.5}],
    "string timestamp": lambda e: [{**e, "modificationOrDeletionTimestamp": "yesterday"}],
    "boolean start": lambda e: [{**e, "loadStartTime": True}],
    "segmentFile escapes": lambda e: [{**e, "segmentFile": "../../../../outside/x.carbonindexmerge"}],
    "segmentFile absolute": lambda e: [{**e, "segmentFile": "/etc/passwd"}],
    "segmentFile in a folder": lambda e: [{**e, "segmentFile": "a/b.carbonindexmerge"}],
    "mergedLoadName path": lambda e: [{**e, "mergedLoadName": "../1"}],
    "visibility word": lambda e: [{**e, "visibility": "maybe"}],
    "not an object": lambda e: [[1, 2]],
}


@pytest.mark.parametrize("kind", sorted(BAD_ENTRIES))
@pytest.mark.parametrize("where", ["checkpoint", "delta", "big delta", "legacy"])
def test_damaged_entries_are_corrupt_metadata_naming_the_file(
    store: Store, kind: str, where: str
) -> None:
    from carbonstore.segments.clean import clean_files

    table = store.create_table("d", "id long")
    table.status.allocate(status=SUCCESS, row_count=3)
    good = LoadEntry(load_name="0", status=SUCCESS, load_start_time=1, row_count=3,
                     segment_file="0_1.carbonindexmerge").to_json()
    bad = BAD_ENTRIES[kind](good)
    if where == "legacy":
        shutil.rmtree(table.paths.tablestatus_log)
        schema = orjson.loads(open(table.paths.schema, "rb").read())
        del schema["tableId"], schema["checksum"]  # as written before both
        with open(table.paths.schema, "wb") as f:
            f.write(orjson.dumps(schema))
        path = table.paths.tablestatus
        data = orjson.dumps(bad)
    else:
        path = f"{table.status.log_dir}/{1:020d}.json"
        rec = orjson.loads(open(path, "rb").read())
        if where == "checkpoint":
            path = f"{table.status.log_dir}/{0:020d}.json"
            rec = orjson.loads(open(path, "rb").read())
            rec["entries"] = bad
        elif where == "big delta":  # big enough that opening the table decodes it whole
            rec["upserts"] = [{**good, "loadName": str(n)} for n in range(10, 400)] + bad
            assert len(orjson.dumps(rec)) > 32 * 1024
        else:
            rec["upserts"] = bad
        data = orjson.dumps(rec)
    with open(path, "wb") as f:
        f.write(data)
    forget_decoded()
    t = store.table("d")
    name = os.path.basename(path)
    with pytest.raises(CorruptMetadataError, match=name):
        t.status.read()
    with pytest.raises(CorruptMetadataError, match=name):  # never a TypeError
        clean_files(t, dry_run=False, force=False, stale_inprogress=True)
    with pytest.raises(CorruptMetadataError, match=name):  # writers refuse too
        t.status.allocate()


def test_drop_commits_a_version_and_old_handles_fail(store: Store) -> None:
    table = store.create_table("x", "id long")
    table.status.allocate()
    store.drop_table("x")
    with pytest.raises(TableNotFoundError, match="dropped"):
        table.status.read()
    with pytest.raises(TableNotFoundError):
        table.status.allocate()
    assert not os.path.exists(table.paths.root) or not os.path.exists(table.paths.schema)


def test_snapshot_defaults() -> None:
    assert TableStatusSnapshot(()).next_segment_id() == "0"
    assert TableStatusSnapshot((), id_floor=5).next_segment_id() == "5"


class _Cut(Exception):
    pass


def _cut() -> None:
    raise _Cut


@pytest.mark.parametrize("loads", [CHECKPOINT_INTERVAL - 2, CHECKPOINT_INTERVAL - 1])
def test_a_drop_on_a_checkpoint_number_reads_as_dropped(store: Store, loads: int) -> None:
    """The DROP is version 49 or 50 (a delta at a checkpoint's number); its folder is left
    (the drop stopped at drop.after_commit)."""
    from carbonstore.store.faults import on_point

    table = store.create_table("x", "id long")
    for _ in range(loads):
        table.status.allocate(status=SUCCESS)
    with on_point("drop.after_commit", _cut), pytest.raises(_Cut):
        store.drop_table("x")
    assert os.path.exists(table.paths.schema)
    for fresh in (False, True):
        if fresh:
            forget_decoded()
        with pytest.raises(TableNotFoundError, match="dropped"):
            table.status.read()
        assert table.status.dropped()
        assert not store.exists("x") and store.tables() == []
        with pytest.raises(TableNotFoundError, match="was dropped"):
            store.table("x")
    assert store.drop_table("x") is False  # finishes the removal
    assert not os.path.exists(table.paths.root)
    assert store.create_table("x", "id long").status.read().entries == ()


@pytest.mark.parametrize("order", ["descending", "shuffled"])
def test_cold_reads_in_any_order_equal_warm_ones(table: Table, order: str) -> None:
    """Every version rebuilt from whatever this process decoded before (nothing, an older
    version, a newer one) equals what its writer saw: upserts onto no entries, removes only,
    versions that change nothing (forced), checkpoints."""
    import random

    snaps = {table.status.read().version: table.status.read()}
    for i in range(CHECKPOINT_INTERVAL + 6):
        if i % 9 == 4:
            snap = table.status.update(lambda s: list(s.entries), force=True)  # changes nothing
        elif i % 5 == 3:
            snap = table.status.update(lambda s: list(s.entries),
                                       remove=lambda e: int(e.load_name) % 3 == 0)
        else:
            table.status.allocate(status=SUCCESS, row_count=i)
            snap = table.status.read()
        snaps[snap.version] = snap
    versions = sorted(snaps, reverse=True)
    if order == "shuffled":
        random.Random(7).shuffle(versions)
    forget_decoded()
    for version in versions:
        assert table.status.read(version) == snaps[version]
        assert table.status.read(version).readable_in_order() == sorted(
            snaps[version].readable, key=lambda e: int(e.load_name))
