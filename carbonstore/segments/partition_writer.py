"""The executor side of a load into a partitioned or bucketed table.

:class:`PartitionedWriter` splits each batch by partition key (the transform values of the
spec's fields, store/partitioning.py) and bucket id, and hands each group to a file writer of
that partition: ``<segment>/<name>=<value>/.../part-<task>-<uuid>[_b<bucket>].parquet``. The
task still writes ONE ``.carbonindex`` for all its files; their relative paths carry the
partition values and bucket ids the planner prunes on.

Bounds: at most ``MAX_OPEN_FILES`` files are open at once (the least recently used one is
closed; later rows of its partition go to a new file) and the buffered rows of all
partitions stay under one blocklet size (the largest buffer is written out first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from carbonstore.store.fs import AnyFS
from carbonstore.store.partitioning import (
    PartitionSpec,
    bucket_ids,
    field_values,
    partition_dir,
)

__all__ = ["MAX_OPEN_FILES", "PartitionedWriter", "partition_keys"]

MAX_OPEN_FILES = 64


def partition_keys(
    batch: pa.RecordBatch, spec: PartitionSpec, types: dict[str, str]
) -> tuple[np.ndarray, list[tuple[str, int | None]]]:
    """Group code of each row and, per code, its (partition folder, bucket id)."""
    n = batch.num_rows
    columns: list[np.ndarray] = []
    texts: list[list[str | None]] = []
    names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    for f in spec.fields:
        arr = batch.column(names[f.source])
        enc = pc.dictionary_encode(arr)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        values = field_values(f, enc.dictionary, types[f.source])
        # distinct transform values of the distinct column values
        uniq: dict[str | None, int] = {}
        codes = np.array([uniq.setdefault(v, len(uniq)) for v in values], dtype=np.int64)
        null_code = uniq.setdefault(None, len(uniq))
        idx = np.asarray(pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        row_codes = np.where(idx >= 0, codes[np.clip(idx, 0, None)] if len(codes) else null_code,
                             null_code)
        columns.append(row_codes)
        texts.append(list(uniq))
    if spec.bucket_number:
        cols = [batch.column(names[c]) for c in spec.bucket_columns]
        if len(cols) == 1:  # hash each distinct value once
            enc = pc.dictionary_encode(cols[0])
            per_value = bucket_ids([enc.dictionary], spec.bucket_number)
            idx = np.asarray(pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False),
                             dtype=np.int64)
            null_bucket = int(bucket_ids([pa.nulls(1, cols[0].type)], spec.bucket_number)[0])
            buckets = np.where(idx >= 0, per_value[np.clip(idx, 0, None)] if len(per_value)
                               else null_bucket, null_bucket)
        else:
            buckets = bucket_ids(cols, spec.bucket_number)
        columns.append(np.asarray(buckets, dtype=np.int64))
    stacked = np.column_stack(columns) if columns else np.zeros((n, 0), np.int64)
    uniq_rows, inverse = np.unique(stacked, axis=0, return_inverse=True)
    keys: list[tuple[str, int | None]] = []
    nf = len(spec.fields)
    for row in uniq_rows.tolist():
        values = [texts[i][row[i]] for i in range(nf)]
        bucket = int(row[nf]) if spec.bucket_number else None
        keys.append((partition_dir(spec.fields, values), bucket))
    return np.asarray(inverse, dtype=np.int64).reshape(-1), keys


class PartitionedWriter:
    """Writes one task's rows split by partition and bucket; the task API of _TaskWriter."""

    def __init__(
        self, settings: Any, task_id: str, fs: AnyFS, *, make: Callable[..., Any]
    ) -> None:
        if settings.partitioning is None:
            raise ValueError("PartitionedWriter needs settings.partitioning")
        self.s = settings
        self.spec: PartitionSpec = settings.partitioning
        self.task_id = task_id
        self.fs = fs
        self.make = make
        self.base = make(settings, task_id, fs)  # owns the dictionary encoder and statistics
        self.schema = self.base.schema
        self.stats = self.base.stats
        self.types = {c.name: c.type for c in settings.columns}
        self.writers: OrderedDict[tuple[str, int | None], Any] = OrderedDict()
        self.files: list[str] = []
        self.sizes: list[int] = []
        self._rows = 0

    @property
    def rows(self) -> int:
        return self._rows

    @rows.setter
    def rows(self, value: int) -> None:
        self._rows = value

    def _writer(self, key: tuple[str, int | None]) -> Any:
        w = self.writers.get(key)
        if w is None:
            subdir, bucket = key
            suffix = "" if bucket is None else f"_b{bucket:05d}"
            w = self.make(self.s, self.task_id, self.fs, subdir=subdir, suffix=suffix,
                          parent=self.base)
            self.writers[key] = w
        self.writers.move_to_end(key)
        return w

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        codes, keys = partition_keys(batch, self.spec, self.types)
        if len(keys) == 1:
            self._writer(keys[0]).add(batch)
        else:
            order = np.argsort(codes, kind="stable")
            edges = np.flatnonzero(np.diff(codes[order])) + 1
            starts = np.concatenate([[0], edges])
            ends = np.concatenate([edges, [len(order)]])
            for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
                rows = pa.array(order[a:b])
                self._writer(keys[int(codes[order[a]])]).add(batch.take(rows))
        self._rows += batch.num_rows
        self._bound()

    def _bound(self) -> None:
        open_files = [k for k, w in self.writers.items() if w.file_open]
        for key in open_files[: max(0, len(open_files) - MAX_OPEN_FILES)]:  # least recent first
            self.writers[key].flush(close=True)
        total = sum(w.pending_bytes for w in self.writers.values())
        while total >= self.s.blocklet_bytes:
            largest = max(self.writers.values(), key=lambda w: w.pending_bytes)
            total -= largest.pending_bytes
            largest.flush()

    def finish(self) -> tuple[str | None, int]:
        indexes = []
        for w in self.writers.values():
            indexes.extend(w.close_files())
            self.files.extend(w.files)
            self.sizes.extend(w.sizes)
        self._rows = sum(w.rows for w in self.writers.values())
        return self.base.write_index(indexes)

    def abort(self) -> None:
        for w in self.writers.values():
            w.abort()
