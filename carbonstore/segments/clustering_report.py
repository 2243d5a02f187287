"""How clustered a segment is: what a point filter on each column keeps (docs/clustering.md).

For every readable segment and every column asked about (by default the columns any
segment is clustered on, plus the table's ``clustering.columns``), a few values are taken
from evenly spread row groups of the segment and the segment alone is planned with
``column = value`` (the pruner of ``carbonstore prune``). The averages of the row groups,
pages and rows kept say how selective the layout makes such a filter: a segment clustered
on the column keeps a small share; an unclustered one keeps nearly everything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from carbonstore.dictionary.column import load_dictionary
from carbonstore.expressions.expr import Eq
from carbonstore.pruning.plan import prune
from carbonstore.segments.clustering import ClusterSpec, segment_clustering, table_clustering
from carbonstore.segments.compaction_merge import segment_data_files
from carbonstore.segments.unify import file_columns
from carbonstore.store.table import Table

__all__ = ["ColumnSelectivity", "SegmentClustering", "clustering_report"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnSelectivity:
    """Averages over the sampled point filters ``column = value`` on one segment."""

    column: str
    filters: int
    pages: int  # the column's pages in the segment
    row_groups_kept: float
    pages_kept: float
    rows_kept: float

    def to_json(self) -> dict[str, Any]:
        return {"column": self.column, "filters": self.filters, "pages": self.pages,
                "rowGroupsKept": round(self.row_groups_kept, 2),
                "pagesKept": round(self.pages_kept, 2), "rowsKept": round(self.rows_kept, 1)}


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentClustering:
    """One segment: its clustering, its size in units, and per column what a point keeps."""

    segment: str
    clustering: ClusterSpec | None
    rows: int
    row_groups: int
    columns: tuple[ColumnSelectivity, ...]

    def to_json(self) -> dict[str, Any]:
        return {"segment": self.segment,
                "clusteredBy": None if self.clustering is None else self.clustering.describe(),
                "rows": self.rows, "rowGroups": self.row_groups,
                "pointFilters": [c.to_json() for c in self.columns]}


def _values(table: Table, segment: str, column: str, samples: int) -> list[Any]:
    """Up to ``samples`` non-null, non-NaN values of ``column`` from spread row groups."""
    fs = table.paths.sfs
    groups: list[tuple[str, int]] = []
    for path in segment_data_files(table, segment):
        with fs.open_input_file(path) as f:
            groups.extend((path, i) for i in range(pq.ParquetFile(f).metadata.num_row_groups))
    if not groups:
        return []
    picks = [groups[int(i)] for i in np.linspace(0, len(groups) - 1, min(samples, len(groups)))]
    per_group = max(1, math.ceil(samples / len(picks)))
    out: list[Any] = []
    for path, rg in picks:
        with fs.open_input_file(path) as f:
            pf = pq.ParquetFile(f)
            found = file_columns(pf.schema_arrow, [column], None)
            if not found:
                continue
            col = pf.read_row_group(rg, columns=found).column(0)
        for i in np.linspace(0, len(col) - 1, per_group).astype(int) if len(col) else []:
            v = col[int(i)].as_py()
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                out.append(v)
    if column.lower() in {c.lower() for c in table.schema.dictionary_columns}:
        dictionary = load_dictionary(table, column)  # the files hold surrogates
        out = [dictionary.value_of(int(s)) for s in out]
    return list(dict.fromkeys(out))[:samples]


def _selectivity(table: Table, segment: str, column: str, samples: int) -> ColumnSelectivity:
    kept = {"row_groups": 0.0, "pages": 0.0, "rows": 0.0}
    values = _values(table, segment, column, samples)
    pages = 0
    for v in values:
        levels = prune(table, Eq(column, v), segments=[segment]).levels
        pages = levels["pages"].total
        for level in kept:
            kept[level] += levels[level].kept
    n = max(1, len(values))
    return ColumnSelectivity(column=column, filters=len(values), pages=pages,
                             row_groups_kept=kept["row_groups"] / n,
                             pages_kept=kept["pages"] / n, rows_kept=kept["rows"] / n)


def clustering_report(
    table: Table, *, columns: Sequence[str] | None = None, segments: Sequence[str] | None = None,
    samples: int = 8,
) -> list[SegmentClustering]:
    """Per readable segment (or the given ids): its clustering and, per column, the average
    row groups / pages / rows a point filter keeps (``samples`` filters per column)."""
    entries = [e for e in table.status.read().entries if e.readable
               and (segments is None or e.load_name in segments)]
    if columns is None:
        found: dict[str, None] = {}
        prop = table_clustering(table)
        for spec in [prop, *(segment_clustering(e) for e in entries)]:
            for c in spec.columns if spec is not None else ():
                found[c] = None
        columns = list(found)
    out = []
    for e in entries:
        full = prune(table, None, segments=[e.load_name]).levels
        out.append(SegmentClustering(
            segment=e.load_name, clustering=segment_clustering(e), rows=e.row_count,
            row_groups=full["row_groups"].total,
            columns=tuple(_selectivity(table, e.load_name, c, samples) for c in columns)))
    return out
