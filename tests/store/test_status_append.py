"""Commits that name their change (StatusChange), entries built when used, and checkpoints
spliced from columns: the same entries as a commit that hands over the whole list."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.errors import CorruptMetadataError
from carbonstore.store import checkpoint_arrow, tablestatus, versions
from carbonstore.store.arrow_numpy import strings_bytes
from carbonstore.store.checkpoint_arrow import checkpoint_name
from carbonstore.store.records import replace
from carbonstore.store.tablestatus import (
    COMPACTED,
    FAILURE,
    IN_PROGRESS,
    MARKED_FOR_DELETE,
    SUCCESS,
    LoadEntry,
    StatusChange,
    forget_decoded,
)

SPEC = {"fields": [{"source": "d", "transform": "day", "sourceId": 1}]}


@pytest.fixture
def small_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints every 4th version, entry columns from 3 entries: short sequences meet
    both, several times."""
    monkeypatch.setattr(versions, "CHECKPOINT_INTERVAL", 4)
    monkeypatch.setattr(tablestatus, "CHECKPOINT_INTERVAL", 4)
    monkeypatch.setattr(versions, "COLUMNS_FROM", 3)


def _table(root: Path, name: str = "db.t"):
    return Store(str(root)).create_table(name, "id long, d date")


# One step of a random commit sequence: (kind, a number choosing the segment(s), extras?)
STEP = st.tuples(
    st.sampled_from(["load", "begin", "finish", "fail", "delete", "compact", "clean", "deltas", "noop",
                     "abort", "archive", "mark"]),
    st.integers(0, 1000), st.booleans(),
)


def _change(entries: dict[str, LoadEntry], step: tuple[str, int, bool], next_id: int,
            ) -> tuple[list[LoadEntry], list[str]]:
    """(upserts, removes) of ``step`` on ``entries`` (a model of what the product commits)."""
    kind, pick, extras = step
    names = list(entries)
    extra = {"writer": f"h:{pick % 3}", "schemaVersion": 0, **({"partitioning": SPEC} if extras else {})}

    def of(status: str) -> list[LoadEntry]:
        return [e for e in entries.values() if e.status == status]

    if kind == "load":
        return [LoadEntry(load_name=str(next_id), status=SUCCESS, load_start_time=1000 + pick,
                          timestamp=2000 + pick, row_count=pick, segment_file=f"{next_id}_1.carbonindexmerge",
                          extra=extra)], []
    if kind == "begin":
        return [LoadEntry(load_name=str(next_id), status=IN_PROGRESS, load_start_time=1000 + pick,
                          extra={**extra, "leaseExpiryMs": 99 + pick})], []
    running, done = of(IN_PROGRESS), of(SUCCESS)
    if kind in ("finish", "fail") and running:
        e = running[pick % len(running)]
        return [e.with_status(SUCCESS if kind == "finish" else FAILURE, timestamp=3000 + pick,
                              row_count=pick, extra={k: v for k, v in e.extra.items() if k != "leaseExpiryMs"})], []
    if kind == "delete" and done:
        return [done[pick % len(done)].with_status(MARKED_FOR_DELETE, modification_or_deletion_timestamp=pick)], []
    if kind == "compact" and len(done) >= 2:
        first = pick % (len(done) - 1)
        sources = done[first:first + 2]
        out_name = f"{sources[0].load_name.split('.')[0]}.{pick % 5 + 1}"
        if out_name in entries:
            return [], []
        merged = LoadEntry(load_name=out_name, status=SUCCESS, load_start_time=5, timestamp=6,
                           row_count=sum(e.row_count for e in sources), extra=extra)
        return [*(e.with_status(COMPACTED, merged_load_name=out_name) for e in sources), merged], []
    if kind in ("clean", "archive"):
        gone = [n for n in names if entries[n].status in (COMPACTED, MARKED_FOR_DELETE, FAILURE)]
        return [], gone[: 1 + pick % 3]
    if kind == "abort" and running:  # a compaction's abort: Failure, then to the history
        e = running[pick % len(running)]
        return [e.with_status(FAILURE, timestamp=pick, extra={**e.extra, "aborted": pick})], []
    if kind == "mark" and running:  # clean files marking dead loads Failure
        return [e.with_status(FAILURE, timestamp=pick, extra={**e.extra, "failureCause": "dead"})
                for e in running[: 1 + pick % 2]], []
    if kind == "deltas" and done:
        from carbonstore.store.entries import DeleteDelta

        e = done[pick % len(done)]
        dd = (DeleteDelta(data_file="part-0.parquet", delta_file=f"d{pick}.delta", deleted_rows=min(1, e.row_count)),)
        return [e.with_status(e.status, delete_deltas=dd)], []
    return [], []


def _run(table, steps: list[tuple[str, int, bool]], *, as_change: bool) -> list[list[LoadEntry]]:
    """Commit ``steps``; the entries after each version, as a model computes them."""
    model: dict[str, LoadEntry] = {}
    out = []
    for step in steps:
        snap = table.status.read()
        next_id = int(snap.next_segment_id())
        upserts, removes = _change(model, step, next_id)
        if not upserts and not removes:
            continue
        before = dict(model)
        # abort and archive take the entries they remove to tablestatus.history, as
        # abort_compaction and clean files do (update(remove=...))
        archived = {e.load_name for e in upserts} if step[0] == "abort" else (
            set(removes) if step[0] == "archive" else set())
        remove = (lambda e, a=frozenset(archived): e.load_name in a) if archived else None
        for n in removes:
            del model[n]
        for e in upserts:
            model[e.load_name] = e
        if as_change:
            table.status.update(lambda s, u=tuple(upserts), r=tuple(removes): StatusChange(u, r),
                                operation=step[0].upper(), remove=remove)
        else:
            wanted = list(model.values())
            if step[0] == "archive":  # the whole list still holds them: remove= leaves them out
                wanted = [*wanted, *(e for n, e in before.items() if n in archived)]
            table.status.update(lambda s, w=wanted: w, operation=step[0].upper(), remove=remove)
        for n in archived:
            model.pop(n, None)
        out.append(list(model.values()))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=30))
def test_change_commits_equal_whole_list_commits(tmp_path_factory, small_checkpoints, steps) -> None:
    root = tmp_path_factory.mktemp("append")
    whole, change = _table(root, "db.whole"), _table(root, "db.change")
    want = _run(whole, steps, as_change=False)
    got = _run(change, steps, as_change=True)
    assert want == got
    latest = whole.status.read().version
    assert change.status.read().version == latest
    for fresh in (False, True):  # as the writer saw it, and from the files in a new process
        if fresh:
            forget_decoded()
        for v in range(latest + 1):
            a, b = whole.status.read(v), change.status.read(v)
            # what time travel compares, read from a checkpoint's columns where it has them
            files_a, files_b = a.view.readable_files(), b.view.readable_files()
            some = [*a.view.names()[::2], "no such segment"]
            some_b = b.view.readable_files(some)
            _same_readable(a)
            _same_readable(b)
            assert list(a.entries) == list(b.entries)
            assert a.id_floor == b.id_floor
            assert a.readable_rows() == b.readable_rows() == sum(
                e.row_count - e.deleted_rows for e in a.entries if e.readable)
            assert a.readable_count() == len(a.readable)
            assert files_a == files_b == {
                e.load_name: (e.segment_file, e.delete_deltas) for e in a.entries if e.readable}
            assert some_b == a.view.readable_files(some) == {n: files_a[n] for n in some if n in files_a}
        final = change.status.read()
        assert list(final.entries) == want[-1] if want else True
        for limit, offset in ((1, 0), (3, 1), (100, 0)):
            assert final.newest(limit, offset) == list(final.entries)[::-1][offset:offset + limit]
    infos_a = [(i.added, i.removed, i.rows) for i in whole.history()]
    infos_b = [(i.added, i.removed, i.rows) for i in change.history()]
    assert infos_a == infos_b
    # the entries taken out for good: the same, in the same order
    assert whole.status.history.read() == change.status.history.read()


def _same_readable(snap: Any) -> None:
    """The readable entries a plan reads (readable.py: columns of the checkpoint, entries
    built when used) are ``readable_in_order``'s: names, merge indexes, row counts, extras,
    the entries with deltas, and the very entry objects."""
    lazy = snap.readable_segments()
    key = lazy.key_bytes()  # (before the names: from the checkpoint's bytes and the changes)
    names, files, counts = lazy.names, lazy.files, lazy.row_counts.tolist()
    for (lengths, data), strings in zip(key, (names, files), strict=True):
        assert (lengths.tolist(), bytes(data)) == (lambda kb: (kb[0].tolist(), kb[1]))(strings_bytes(strings))
    codes, extras = lazy.extra_codes()
    marked = lazy.with_deltas_or("removedPartitions")
    want = snap.readable_in_order()
    assert names == tuple(e.load_name for e in want)
    assert files == tuple(e.segment_file or "" for e in want)
    assert counts == [e.row_count for e in want]
    assert [extras[c] if c >= 0 else {} for c in codes.tolist()] == [e.extra for e in want]
    assert marked == [i for i, e in enumerate(want) if e.delete_deltas or "removedPartitions" in e.extra]
    assert len(lazy) == len(want) and all(x is y for x, y in zip(lazy, want, strict=True))


def test_a_commit_builds_only_the_entries_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A load's begin and commit on a fresh read of a 600-segment table build a handful of
    entries, not 600 (before: the read built every entry, the commit diffed them all)."""
    monkeypatch.setattr(versions, "CHECKPOINT_INTERVAL", 3)
    monkeypatch.setattr(tablestatus, "CHECKPOINT_INTERVAL", 3)
    table = _table(tmp_path)
    table.status.update(lambda s: [LoadEntry(load_name=str(i), status=SUCCESS, load_start_time=i,
                                             extra={"writer": "h:1"}) for i in range(600)],
                        operation="LOAD")
    while table.status.read().version % 3:
        table.status.update(lambda s: list(s.entries), operation="ALTER t", force=True)
    assert (Path(table.status.log_dir) / checkpoint_name(table.status.read().version)).exists()
    forget_decoded()
    built = []
    real = checkpoint_arrow.build_plain

    def counting(*cols):
        built.append(len(cols[0]))
        return real(*cols)

    monkeypatch.setattr(checkpoint_arrow, "build_plain", counting)
    entry = table.status.allocate()
    table.status.set_status(entry.load_name, SUCCESS, row_count=5)
    snap = table.status.read()
    assert snap.find(entry.load_name).status == SUCCESS
    assert snap.find("17").extra == {"writer": "h:1"}
    assert snap.readable_count() == 601 and snap.readable_rows() == 5
    assert [e.load_name for e in snap.newest(3)] == ["600", "599", "598"]
    assert sum(built) <= 4, built
    assert len(snap.entries) == 601 and sum(built) > 600  # iterating builds them all


def test_a_crash_before_a_checkpoint_leaves_a_readable_table(tmp_path: Path) -> None:
    """Killed after committing the version whose checkpoint it was about to write: the
    table reads from the checkpoint before it (and the versions since), and commits go on."""
    table = _table(tmp_path)
    interval = versions.CHECKPOINT_INTERVAL
    while table.status.read().version < interval - 1:
        table.status.allocate(status=SUCCESS, row_count=1)
    before = table.status.read()
    code = ("import sys; from carbonstore import Store; "
            "Store(sys.argv[1]).table('db.t').status.allocate(status='Success', row_count=1)")
    for point in ("tablestatus.before_write", "tablestatus.before_checkpoint"):
        env = {**os.environ, "CARBONSTORE_CRASH_AT": point}
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, timeout=120)
        assert proc.returncode == -9
        forget_decoded()
        if point == "tablestatus.before_write":
            assert table.status.read() == before
    after = table.status.read()
    assert after.version == interval and not (Path(table.status.log_dir) / checkpoint_name(interval)).exists()
    assert [e.load_name for e in after.entries] == [*(e.load_name for e in before.entries), str(interval - 1)]
    assert after.readable_rows() == interval
    table.status.allocate(status=SUCCESS, row_count=1)
    forget_decoded()
    assert table.status.read().readable_rows() == interval + 1
    assert table.status.read(interval) == after


def _old_chain(table, versions_n: int, per_version: int) -> list[LoadEntry]:
    """Version files as the JSON-checkpoint format wrote them (a checkpoint of every entry
    at every 50th version), written directly."""
    entries: list[LoadEntry] = []
    status = table.status
    for v in range(1, versions_n + 1):
        new = tuple(LoadEntry(load_name=str(len(entries) + i), status=SUCCESS, load_start_time=v,
                              row_count=2, extra={"writer": "old:1"}) for i in range(per_version))
        before = tuple(entries)
        entries.extend(new)
        data = versions.encode_version(
            version=v, table_id=status.table_id, operation="LOAD", floor=len(entries),
            checkpoint=tuple(entries) if v % 50 == 0 else None, upserts=new, removes=(),
            base=before, timestamp=1000 + v, new=tuple(entries))
        assert table.store.sfs.put_if_absent(status._version_path(v), data)
    return entries


@pytest.mark.parametrize("per_version", [1, 3])  # checkpoint as objects, and as columns
def test_old_format_tables_open_and_take_change_commits(tmp_path: Path, per_version: int) -> None:
    table = _table(tmp_path)
    entries = _old_chain(table, 60, per_version)
    raw = orjson.loads((Path(table.status.log_dir) / f"{50:020d}.json").read_bytes())
    assert raw["checkpoint"] is True and ("entries" in raw) == (per_version == 1)
    forget_decoded()
    assert list(table.status.read().entries) == entries
    while table.status.read().version < 100:  # upgrade on write: the next checkpoint is Arrow
        e = table.status.allocate()
        table.status.set_status(e.load_name, SUCCESS, row_count=3)
        entries.append(table.status.read().get(e.load_name))
    assert (Path(table.status.log_dir) / checkpoint_name(100)).exists()
    forget_decoded()
    snap = table.status.read()
    assert list(snap.entries) == entries
    assert snap.readable_rows() == sum(e.row_count for e in entries)
    assert table.status.read(55).entries == tuple(entries[:55 * per_version])


def test_legacy_single_file_table_upgrades_and_takes_change_commits(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    table = store.create_table("db.old", "id long")
    paths = table.paths
    schema = orjson.loads(Path(paths.schema).read_bytes())
    del schema["tableId"], schema["checksum"]  # as written before both
    Path(paths.schema).write_bytes(orjson.dumps(schema))
    store.sfs.delete_dir(paths.tablestatus_log)
    Path(paths.tablestatus).write_bytes(orjson.dumps(
        [LoadEntry(load_name="0", status=SUCCESS, load_start_time=1, row_count=7).to_json()]))
    forget_decoded()
    old = Store(str(tmp_path)).table("db.old")
    assert old.status.read().legacy
    e = old.status.allocate()
    old.status.set_status(e.load_name, SUCCESS, row_count=1)
    forget_decoded()
    snap = Store(str(tmp_path)).table("db.old").status.read()
    assert [x.load_name for x in snap.entries] == ["0", "1"] and snap.readable_rows() == 8


def _checkpointed(tmp_path: Path):
    table = _table(tmp_path)
    table.status.update(lambda s: [LoadEntry(load_name=str(i), status=SUCCESS, load_start_time=i)
                                   for i in range(200)], operation="LOAD")
    while table.status.read().version % versions.CHECKPOINT_INTERVAL:
        table.status.update(lambda s: list(s.entries), operation="ALTER t", force=True)
    v = table.status.read().version
    return table, v, Path(table.status.log_dir) / checkpoint_name(v)


@pytest.mark.parametrize("damage", ["flip", "escape", "twice", "status", "known extra", "other version"])
def test_damaged_checkpoints_are_reported_when_read(tmp_path: Path, damage: str) -> None:
    """Entries are built when used, but every column is checked when the checkpoint is read."""
    table, v, path = _checkpointed(tmp_path)
    entries = [LoadEntry(load_name=str(i), status=SUCCESS, load_start_time=i) for i in range(200)]
    if damage == "flip":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x10
        expect = "checksum"
    else:
        expect, version = {
            "escape": ("not a plain file name", v), "twice": ("appears twice", v),
            "status": ("unknown loadStatus", v), "known extra": ("extra", v),
            "other version": ("it is version", v - 1),
        }[damage]
        e = entries[150]
        entries[150] = {
            "escape": replace(e, segment_file="../escape"), "twice": replace(e, load_name="3"),
            "status": replace(e, status="Sucess"), "known extra": replace(e, extra={"rowCount": 1}),
        }.get(damage, e)
        data, _ = checkpoint_arrow.checkpoint_bytes(
            checkpoint_arrow.entries_table(entries), table_id=table.status.table_id, version=version)
    path.unlink()
    path.write_bytes(bytes(data))
    forget_decoded()
    with pytest.raises(CorruptMetadataError, match=expect):
        table.status.read()



def test_dropped_at_a_checkpoints_number_reads_no_entries(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a table was dropped is said by its latest version's header, also when that
    version is at a checkpoint's number: ``carbonstore tables`` decodes no checkpoint of
    100,000 entries (its entries are in the Arrow file beside it)."""
    table = _table(tmp_path)
    interval = versions.CHECKPOINT_INTERVAL
    while table.status.read().version < interval:
        table.status.allocate(status=SUCCESS, row_count=1)
    assert (Path(table.status.log_dir) / checkpoint_name(interval)).exists()
    forget_decoded()

    def decoded(*args: Any) -> Any:
        raise AssertionError("the entries were decoded")

    monkeypatch.setattr(tablestatus.TableStatus, "_state", decoded)
    reopened = Store(str(tmp_path)).table("db.t").status  # opening reads no entries either
    assert reopened.dropped() is False
    names = [str(n) for n in Store(str(tmp_path)).tables()]
    assert names == ["db.t"]


def test_a_reader_without_arrow_replays_only_a_short_light_log(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pyarrow loaded, the JSON versions are read instead of the Arrow checkpoint
    only while they are few and small (REPLAY_VERSIONS, REPLAY_BYTES): a table of 100,000
    segments in 250 versions holds 50 MB of them and reads its checkpoint."""
    from carbonstore.store import status_checkpoints as sc
    from carbonstore.store.fs import local_disk

    table = _table(tmp_path)
    while table.status.read().version < versions.CHECKPOINT_INTERVAL:
        table.status.allocate(status=SUCCESS, row_count=1)
    sfs, log_dir = local_disk(), table.status.log_dir  # lists through os: no pyarrow again
    assert not sc.replays_json(sfs, log_dir, 50)  # pyarrow is loaded here: the checkpoint
    monkeypatch.delitem(sys.modules, "pyarrow")
    assert sc.replays_json(sfs, log_dir, 50)
    size = sum(p.stat().st_size for p in Path(log_dir).glob("*.json") if p.stem.isdigit())
    monkeypatch.setattr(sc, "REPLAY_BYTES", size - 1)
    assert not sc.replays_json(sfs, log_dir, 50)
    monkeypatch.setattr(sc, "REPLAY_BYTES", size)
    assert sc.replays_json(sfs, log_dir, 50)
    monkeypatch.setattr(sc, "REPLAY_VERSIONS", 49)
    assert not sc.replays_json(sfs, log_dir, 50)


def test_readable_files_from_a_checkpoint_carry_deltas_and_leave_out_the_unreadable(
        tmp_path: Path, small_checkpoints) -> None:
    """Time travel compares each readable entry's (segment file, delete deltas): from a
    checkpoint's columns, an entry with deltas keeps them, an unreadable entry is left out."""
    table = _table(tmp_path)
    steps = [("load", i, False) for i in range(6)] + [("deltas", 1, False), ("delete", 2, False),
                                                      ("begin", 0, False), ("noop", 0, False)]
    _run(table, steps, as_change=True)
    forget_decoded()
    snap = table.status.read()
    assert snap.view._arrow is not None  # the columns of a checkpoint, not built entries
    got = snap.view.readable_files()  # (before snap.entries builds every entry)
    some = snap.view.readable_files(["1", "2", "4", "9", "no such segment"])
    want = {e.load_name: (e.segment_file, e.delete_deltas) for e in snap.entries if e.readable}
    assert any(dd for _, dd in want.values()) and len(want) < len(snap.entries)
    assert got == want
    assert some == {n: want[n] for n in ("1", "2", "4", "9") if n in want} and "1" in some
