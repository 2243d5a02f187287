"""The driver side of analyze and of a load's or compaction's statistics: which segments to
analyze, and storing what the tasks' accumulators computed.

Reading a segment's data files (its delete deltas applied) is the segments package's part
(:mod:`carbonstore.segments.analyze`); statistics never import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from carbonstore.errors import SegmentNotFoundError, UserError
from carbonstore.statistics.accumulator import StatsAccumulator
from carbonstore.statistics.evolution import written_statistics
from carbonstore.statistics.model import SegmentStatistics, StatisticsScope, kind_of
from carbonstore.statistics.store import (
    delete_segment_statistics,
    get_segment_statistics,
    update_segment_statistics,
)

if TYPE_CHECKING:
    from carbonstore.store.table import Table

__all__ = ["analyze_targets", "store_accumulated", "store_task_statistics", "table_column_specs"]


def analyze_targets(
    table: Table, segments: Sequence[str] | None = None, *, missing_only: bool = False
) -> list[str]:
    """The segments to analyze: the given ones (each must be readable) or every readable one.

    Raises:
        SegmentNotFoundError: a given id is not a Success / Partial Success segment.
    """
    snap = table.status.read()
    if segments is not None:
        if not segments:
            raise UserError("--segments: Segment ids should not be empty")
        out = []
        for sid in segments:
            entry = snap.find(sid)
            if entry is None or not entry.readable:
                state = "does not exist" if entry is None else f"is {entry.status}"
                raise SegmentNotFoundError(
                    f"segment {sid} of {table.name} {state}; only Success and Partial Success "
                    "segments can be analyzed (see 'carbonstore show-segments')"
                )
            out.append(sid)
    else:
        out = [e.load_name for e in snap.readable]
    if missing_only:
        # a damaged statistics file counts as missing: analyze rewrites it
        out = [sid for sid in out
               if get_segment_statistics(table, sid, damaged_as_missing=True) is None]
    return out


def table_column_specs(table: Table) -> list[tuple[str, str]]:
    """(name, type) of every table column: what an accumulator on an executor needs."""
    return [(c.name, str(c.type)) for c in table.schema.columns if not c.type.is_nested]


def store_accumulated(
    table: Table, states: Mapping[str, Sequence[bytes | str]], targets: Sequence[str],
    spec: Sequence[tuple[str, str]], *, columns: Sequence[str] | None = None,
    source: str = "analyze",
) -> list[SegmentStatistics]:
    """Merge each target segment's task states and store its statistics.

    With ``columns`` the other columns already stored are kept; without, the segment's
    statistics are replaced.
    """
    out = []
    snap = table.status.read()
    for sid in targets:
        acc = StatsAccumulator.merge_all(states.get(sid, []), spec, columns=columns)
        stats = acc.finish(StatisticsScope(table=str(table.name), segment_id=sid), source=source)
        # stored under the names of the segment's schema version, as its files name them
        stats = written_statistics(table, stats, snap)
        out.append(update_segment_statistics(table, stats, replace_all=columns is None))
    # A segment deleted and cleaned while it was analyzed must not keep statistics.
    snap = table.status.read()
    for sid in targets:
        if snap.find(sid) is None:
            delete_segment_statistics(table, sid)
    return out


def store_task_statistics(
    table: Table, segment_id: str, results: Sequence[Any], *, source: str = "load"
) -> SegmentStatistics | None:
    """Store a written segment's statistics from its tasks' results (driver side of a
    load or compaction commit). Each result has ``rows`` and ``stats`` (accumulator state).

    Returns None (and stores nothing) when a task that wrote rows sent no statistics.
    """
    if any(r.rows and r.stats is None for r in results):
        return None
    states = [r.stats for r in results if r.stats]
    acc = (StatsAccumulator.from_bytes(states[0]) if states
           else StatsAccumulator(table_column_specs(table)))
    for state in states[1:]:
        acc.merge(StatsAccumulator.from_bytes(state))
    stats = acc.finish(StatisticsScope(table=str(table.name), segment_id=segment_id),
                       source=source)
    # A writer that was given another type than the table's (e.g. a global-dictionary
    # string column declared as its INT32 surrogates, where surrogate 1 is null) computed
    # statistics of another family: they would not merge with the other segments' and are
    # not stored ('carbonstore analyze --columns' computes them from the files).
    kinds = {name.lower(): kind_of(t) for name, t in table_column_specs(table)}
    keep = [c.column for c in stats.columns if kinds.get(c.column) == c.kind]
    if len(keep) != len(stats.columns):
        stats = stats.select(keep)
    return update_segment_statistics(table, stats, replace_all=True)
