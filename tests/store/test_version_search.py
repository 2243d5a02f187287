"""``version_as_of`` and ``history --limit`` read versions by number, never list the log.

Oracle: every version's timestamp read one by one; the version as of T is the newest one
written at or before T. Times never decrease along the chain (each is at least its
parent's), which the binary search relies on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore import Store, Table
from carbonstore.cli import main
from carbonstore.errors import VersionNotFoundError
from carbonstore.store import load_conf
from carbonstore.store import versions as versions_module
from carbonstore.store.fs import StoreFS
from carbonstore.store.tablestatus import CHECKPOINT_INTERVAL, SUCCESS, forget_decoded

COMMITS = 2 * CHECKPOINT_INTERVAL + 17  # three checkpoints and deltas after the last


def _clock(at: int) -> Callable[[], int]:
    return lambda: at


def _build(root: Path) -> Table:
    """Versions with distinct times, a run within one millisecond (ties) and a run whose
    writer's clock is an hour behind."""
    store = Store(str(root / "store"), conf=load_conf(None))
    t = store.create_table("db.t", "id long")
    real_now = versions_module.now_ms
    try:
        for i in range(COMMITS):
            if i in (40, 80):
                then = t.status.read().timestamp
                versions_module.now_ms = _clock(then if i == 40 else then - 3_600_000)
            elif i in (60, 90):
                versions_module.now_ms = real_now
            entry = t.status.allocate(status=SUCCESS, row_count=i)
            if i % 7 == 3:
                t.status.set_status(entry.load_name, "Marked for Delete")
    finally:
        versions_module.now_ms = real_now
    return t


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Table:
    return _build(tmp_path_factory.mktemp("search"))


def _times(table: Table) -> list[int]:
    """Oracle input: each version's time, read one by one."""
    latest = table.status.read().version
    return [table.status.read(v).timestamp for v in range(latest + 1)]


def _oracle(times: list[int], t: int) -> int | None:
    older = [v for v, ts in enumerate(times) if ts <= t]
    return older[-1] if older else None


@pytest.fixture
def no_listing(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Records every folder listed and every file read through the store."""
    seen: list[str] = []
    real_list, real_read = StoreFS.list_dir, StoreFS.read_bytes

    def list_dir(self: StoreFS, path: str) -> object:
        seen.append(f"list {path}")
        return real_list(self, path)

    def read_bytes(self: StoreFS, path: str) -> bytes:
        seen.append(f"read {path}")
        return real_read(self, path)

    monkeypatch.setattr(StoreFS, "list_dir", list_dir)
    monkeypatch.setattr(StoreFS, "read_bytes", read_bytes)
    yield seen


def test_times_never_decrease_along_the_chain(table: Table) -> None:
    times = _times(table)
    assert len(times) > COMMITS and times == sorted(times)
    assert len(set(times)) < len(times) - 30  # the runs of equal times (ties) are there


def test_version_as_of_equals_the_oracle_at_every_boundary(table: Table) -> None:
    times = _times(table)
    probes = {t + d for t in times for d in (-1, 0, 1)}
    for t in sorted(probes):
        forget_decoded()
        want = _oracle(times, t)
        if want is None:
            with pytest.raises(VersionNotFoundError, match="no version as of"):
                table.status.version_as_of(t)
        else:
            assert table.status.version_as_of(t) == want, t
    assert table.status.version_as_of(times[-1] + 10**9) == len(times) - 1


@settings(max_examples=200, deadline=None)
@given(offset=st.integers(min_value=-5, max_value=2000))
def test_version_as_of_equals_the_oracle_anywhere(table: Table, offset: int) -> None:
    times = _times(table)
    t = times[0] + offset
    want = _oracle(times, t)
    if want is None:
        with pytest.raises(VersionNotFoundError):
            table.status.version_as_of(t)
    else:
        assert table.status.version_as_of(t) == want


def test_version_as_of_reads_few_versions_and_lists_nothing(
    table: Table, no_listing: list[str]
) -> None:
    times = _times(table)
    forget_decoded()
    no_listing.clear()
    assert table.status.version_as_of(times[len(times) // 3]) == _oracle(times, times[len(times) // 3])
    assert not [s for s in no_listing if s.startswith("list")]
    versions_read = [s for s in no_listing if s.endswith(".json") and "_latest" not in s]
    assert 0 < len(versions_read) <= 2 + len(times).bit_length()


@pytest.mark.parametrize("limit", [1, 3, CHECKPOINT_INTERVAL + 5, 10**6])
def test_history_limit_is_the_tail_of_the_full_history_and_reads_only_it(
    table: Table, no_listing: list[str], limit: int
) -> None:
    full = [v.to_json() for v in table.history()]
    assert [v["version"] for v in full] == list(range(len(full)))
    forget_decoded()
    no_listing.clear()
    got = [v.to_json() for v in table.history(limit=limit)]
    assert got == full[-limit:]
    assert not [s for s in no_listing if s.startswith("list")]
    versions_read = [s for s in no_listing if s.endswith(".json") and "_latest" not in s]
    assert len(versions_read) == min(limit, len(full))


def test_history_limit_on_the_command_line(
    table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    loc = table.store.location
    assert main(["--store", loc, "history", "db.t", "--json"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert main(["--store", loc, "history", "db.t", "--json", "--limit", "4"]) == 0
    assert json.loads(capsys.readouterr().out) == full[-4:]
    assert main(["--store", loc, "history", "db.t", "--limit", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 + 2 and lines[-1].split()[0] == str(full[-1]["version"])
    for bad in ("0", "-1", "x", "1.5", ""):
        with pytest.raises(SystemExit) as exc:
            main(["--store", loc, "history", "db.t", "--limit", bad])
        assert exc.value.code == 2
        assert "--limit" in capsys.readouterr().err


def test_a_writer_whose_clock_is_behind_never_makes_time_go_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(str(tmp_path / "store"), conf=load_conf(None))
    t = store.create_table("db.c", "id long")
    t.status.allocate(status=SUCCESS)
    before = t.status.read().timestamp
    monkeypatch.setattr(versions_module, "now_ms", lambda: before - 3_600_000)  # an hour behind
    t.status.allocate(status=SUCCESS)
    monkeypatch.undo()
    times = _times(t)
    assert times == sorted(times) and times[-1] == before
    assert t.status.version_as_of(before) == len(times) - 1
