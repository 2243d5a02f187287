"""Compaction's data movement: merge units that read, sort and write the output segment.

The output is cut into *units*: with SORT_COLUMNS, ranges of the first sort column's values
(sampled from a few row groups of the sources; nulls in the first range), so each unit holds
one sorted slice of the output and reads only its slice (row groups outside the range are
skipped by their statistics: source files are sorted, so their bounds are tight); without
them, the source files dealt out by size. ``merge_unit`` reads a unit with pyarrow, sorts
it and writes its Parquet files and ONE ``.carbonindex`` through the load writer
(``segments/writer.py``). The local merger runs the units one after the other in this
process (memory bounded by one unit); ``carbonstore.spark.compact_job`` runs them as Spark
tasks. ``finish_segment`` then writes the ``.carbonindexmerge`` on the driver.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from carbonstore.dictionary.column import load_dictionary
from carbonstore.errors import CarbonStoreError, CompactionError
from carbonstore.indexfiles.indexfile import merge_indexes, read_index
from carbonstore.segments.deltas import decode_delta, deltas_by_path, live_rows, positions
from carbonstore.segments.load import table_partitioning
from carbonstore.segments.partitions import live_files, with_spec
from carbonstore.segments.unify import file_columns, unify
from carbonstore.segments.writer import (
    ColumnSpec,
    TaskResult,
    WriteSettings,
    arrow_schema,
    write_task,
)
from carbonstore.statistics.analyze import store_task_statistics
from carbonstore.statistics.model import SegmentStatistics, StatisticsScope, merge_column
from carbonstore.statistics.store import (
    get_segment_statistics,
    stats_path,
    update_segment_statistics,
)
from carbonstore.store.evolution import segment_projections
from carbonstore.store.fs import resolve_fs
from carbonstore.store.partitioning import PartitionSpec
from carbonstore.store.table import StoreRoot, Table
from carbonstore.store.tablestatus import LoadEntry, now_ms

__all__ = [
    "KeyRange",
    "SegmentOutput",
    "WorkUnit",
    "finish_segment",
    "key_ranges",
    "merge_evolved",
    "merge_local",
    "merge_unit",
    "ordered_files",
    "rank_columns",
    "read_source_rows",
    "segment_data_files",
    "sort_keys",
    "source_deltas",
    "sources_have_statistics",
    "work_units",
    "write_output_statistics",
    "write_segment",
    "write_settings",
    "writer_batches",
]

_MB = 1024 * 1024
UNIT_BYTES = 128 * _MB
_SAMPLE_ROWS = 1 << 20
_SCAN_BATCH_ROWS = 1 << 22

# (unit index, lower bound inclusive or None, upper bound exclusive or None, holds nulls)
KeyRange = tuple[int, Any, Any, bool]
# A unit: a key range, or (unit index, source files) when the table has no SORT_COLUMNS.
WorkUnit = KeyRange | tuple[int, list[str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentOutput:
    """What a merger wrote into the output segment folder."""

    row_count: int
    data_size: int
    index_size: int
    segment_file: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The writer tasks' commit messages (they carry statistics when computed while writing).
    tasks: tuple[TaskResult, ...] = ()


def segment_data_files(table: Table, load_name: str) -> list[str]:
    """Full paths of a segment's data files, as its index names them.

    The ``.carbonindexmerge`` (else the task ``.carbonindex`` files) is the list of what the
    commit accepted; a segment without any index (written by an older tool) falls back to
    the Parquet files of its folder.
    """

    sfs = table.paths.sfs
    seg_dir = table.paths.segment_dir(load_name)
    names = sorted(i.base_name for i in sfs.list_dir(seg_dir) if i.is_file)
    merged = [n for n in names if n.endswith(".carbonindexmerge")]
    indexes = merged[-1:] if merged else [n for n in names if n.endswith(".carbonindex")]
    if indexes:
        files: list[str] = []
        for name in indexes:
            header = read_index(sfs, f"{seg_dir}/{name}").header  # paths checked there
            files.extend(f"{seg_dir}/{f.path}" for f in header.files or [])
        return files
    return [f"{seg_dir}/{n}" for n in names if n.endswith(".parquet")]


def sort_keys(table: Table) -> list[tuple[str, str, str]]:
    """pyarrow sort keys for the table's SORT_COLUMNS (empty when it has none).

    Nulls first, as Spark's ascending sort (and so a load) orders them; the merge sort
    adds a key per float column that puts NaN after every number, as Spark does.
    """
    return [(c, "ascending", "at_start") for c in table.schema.sort_columns]


def write_settings(
    table: Table, segment_id: str, *, statistics: bool = True
) -> WriteSettings:
    """The load writer's settings for an output segment of ``table``.

    ``statistics``: compute column statistics while writing (not needed when every source
    has statistics: they are merged instead, see ``write_output_statistics``).

    Dictionary columns hold global surrogates (INT32) in the data files; compaction copies
    them as they are (the dictionary is global, so no re-encoding is needed).
    """
    conf = table.conf
    dict_cols = {c.lower() for c in table.schema.dictionary_columns}
    columns = []
    for c in table.schema.columns:
        spec = ColumnSpec.from_column(c)
        if c.name.lower() in dict_cols:
            spec = replace(spec, type="int", precision=0, scale=0, nullable=False)
        columns.append(spec)
    return WriteSettings(
        store_location=table.store.location,
        segment_id=segment_id,
        segment_dir=table.paths.segment_dir(segment_id),
        columns=tuple(columns),
        page_rows=conf.get_int("carbon.page.rows"),
        blocklet_bytes=int(conf.get_float("carbon.blocklet.size.in.mb") * _MB),
        block_bytes=int(conf.get_float("carbon.table.block.size.in.mb") * _MB),
        bloom_columns=tuple(table.schema.bloom_columns),
        bloom_fpp=conf.get_float("carbon.bloom.fpp"),
        # Recorded in the files' sorting metadata: stop at a dictionary column, whose
        # surrogates do not follow value order.
        sort_columns=tuple(
            itertools.takewhile(lambda c: c.lower() not in dict_cols, table.schema.sort_columns)
        ),
        table_name=str(table.name),
        statistics=statistics,
        action="FAIL",
        partitioning=table_partitioning(table),  # the output is written with the current spec
    )


def write_segment(
    table: Table, segment_id: str, tasks: Sequence[Sequence[pa.RecordBatch]]
) -> SegmentOutput:
    """Write one segment folder through the load writer: per task its Parquet files and one
    ``.carbonindex``, then the segment's ``.carbonindexmerge``. Nothing is committed here."""
    settings = write_settings(table, segment_id)
    table.paths.sfs.makedirs(settings.segment_dir)
    results = [
        write_task(batches, settings, task_id=f"{n:05d}", fs=table.paths.sfs)
        for n, batches in enumerate(tasks)
        if batches
    ]
    return finish_segment(table, segment_id, results, partitioning=settings.partitioning)


def finish_segment(
    table: Table, segment_id: str, tasks: Sequence[TaskResult], *,
    partitioning: PartitionSpec | None = None,
) -> SegmentOutput:
    """Driver side: merge the task indexes into the segment's ``.carbonindexmerge``.

    ``partitioning``: the spec the tasks wrote with, recorded in the output's entry."""

    sfs = table.paths.sfs
    seg_dir = table.paths.segment_dir(segment_id)
    bad = sum(t.bad_records for t in tasks)
    if bad:
        raise CarbonStoreError(f"compaction into {segment_id} met {bad} invalid rows; aborted")
    index_files = [t.index_file for t in tasks if t.index_file]
    # Files of failed or speculative task attempts that no commit message names.
    keep = {f for t in tasks for f in t.files} | set(index_files)
    for info in sfs.list_dir(seg_dir):
        if info.is_file and info.base_name not in keep:
            sfs.delete_file(info.path)
    merge_name = f"{segment_id}_{now_ms()}.carbonindexmerge"
    index_size = merge_indexes(
        sfs, [f"{seg_dir}/{n}" for n in index_files], f"{seg_dir}/{merge_name}",
        segment_id=segment_id,
    )
    return SegmentOutput(
        row_count=sum(t.rows for t in tasks),
        data_size=sum(t.data_bytes for t in tasks),
        index_size=index_size + sum(t.index_bytes for t in tasks),
        segment_file=merge_name,
        tasks=tuple(tasks),
        extra=with_spec({}, partitioning),
    )


def _sample_column(fs: Any, files: Sequence[str], column: str) -> pa.Array:
    """Values of ``column`` from evenly spread row groups, about ``_SAMPLE_ROWS`` in all."""
    metas: list[tuple[str, int, int]] = []
    for path in files:
        with fs.open_input_file(path) as f:
            md = pq.ParquetFile(f).metadata
            metas.extend((path, i, md.row_group(i).num_rows) for i in range(md.num_row_groups))
    total = sum(m[2] for m in metas)
    step = max(1, math.ceil(total / _SAMPLE_ROWS))
    chunks: list[pa.Array] = []
    by_file: dict[str, list[int]] = {}
    for path, rg, _rows in metas[::step] if step > 1 and len(metas) > 8 else metas:
        by_file.setdefault(path, []).append(rg)
    for path, groups in by_file.items():
        with fs.open_input_file(path) as f:
            pf = pq.ParquetFile(f)
            found = file_columns(pf.schema_arrow, [column], None)  # add-segment: any case
            if not found:
                continue
            col = pf.read_row_groups(groups, columns=found).column(0).combine_chunks()
        if len(col) > _SAMPLE_ROWS // max(1, len(by_file)):
            idx = np.linspace(0, len(col) - 1, _SAMPLE_ROWS // max(1, len(by_file))).astype(np.int64)
            col = col.take(pa.array(idx))
        chunks.append(col if not chunks or col.type == chunks[0].type else col.cast(chunks[0].type))
    return pa.concat_arrays(chunks) if chunks else pa.array([])


def key_ranges(fs: Any, files: Sequence[str], column: str, n: int) -> list[KeyRange]:
    """Cut ``column``'s values into at most ``n`` ranges of about equal row counts.

    Boundaries are sampled values, deduplicated, so every value (and every group of equal
    values) lands in exactly one range; nulls go to the first range and NaN to the last (as
    Spark orders them: NaN after every number; see :func:`_range_filter`).
    """
    if n <= 1:
        return [(0, None, None, True)]
    sample = pc.drop_null(_sample_column(fs, files, column))
    if pa.types.is_floating(sample.type):
        sample = sample.filter(pc.invert(pc.is_nan(sample)))
    if len(sample) == 0:
        return [(0, None, None, True)]
    ordered = sample.take(pc.sort_indices(sample))
    picks = [ordered[int(len(ordered) * k / n)].as_py() for k in range(1, n)]
    bounds: list[Any] = []
    for v in picks:
        if not bounds or v != bounds[-1]:
            bounds.append(v)
    edges = [None, *bounds, None]
    return [(i, edges[i], edges[i + 1], i == 0) for i in range(len(edges) - 1)]


def _range_filter(
    column: str, lo: Any, hi: Any, nulls: bool, *, floating: bool = False
) -> ds.Expression | None:
    """The rows of one key range; NaN (of a ``floating`` column) belongs to the last one."""
    field = ds.field(column)
    expr: ds.Expression | None = None
    if lo is not None:
        expr = field >= lo
        if floating and hi is None:
            expr = expr | pc.is_nan(field)
    if hi is not None:
        expr = (field < hi) if expr is None else (expr & (field < hi))
    if nulls and expr is not None:
        expr = expr | field.is_null()
    return expr


def merge_unit(
    settings: WriteSettings, files: Sequence[str], keys: Sequence[tuple[str, str, str]],
    unit: WorkUnit, *, rank_columns: Sequence[str] = (), deleted: Mapping[str, bytes] | None = None,
) -> TaskResult:
    """One merge task: read the unit's rows with pyarrow, sort, write through the load writer.

    Runs on an executor (Spark merger) or in this process (local merger). ``rank_columns``
    are dictionary sort columns: their surrogates are sorted by the value rank of the
    dictionary's sort index, so the output follows value order as a load's does.
    ``deleted``: data file path -> its delete delta's bytes; those rows are not merged.
    Each file is read as the table's storage schema (segments/unify.py), so files adopted
    with add-segment (nullable fields, other name case) merge with the store's own.
    """
    fs = resolve_fs(settings.store_location)
    target = arrow_schema(settings.columns)
    if keys:
        idx, lo, hi, nulls = unit  # type: ignore[misc]
        key = keys[0][0]
        floating = pa.types.is_floating(target.field(key).type)
        data = read_source_rows(fs, files, target, deleted,
                           lambda name: _range_filter(name, lo, hi, nulls, floating=floating),
                           key)
        data = _sort(data, keys, rank_columns, settings)
    else:
        idx, mine = unit  # type: ignore[misc]
        data = read_source_rows(fs, mine, target, deleted)
    return write_task(writer_batches(data, settings), settings, task_id=f"{idx:05d}", fs=fs)


def writer_batches(data: pa.Table, settings: WriteSettings) -> list[pa.RecordBatch]:
    """``data`` in batches of about an eighth of a row group: the writer cuts a row group
    once its buffered batches reach the blocklet size, so one huge batch (a sorted unit is
    one chunk) would be one huge row group whose min/max prune nothing."""
    per_row = max(1.0, data.nbytes / max(1, data.num_rows))
    rows = int(settings.blocklet_bytes / per_row / 8)
    return data.to_batches(max_chunksize=max(1024, min(1 << 20, rows)))


def read_source_rows(
    fs: Any, files: Sequence[str], target: pa.Schema, deleted: Mapping[str, bytes] | None,
    where: Callable[[str], ds.Expression | None] | None = None, key: str = "",
) -> pa.Table:
    """The rows of ``files`` as ``target`` without their deleted positions; ``where(name)``
    is the key range's filter on column ``key`` under its name in a file (statistics skip
    row groups outside it)."""

    parts: list[pa.Table] = []
    for path in files:
        dataset = fs.parquet_dataset(path)
        names = file_columns(dataset.schema, target.names, None)
        pos = positions(decode_delta(deleted[path], path)) if deleted and path in deleted \
            else None
        if pos is not None and len(pos):  # positions count every row: filter after them
            data = live_rows(dataset.to_table(columns=names, batch_size=_SCAN_BATCH_ROWS), pos)
            data = unify(data, target, source=path)
            expr = where(key) if where is not None else None
            parts.append(data.filter(expr) if expr is not None else data)
            continue
        found = file_columns(dataset.schema, [key], None) if where is not None else []
        expr = where(found[0]) if where is not None and found else None
        # Large scan batches: few chunks make the sort's take much cheaper.
        data = dataset.to_table(columns=names, filter=expr, batch_size=_SCAN_BATCH_ROWS)
        parts.append(unify(data, target, source=path))
    return pa.concat_tables(parts) if parts else target.empty_table()


def source_deltas(table: Table, sources: Sequence[LoadEntry]) -> dict[str, bytes]:
    """Data file path -> its delete delta's bytes, for every source file with one."""

    out: dict[str, bytes] = {}
    for e in sources:
        if e.delete_deltas:
            out.update(deltas_by_path(table.paths.sfs, table.paths.segment_dir(e.load_name), e))
    return out


def _sort(
    data: pa.Table, keys: Sequence[tuple[str, str, str]], rank_columns: Sequence[str],
    settings: WriteSettings,
) -> pa.Table:
    hidden: list[str] = []
    by_key = list(keys)
    if rank_columns:
        table = StoreRoot(settings.store_location).table(settings.table_name)
        by_key = []
        for name, order, nulls in keys:
            if name not in rank_columns:
                by_key.append((name, order, nulls))
                continue
            _, rank = load_dictionary(table, name).sort_index()
            surrogates = data[name].to_numpy(zero_copy_only=False).astype(np.int64)
            # Surrogate 1 is null (first, as Spark sorts nulls); values start at 2.
            ranks = np.full(len(surrogates), -1, dtype=np.int64)
            valid = surrogates >= 2
            ranks[valid] = np.asarray(rank, dtype=np.int64)[surrogates[valid] - 2]
            hidden_name = f"__rank_{name}"
            data = data.append_column(hidden_name, pa.array(ranks))
            hidden.append(hidden_name)
            by_key.append((hidden_name, order, nulls))
    sort_by: list[tuple[str, str, str]] = []
    for name, order, nulls in by_key:
        if pa.types.is_floating(data.schema.field(name).type):
            # pyarrow puts NaN next to the nulls; Spark puts it after every number.
            nan_name = f"__nan_{name}"
            data = data.append_column(nan_name, pc.fill_null(pc.is_nan(data[name]), False))
            hidden.append(nan_name)
            sort_by.append((nan_name, order, nulls))
        sort_by.append((name, order, nulls))
    order_idx = pc.sort_indices(data, sort_keys=sort_by)
    # Sources loaded in key order (time series, increasing ids) arrive sorted: skip the
    # take, the costliest step of the sort.
    if not np.array_equal(order_idx.to_numpy(), np.arange(len(order_idx))):
        data = data.take(order_idx)
    return data.drop_columns(hidden) if hidden else data


def ordered_files(table: Table, sources: Sequence[LoadEntry]) -> list[str]:
    """The sources' data files, by the minimum of the first sort column (footer statistics).

    Files of segments loaded in key order then concatenate into sorted order, and the
    merge skips its sort's take.
    """
    files = [p for e in sources for p in live_files(table, e, segment_data_files(table, e.load_name))]
    keys = sort_keys(table)
    if not keys or rank_columns(table)[:1] == (keys[0][0],):
        return files
    fs = table.paths.sfs
    mins: list[tuple[int, Any, int, str]] = []
    for n, path in enumerate(files):
        with fs.open_input_file(path) as f:
            md = pq.ParquetFile(f).metadata
        # the key's leaf column, by name whatever its case (files adopted with add-segment)
        col = next((i for i in range(md.num_columns)
                    if md.schema.column(i).path.lower() == keys[0][0]), -1)
        lows = [md.row_group(i).column(col).statistics for i in range(md.num_row_groups)] \
            if col >= 0 else []
        if not lows or any(st is None or not st.has_min_max for st in lows):
            return files  # no statistics to order by: keep the order, sorting still works
        mins.append((0, min(st.min for st in lows), n, path))
    try:
        return [m[3] for m in sorted(mins)]
    except TypeError:  # values that do not compare (mixed types): keep the order
        return files


def rank_columns(table: Table) -> tuple[str, ...]:
    """Sort columns stored as dictionary surrogates."""
    dict_cols = {c.lower() for c in table.schema.dictionary_columns}
    return tuple(c for c in table.schema.sort_columns if c.lower() in dict_cols)


def _deal_files(fs: Any, files: Sequence[str], n: int) -> list[tuple[int, list[str]]]:
    """Source files dealt out to ``n`` tasks, largest first onto the lightest task."""
    sizes = sorted(((fs.size(f), f) for f in files), reverse=True)
    count = max(1, min(n, len(files)))
    totals = [0] * count
    out: list[tuple[int, list[str]]] = [(i, []) for i in range(count)]
    for size, f in sizes:
        i = totals.index(min(totals))
        totals[i] += size
        out[i][1].append(f)
    return out


def work_units(table: Table, files: Sequence[str], n: int) -> list[WorkUnit]:
    """Cut the merge of ``files`` into at most ``n`` units (see the module docstring)."""
    if not files:
        raise CompactionError("the segments to compact have no data files")
    keys = sort_keys(table)
    fs = table.paths.sfs
    if keys:
        return list(key_ranges(fs, files, keys[0][0], n))
    return list(_deal_files(fs, files, n))


def unit_count(total_bytes: int, parallelism: int = 1) -> int:
    """Units for ``total_bytes`` of sources: about ``UNIT_BYTES`` each, at least ``parallelism``."""
    return max(1, parallelism, math.ceil(total_bytes / UNIT_BYTES))


def merge_local(table: Table, sources: Sequence[LoadEntry], output_id: str) -> SegmentOutput:
    """Merge in this process with pyarrow, one unit after the other (no JVM).

    Memory holds one unit (about ``UNIT_BYTES`` of Parquet) at a time.
    """
    files = ordered_files(table, sources)
    units = work_units(table, files, unit_count(sum(e.data_size for e in sources)))
    settings = write_settings(
        table, output_id, statistics=not sources_have_statistics(table, sources)
    )
    table.paths.sfs.makedirs(settings.segment_dir)
    keys = sort_keys(table)
    ranks = rank_columns(table)
    deleted = source_deltas(table, sources)
    results = [merge_unit(settings, files, keys, u, rank_columns=ranks, deleted=deleted)
               for u in units]
    return finish_segment(table, output_id, results, partitioning=settings.partitioning)


def merge_evolved(
    table: Table, sources: Sequence[LoadEntry], output_id: str, projections: dict[str, Any],
    *, settings: WriteSettings | None = None,
    order: Callable[[pa.Table], tuple[Sequence[pa.RecordBatch], WriteSettings]] | None = None,
) -> SegmentOutput:
    """Merge sources of which some were written with an older schema version, in this
    process: each file is read by column id as the current schema (store/evolution.py:
    renamed, added columns as their default, widened), sorted, written by one task with the
    current schema (the units of :func:`merge_local` cut by the current names)."""

    if settings is None:
        settings = write_settings(table, output_id, statistics=True)
    target = arrow_schema(settings.columns)
    fs = table.paths.sfs
    deleted = source_deltas(table, sources)
    parts: list[pa.Table] = []
    for e in sources:
        proj = projections.get(e.load_name)
        # rows of partitions a dynamic overwrite replaced are not compacted
        for path in live_files(table, e, segment_data_files(table, e.load_name)):
            with fs.open_input_file(path) as f:
                data = pq.read_table(f)
            if path in deleted:  # the output has no deleted rows
                data = live_rows(data, positions(decode_delta(deleted[path], path)))
            parts.append(unify(data, target, proj, source=path))
    data = pa.concat_tables(parts) if parts else target.empty_table()
    keys = sort_keys(table)
    table.paths.sfs.makedirs(settings.segment_dir)
    if order is not None:  # a clustering layout (segments/clustering.py): its own batches
        batches, laid = order(data)
        result = write_task(batches, laid, task_id="00000", fs=fs)
    else:
        if keys:
            data = _sort(data, keys, rank_columns(table), settings)
        result = write_task(writer_batches(data, settings), settings, task_id="00000", fs=fs)
    return finish_segment(table, output_id, [result], partitioning=settings.partitioning)


def sources_have_statistics(table: Table, sources: Sequence[LoadEntry]) -> bool:
    """Whether every source segment has stored column statistics (of all its rows: a source
    with deleted rows has none that still hold)."""
    if any(e.delete_deltas for e in sources):
        return False
    return all(table.paths.sfs.exists(stats_path(table, e.load_name)) for e in sources)


def write_output_statistics(
    table: Table, sources: Sequence[LoadEntry], output_id: str, output: SegmentOutput
) -> bool:
    """Store the output segment's column statistics.

    When every source has statistics, they are merged (the output holds exactly the
    sources' rows, so the merge - distinct counts by sketch union - is what a rescan would
    give, at no I/O cost); otherwise the statistics the writer tasks computed while writing
    are stored. Returns False when neither is available (``carbonstore analyze`` computes
    them later).
    """

    stats = [None if e.delete_deltas
             else get_segment_statistics(table, e.load_name, damaged_as_missing=True)
             for e in sources]
    present = [s for s in stats if s is not None]
    # statistics of sources of an older schema version name its columns: not merged
    if not present or len(present) != len(stats) or segment_projections(table, sources):
        stored = store_task_statistics(table, output_id, output.tasks, source="compaction")
        return stored is not None
    scope = StatisticsScope(table=present[0].table, segment_id=output_id)
    columns: list[Any] = []
    sketches: dict[str, bytes] = {}
    for c in present[0].columns:
        parts = [(s.find(c.column), s.row_count, s.sketches.get(c.column)) for s in present]
        if any(p[0] is None or type(p[0]) is not type(c) for p in parts):
            continue  # not in every source (or its type changed): analyze recomputes it
        merged, sketch = merge_column(parts, scope)  # type: ignore[arg-type]
        columns.append(merged)
        if sketch is not None:
            sketches[c.column] = sketch
    update_segment_statistics(
        table,
        SegmentStatistics(
            table=present[0].table, segment_id=output_id,
            row_count=sum(s.row_count for s in present), columns=tuple(columns),
            sketches=sketches, source="compaction",
        ),
        replace_all=True,
    )
    return True
