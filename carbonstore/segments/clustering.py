"""Clustering compaction: rewrite segments ordered along a space-filling curve
(docs/clustering.md).

A :class:`ClusterSpec` names 1-4 columns and a curve (``zorder`` or ``hilbert``). The
driver samples the sources' clustering columns once, jointly (the same rows for every
column), and derives (1) each column's grid (``curves.grid_of``: boundaries and codes) and
(2) the cuts of the output into *units* (tasks) of about equal row counts: the top of the
k-d tree that lays every unit out in boxes (``clustering_layout.unit_tree``; units were
curve-key ranges, whose boundaries put one value of the second column at the edge of every
unit). The merge is a shuffle: :func:`split_source` (map) reads ONE source file with
pyarrow (deleted rows dropped, as the table's storage schema) and sends each row to the
unit its order keys fall in; :func:`write_unit` (reduce) lays a unit's rows out in boxes
(``segments/clustering_layout.py``) and writes them through the load writer with pages of
at most ``CLUSTER_PAGE_ROWS`` rows. On Spark the shuffle is Spark's
(``spark/compact_job.py``); :func:`cluster_local` spills the map output to a local
temporary folder. The segment's tablestatus entry records
``"clustering": {"columns": [...], "curve": ...}``.

Every row lands in exactly one unit (keys are compared to the same thresholds in every map
task), so the output holds the sources' rows exactly once; the compaction's row count check
and commit (``segments/compaction.py``) are the ones of any compaction.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from carbonstore.errors import CompactionError
from carbonstore.segments.cluster_spec import (
    CLUSTERING_KEY,
    CURVES,
    MAX_COLUMNS,
    ClusterSpec,
    segment_clustering,
)
from carbonstore.segments.clustering_layout import (
    Node,
    box_order,
    group_rows,
    layout_batches,
    unit_of_rows,
    unit_tree,
)
from carbonstore.segments.compaction_merge import (
    SegmentOutput,
    finish_segment,
    ordered_files,
    read_source_rows,
    source_deltas,
    sources_have_statistics,
    unit_count,
    write_settings,
)
from carbonstore.segments.curves import (
    Grid,
    bits_per_column,
    cell_codes,
    grid_of,
    keys_of,
    order_keys,
)
from carbonstore.segments.unify import file_columns
from carbonstore.segments.writer import TaskResult, WriteSettings, arrow_schema, write_task
from carbonstore.store.fs import resolve_fs
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry

__all__ = [
    "CLUSTERING_KEY",
    "CLUSTER_PAGE_ROWS",
    "ClusterPlan",
    "ClusterSpec",
    "cluster_local",
    "cluster_batches",
    "cluster_plan",
    "cluster_settings",
    "grids_of",
    "split_source",
    "unit_of",
    "write_unit",
    "prepare",
    "resolve_spec",
    "segment_clustering",
    "table_clustering",
]

#: Rows per data page of a clustered segment (at most; the table's page rows if fewer).
CLUSTER_PAGE_ROWS = 8192
#: Rows per data page at least, when a smaller output cuts pages finer (page_rows_for).
MIN_CLUSTER_PAGE_ROWS = 1024
#: Pages cut each clustering column about this many ways (page_rows_for): a 1% range that
#: crosses a cut keeps the boxes on both sides of it, about 2/10 + 1% of the rows where
#: they cross (2/8 + 1% at 8 ways: 3.8x fewer than unclustered).
_CUTS_PER_COLUMN = 10
_SAMPLE_ROWS = 1 << 18


def resolve_spec(table: Table, columns: Sequence[str], curve: str = "zorder") -> ClusterSpec:
    """Check ``columns`` against the schema and build the spec.

    Raises:
        CompactionError: no column, more than four, an unknown or repeated one, a nested
            one, or an unknown curve.
    """
    names = [c.strip().lower() for c in columns if c.strip()]
    if not names:
        raise CompactionError("clustering needs at least one column: pass --by a,b")
    if len(names) > MAX_COLUMNS:
        raise CompactionError(f"clustering takes at most {MAX_COLUMNS} columns, got {len(names)}")
    if len(set(names)) != len(names):
        raise CompactionError(f"clustering columns {','.join(names)} name a column twice")
    if curve not in CURVES:
        raise CompactionError(f"unknown curve {curve!r}; use one of {', '.join(CURVES)}")
    by_name = {c.name.lower(): c for c in table.schema.columns}
    for n in names:
        col = by_name.get(n)
        if col is None:
            raise CompactionError(f"table {table.name} has no column {n!r} to cluster on")
        if col.type.is_nested:
            raise CompactionError(f"cannot cluster on {n!r} of type {col.type}: use a column "
                                  "of a plain type")
    return ClusterSpec(columns=tuple(by_name[n].name for n in names), curve=curve)  # type: ignore[arg-type]


def table_clustering(table: Table) -> ClusterSpec | None:
    """The table's ``clustering.columns`` / ``clustering.curve`` properties (None: not set)."""
    cols = table.schema.list_property("clustering.columns")
    if not cols:
        return None
    return resolve_spec(table, cols, (table.schema.properties.get("clustering.curve") or "zorder").lower())


# ---- planning on the driver -----------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterPlan:
    """What every cluster task needs: the columns' grids and the cuts into units."""

    spec: ClusterSpec
    grids: tuple[Grid, ...]
    #: the unit tree (clustering_layout.unit_tree): thresholds on the columns' order keys
    tree: tuple[Node, ...]
    #: the units, in the curve's order of their sampled rows (task ids)
    units: tuple[int, ...]


def _sample(fs: Any, files: Sequence[str], columns: Sequence[str]) -> pa.Table:
    """About ``_SAMPLE_ROWS`` rows of ``columns`` from evenly spread row groups (the same
    rows for every column, so sampled keys are keys of real rows)."""
    picks: list[tuple[str, int]] = []
    for path in files:
        with fs.open_input_file(path) as f:
            md = pq.ParquetFile(f).metadata
            picks.extend((path, i) for i in range(md.num_row_groups))
    step = max(1, len(picks) // 64)  # at most 64 row groups
    by_file: dict[str, list[int]] = {}
    for path, rg in picks[::step]:
        by_file.setdefault(path, []).append(rg)
    per_file = max(1, _SAMPLE_ROWS // max(1, len(by_file)))
    parts: list[pa.Table] = []
    for path, groups in by_file.items():
        with fs.open_input_file(path) as f:
            pf = pq.ParquetFile(f)
            found = file_columns(pf.schema_arrow, list(columns), None)
            if len(found) != len(columns):
                continue  # a column added later: no values in this file to sample
            data = pf.read_row_groups(groups, columns=found)
        if data.num_rows > per_file:
            data = data.take(np.linspace(0, data.num_rows - 1, per_file).astype(np.int64))
        parts.append(data.rename_columns(list(columns)))
    if not parts:
        return pa.table({c: pa.array([], pa.int64()) for c in columns})
    return pa.concat_tables(parts, promote_options="permissive")


def grids_of(sample: pa.Table, spec: ClusterSpec) -> tuple[Grid, ...]:
    """Each clustering column's grid from a sample of its rows."""
    bits = bits_per_column(len(spec.columns))
    return tuple(grid_of(sample.column(c), bits) for c in spec.columns)


def cluster_plan(
    fs: Any, files: Sequence[str], spec: ClusterSpec, n: int
) -> ClusterPlan:
    """Boundaries of the grid and of ``n`` units, from one joint sample of the sources."""
    if not files:
        raise CompactionError("the segments to cluster have no data files")
    sample = _sample(fs, files, spec.columns)
    grids = grids_of(sample, spec) if sample.num_rows else tuple(
        Grid(bounds=np.zeros(0, np.uint64), codes=np.zeros(2, np.uint64)) for _ in spec.columns)
    if not sample.num_rows:
        return ClusterPlan(spec=spec, grids=grids, tree=(), units=(0,))
    columns = [sample.column(c) for c in spec.columns]
    codes = [cell_codes(c, g) for c, g in zip(columns, grids, strict=True)]
    keys = [order_keys(c, g) for c, g in zip(columns, grids, strict=True)]
    tree, count = unit_tree(codes, keys, max(1, min(n, sample.num_rows)))
    # task ids follow the curve through the units (the files' order, not the pruning)
    curve, sampled = keys_of(codes, spec.curve), unit_of_rows(keys, tree)
    middle = [float(np.median(curve[sampled == u])) for u in range(count)]
    units = tuple(int(r) for r in np.argsort(np.argsort(middle, kind="stable"), kind="stable"))
    return ClusterPlan(spec=spec, grids=grids, tree=tree, units=units)


def page_rows_for(rows: int, columns: int) -> int:
    """Rows per page of a clustered output of ``rows`` rows on ``columns`` columns: enough
    pages that the boxes cut each column about 10 ways (a filter on one column keeps about
    ``pages ** (-1 / columns)``, docs/clustering.md), within
    ``MIN_CLUSTER_PAGE_ROWS .. CLUSTER_PAGE_ROWS``."""
    want = rows // max(1, _CUTS_PER_COLUMN ** columns)
    return max(MIN_CLUSTER_PAGE_ROWS, min(CLUSTER_PAGE_ROWS, want))


def cluster_settings(
    table: Table, output_id: str, *, statistics: bool, rows: int | None = None,
    columns: int = 1,
) -> WriteSettings:
    """The load writer's settings for a clustered output: no sort order recorded (the rows
    follow the curve), pages of at most ``CLUSTER_PAGE_ROWS`` rows (fewer for an output of
    ``rows`` rows, see :func:`page_rows_for`), never more than the table's page rows."""
    base = write_settings(table, output_id, statistics=statistics)
    page = CLUSTER_PAGE_ROWS if rows is None else page_rows_for(rows, columns)
    return replace(base, sort_columns=(), page_rows=min(base.page_rows, page))


# ---- the task -------------------------------------------------------------------------------
def cluster_batches(
    data: pa.Table, spec: ClusterSpec, grids: Sequence[Grid], settings: WriteSettings,
    codes: Sequence[np.ndarray] | None = None, salt: int = 0,
) -> tuple[list[pa.RecordBatch], WriteSettings]:
    """``data`` laid out in boxes (segments/clustering_layout.py): the writer's batches (one
    per row group) and the settings that keep them apart. ``codes``: the rows' grid codes
    when already computed; ``salt``: the unit (staggers the cuts between tasks)."""
    columns = [data.column(c) for c in spec.columns]
    if codes is None:
        codes = [cell_codes(c, g) for c, g in zip(columns, grids, strict=True)]
    keys = [order_keys(c, g) for c, g in zip(columns, grids, strict=True)]
    rows = group_rows(data, settings)
    order = box_order(codes, keys, rows, settings.page_rows, salt=salt)
    return layout_batches(data, order, rows, settings)


def unit_of(keys: Sequence[np.ndarray], plan: ClusterPlan) -> np.ndarray:
    """The task each row goes to, from its order keys on the clustering columns (the unit
    tree's leaf it falls in, numbered in the curve's order)."""
    return np.asarray(plan.units, dtype=np.int64)[unit_of_rows(keys, plan.tree)]


def split_source(
    settings: WriteSettings, path: str, plan: ClusterPlan,
    deleted: Mapping[str, bytes] | None = None,
) -> Iterator[tuple[int, bytes]]:
    """The map side of a cluster merge: ONE source file's live rows, split by the unit their
    curve key falls in, as ``(unit, Arrow IPC stream)`` pairs (the shuffle's records)."""
    fs = resolve_fs(settings.store_location)
    data = read_source_rows(fs, [path], arrow_schema(settings.columns), deleted)
    if not data.num_rows:
        return
    spec = plan.spec
    units = unit_of([order_keys(data.column(c), g)
                     for c, g in zip(spec.columns, plan.grids, strict=True)], plan)
    order = np.argsort(units, kind="stable")
    ordered, runs = data.take(order), units[order]
    starts = np.flatnonzero(np.concatenate(([True], runs[1:] != runs[:-1])))
    for start, stop in zip(starts, [*starts[1:], len(runs)], strict=True):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, ordered.schema) as writer:
            writer.write_table(ordered.slice(int(start), int(stop - start)))
        yield int(runs[start]), sink.getvalue().to_pybytes()


def write_unit(
    settings: WriteSettings, plan: ClusterPlan, unit_index: int, parts: Iterable[bytes]
) -> TaskResult | None:
    """The reduce side: one unit's rows (the IPC streams the map side sent it) laid out in
    boxes and written through the load writer as ONE task (one ``.carbonindex``); None when
    no row fell in the unit."""
    tables = [pa.ipc.open_stream(p).read_all() for p in parts]
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return None
    data = pa.concat_tables(tables)
    batches, laid = cluster_batches(data, plan.spec, plan.grids, settings, salt=unit_index)
    fs = resolve_fs(settings.store_location)
    return write_task(batches, laid, task_id=f"{unit_index:05d}", fs=fs)


def prepare(
    table: Table, sources: Sequence[LoadEntry], output_id: str, spec: ClusterSpec,
    parallelism: int = 1, tasks: int | None = None,
) -> tuple[WriteSettings, list[str], ClusterPlan, dict[str, bytes]]:
    """The driver's part of a cluster merge: settings, source files, plan, deletes."""
    files = ordered_files(table, sources)
    n = tasks or unit_count(sum(e.data_size for e in sources), parallelism)
    plan = cluster_plan(table.paths.sfs, files, spec, n)
    settings = cluster_settings(
        table, output_id, statistics=not sources_have_statistics(table, sources),
        rows=sum(e.row_count for e in sources), columns=len(spec.columns))
    table.paths.sfs.makedirs(settings.segment_dir)
    return settings, files, plan, source_deltas(table, sources)


def cluster_local(
    table: Table, sources: Sequence[LoadEntry], output_id: str, spec: ClusterSpec,
    *, tasks: int | None = None,
) -> SegmentOutput:
    """Cluster in this process (no JVM): every source file is read once and its rows are
    spilled per unit to a local temporary folder, then the units are written one after the
    other (memory holds one file or one unit)."""
    settings, files, plan, deleted = prepare(table, sources, output_id, spec, tasks=tasks)
    with tempfile.TemporaryDirectory(prefix="carbonstore-cluster-") as spill:
        written: dict[int, list[str]] = {}
        for n, path in enumerate(files):
            for unit, part in split_source(settings, path, plan, deleted):
                name = os.path.join(spill, f"{unit:05d}-{n:06d}.arrows")
                with open(name, "wb") as f:
                    f.write(part)
                written.setdefault(unit, []).append(name)
        results = [r for unit in sorted(written)
                   if (r := write_unit(settings, plan, unit, _spilled(written[unit])))]
    return finish_segment(table, output_id, results, partitioning=settings.partitioning)


def _spilled(names: Sequence[str]) -> Iterator[bytes]:
    for name in names:
        with open(name, "rb") as f:
            yield f.read()

