"""Leases of running loads and compactions: liveness without locks (DESIGN.md section 3).

An ``In Progress`` entry records when its lease expires (``leaseExpiryMs``) and who holds
it (``writer``, ``writerHost``, ``writerPid``). While the load or compaction runs, a
background thread of its driver (for a bare ``df.write``, a renewer process:
``carbonstore.store.renewer``) rewrites a heartbeat file
``Metadata/tablestatus_log/<tableId>/leases/<segment>.json`` with a later expiry every
quarter of ``carbon.segment.lease.seconds`` (no tablestatus version per renewal). Clean
files may treat the entry as dead only when

* the lease expired: neither the entry nor the heartbeat names a time after now, or
* (stores on a local or NFS disk) its writer ran on this very machine (same host name,
  boot id and pid namespace) and that process no longer exists (or is a zombie: it exited, and a parent or an init that
  does not reap keeps it listed): a killed load is recognised at once.

Being judged dead is never unsafe: clean files commits the entry as ``Failure`` before it
deletes a file, and the load's own commit then fails with a clear error (a version chain
has one order, so either the load's ``Success`` or clean's ``Failure`` comes first). A
lease only decides how soon a dead load is cleaned and that a live one is not disturbed.
Clocks of the machines writing one table must agree to well within the lease time.

Statements that write files a later commit names without an ``In Progress`` entry of their
own (DELETE / UPDATE / MERGE delete deltas, an index rebuild's merge index) hold a
*statement lease* (:class:`StatementLease`): a heartbeat ``leases/stmt-<token>.json``
renewed the same way, naming when the statement started. Clean files keeps every unnamed
file written after a live statement started; a statement whose lease expired is first
marked dead with a write-once tombstone ``leases/stmt-<token>.dead``, then clean files
commits a tablestatus version, and only then deletes files. The statement checks, inside its
commit's update function (after reading the version it builds on), that no tombstone
names it and that every file it names exists: either its check ran before the tombstone,
so its version number was taken before clean's version and its put loses to it (the retry
sees the tombstone), or it sees the tombstone - a committed version never names a file
clean files removed. The statement then fails with :class:`CommitConflictError`.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from functools import cache
from typing import Any, Protocol

import orjson

from carbonstore.errors import CommitConflictError
from carbonstore.store.entries import LoadEntry, now_ms
from carbonstore.store.status_leases import LeaseFiles

__all__ = ["MARKED_DEAD", "LeaseKeeper", "StatementLease", "entry_is_dead", "statement_is_dead", "lease_fields", "process_start", "renew_lease", "writer_identity"]


MARKED_DEAD = "markedDead"  # failureCause of an entry clean files committed as Failure


class HasLeases(Protocol):
    """What the functions here take: a table's ``TableStatus`` (only its lease files are used)."""

    @property
    def leases(self) -> LeaseFiles: ...


@cache
def _host_id() -> str:
    """Host name, boot id and pid namespace: two processes with the same value share pids."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            parts.append(f.read().strip())
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:  # not Linux: never conclude from a pid
        parts.append(f"unknown-{os.getpid()}-{id(parts)}")
    return "/".join(parts)


def writer_identity() -> str:
    """``host:pid`` of this process, recorded in every version it writes."""
    return f"{socket.gethostname()}:{os.getpid()}"


def lease_fields(seconds: float) -> dict[str, Any]:
    """The ``extra`` keys of a new running entry: its lease and its holder."""
    return {
        "leaseExpiryMs": now_ms() + int(seconds * 1000),
        "writer": writer_identity(),
        "writerHost": _host_id(),
        "writerPid": os.getpid(),
    }


def process_start(pid: int) -> str | None:
    """Process ``pid``'s start time from ``/proc``: None when it is gone, a zombie (it
    exited; a parent or an init that does not reap keeps it listed) or ``/proc`` is missing."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    # A zombie has exited; without /proc, a listed pid counts as alive.
    return not os.path.isdir("/proc/self") or process_start(pid) is not None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def entry_is_dead(status: HasLeases, entry: LoadEntry, *, now: int, lease_ms: int) -> bool:
    """True when ``entry`` (In Progress) belongs to a load that is no longer running."""
    heartbeat = status.leases.read_lease(entry.load_name)
    info = {**entry.extra, **(heartbeat or {})}
    expiry = max(
        _int(entry.extra.get("leaseExpiryMs")) or entry.load_start_time + lease_ms,
        _int((heartbeat or {}).get("leaseExpiryMs")) or 0,
    )
    if now > expiry:
        return True
    if status.leases.paths.sfs.object_store:
        # Writers of an object store run anywhere (containers, other hosts that may share a
        # host name): only the lease decides.
        return False
    pid = _int(info.get("writerPid"))
    return info.get("writerHost") == _host_id() and pid is not None and not _pid_alive(pid)


def statement_is_dead(status: HasLeases, beat: dict[str, Any] | None, *, now: int) -> bool:
    """True when a statement lease's heartbeat ``beat`` (None: torn) shows it stopped."""
    if beat is None:
        return True
    expiry = _int(beat.get("leaseExpiryMs"))
    if expiry is None or now > expiry:
        return True
    if status.leases.paths.sfs.object_store:
        return False
    pid = _int(beat.get("writerPid"))
    return beat.get("writerHost") == _host_id() and pid is not None and not _pid_alive(pid)


def renew_lease(status: HasLeases, segment_id: str, seconds: float) -> None:
    """Rewrite ``segment_id``'s heartbeat: its lease now runs ``seconds`` from now, held by
    this process. FileNotFoundError when the table's log is gone (dropped)."""
    data = {**lease_fields(seconds), "segment": segment_id}
    status.leases.write_lease(segment_id, orjson.dumps(data))


def _renew_until(stop: threading.Event, seconds: float, renew: Any, what: str) -> None:
    """Call ``renew`` every quarter of the lease time until ``stop`` is set (a lease
    thread's loop)."""
    while not stop.wait(max(0.05, seconds / 4)):
        try:
            renew()
        except FileNotFoundError:  # the table was dropped: nothing left to keep alive
            return
        except OSError:  # a full disk or a hiccup: the next renewal tries again
            import logging  # (only here: logging costs 3-10 ms of a fresh process's start)

            logging.getLogger(__name__).warning("lease of %s not renewed", what, exc_info=True)


class LeaseKeeper:
    """Keeps one running entry's lease fresh from a daemon thread until ``release()``.

    Also releases a courtesy lock handed to it, so callers that release "the segment lock"
    of ``begin_segment`` stop the renewal the same way.
    """

    def __init__(self, status: HasLeases, segment_id: str, seconds: float, courtesy: Any = None) -> None:
        self.status = status
        self.segment_id = segment_id
        self.seconds = seconds
        self.courtesy = courtesy
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"lease-{self.segment_id}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        _renew_until(self._stop, self.seconds, self.renew, f"segment {self.segment_id}")

    def renew(self) -> None:
        renew_lease(self.status, self.segment_id, self.seconds)

    def release(self) -> None:
        """Stop renewing and remove the heartbeat (idempotent)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self.status.leases.delete_lease(self.segment_id)
        if self.courtesy is not None:
            self.courtesy.release()
            self.courtesy = None


class StatementLease:
    """A running statement's lease (see the module docstring): the heartbeat is written at
    once and renewed from a daemon thread until ``release()``."""

    def __init__(self, status: HasLeases, operation: str, seconds: float, token: str | None = None) -> None:
        self.status = status
        self.operation = operation
        self.seconds = seconds
        self.token = uuid.uuid4().hex[:16] if token is None else token
        self.started = now_ms()
        self._marked_dead = False
        self._stop = threading.Event()
        self.renew()  # before the statement writes any file
        self._thread = threading.Thread(
            target=self._run, name=f"lease-{self.operation}-{self.token}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        _renew_until(self._stop, self.seconds, self.renew, f"{self.operation} {self.token}")

    def renew(self) -> None:
        data = {**lease_fields(self.seconds), "startMs": self.started,
                "operation": self.operation}
        self.status.leases.write_statement_lease(self.token, orjson.dumps(data))

    def check(self, files: list[str]) -> None:
        """Raise when clean files marked this statement dead or removed one of ``files``
        (call it inside the commit's update function, after the version was read).

        Raises:
            CommitConflictError: nothing may be committed; the statement can be run again.
        """
        why = None
        if self.status.leases.statement_marked_dead(self.token):
            self._marked_dead = True
            why = ("it stalled longer than carbon.segment.lease.seconds and clean files "
                   "marked it dead")
        else:
            sfs = self.status.leases.paths.sfs
            missing = [f for f in files if not sfs.exists(f)]
            if missing:
                why = f"{missing[0]} it wrote was removed meanwhile"
        if why is not None:
            raise CommitConflictError(
                f"{self.operation} on {self.status.leases.paths.name} cannot commit: {why}; nothing "
                "was changed - run it again")

    def release(self) -> None:
        """Stop renewing; remove the heartbeat, and the tombstone this statement failed on
        (it has ended: it committed or never will; clean files removes any other tombstone
        after the trash retention time)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self.status.leases.delete_statement_lease(self.token, tombstone=self._marked_dead)
