"""Which segments a compaction merges (pure: a tablestatus snapshot and the conf in, a
:class:`MergeGroup` out; docs/compaction.md).

MINOR merges per level once a level's count reaches its threshold, MAJOR merges consecutive
segments while their total stays under a size, CUSTOM merges exactly the given segments,
CLUSTER merges the readable segments not yet clustered as asked (docs/clustering.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from carbonstore.errors import CompactionError
from carbonstore.store.conf import CarbonConf
from carbonstore.store.tablestatus import (
    COMPACTED,
    READABLE_STATUSES,
    LoadEntry,
    TableStatusSnapshot,
    next_compacted_name,
    now_ms,
    segment_sort_key,
)

__all__ = [
    "COMPACTION_TYPES",
    "CompactionType",
    "MergeGroup",
    "plan_cluster",
    "plan_compaction",
    "plan_custom",
    "plan_major",
    "plan_minor",
    "segment_level",
]

CompactionType = Literal["minor", "major", "custom", "cluster"]
COMPACTION_TYPES: tuple[CompactionType, ...] = ("minor", "major", "custom", "cluster")
_MB = 1024 * 1024
_DAY_MS = 24 * 3600 * 1000
#: tables of this many entries or more are planned from the status columns
_COLUMNS_FROM = 2_000


@dataclass(frozen=True, slots=True, kw_only=True)
class MergeGroup:
    """One merge: these sources (in segment order) become ``output``."""

    compaction_type: CompactionType
    sources: tuple[str, ...]
    output: str

    @property
    def major(self) -> bool:
        return self.compaction_type == "major"

def segment_level(load_name: str) -> int:
    """How many times a segment was merged: ``3`` is level 0, ``3.1`` level 1, ``3.2`` level 2."""
    return segment_sort_key(load_name)[1]


@dataclass(frozen=True, slots=True)
class _Candidate:
    """What planning looks at of a readable segment."""

    load_name: str
    data_size: int
    major_compacted: bool


def _candidates(
    snapshot: TableStatusSnapshot, conf: CarbonConf, now: int
) -> Iterator[_Candidate]:
    """Readable segments in segment order, minus the preserved newest and the too old.

    A big table's are taken from the status columns (its checkpoint's, with the versions
    since spliced in): planning at 100,000 segments builds no entry."""
    if len(snapshot.view) >= _COLUMNS_FROM:
        names, sizes, majors, starts = _readable_columns(snapshot)
    else:
        valid = sorted((e for e in snapshot.entries if e.readable),
                       key=lambda e: segment_sort_key(e.load_name))
        names = [e.load_name for e in valid]
        sizes = [e.data_size for e in valid]
        majors = [e.major_compacted for e in valid]
        starts = [e.load_start_time for e in valid]
    keep = len(names)
    preserve = max(0, conf.get_int("carbon.compaction.preserve.segments"))
    if preserve:
        keep = max(0, keep - preserve)
    days = conf.get_int("carbon.allowed.compaction.days")
    oldest = now - days * _DAY_MS if days > 0 else None
    return (_Candidate(names[i], sizes[i], majors[i]) for i in range(keep)  # built as planned
            if oldest is None or starts[i] >= oldest)


def _readable_columns(snapshot: TableStatusSnapshot) -> tuple[list[str], list[int], list[bool], list[int]]:
    """(names, data sizes, major-compacted flags, load start times) of the readable
    entries in segment order, from the status columns."""
    names, (sizes, majors, starts) = snapshot.view.readable_values(
        "data_size", "major_compacted", "load_start_time")
    if any("." in n for n in names):
        order = sorted(range(len(names)), key=lambda i: segment_sort_key(names[i]))
    else:
        order = np.argsort(np.fromiter(map(int, names), dtype=np.int64, count=len(names)),
                           kind="stable").tolist()
    return ([names[i] for i in order], [sizes[i] for i in order],  # type: ignore[misc]
            [majors[i] for i in order], [starts[i] for i in order])  # type: ignore[misc]


def plan_minor(
    snapshot: TableStatusSnapshot, conf: CarbonConf, *, now: int | None = None
) -> MergeGroup | None:
    """The next MINOR merge, or None.

    Segments are counted per level in segment order; the first level whose count reaches
    its threshold (``compaction_level_threshold``, e.g. ``4,3``) is merged. A threshold of
    1 or less never merges (a group of one would only rename). Segments above the minor
    size limit, major-compacted segments and segments already at the last level are left
    alone.
    """
    thresholds = conf.get_int_list("carbon.compaction.level.threshold")
    if not thresholds:
        return None
    size_limit = conf.get_int("carbon.minor.compaction.size") * _MB
    per_level: dict[int, list[str]] = {}
    for e in _candidates(snapshot, conf, now_ms() if now is None else now):
        level = segment_level(e.load_name)
        if e.major_compacted or level >= len(thresholds):
            continue
        if size_limit > 0 and e.data_size > size_limit:
            continue
        if thresholds[level] <= 1:
            continue
        group = per_level.setdefault(level, [])
        group.append(e.load_name)
        if len(group) == thresholds[level]:
            return MergeGroup(
                compaction_type="minor", sources=tuple(group), output=next_compacted_name(group[0])
            )
    return None


def plan_major(
    snapshot: TableStatusSnapshot, conf: CarbonConf, *, now: int | None = None
) -> MergeGroup | None:
    """The next MAJOR merge: consecutive segments while their total stays under the threshold.

    A segment that alone exceeds ``major_compaction_size`` (MB) breaks the run; a run of
    fewer than two segments is not merged.
    """
    limit = conf.get_int("carbon.major.compaction.size") * _MB
    run: list[_Candidate] = []
    total = 0
    for e in _candidates(snapshot, conf, now_ms() if now is None else now):
        if e.data_size > limit:
            if len(run) > 1:
                break
            run, total = [], 0
            continue
        if total + e.data_size < limit:
            run.append(e)
            total += e.data_size
        elif len(run) > 1:
            break
        else:
            run, total = [e], e.data_size
    if len(run) < 2:
        return None
    names = tuple(e.load_name for e in run)
    return MergeGroup(compaction_type="major", sources=names, output=next_compacted_name(names[0]))


def plan_custom(snapshot: TableStatusSnapshot, segment_ids: Sequence[str] | None) -> MergeGroup:
    """Exactly the given segments, at least two; every one must exist, be readable
    (Success or Partial Success) and not yet compacted.

    Raises:
        CompactionError: no ids, a single id, an id given twice, or an id that is missing,
            compacted or not readable.
    """
    ids = [s.strip() for s in (segment_ids or []) if s.strip()]
    if not ids:
        raise CompactionError("Segment ids should not be empty: pass --segments 1,2,3")
    if len(set(ids)) != len(ids):
        raise CompactionError(f"segment ids {','.join(ids)} name a segment twice")
    one = snapshot.find(ids[0]) if len(ids) == 1 else None
    if len(ids) < 2 and not (one is not None and one.delete_deltas and one.readable):
        # As minor and major: merging one segment would only rewrite it under a new id
        # (unless rows of it were deleted: the rewrite then purges them).
        raise CompactionError(
            f"custom compaction merges at least two segments, got only segment {ids[0]}: "
            "pass two or more ids, e.g. --segments 1,2"
        )
    _check_ids(snapshot, ids)
    names = tuple(sorted(ids, key=segment_sort_key))
    return MergeGroup(compaction_type="custom", sources=names, output=next_compacted_name(names[0]))


def _check_ids(snapshot: TableStatusSnapshot, ids: Sequence[str]) -> None:
    """Every id exists, is readable and visible, and is not compacted."""
    for sid in ids:
        e = snapshot.find(sid)
        if e is None:
            raise CompactionError(
                f"segment {sid} does not exist; 'carbonstore show-segments' lists the segments"
            )
        if e.status == COMPACTED:
            raise CompactionError(
                f"segment {sid} is already compacted into {e.merged_load_name}; "
                f"compact {e.merged_load_name} instead"
            )
        if e.status not in READABLE_STATUSES:
            raise CompactionError(
                f"segment {sid} has status {e.status!r}; only Success or Partial Success "
                "segments can be compacted"
            )
        if not e.readable:
            raise CompactionError(
                f"segment {sid} is invisible (tablestatus visibility false); only visible "
                "segments can be compacted"
            )


def plan_cluster(
    snapshot: TableStatusSnapshot,
    clustered: Callable[[LoadEntry], bool],
    *,
    segment_ids: Sequence[str] | None = None,
    allowed: Callable[[LoadEntry], bool] | None = None,
) -> MergeGroup | None:
    """The readable segments (or exactly ``segment_ids``) that are not ``clustered`` yet, as
    one merge; None when every candidate already is (incremental clustering: a segment
    clustered on the asked columns and curve is never rewritten again).

    ``allowed``: only segments it accepts (``--where``: segments that may hold matching
    rows). A single segment is a valid group: clustering rewrites its order.

    Raises:
        CompactionError: an id given twice, missing, compacted or not readable.
    """
    if segment_ids is not None:
        ids = [s.strip() for s in segment_ids if s.strip()]
        if not ids:
            raise CompactionError("Segment ids should not be empty: pass --segments 1,2,3")
        if len(set(ids)) != len(ids):
            raise CompactionError(f"segment ids {','.join(ids)} name a segment twice")
        _check_ids(snapshot, ids)
        pool = [snapshot.get(s) for s in ids]
    else:
        pool = [e for e in snapshot.entries if e.readable]
    todo = sorted((e for e in pool if not clustered(e) and (allowed is None or allowed(e))),
                  key=lambda e: segment_sort_key(e.load_name))
    if not todo:
        return None
    names = tuple(e.load_name for e in todo)
    return MergeGroup(compaction_type="cluster", sources=names, output=next_compacted_name(names[0]))


def plan_compaction(
    snapshot: TableStatusSnapshot,
    conf: CarbonConf,
    compaction_type: CompactionType,
    *,
    segment_ids: Sequence[str] | None = None,
    now: int | None = None,
) -> MergeGroup | None:
    """The next merge of ``compaction_type`` for this snapshot (None: nothing to do)."""
    if compaction_type == "minor":
        return plan_minor(snapshot, conf, now=now)
    if compaction_type == "major":
        return plan_major(snapshot, conf, now=now)
    if compaction_type == "custom":
        return plan_custom(snapshot, segment_ids)
    if compaction_type == "cluster":
        raise CompactionError("plan a cluster compaction with plan_cluster (it needs the spec)")
    raise CompactionError(
        f"unknown compaction type {compaction_type!r}; use one of {', '.join(COMPACTION_TYPES)}"
    )


