"""A load's progress from its Spark jobs: rows and bytes of finished tasks.

The CSV tasks add the rows they wrote and the input bytes they read to two accumulators
(:func:`watching`); a load through Spark's reader reports the share of its stage's tasks
that finished as that share of the input bytes (:func:`stage_watch`, rows unknown: -1).
A thread reports every quarter second to the ``LoadUpdate`` of
:func:`carbonstore.progress.load_progress`; nothing runs without one.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pyspark import Accumulator, SparkContext

from carbonstore.progress import LoadUpdate

__all__ = ["Counters", "stage_watch", "watching"]


def _every_quarter_second(report: Callable[[], None]) -> Callable[[], None]:
    """Run ``report`` on a thread until the returned stop function is called (it reports
    once more, last)."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.25):
            report()

    thread = threading.Thread(target=loop, name="load-progress", daemon=True)
    thread.start()

    def finish() -> None:
        stop.set()
        thread.join()
        report()

    return finish


@dataclass(frozen=True, slots=True)
class Counters:
    """Rows written and input bytes read by finished tasks (Spark accumulators)."""

    rows: Accumulator[int]
    bytes: Accumulator[int]


@contextlib.contextmanager
def watching(sc: SparkContext, progress: LoadUpdate | None) -> Iterator[Counters | None]:
    """Counters the tasks add to, reported to ``progress`` from a thread while the block
    runs (None and no thread without ``progress``)."""
    if progress is None:
        yield None
        return
    counters = Counters(sc.accumulator(0), sc.accumulator(0))
    finish = _every_quarter_second(
        lambda: progress(counters.rows.value, counters.bytes.value))
    try:
        yield counters
    finally:
        finish()




@contextlib.contextmanager
def stage_watch(sc: SparkContext, total_bytes: int, progress: LoadUpdate | None) -> Iterator[None]:
    """Report the finished share of the running stages' tasks as that share of
    ``total_bytes`` (rows -1: not known) while the block runs."""
    if progress is None:
        yield
        return
    tracker = sc.statusTracker()
    best = [0]

    def report() -> None:
        done = total = 0
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                done, total = done + info.numCompletedTasks, total + info.numTasks
        if total:
            best[0] = max(best[0], total_bytes * done // total)
        progress(-1, best[0])

    finish = _every_quarter_second(report)
    try:
        yield
    finally:
        finish()
