"""A lease renewer process for a load whose driver code does not stay (``df.write``).

A bare ``df.write.format("carbonstore")`` begins its segment in a Python planning worker
that Spark reuses or kills about a minute after planning, and commits it from another
worker process, so no process of the write lives from begin to commit. ``spawn_renewer``
starts this module as a detached process (its own session, so signals to the worker's
process group do not reach it); it renews the segment's heartbeat every quarter of the
lease until the first of:

* the entry is no longer running (the commit or abort went through, or clean files marked
  it dead), or the table was dropped;
* ``stop_renewer`` sent it SIGTERM (``commit()`` / ``abort()`` do, on every path);
* the watched process (the worker's parent: PySpark's worker daemon or the driver JVM)
  exited: the Spark application is gone, so nothing will ever commit the load.

Its heartbeat names this process as the writer, so a killed application's load is judged
dead by clean files as soon as the renewer exited. Run as
``python -m carbonstore.store.renewer TOKEN`` with its settings as JSON on stdin.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import uuid
from typing import Any

import orjson

import carbonstore
from carbonstore.errors import CarbonStoreError, TableNotFoundError
from carbonstore.store.conf import load_conf
from carbonstore.store.leases import process_start, renew_lease
from carbonstore.store.table import StoreRoot
from carbonstore.store.tablestatus import RUNNING_STATUSES

__all__ = ["Renewal", "spawn_renewer", "stop_renewer"]

log = logging.getLogger(__name__)

Renewal = tuple[int, str]  # (pid, token) of a renewer process


def _alive(pid: int, start: str | None) -> bool:
    if start is not None:
        return process_start(pid) == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def spawn_renewer(
    *, store_location: str, conf: dict[str, str], table_name: str, table_id: str,
    segment_id: str, seconds: float,
) -> Renewal | None:
    """Start a renewer for ``segment_id``; None when it could not be started (logged)."""
    token = uuid.uuid4().hex
    watch = os.getppid()
    settings = {
        "store": store_location, "conf": conf, "table": table_name, "tableId": table_id,
        "segment": segment_id, "seconds": seconds, "watchPid": watch,
        "watchStart": process_start(watch),
    }
    root = os.path.dirname(os.path.dirname(os.path.abspath(carbonstore.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "carbonstore.store.renewer", token],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=env, start_new_session=True, close_fds=True,
        )
        assert proc.stdin is not None
        proc.stdin.write(orjson.dumps(settings))
        proc.stdin.close()
    except OSError:
        log.warning("the lease of segment %s cannot be renewed: no renewer started", segment_id,
                    exc_info=True)
        return None
    # Reap it while this process lives (else it stays a zombie until this one exits).
    threading.Thread(target=proc.wait, name=f"renewer-{segment_id}", daemon=True).start()
    return proc.pid, token


def stop_renewer(renewal: Renewal | None) -> None:
    """SIGTERM the renewer ``renewal`` names, if it is still that process (idempotent)."""
    if renewal is None:
        return
    pid, token = renewal
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if token.encode() not in f.read():
                return  # gone, and the pid taken by another process
        os.kill(pid, signal.SIGTERM)
    except OSError:  # gone; or no /proc (then it stops when its entry is no longer running)
        pass


def _run(settings: dict[str, Any]) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    seg = str(settings["segment"])
    watch, watch_start = int(settings["watchPid"]), settings.get("watchStart")
    conf = load_conf().with_overrides(settings.get("conf") or {})
    try:
        table = StoreRoot(settings["store"], conf=conf).table(settings["table"])
    except CarbonStoreError:
        return
    if table.table_id != settings["tableId"]:
        return  # dropped and created again: not ours
    status, seconds = table.status, float(settings["seconds"])
    while not stop.is_set():
        if not _alive(watch, watch_start):
            return  # the application is gone: the heartbeat names this exited process
        try:
            renew_lease(status, seg, seconds)
            mine = status.read().find(seg)
        except (FileNotFoundError, TableNotFoundError):
            return  # dropped
        except (CarbonStoreError, OSError):  # a hiccup or damage: the next round tries again
            log.warning("lease of segment %s not renewed", seg, exc_info=True)
        else:
            if mine is None or mine.status not in RUNNING_STATUSES:
                # Committed, aborted or marked dead. Checked after the write, so a heartbeat
                # written after the committer removed it is removed here.
                status.leases.delete_lease(seg)
                return
        stop.wait(max(0.05, seconds / 4))


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    try:
        settings = orjson.loads(sys.stdin.buffer.read())
    except (OSError, orjson.JSONDecodeError):
        return
    if isinstance(settings, dict):
        _run(settings)


if __name__ == "__main__":
    main()
