"""The filesystem layer on a real S3 API server: conditional put, probe, atomic writes, counts."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys

import pytest
from s3fixtures import BUCKET, S3Store, start_server, stop_server

from carbonstore import Store
from carbonstore.errors import UserError
from carbonstore.store.fs import UnsupportedStoreError, resolve_fs
from carbonstore.store.objectstore import request_counts, s3_options, shipped_location


def _race(location: str, name: str, writer: int, barrier: object, out: object) -> None:
    sfs = resolve_fs(location)
    barrier.wait()  # type: ignore[attr-defined]
    won = sfs.put_if_absent(sfs.join(name), f"writer {writer}".encode())
    out.put((writer, won))  # type: ignore[attr-defined]


def test_put_if_absent_creates_once_and_needs_the_folder(s3_store: S3Store) -> None:
    sfs = resolve_fs(s3_store.location, s3_store.conf())
    sfs.makedirs(sfs.join("log"))
    assert sfs.put_if_absent(sfs.join("log", "v1"), b"first")
    assert not sfs.put_if_absent(sfs.join("log", "v1"), b"second")
    assert sfs.read_bytes(sfs.join("log", "v1")) == b"first"
    with pytest.raises(FileNotFoundError):
        sfs.put_if_absent(sfs.join("gone", "v1"), b"x")
    assert not any("/gone/" in k for k in s3_store.keys())
    assert s3_store.puts()[f"{s3_store.prefix}/log/v1"] == 1  # never overwritten


def test_put_if_absent_one_winner_among_processes(s3_store: S3Store) -> None:
    location = shipped_location(s3_store.location, s3_store.conf())
    sfs = resolve_fs(location)
    sfs.makedirs(sfs.join("race"))
    ctx = mp.get_context("spawn")
    writers = 6
    barrier, out = ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(location, "race/v7", w, barrier, out))
             for w in range(writers)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    winners = [w for w, won in results if won]
    assert len(winners) == 1
    assert sfs.read_bytes(sfs.join("race", "v7")) == f"writer {winners[0]}".encode()
    assert s3_store.puts()[f"{s3_store.prefix}/race/v7"] == 1


def test_write_atomic_is_one_put_of_the_final_name(s3_store: S3Store) -> None:
    sfs = resolve_fs(s3_store.location, s3_store.conf())
    path = sfs.join("hint.json")
    sfs.write_atomic(path, b"1")
    sfs.write_atomic(path, b"2")
    assert sfs.read_bytes(path) == b"2"
    assert s3_store.keys() == [f"{s3_store.prefix}/hint.json"]  # no temp object, no rename
    assert s3_store.puts()[f"{s3_store.prefix}/hint.json"] == 2  # a hint may be rewritten


def test_move_of_a_folder_copies_then_deletes(s3_store: S3Store) -> None:
    sfs = resolve_fs(s3_store.location, s3_store.conf())
    for name in ("a/x", "a/sub/y"):
        sfs.write_bytes(sfs.join(name), name.encode())
    sfs.move(sfs.join("a"), sfs.join("b"))
    assert sfs.read_bytes(sfs.join("b", "sub", "y")) == b"a/sub/y"
    assert not sfs.exists(sfs.join("a"))


def test_location_carries_the_endpoint_to_tasks(s3_store: S3Store) -> None:
    store = Store(s3_store.location, conf=s3_store.conf())
    assert store.location.startswith(s3_store.location + "?")
    # a task that has only the location (no conf file, no endpoint in its environment)
    options = s3_options(store.location)
    assert options.endpoint == s3_store.server.endpoint
    assert options.base == f"{BUCKET}/{s3_store.prefix}"
    assert not options.path_style
    assert s3_options(store.location + "&path_style=true").path_style
    styled = Store(s3_store.location, conf=s3_store.conf(**{"carbon.s3.path.style.access": "true"}))
    assert "path_style=true" in styled.location and s3_options(styled.location).path_style
    with pytest.raises(UserError, match="unknown parameter"):
        s3_options(s3_store.location + "?endpoit=x")
    secret = s3_store.conf(**{"carbon.s3.access.key": "AKIDEXAMPLE",
                              "carbon.s3.secret.key": "very-secret"})
    shipped = Store(s3_store.location, conf=secret).location
    assert "AKIDEXAMPLE" not in shipped and "very-secret" not in shipped  # never in the location


def test_requests_are_counted_per_operation(s3_store: S3Store) -> None:
    sfs = resolve_fs(s3_store.location, s3_store.conf())
    before = request_counts()
    sfs.write_bytes(sfs.join("f"), b"x")
    sfs.read_bytes(sfs.join("f"))
    sfs.list_dir(s3_store.location.removeprefix("s3://"))
    after = request_counts()
    assert after["PUT"] == before.get("PUT", 0) + 1
    assert after["GET"] == before.get("GET", 0) + 1
    assert after["LIST"] == before.get("LIST", 0) + 1


def test_server_without_conditional_writes_is_refused(tmp_path) -> None:
    bad = start_server("--ignore-conditional")
    try:
        bad.client().create_bucket(Bucket=BUCKET)
        conf = tmp_path / "carbon.properties"
        conf.write_text(f"carbon.s3.endpoint={bad.endpoint}\n", encoding="utf-8")
        from carbonstore.store import load_conf

        with pytest.raises(UnsupportedStoreError, match="ignores conditional writes"):
            Store(f"s3://{BUCKET}/refused", conf=load_conf(conf))
        cli = subprocess.run(
            [sys.executable, "-m", "carbonstore.cli", "--store", f"s3://{BUCKET}/refused",
             "--conf", str(conf), "create", "db.t", "--schema", "id long"],
            capture_output=True, text=True, timeout=120,
            env={k: v for k, v in os.environ.items() if k != "CARBON_CONF"},
        )
        assert cli.returncode == 2
        lines = cli.stderr.strip().splitlines()
        assert len(lines) == 1 and "ignores conditional writes" in lines[0], cli.stderr
        keys = bad.client().list_objects_v2(Bucket=BUCKET).get("KeyCount", 0)
        assert keys == 0  # the probe objects are removed, nothing else was written
    finally:
        stop_server(bad)
