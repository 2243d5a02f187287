"""The task side of a DML statement's Spark jobs (run by :func:`carbonstore.spark.tasks.
run_tasks`; the driver side is ``carbonstore.dml.tasks``).

- :class:`DeltaTask`: the matched (file, position) pairs arrive hash-partitioned by file, so
  one task owns all of a file's positions; it unions them with the file's delta of the
  planned version and writes the result as a NEW delta (the portable RoaringBitmap format
  of ``segments.deltas.write_delta``: put-if-absent under a unique name). It yields one row
  per file: (segment, file, delta name, rows in it, rows added), or :data:`DUPLICATE` for
  a file with a position twice. A retried or speculative attempt writes a delta of its own
  under another name; only the attempt whose results Spark keeps is named by the commit,
  the others stay unnamed files that clean files removes (as a load's orphan task files).
- :class:`RowsTask`: the new rows go through the load writer (``segments.writer.
  write_task``) and the task yields its ``TaskResult``.

This module is what a Python worker imports for a delta task: it keeps its imports few
(no planner, no Spark SQL), so a worker's first task pays little.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

from carbonstore.segments.deltas import read_delta, write_delta
from carbonstore.store.entries import DeleteDelta
from carbonstore.store.fs import resolve_fs

__all__ = ["DUPLICATE", "DataFile", "DeltaTask", "RowsTask", "file_key"]

#: the delta task's answer for a file with a position twice (a MERGE target row that more
#: than one source row modifies)
DUPLICATE = "__duplicate__"


@dataclass(frozen=True, slots=True)
class DataFile:
    """One planned data file, as its task sees it."""

    segment: str
    rel: str  # relative to the segment folder
    segment_dir: str
    delta: DeleteDelta | None  # its live delta in the planned version


def file_key(path: str) -> str:
    """The file-system path of a scan's ``_metadata.file_path`` (a URI) or of a plain path,
    one spelling for both."""
    if "://" in path or path.startswith("file:"):
        parsed = urlparse(path)
        if parsed.scheme == "file":
            path = unquote(parsed.path)
        else:
            path = f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"
    return path.replace("//", "/") if "://" not in path else path


@dataclass(frozen=True, slots=True)
class DeltaTask:
    """Pickled to the tasks: where the store is and what each planned file had. Its input
    batches hold (file path, position) columns."""

    location: str
    conf: Any  # the store's CarbonConf
    files: dict[str, DataFile]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[Any, ...]]:
        found: dict[str, list[np.ndarray]] = {}
        for batch in batches:
            if not batch.num_rows:
                continue
            paths = batch.column(0).dictionary_encode()
            pos = batch.column(1).to_numpy(zero_copy_only=False).astype(np.int64)
            codes = paths.indices.to_numpy(zero_copy_only=False)
            for i, path in enumerate(paths.dictionary.to_pylist()):
                if path is not None:
                    found.setdefault(path, []).append(pos[codes == i])
        sfs = resolve_fs(self.location, self.conf) if found else None
        for path, parts in found.items():
            f = self.files[file_key(path)]
            every = np.concatenate(parts)
            bits = BitMap(every.astype(np.uint32))
            if len(bits) != len(every):
                yield (f.segment, f.rel, DUPLICATE, 0, 0)
                continue
            added = len(bits)
            if f.delta is not None:
                bits |= read_delta(sfs, f.segment_dir, f.delta)
            d = write_delta(sfs, f.segment_dir, f.rel, bits)
            yield (f.segment, f.rel, d.delta_file, d.deleted_rows, added)


@dataclass(frozen=True, slots=True)
class RowsTask:
    """Pickled to the tasks: the insert segment's ``WriteSettings``."""

    settings: Any

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[Any]:
        from pyspark import TaskContext

        # the settings' unpickling imported the writer already: this costs nothing more
        from carbonstore.segments.writer import write_task

        ctx = TaskContext.get()
        task_id = f"dml{ctx.partitionId():05d}-{ctx.attemptNumber()}" if ctx else "dml"
        yield write_task(batches, self.settings, task_id=task_id)
