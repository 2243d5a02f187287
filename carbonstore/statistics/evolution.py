"""Stored segment statistics of an older schema version, as the table's current columns.

A segment's statistics are stored under the column names of the schema version its files
were written with - at write time (load, compaction, DML insert) as its files name them,
and ``analyze`` stores what it computed under those names too (:func:`written_statistics`),
so one rule holds for every stored file. The table-level merge reads them through the
segment's projection (store/evolution.py, by column id; :func:`current_statistics`):

- a renamed column's statistics are the same values under the new name;
- a column added after the segment was written holds its default in every row of it: one
  distinct value (no null), or all nulls without a default - computed from one row of the
  default and scaled to the segment's rows, so no data file is read;
- a widened column keeps its values (and so its statistics) when its family is the same
  (int -> long, float -> double, decimal precision); otherwise it is left out (analyze
  recomputes it);
- dropped columns are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa

from carbonstore.errors import UserError
from carbonstore.statistics.accumulator import StatsAccumulator
from carbonstore.statistics.model import ColumnStatistics, SegmentStatistics, kind_of
from carbonstore.store.evolution import ColumnSource, Projection, default_array, segment_projections
from carbonstore.store.schema import arrow_type

if TYPE_CHECKING:
    from carbonstore.store.table import Table
    from carbonstore.store.tablestatus import TableStatusSnapshot

__all__ = ["current_statistics", "written_statistics"]

_COUNTS = ("num_nulls", "num_trues", "num_falses", "num_nans")  # per row: scaled by rows


def current_statistics(
    table: Table, stats: Sequence[SegmentStatistics], snapshot: TableStatusSnapshot,
) -> list[SegmentStatistics]:
    """``stats`` (of segments of ``snapshot``) with the table's current column names and
    the columns added since each segment was written (see the module docstring)."""
    entries = [e for e in (snapshot.find(s.segment_id) for s in stats) if e is not None]
    projections = segment_projections(table, entries)
    return [_as_current(s, projections[s.segment_id]) if s.segment_id in projections else s
            for s in stats]


def written_statistics(
    table: Table, stats: SegmentStatistics, snapshot: TableStatusSnapshot,
) -> SegmentStatistics:
    """``stats`` computed with the table's current columns, as the segment's files name them
    (what is stored): renamed columns under their written name; columns added since the
    segment was written are left out (their default is what :func:`current_statistics`
    gives them)."""
    entry = snapshot.find(stats.segment_id)
    proj = segment_projections(table, [entry]).get(stats.segment_id) if entry else None
    if proj is None:
        return stats
    columns: list[ColumnStatistics] = []
    sketches: dict[str, bytes] = {}
    for source in proj:
        got = stats.find(source.name)
        if got is None or source.physical is None or source.written is None:
            continue
        physical = source.physical.lower()
        columns.append(replace(got, column=physical, type=str(source.written.type)))
        if source.name in stats.sketches:
            sketches[physical] = stats.sketches[source.name]
    return replace(stats, columns=tuple(columns), sketches=sketches)


def _as_current(stats: SegmentStatistics, proj: Projection) -> SegmentStatistics:
    columns: list[ColumnStatistics] = []
    sketches: dict[str, bytes] = {}
    for source in proj:
        if source.column.type.is_nested:
            continue
        if source.physical is None:
            got = _default_statistics(stats, source)
            if got is not None:
                columns.append(got[0])
                if got[1] is not None:
                    sketches[source.name] = got[1]
            continue
        old = stats.find(source.physical)
        if old is None or old.kind != _kind(str(source.column.type)):
            continue
        columns.append(replace(old, column=source.name, type=str(source.column.type)))
        sketch = stats.sketches.get(source.physical.lower())
        if sketch is not None:
            sketches[source.name] = sketch
    return replace(stats, columns=tuple(columns), sketches=sketches)


def _kind(type_name: str) -> str | None:
    try:
        return kind_of(type_name)
    except UserError:
        return None


def _default_statistics(
    stats: SegmentStatistics, source: ColumnSource,
) -> tuple[ColumnStatistics, bytes | None] | None:
    """Statistics of ``stats.row_count`` rows of the column's default, and its sketch."""
    type_name = str(source.column.type)
    if _kind(type_name) is None:
        return None
    acc = StatsAccumulator([(source.name, type_name)])
    acc.update(pa.table({source.name: default_array(source.column, 1,
                                                    arrow_type(source.column.type))}))
    one = acc.finish(stats.scope, source=stats.source, last_analyzed=stats.last_analyzed)
    col = one.columns[0]
    rows = stats.row_count
    scaled = {name: getattr(col, name) * rows for name in _COUNTS if hasattr(col, name)}
    return replace(col, **scaled), one.sketches.get(source.name)
