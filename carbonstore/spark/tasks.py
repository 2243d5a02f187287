"""Python tasks over each partition of a DataFrame, whose small results the driver collects.

:func:`run_tasks` runs ``job`` (a picklable callable: an iterator of the partition's Arrow
record batches in, an iterable of picklable results out) in one Spark task per partition
through ``mapInArrow`` and returns every task's results to the driver. It is one Spark
job: no Python data source writer, whose planning and commit each run in a Python process
of their own (two more PySpark daemons, each importing the job's modules on its first
use). The results must stay small (one row per file, one per task): the driver holds them.

Spark keeps the results of one successful attempt per partition: a retried or speculative
attempt's results are never returned, so whatever such an attempt wrote is named by no
result, as with a data source writer's commit messages (its files stay unnamed and clean
files removes them).

Each task yields its results as one Arrow batch of pickled values; the job's classes are
pickled by reference, so a worker imports only the module that defines them: keep task
code in modules with few imports (a Python worker pays its imports once, on its first task).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["RESULT", "run_tasks"]

#: the one column of a task's output: its results, each pickled
RESULT = "__carbon_result"


@dataclass(frozen=True, slots=True)
class _Collected:
    job: Callable[[Iterator[pa.RecordBatch]], Iterable[Any]]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out = [pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL) for r in self.job(batches)]
        yield pa.RecordBatch.from_arrays([pa.array(out, pa.binary())], names=[RESULT])


def run_tasks(frame: Any, job: Callable[[Iterator[pa.RecordBatch]], Iterable[Any]]) -> list[Any]:
    """Run ``job`` over each partition of ``frame`` (a Spark DataFrame) in Spark tasks;
    their results, collected on the driver."""
    rows = frame.mapInArrow(_Collected(job), f"{RESULT} binary").collect()
    return [pickle.loads(r[0]) for r in rows]  # noqa: S301 - written by our own tasks
