"""Progress of long driver-side steps (merge index, compaction commit, analyze, rebuild).

``progress(total, description)`` is a context manager that yields ``advance(n=1)``. It
draws a rich progress bar on stderr only when stderr is a terminal (not ``TERM=dumb``) and
the command was not asked for ``--json``; otherwise ``advance`` does nothing, so scripts,
pipes and tests see plain output without terminal control codes. Spark shows its own stage progress for executor work; this covers the steps
that run in the driver process.

``load_progress(description, files=, total_bytes=)`` is the bar of a load: files, bytes
read of the total, rows written and the percent where the total is known; it yields
``update(rows, done_bytes)``. A command that draws it starts Spark without Spark's own
console progress bar, so one bar at a time is drawn.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Advance", "LoadUpdate", "load_progress", "progress", "progress_enabled"]

Advance = Callable[..., None]
LoadUpdate = Callable[[int, int], None]

# One bar at a time: while a load's bar draws, the steps inside the load (the merge of its
# task indexes) draw none of their own.
_load_bar_drawing = threading.Event()


def _noop(n: int = 1) -> None:
    del n


def progress_enabled(*, json: bool | None = None) -> bool:
    """True when a progress bar would be drawn (stderr is a TTY and not ``--json``).

    ``json=None`` (library code that cannot see the command line's options) looks for
    ``--json`` among the process arguments.
    """
    if json is None:
        json = "--json" in sys.argv[1:]
    if json or os.environ.get("TERM") == "dumb":
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


@contextmanager
def progress(
    total: int | None, description: str, *, json: bool | None = None
) -> Iterator[Advance]:
    """Show a progress bar of ``total`` units while the block runs (see the module docstring).

    Args:
        total: number of units (None: unknown, an indeterminate bar).
        description: what is being done, e.g. ``"merging indexes of db.t"``.
        json: the command prints JSON: never draw (None: ``--json`` in ``sys.argv``).

    Yields:
        ``advance(n=1)``: record ``n`` more units done.
    """
    if not progress_enabled(json=json) or _load_bar_drawing.is_set():
        yield _noop
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    # The console draws on the terminal we checked, whatever FORCE_COLOR / TTY_COMPATIBLE say.
    console = Console(stderr=True, force_terminal=True)
    bar = Progress(*columns, TimeElapsedColumn(), console=console, transient=True)
    with bar:
        task = bar.add_task(description, total=total)

        def advance(n: int = 1) -> None:
            bar.advance(task, n)

        yield advance


def _no_update(rows: int, done_bytes: int) -> None:
    del rows, done_bytes


@contextmanager
def load_progress(
    description: str, *, files: int, total_bytes: int | None, json: bool | None = None
) -> Iterator[LoadUpdate]:
    """A load's bar (see the module docstring); ``total_bytes`` None: not known (remote
    input), the bar then shows rows and bytes without a percent.

    Yields:
        ``update(rows, done_bytes)``: rows written (-1: not known) and input bytes read
        so far.
    """
    if not progress_enabled(json=json):
        yield _no_update
        return
    from rich.console import Console
    from rich.filesize import decimal
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    total = total_bytes if total_bytes else None
    files_text = f"{files} file{'s' if files != 1 else ''}"
    columns = [SpinnerColumn(), TextColumn(description)]
    if total is not None:
        columns += [BarColumn(bar_width=20), TaskProgressColumn()]
    columns += [TextColumn("{task.fields[done]}"), TimeElapsedColumn()]
    console = Console(stderr=True, force_terminal=True)
    bar = Progress(*columns, console=console, transient=True)
    _load_bar_drawing.set()
    try:
        with bar:
            task = bar.add_task(description, total=total, done=files_text)

            def update(rows: int, done_bytes: int) -> None:
                read = decimal(done_bytes) + (f"/{decimal(total)}" if total else "")
                written = f"{rows:,} rows, " if rows >= 0 else ""
                bar.update(task, completed=min(done_bytes, total or done_bytes),
                           done=f"{written}{read}, {files_text}")

            yield update
    finally:
        _load_bar_drawing.clear()
