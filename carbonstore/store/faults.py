"""Crash points for the reliability suite: kill this process at a named step.

Set ``CARBONSTORE_CRASH_AT=<name>`` (or ``<name>#<n>``: the n-th time) in the environment
of a process and it sends itself SIGKILL when it reaches ``crash_point("<name>")`` - no cleanup, no ``finally`` blocks, the
same as a power cut or an OOM kill. The variable is read once, at import; when it is unset
a crash point costs one comparison with None.

Names used by the product (see docs/reliability.md)::

    load.after_inprogress     load.after_data            index.before_rename
    load.merge_index_written  load.before_commit         tablestatus.before_write
    compaction.after_output   compaction.before_commit
    clean.mid_delete          clean.before_commit        clean.after_move
    tablestatus.after_write   clean.after_read           clean.after_mark_dead
    drop.after_commit         clean.files_chosen         clean.files_recorded
    alter.after_status        alter.after_schema         dml.after_read

Tests of interleavings register an in-process pause with ``on_point(name, fn)``: ``fn``
runs when the point is reached (another operation can complete in between, exactly there).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["CRASH_ENV", "crash_point", "on_point"]

CRASH_ENV = "CARBONSTORE_CRASH_AT"


def _parse(value: str | None) -> tuple[str | None, int]:
    """``name`` or ``name#N`` (the N-th time the point is reached, from 1)."""
    if not value:
        return None, 1
    name, _, nth = value.partition("#")
    return name, int(nth) if nth.isdigit() and int(nth) > 0 else 1


_TARGET, _NTH = _parse(os.environ.get(CRASH_ENV))
_hits = 0
_HOOKS: dict[str, Callable[[], None]] = {}


@contextmanager
def on_point(name: str, fn: Callable[[], None], *, once: bool = True) -> Iterator[None]:
    """Run ``fn`` when this process reaches ``crash_point(name)`` (tests of interleavings)."""
    def run() -> None:
        if once:
            _HOOKS.pop(name, None)
        fn()

    _HOOKS[name] = run
    try:
        yield
    finally:
        _HOOKS.pop(name, None)


def crash_point(name: str) -> None:
    """SIGKILL this process when ``CARBONSTORE_CRASH_AT`` names this point; else nothing."""
    global _hits
    if _HOOKS:
        hook = _HOOKS.get(name)
        if hook is not None:
            hook()
    if _TARGET is not None and _TARGET == name:
        _hits += 1
        if _hits >= _NTH:
            os.kill(os.getpid(), signal.SIGKILL)
