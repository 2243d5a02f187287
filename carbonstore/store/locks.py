"""File locks under ``LockFiles/`` (filelock), with timeout and retries from the conf.

A lock held by a process that dies (even by SIGKILL) is released by the operating
system, so the next writer is never blocked by a dead one. Locks need a filesystem with
working ``flock`` (local disks, NFS with lockd). On object stores they are skipped
(``NoLock``: always free) unless ``carbon.lock.path`` names a local folder shared by every
writer: they are courtesies there too, never what correctness rests on (commits are
conditional puts, liveness is the lease; docs/object-stores.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from carbonstore.errors import LockTimeoutError
from carbonstore.store.conf import CarbonConf
from carbonstore.store.paths import TablePaths, check_segment_id
from carbonstore.store.records import Frozen

if TYPE_CHECKING:
    import filelock

__all__ = ["LockManager", "NoLock"]

# filelock is imported where a lock is taken (about 20 ms of every fresh process, and a
# read - a plan, a metadata command - takes none)


class NoLock:
    """A courtesy lock that is always free: object stores have no locks to offer."""

    def __init__(self, lock_file: str) -> None:
        self.lock_file = lock_file
        self.is_locked = False

    def acquire(self, timeout: float | None = None, **_: object) -> NoLock:
        self.is_locked = True
        return self

    def release(self, force: bool = False) -> None:
        self.is_locked = False

    def __enter__(self) -> NoLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class LockManager(Frozen):
    """Named locks of one table."""

    paths: TablePaths
    conf: CarbonConf

    def _lock_dir(self) -> str:
        override = self.conf.get("carbon.lock.path")
        if override:
            d = os.path.join(override, self.paths.name.database, self.paths.name.table)
        elif self.paths.sfs.local:
            d = self.paths.lock_dir
        else:
            raise LockTimeoutError(
                "locks need a local or NFS folder: set carbon.lock.path for a store on "
                f"{type(self.paths.sfs.fs).__name__}"
            )
        os.makedirs(d, exist_ok=True)
        return d

    def path(self, name: str) -> str:
        return os.path.join(self._lock_dir(), name)

    def lock(self, name: str) -> filelock.BaseFileLock:
        import filelock

        if self.skipped:
            return NoLock(f"{self.paths.lock_dir}/{name}")  # type: ignore[return-value]
        return filelock.FileLock(self.path(name), thread_local=False)

    @property
    def skipped(self) -> bool:
        """Courtesy locks are skipped: an object store without ``carbon.lock.path``."""
        return self.paths.sfs.object_store and not self.conf.get("carbon.lock.path")

    @contextmanager
    def hold(
        self, name: str, *, timeout: float | None = None, retries: int | None = None
    ) -> Iterator[filelock.BaseFileLock]:
        """Take ``name`` (e.g. ``tablestatus.lock``) or raise LockTimeoutError."""
        lock = self.lock(name)
        acquire(lock, name, self.conf, timeout=timeout, retries=retries)
        try:
            yield lock
        finally:
            lock.release()

    @contextmanager
    def courtesy(self, name: str, wait: float) -> Iterator[None]:
        """Writers of one local store take turns on ``name`` (e.g. ``tablestatus.lock``),
        waited for ``wait`` seconds at most.

        Only spares them a storm of lost races: the caller goes ahead without it after
        ``wait`` seconds (a holder may be stuck or slow), and correctness never rests on it
        (put-if-absent decides).
        """
        import filelock

        if not self.paths.sfs.local or self.conf.get("carbon.lock.path"):
            yield
            return
        try:
            lock = self.lock(name)
            lock.acquire(timeout=wait)
        except (filelock.Timeout, OSError):
            yield
            return
        try:
            yield
        finally:
            lock.release()

    def tablestatus(self) -> filelock.BaseFileLock:
        return self.lock("tablestatus.lock")

    def segment(self, segment_id: str) -> filelock.BaseFileLock:
        return self.lock(f"Segment_{check_segment_id(segment_id)}.lock")

    def segment_lock_free(self, segment_id: str) -> bool:
        """True when nobody holds the segment's lock (its load is dead or finished)."""
        import filelock

        lock = self.segment(segment_id)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            return False
        lock.release()
        return True


def acquire(
    lock: filelock.BaseFileLock, name: str, conf: CarbonConf, *,
    timeout: float | None = None, retries: int | None = None,
) -> None:
    import filelock

    per_try = conf.get_float("carbon.lock.retry.timeout.sec") if timeout is None else timeout
    tries = max(1, conf.get_int("carbon.lock.retries") if retries is None else retries)
    for _ in range(tries):
        try:
            lock.acquire(timeout=per_try)
            return
        except filelock.Timeout:
            continue
    raise LockTimeoutError(
        f"could not take {name} at {lock.lock_file} after {tries} attempt(s) of {per_try:g}s; "
        "another operation holds it - retry later or raise carbon.lock.retries"
    )
