"""The executor side of a load: a pure function over ``Iterator[pyarrow.RecordBatch]``.

One load task writes ``part-<task>-<uuid>.parquet`` files into the segment folder:

- a row group (blocklet) is cut when the buffered Arrow data reaches the blocklet size,
- data pages hold at most ``page rows`` rows, the page index is written, statistics are on,
- bloom filters (written by pyarrow, split-block as Parquet defines them) cover the table's
  bloom columns with the configured fpp and an ndv estimated from the first batch,
- the task rolls to a new file once the current one reaches the table block size,

then writes ONE ``.carbonindex`` for all its files from their footers, page indexes and
blooms, adding the NaN counts per row group and per page that the Parquet writer does not
record (counted here while writing). It returns a :class:`TaskResult`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from carbonstore.dictionary.load import BatchEncoder
from carbonstore.errors import SchemaError
from carbonstore.indexfiles.footer import FileIndex, read_file_index
from carbonstore.indexfiles.indexfile import write_index
from carbonstore.indexfiles.packing import pack
from carbonstore.segments.badrecords import (
    HIDDEN_COLUMNS,
    BadRecordAction,
    BadRecordSink,
    split_batch,
)
from carbonstore.segments.partition_writer import PartitionedWriter
from carbonstore.statistics.accumulator import StatsAccumulator
from carbonstore.store.evolution import struct_leaf_ids
from carbonstore.store.fs import AnyFS, StoreFS, as_store_fs, local_disk, resolve_fs
from carbonstore.store.partitioning import PartitionSpec
from carbonstore.store.schema import Column, DataType, arrow_type, parse_type

__all__ = [
    "ColumnSpec",
    "NanTracker",
    "TaskResult",
    "WriteSettings",
    "arrow_schema",
    "arrow_type",
    "write_task",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnSpec:
    """What an executor needs to know about one table column (picklable, small)."""

    name: str
    type: str
    precision: int = 0
    scale: int = 0
    nullable: bool = True
    column_id: str = ""
    type_text: str = ""  # the full type of a nested column (array<...>, map<...>, struct<...>)

    @classmethod
    def from_column(cls, c: Column) -> ColumnSpec:
        return cls(
            name=c.name, type=c.type.name, precision=c.type.precision, scale=c.type.scale,
            nullable=c.nullable, column_id=c.column_id,
            type_text=str(c.type) if c.type.is_nested else "",
        )

    @property
    def data_type(self) -> DataType:
        if self.type_text:
            return parse_type(self.type_text)
        return DataType(self.type, self.precision, self.scale)


def index_column_ids(columns: Iterable[ColumnSpec]) -> dict[str, str]:
    """Index leaf name -> column id: top-level columns, and struct fields reached through
    structs only (``s.a`` -> ``<id of s>/a``: a filter on ``s.a`` prunes by it, also after
    ``s`` is renamed). Leaves inside lists and maps are never pruned on."""

    out: dict[str, str] = {}
    for c in columns:
        out[c.name] = c.column_id
        if c.type == "struct" and c.column_id:
            out.update(struct_leaf_ids(c.name, c.column_id, c.data_type))
    return out


def arrow_schema(columns: Iterable[ColumnSpec]) -> pa.Schema:
    """Arrow schema of the table: exact types and nullability."""
    return pa.schema(
        [pa.field(c.name, arrow_type(c.data_type), nullable=c.nullable) for c in columns]
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteSettings:
    """Everything a load task needs, resolved on the driver and shipped to executors."""

    store_location: str
    segment_id: str
    segment_dir: str
    columns: tuple[ColumnSpec, ...]
    page_rows: int = 32000
    blocklet_bytes: int = 64 << 20
    block_bytes: int = 1024 << 20
    bloom_columns: tuple[str, ...] = ()
    bloom_fpp: float = 0.01
    sort_columns: tuple[str, ...] = ()
    action: BadRecordAction = "FAIL"
    bad_record_dir: str | None = None
    compression: str = "snappy"
    #: Global-dictionary columns written as INT32 surrogates (docs/dictionary.md).
    dictionary_columns: tuple[str, ...] = ()
    #: Compute column statistics of the written rows (docs/statistics.md).
    statistics: bool = True
    table_name: str = ""
    #: Partition fields and bucketing of the rows written (docs/partitioning.md).
    partitioning: PartitionSpec | None = None
    #: Commit as a dynamic partition overwrite (load --overwrite-partitions).
    overwrite_partitions: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskResult:
    """The small message one task sends to the driver's commit."""

    task_id: str
    files: tuple[str, ...] = ()
    rows: int = 0
    data_bytes: int = 0
    index_file: str | None = None
    index_bytes: int = 0
    bad_records: int = 0
    bad_record_file: str | None = None
    bad_samples: tuple[str, ...] = ()
    #: ``StatsAccumulator.to_bytes()`` of the written rows, as text (None: not computed).
    stats: str | None = None


@dataclass(slots=True)
class NanTracker:
    """NaN row positions per row group and float column of the file being written."""

    columns: tuple[str, ...]
    row_groups: list[dict[str, np.ndarray]] = field(default_factory=list)

    def add_row_group(self, table: pa.Table) -> None:
        found: dict[str, np.ndarray] = {}
        for name in self.columns:
            col = table.column(name)
            nan = pc.is_nan(col)
            if nan.null_count:
                nan = pc.fill_null(nan, False)
            if pc.any(nan).as_py():
                found[name] = np.flatnonzero(nan.to_numpy(zero_copy_only=False))
        self.row_groups.append(found)

    def apply(self, fi: FileIndex) -> None:
        """Fill the chunk and page NaN counts of the file just written."""
        names = [c.name for c in fi.columns]
        for rg, found in zip(fi.row_groups, self.row_groups, strict=True):
            for name in self.columns:
                chunk = rg.chunks[names.index(name)]
                pos = found.get(name)
                chunk.nan_count = 0 if pos is None else len(pos)
                pages = chunk.pages
                if pages is None:
                    continue
                if pos is None:
                    pages.nan_counts = [0] * len(pages.first_row_index)
                else:
                    edges = np.searchsorted(pos, [*pages.first_row_index, rg.num_rows])
                    pages.nan_counts = [int(x) for x in np.diff(edges)]


class _TaskWriter:
    """Writes one task's files; see the module docstring."""

    def __init__(
        self, settings: WriteSettings, task_id: str, fs: AnyFS, *,
        subdir: str = "", suffix: str = "", parent: _TaskWriter | None = None,
    ) -> None:
        self.s = settings
        self.task_id = task_id
        self.fs: StoreFS = as_store_fs(fs)
        self.subdir = subdir  # partition folder inside the segment ('' = the segment folder)
        self.suffix = suffix  # file name suffix (the bucket id)
        self.schema = arrow_schema(settings.columns)
        self.encoder: BatchEncoder | None = None
        self.file_schema = self.schema
        if parent is not None:  # a partition's writer shares the dictionary encoder
            self.encoder, self.file_schema = parent.encoder, parent.file_schema
        elif settings.dictionary_columns:
            self.encoder = BatchEncoder.open(
                settings.store_location, settings.table_name, settings.segment_id
            )
            self.file_schema = self.encoder.storage_schema(self.schema)
        self.float_cols = tuple(c.name for c in settings.columns if c.type in ("float", "double"))
        self.files: list[str] = []
        self.sizes: list[int] = []
        self.nan: list[NanTracker] = []
        self.rows = 0
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._writer: pq.ParquetWriter | None = None
        self._sink: pa.NativeFile | None = None
        self._bloom: dict[str, dict[str, float | int]] | None = None
        self.stats = StatsAccumulator(settings.columns) if settings.statistics else None
        if parent is not None:
            self.stats = parent.stats

    # ---- row groups and files -------------------------------------------------------------
    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self.encoder is not None:
            batch = self.encoder.encode(batch)
        if self._bloom is None:
            self._bloom = self._bloom_options(batch)
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes
        if self._pending_bytes >= self.s.blocklet_bytes:
            self._flush_row_group()

    def _bloom_options(self, first: pa.RecordBatch) -> dict[str, dict[str, float | int]]:
        """ndv per row group estimated from the first batch's distinct ratio."""
        out: dict[str, dict[str, float | int]] = {}
        if not self.s.bloom_columns:
            return out
        bytes_per_row = max(1.0, first.nbytes / max(1, first.num_rows))
        rg_rows = int(self.s.blocklet_bytes / bytes_per_row)
        for name in self.s.bloom_columns:
            distinct = pc.count_distinct(first.column(name)).as_py()
            ratio = distinct / max(1, first.num_rows)
            ndv = max(1024, min(rg_rows, int(ratio * rg_rows) + distinct))
            out[name] = {"ndv": ndv, "fpp": self.s.bloom_fpp}
        return out

    def _open(self) -> tuple[pq.ParquetWriter, pa.NativeFile]:
        name = f"part-{self.task_id}-{uuid.uuid4().hex[:16]}{self.suffix}.parquet"
        if self.subdir:
            self.fs.makedirs(f"{self.s.segment_dir}/{self.subdir}")
            name = f"{self.subdir}/{name}"
        self._sink = self.fs.open_output_stream(f"{self.s.segment_dir}/{name}")
        sorting = None
        # Surrogates do not follow value order: the recorded sort stops at a dictionary column.
        dict_cols = set(self.s.dictionary_columns)
        sort_cols = list(self.s.sort_columns)
        for i, c in enumerate(sort_cols):
            if c in dict_cols:
                sort_cols = sort_cols[:i]
                break
        if sort_cols:
            sorting = [pq.SortingColumn(self.schema.get_field_index(c)) for c in sort_cols]
        self._writer = pq.ParquetWriter(
            self._sink,
            self.file_schema,
            compression=self.s.compression,
            write_statistics=True,
            write_page_index=True,
            max_rows_per_page=self.s.page_rows,
            bloom_filter_options=self._bloom or None,
            sorting_columns=sorting,
            store_schema=False,
        )
        self.files.append(name)
        self.nan.append(NanTracker(self.float_cols))
        return self._writer, self._sink

    def _flush_row_group(self) -> None:
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending).combine_chunks().cast(self.file_schema)
        self._pending, self._pending_bytes = [], 0
        writer, sink = self._open() if self._writer is None or self._sink is None else (
            self._writer, self._sink
        )
        writer.write_table(table, row_group_size=table.num_rows)
        self.nan[-1].add_row_group(table)
        if self.stats is not None:
            self.stats.update(table)
        self.rows += table.num_rows
        if sink.tell() >= self.s.block_bytes:
            self._close_file()

    @property
    def pending_bytes(self) -> int:
        return self._pending_bytes

    @property
    def file_open(self) -> bool:
        return self._writer is not None

    def flush(self, *, close: bool = False) -> None:
        """Write the buffered rows as a row group; with ``close`` also close the file."""
        self._flush_row_group()
        if close:
            self._close_file()

    def _close_file(self) -> None:
        if self._writer is not None and self._sink is not None:
            if self.encoder is not None:
                self._writer.add_key_value_metadata(self.encoder.metadata())
            self._writer.close()
            self.sizes.append(self._sink.tell())
            self._sink.close()
        self._writer, self._sink = None, None

    def close_files(self) -> list[FileIndex]:
        """Flush and close; the index of every file written (paths relative to the segment)."""
        self._flush_row_group()
        self._close_file()
        indexes = []
        for name, tracker in zip(self.files, self.nan, strict=True):
            fi = read_file_index(self.fs, f"{self.s.segment_dir}/{name}", rel_path=name)
            tracker.apply(fi)
            indexes.append(fi)
        return indexes

    def finish(self) -> tuple[str | None, int]:
        """Flush, close, write the task's .carbonindex; returns (index name, size)."""
        return self.write_index(self.close_files())

    def write_index(self, indexes: list[FileIndex]) -> tuple[str | None, int]:
        """Write the task's ONE .carbonindex over ``indexes``; returns (index name, size)."""
        if not indexes:
            return None, 0
        header, blooms = pack(
            indexes,
            segment_id=self.s.segment_id,
            task_id=self.task_id,
            column_ids=index_column_ids(self.s.columns),
        )
        index_name = f"{self.task_id}-{uuid.uuid4().hex[:16]}.carbonindex"
        size = write_index(self.fs, f"{self.s.segment_dir}/{index_name}", header, blooms)
        return index_name, size

    def abort(self) -> None:
        """Best effort: remove what this task wrote (the driver removes the folder too)."""
        try:
            if self._writer is not None:
                self._writer.close()
            if self._sink is not None:
                self._sink.close()
        except OSError:
            pass
        for name in self.files:
            try:
                self.fs.delete_file(f"{self.s.segment_dir}/{name}")
            except OSError:
                continue


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Select the table columns by name (case-insensitive) and cast to the table types."""
    by_lower = {n.lower(): i for i, n in enumerate(batch.schema.names)}
    arrays = []
    for f in schema:
        i = by_lower.get(f.name)
        if i is None:
            if not f.nullable:
                raise SchemaError(f"the input has no column {f.name!r}, which is NOT NULL")
            arrays.append(pa.nulls(batch.num_rows, f.type))
            continue
        arr = batch.column(i)
        if arr.type != f.type:
            arr = arr.cast(f.type)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def write_task(
    batches: Iterable[pa.RecordBatch],
    settings: WriteSettings,
    *,
    task_id: str,
    fs: AnyFS | None = None,
) -> TaskResult:
    """Write one task's rows into the segment folder and index them.

    Args:
        batches: the task's rows; table columns (any order, matched by name) plus the
            optional hidden ``__carbon_bad``/``__carbon_raw`` columns.
        settings: resolved on the driver.
        task_id: unique within the load (Spark's partition id, padded).
        fs: the store's filesystem (default: resolved from ``settings.store_location``).

    Returns:
        The commit message for the driver.
    """
    if fs is None:
        fs = resolve_fs(settings.store_location)
    tw: _TaskWriter | PartitionedWriter
    if settings.partitioning is not None and not settings.partitioning.is_empty:
        tw = PartitionedWriter(settings, task_id, fs, make=_TaskWriter)
    else:
        tw = _TaskWriter(settings, task_id, fs)
    not_null = tuple(c.name for c in settings.columns if not c.nullable)
    redirect = settings.action == "REDIRECT"
    sink = _bad_record_sink(settings, task_id, redirect)
    bad = 0
    try:
        for batch in _iter(batches):
            split = split_batch(
                _with_hidden(batch, tw.schema),
                not_null=not_null,
                action=settings.action,
                want_raw=redirect or (settings.action == "FAIL" and len(sink.samples) < 3),
            )
            if split.bad_count:
                bad += split.bad_count
                sink.add(split.bad_raw)
            if settings.action == "FAIL" and bad:
                continue  # the load fails at commit; keep counting, stop writing
            tw.add(split.kept)
        if settings.action == "FAIL" and bad:
            tw.abort()
            index_name, index_size = None, 0
            tw.files.clear()
            tw.sizes.clear()
            tw.rows = 0
        else:
            index_name, index_size = tw.finish()
    except BaseException:
        tw.abort()
        raise
    finally:
        sink.close()
    return TaskResult(
        task_id=task_id,
        files=tuple(tw.files),
        rows=tw.rows,
        data_bytes=sum(tw.sizes),
        index_file=index_name,
        index_bytes=index_size,
        bad_records=bad,
        bad_record_file=sink.path,
        bad_samples=tuple(sink.samples),
        stats=tw.stats.to_bytes().decode() if tw.stats is not None and tw.rows else None,
    )


def _bad_record_sink(settings: WriteSettings, task_id: str, redirect: bool) -> BadRecordSink:
    if not redirect or not settings.bad_record_dir:
        return BadRecordSink(local_disk(), None, task_id)
    bfs = resolve_fs(settings.bad_record_dir)
    return BadRecordSink(bfs, bfs.base, task_id)


def _iter(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for b in batches:
        if isinstance(b, pa.Table):
            yield from b.to_batches()
        else:
            yield b


def _with_hidden(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The table columns conformed to ``schema`` plus any hidden columns, unchanged."""

    hidden = [n for n in batch.schema.names if n in HIDDEN_COLUMNS]
    data = _conform(batch, _nullable(schema))
    if not hidden:
        return data
    arrays = [*data.columns, *(batch.column(n) for n in hidden)]
    names = [*data.schema.names, *hidden]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _nullable(schema: pa.Schema) -> pa.Schema:
    """Same schema with every field nullable: NOT NULL is enforced by bad-record handling."""
    return pa.schema([f.with_nullable(True) for f in schema])
