"""The durable writes (put-if-absent, atomic replace, append) on a real local filesystem."""

from __future__ import annotations

import multiprocessing as mp

import pyarrow.fs as pafs
import pytest

from carbonstore.store.faults import on_point
from carbonstore.store.fs import StoreFS, UnsupportedStoreError, resolve_fs


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


def test_write_atomic_replaces_and_leaves_no_temp(tmp_path):
    sfs = resolve_fs(str(tmp_path))
    path = sfs.join("f")
    sfs.write_atomic(path, b"old")
    sfs.write_atomic(path, b"new")
    assert sfs.read_bytes(path) == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


@pytest.mark.parametrize("durable", [True, False])
def test_write_atomic_of_pieces_writes_them_in_order(tmp_path, durable):
    """A file handed over in pieces (bytes, memoryviews of a mapping, numpy buffers, empty
    ones) is their bytes one after another."""
    import mmap

    import numpy as np

    sfs = resolve_fs(str(tmp_path))
    src = tmp_path / "src"
    src.write_bytes(bytes(range(256)) * 64)
    with open(src, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        pieces = [b"head", view[10:5000], b"", np.arange(7, dtype=np.int32), view[:3], bytearray(b"tail")]
        sfs.write_atomic(sfs.join("f"), pieces, durable=durable)
        want = b"".join(bytes(memoryview(p).cast("B")) for p in pieces)
        del view, pieces
    assert (tmp_path / "f").read_bytes() == want and len(want) == 4 + 4990 + 28 + 3 + 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "src"]


@pytest.mark.parametrize("durable", [True, False])
def test_write_atomic_that_fails_removes_its_temp_file(tmp_path, durable):
    sfs = resolve_fs(str(tmp_path))
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_bytes(b"")  # a non-empty folder: the rename fails
    with pytest.raises(OSError):
        sfs.write_atomic(sfs.join("d"), b"data", durable=durable)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_write_atomic_crash_point_is_between_temp_file_and_rename(tmp_path):
    sfs = resolve_fs(str(tmp_path))
    path = sfs.join("f")
    sfs.write_atomic(path, b"old")
    seen: list[tuple[bytes, list[bytes]]] = []

    def look() -> None:
        temps = [p.read_bytes() for p in tmp_path.glob("f.*.tmp")]
        seen.append((sfs.read_bytes(path), temps))

    with on_point("test.write", look):
        sfs.write_atomic(path, b"new", crash="test.write")
    assert seen == [(b"old", [b"new"])]  # the temp file is whole, the old file still there
    assert sfs.read_bytes(path) == b"new"


def test_append_durable_appends_and_says_where_the_file_ends(tmp_path):
    sfs = resolve_fs(str(tmp_path))
    path = sfs.join("log")
    assert sfs.append_durable(path, b"abc") == 3
    assert sfs.append_durable(path, b"de") == 5
    sfs.write_at_durable(path, [(1, b"X"), (4, b"Y")])
    assert sfs.read_bytes(path) == b"aXcdY"
    sfs.truncate_durable(path, 2)
    assert sfs.read_bytes(path) == b"aX"


def test_append_durable_needs_a_local_store(tmp_path):
    sfs = StoreFS(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()), "", False)
    with pytest.raises(UnsupportedStoreError, match="only local and NFS stores"):
        sfs.append_durable("log", b"x")
    assert not (tmp_path / "log").exists()


def test_map_file_maps_a_local_file_that_a_replace_does_not_change(tmp_path):
    """An immutable file (index snapshot, checkpoint) is mapped on a local disk: a reader
    pays for the pages it touches. Replacing it (write_atomic renames a new file over it)
    or deleting it leaves a mapping taken before on the old bytes; elsewhere it is read."""
    sfs = StoreFS(None, str(tmp_path), True)
    path = str(tmp_path / "f.bin")
    sfs.write_atomic(path, b"old bytes")
    mapped = sfs.map_file(path)
    assert mapped is not None and bytes(mapped[4:]) == b"bytes"
    sfs.write_atomic(path, b"new bytes!")
    assert bytes(mapped) == b"old bytes" and bytes(sfs.map_file(path)) == b"new bytes!"
    sfs.delete_file(path)
    assert bytes(mapped[:3]) == b"old"
    with pytest.raises(FileNotFoundError):
        sfs.map_file(path)
    sfs.write_atomic(path, b"")
    assert sfs.map_file(path) is not None and not len(sfs.map_file(path))
    other = StoreFS(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()), "", False)
    assert other.map_file("f.bin") is None
