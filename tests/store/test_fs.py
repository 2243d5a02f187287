"""The put-if-absent commit primitive on a real local filesystem."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from carbonstore.store.fs import resolve_fs


def _race(base: str, name: str, writer: int, barrier: object, out: object) -> None:
    sfs = resolve_fs(base)
    barrier.wait()  # type: ignore[attr-defined]
    won = sfs.put_if_absent(f"{sfs.base}/{name}", f"writer {writer}".encode())
    out.put((writer, won))  # type: ignore[attr-defined]


def test_put_if_absent_creates_once(tmp_path):
    sfs = resolve_fs(str(tmp_path))
    path = sfs.join("v1")
    assert sfs.put_if_absent(path, b"first")
    assert not sfs.put_if_absent(path, b"second")
    assert sfs.read_bytes(path) == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v1"]  # no temp file left


def test_put_if_absent_needs_the_folder(tmp_path):
    sfs = resolve_fs(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        sfs.put_if_absent(sfs.join("gone", "v1"), b"x")
    assert not (tmp_path / "gone").exists()


def test_put_if_absent_one_winner_among_processes(tmp_path):
    ctx = mp.get_context("spawn")
    writers = 6
    barrier, out = ctx.Barrier(writers), ctx.Queue()
    procs = [
        ctx.Process(target=_race, args=(str(tmp_path), "v7", w, barrier, out))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    winners = [w for w, won in results if won]
    assert len(winners) == 1
    assert (tmp_path / "v7").read_bytes() == f"writer {winners[0]}".encode()
