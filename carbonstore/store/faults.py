"""Crash points for the reliability suite: kill this process at a named step.

Set ``CARBONSTORE_CRASH_AT=<name>`` in the environment of a process and it sends itself
SIGKILL when it reaches ``crash_point("<name>")`` - no cleanup, no ``finally`` blocks, the
same as a power cut or an OOM kill. The variable is read once, at import; when it is unset
a crash point costs one comparison with None.

Names used by the product (see docs/reliability.md)::

    load.after_inprogress   load.after_data   load.merge_index_written
    load.before_commit      compaction.after_output   compaction.before_commit
    clean.after_move        clean.mid_delete          clean.before_commit
"""

from __future__ import annotations

import os
import signal

__all__ = ["CRASH_ENV", "crash_point"]

CRASH_ENV = "CARBONSTORE_CRASH_AT"
_TARGET: str | None = os.environ.get(CRASH_ENV) or None


def crash_point(name: str) -> None:
    """SIGKILL this process when ``CARBONSTORE_CRASH_AT`` names this point; else nothing."""
    if _TARGET is not None and _TARGET == name:
        os.kill(os.getpid(), signal.SIGKILL)
