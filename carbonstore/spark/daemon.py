"""PySpark's worker daemon, quiet when the JVM stops reading a task's output early.

A query with a LIMIT (``carbonstore query --limit``, ``SELECT ... LIMIT``) lets Spark stop a
scan once it has enough rows: it closes the Python worker's socket while the data source
reader still has batches to send. PySpark's daemon then prints a ``BrokenPipeError``
traceback to the console although nothing failed. This module is PySpark's daemon with
that one case handled: a worker whose socket was closed by the JVM ends silently and is
not reused. The embedded session sets ``spark.python.daemon.module`` to it; any other
error is raised as before.
"""

from __future__ import annotations

import socket
from typing import Any

import pyspark.daemon as _daemon

_worker = _daemon.worker


def worker(sock: socket.socket, authenticated: bool) -> Any:
    try:
        return _worker(sock, authenticated)
    except (BrokenPipeError, ConnectionResetError):
        return 1  # the JVM closed the socket: no one is left to tell


_daemon.worker = worker

if __name__ == "__main__":
    _daemon.manager()
