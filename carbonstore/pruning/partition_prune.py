"""Partition pruning: drop whole data files by the partition values their paths record.

A file of a partitioned segment lives in ``<name>=<value>/...`` folders (store/
partitioning.py). For a bound filter, each file's partition values imply statistics of the
source columns of every field: an identity value ``v`` is ``min = max = v``; ``day(ts) =
2024-01-03`` bounds ``ts`` to ``[2024-01-03 00:00, 2024-01-04 00:00)``; ``truncate(3, s) =
'abc'`` bounds ``s`` to ``['abc', 'abd')``; a null value means every value is null. The
file statistics are evaluated by the same :class:`StatsEvaluator` as row groups, so every
operator, AND/OR and null semantics are shared and the result is inclusive: a file is
dropped only when its partition proves that no row matches. Bucket ids (of ``bucket(N, c)``
fields and of table bucketing) are probed for ``=`` and ``IN`` leaves like a bloom filter:
a file whose bucket is not the bucket of any literal is dropped. With several bucket
columns the top-level conjuncts must fix every bucket column.

Files of partitions a dynamic overwrite replaced (the entry's ``removedPartitions``) are
dropped here too: they are not part of the version being read.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from carbonstore.errors import CorruptMetadataError
from carbonstore.expressions.expr import And, BoundRef, Eq, Expr, In, flatten, nodes
from carbonstore.pruning.evaluator import LEVEL_BLOOM, StatsEvaluator, UnitStats
from carbonstore.store.partitioning import (
    PARTITIONING_KEY,
    REMOVED_KEY,
    PartitionKey,
    PartitionSpec,
    bucket_ids,
    entry_spec,
    field_bounds,
    literal_array,
    parse_partition_path,
    partition_of,
    removed_partitions,
)
from carbonstore.store.readable import EntryExtra, ReadableEntries, extras_of
from carbonstore.store.records import Frozen

__all__ = ["PartitionMasks", "applies", "partition_masks"]

Mask = npt.NDArray[np.bool_]
_MAX_COMBINATIONS = 4096  # IN lists over several bucket columns: beyond this, keep all


class PartitionMasks(Frozen):
    """Per unit of the plan, the row groups whose file survives; and files dropped."""

    masks: list[Mask]
    files_dropped: int


def applies(entries: Sequence[Any]) -> bool:
    """True when some entry is partitioned, bucketed or lost partitions to an overwrite."""
    if isinstance(entries, ReadableEntries):  # from the distinct extras, no entry built
        return entries.any_extra((PARTITIONING_KEY, REMOVED_KEY))
    return any(PARTITIONING_KEY in e.extra or REMOVED_KEY in e.extra for e in entries)


def partition_masks(
    view: Any, parts: Sequence[Any], rg_seg: Sequence[npt.NDArray[np.intp]], expr: Expr
) -> PartitionMasks | None:
    """Row-group masks over ``parts`` (plan units) from the files' partitions; None
    when no planned segment is partitioned, or nothing here can drop a file (the filter
    names no partition or bucket column and no segment lost partitions to an overwrite).

    Files are grouped by the spec their segment was written with and by their partition
    folder: each distinct folder is parsed and evaluated once, so a plan over many
    segments of few partitions costs one string operation per file, not one parse.
    """
    entries = view.entries
    if not view.partitioned:  # TableIndex.partitioned: applies(entries), once per view
        return None
    refs = _refs(expr)
    if isinstance(entries, ReadableEntries) and not _may_drop(entries, refs):
        return None  # (what the check below finds of the planned segments, from every extra)
    segs = [np.asarray(rg_seg[pi], dtype=np.int64) for pi in range(len(parts))]
    specs = _Specs()
    # what is read of each planned segment's entry, without building it (readable.py)
    entries = extras_of(entries, _distinct_segments(segs))
    # readable entries share one object per distinct extra: each is parsed once
    lost = specs.parse(entries, list({id(e): si for si, e in entries.items()}.values()))
    if not lost and not any(_names_any(spec, refs) for spec in specs.seen()):
        return None
    # (spec, removed partitions or None) -> [(part, its unit files, their paths)]: a
    # segment's files share its group, found once per distinct entry object (readable
    # entries share one per distinct extra), not once per file
    groups: dict[tuple[PartitionSpec, Any], list[tuple[int, npt.NDArray[np.intp], list[str]]]] = {}
    group_of: dict[int, tuple[PartitionSpec, Any]] = {}
    part_keep: list[Mask] = []
    pair_index: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []
    for pi, arrays in enumerate(parts):
        rg_file = np.asarray(arrays.rg_file, dtype=np.int64)
        pairs = (segs[pi] << 32) | rg_file
        uniq, inverse = np.unique(pairs, return_inverse=True)
        pair_index.append((uniq, np.asarray(inverse).reshape(-1)))
        part_keep.append(np.ones(len(uniq), dtype=bool))
        seg_of = uniq >> 32
        paths = [p or "" for p in _paths(arrays.files, (uniq & 0xFFFFFFFF).tolist())]
        starts = np.flatnonzero(np.concatenate([[True], seg_of[1:] != seg_of[:-1]])) if len(uniq) else \
            np.zeros(0, np.intp)  # each segment's files: a run of uniq (sorted)
        keys = []
        for si in seg_of[starts].tolist():
            e = entries[si]
            key = group_of.get(id(e))
            if key is None:
                gone = frozenset(removed_partitions(e)) if REMOVED_KEY in e.extra else None
                key = group_of[id(e)] = (specs.of(e), gone)
            keys.append(key)
        if len({id(k) for k in keys}) == 1:  # one group (the usual): every file of the part
            groups.setdefault(keys[0], []).append((pi, np.arange(len(uniq), dtype=np.intp), paths))
            continue
        ends = [*starts[1:].tolist(), len(uniq)]
        for key, a, b in zip(keys, starts.tolist(), ends, strict=True):
            groups.setdefault(key, []).append((pi, np.arange(a, b, dtype=np.intp), paths[a:b]))
    dropped = 0
    for (spec, gone), runs in groups.items():
        paths = [p for _, _, ps in runs for p in ps] if len(runs) > 1 else runs[0][2]
        # the folder decides, except for bucketed files (their bucket is in the file name);
        # each distinct folder is parsed and evaluated once
        folders = paths if spec.bucket_number else [p.rpartition("/")[0] for p in paths]
        at = {f: i for i, f in enumerate(dict.fromkeys(folders))}
        distinct = list(at) if spec.bucket_number else [_folder_file(f"{f}/") for f in at]
        keep_f = np.ones(len(distinct), dtype=bool)
        if gone:
            keep_f &= np.array([partition_of(f) not in gone for f in distinct], dtype=bool)
        if not spec.is_empty:
            keep_f &= _evaluate(expr, spec, _keys(spec, distinct))
        keep = keep_f[np.fromiter(map(at.__getitem__, folders), dtype=np.intp, count=len(folders))]
        done = 0
        for pi, ks, ps in runs:
            mine = keep[done:done + len(ps)]
            part_keep[pi][ks[~mine]] = False
            done += len(ps)
        dropped += int((~keep).sum())
    masks = [keep[inv] for keep, (_, inv) in zip(part_keep, pair_index, strict=True)]
    return PartitionMasks(masks=masks, files_dropped=dropped)


class _Specs:
    """Entry -> its PartitionSpec, parsed once per distinct raw value (the entries of a
    checkpoint share their decoded ``partitioning`` objects)."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Any, PartitionSpec]] = {}

    def parse(self, entries: Any, rows: list[int]) -> list[Any]:
        """Parse the specs of entries ``rows``; returns those that lost partitions."""
        out = []
        for si in rows:
            e = entries[si]
            self.of(e)
            if REMOVED_KEY in e.extra:
                out.append(e)
        return out

    def seen(self) -> list[PartitionSpec]:
        return [spec for _, spec in self._by_id.values()]

    def of(self, entry: Any) -> PartitionSpec:
        raw = entry.extra.get(PARTITIONING_KEY)
        got = self._by_id.get(id(raw))
        if got is None or got[0] is not raw:
            got = self._by_id[id(raw)] = (raw, entry_spec(entry))
        return got[1]


def _may_drop(entries: ReadableEntries, refs: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Whether some entry lost partitions or was written with a spec the filter names,
    from the distinct extras (a handful) rather than one look per planned segment: when
    none does, no planned segment does either."""
    _, extras = entries.extra_codes()
    specs = _Specs()
    for x in extras:
        try:
            if REMOVED_KEY in x or _names_any(specs.of(EntryExtra("", x)), refs):
                return True
        except CorruptMetadataError:  # said by the check below, if a planned segment has it
            return True
    return False


def _distinct_segments(segs: Sequence[npt.NDArray[np.int64]]) -> list[int]:
    if not segs:
        return []
    # distinct, sorted (np.unique would load numpy.ma: 8 ms of a fresh lookup)
    return np.flatnonzero(np.bincount(np.concatenate(segs))).tolist()  # type: ignore[no-any-return]


def _refs(expr: Expr) -> tuple[frozenset[str], frozenset[str]]:
    """Names and column ids the filter refers to."""
    names, ids = set(), set()
    for e in nodes(expr):
        term = getattr(e, "term", None)
        if isinstance(term, BoundRef):
            names.add(term.name)
            if term.column is not None and term.column.column_id:
                ids.add(term.column.column_id)
        elif term is not None:
            names.add(str(term).lower())
    return frozenset(names), frozenset(ids)


def _names_any(spec: PartitionSpec, refs: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Whether the filter refers to a partition field's or bucket column's source."""
    names, ids = refs
    for f in spec.fields:
        if (f.source_id and f.source_id in ids) or f.source.lower() in names:
            return True
    return any(c.lower() in names for c in spec.bucket_columns) or any(
        i and i in ids for i in spec.bucket_column_ids)


def _folder_file(path: str) -> str:
    """A stand-in path in the same folder as ``path`` (its partition is the same)."""
    head = path.rpartition("/")[0]
    return f"{head}/_" if head else "_"


def _paths(files: Any, positions: list[int]) -> list[str]:
    """Paths of files ``positions`` of a unit (a snapshot unit takes them as one batch)."""
    batch = getattr(files, "paths", None)
    if batch is not None:
        return batch(positions)
    return [files[i].path for i in positions]


_KEYS: dict[PartitionSpec, dict[str, PartitionKey | None]] = {}
_KEYS_LIMIT = 1 << 18


def _keys(spec: PartitionSpec, paths: list[str]) -> list[PartitionKey | None]:
    """Partition keys of data file paths under ``spec`` (parsed once per process)."""
    if sum(len(c) for c in _KEYS.values()) > _KEYS_LIMIT:
        _KEYS.clear()
    cache = _KEYS.setdefault(spec, {})
    out: list[PartitionKey | None] = []
    for p in paths:
        if p not in cache:
            cache[p] = parse_partition_path(spec.fields, p, buckets=spec.bucket_number)
        out.append(cache[p])
    return out


def _evaluate(expr: Expr, spec: PartitionSpec, keys: list[PartitionKey | None]) -> Mask:
    n = len(keys)
    rounds = max([sum(1 for f in spec.fields if f.source == g.source) for g in spec.fields] or [1])
    out = np.ones(n, dtype=bool)
    for r in range(rounds):
        stats_cache: dict[str, UnitStats | None] = {}

        def stats_for(ref: BoundRef, r: int = r, cache: dict[str, UnitStats | None] = stats_cache) -> UnitStats | None:
            if ref.name not in cache:
                cache[ref.name] = _field_stats(spec, keys, ref, r)
            return cache[ref.name]

        probe = _BucketProbe(spec, keys)
        out &= StatsEvaluator(n, stats_for, level=LEVEL_BLOOM, bloom=probe).evaluate(expr)
    if spec.bucket_number and len(spec.bucket_columns) > 1:
        out &= _multi_bucket(expr, spec, keys)
    return out


def _matches(f: Any, ref: BoundRef) -> bool:
    return (f.source_id and f.source_id == ref.column.column_id) or (
        not f.source_id and f.source == ref.name)


def _field_stats(
    spec: PartitionSpec, keys: list[PartitionKey | None], ref: BoundRef, r: int
) -> UnitStats | None:
    fields = [(i, f) for i, f in enumerate(spec.fields) if _matches(f, ref)]
    n = len(keys)
    if not fields:
        if not _table_bucket_column(spec, ref):
            return None
        none = np.zeros(n, dtype=bool)  # no bounds, only the bucket probe
        return UnitStats(
            floating=False, lo=np.empty(n, dtype=object), hi=np.empty(n, dtype=object),
            lo_ok=none, hi_ok=none, hi_strict=none, null_count=np.full(n, -1, np.int64),
            nan_count=np.zeros(n, np.int64), num_rows=np.ones(n, np.int64), null_unit=none,
        )
    i, f = fields[min(r, len(fields) - 1)]
    t = ref.type
    lo = np.empty(n, dtype=object)
    hi = np.empty(n, dtype=object)
    lo_ok = np.zeros(n, dtype=bool)
    hi_ok = np.zeros(n, dtype=bool)
    strict = np.zeros(n, dtype=bool)
    nulls = np.full(n, -1, dtype=np.int64)
    for k, key in enumerate(keys):
        if key is None:
            continue
        text = key.values[i]
        if text is None:
            nulls[k] = 1  # every row of the file is null in this column
            continue
        nulls[k] = 0
        b = field_bounds(f, text, t.name, t.scale)
        if b is not None:
            lo[k], hi[k], strict[k] = b
            lo_ok[k] = hi_ok[k] = True
    # num_rows 1 per file: only null_count == num_rows ("all null") and 0 ("none") are used
    return UnitStats(
        floating=False, lo=lo, hi=hi, lo_ok=lo_ok, hi_ok=hi_ok, hi_strict=strict,
        null_count=nulls, nan_count=np.zeros(n, dtype=np.int64),
        num_rows=np.ones(n, dtype=np.int64), null_unit=nulls == 1,
    )


def _literal_buckets(ref: BoundRef, literals: Sequence[Any], number: int) -> set[int] | None:
    """Buckets of the literals of a leaf on ``ref``; None when one cannot be hashed."""
    t = ref.type
    out: set[int] = set()
    for v in literals:
        if v is None:
            continue
        try:
            if (t.is_integral or t.name in ("date", "timestamp", "decimal")) and type(v) is not int:
                return None  # not a value of the column (bind keeps exact ints only)
            arr = literal_array(v, t.name, t.precision, t.scale)
        except (ValueError, TypeError, OverflowError, UnicodeDecodeError, pa.ArrowException):
            return None
        out.add(int(bucket_ids([arr], number)[0]))
    return out


def _table_bucket_column(spec: PartitionSpec, ref: BoundRef) -> bool:
    """``ref`` is the one column of the table bucketing."""
    cols, ids = spec.bucket_columns, spec.bucket_column_ids
    return bool(spec.bucket_number) and len(cols) == 1 and (
        (bool(ids) and ids[0] == ref.column.column_id) or (not ids and cols[0] == ref.name))


class _BucketProbe:
    """Bloom-style probe of ``=`` / ``IN`` leaves against each file's bucket ids."""

    def __init__(self, spec: PartitionSpec, keys: list[PartitionKey | None]) -> None:
        self.spec = spec
        self.keys = keys

    def __call__(self, expr: Expr, idx: npt.NDArray[np.intp]) -> Mask:
        out = np.ones(len(idx), dtype=bool)
        if not isinstance(expr, (Eq, In)) or not isinstance(expr.term, BoundRef):
            return out
        ref = expr.term
        literals = (expr.literal,) if isinstance(expr, Eq) else tuple(expr.literals)
        checks: list[tuple[int | None, set[int]]] = []  # (field index or None = table bucket)
        for i, f in enumerate(self.spec.fields):
            if f.transform == "bucket" and _matches(f, ref):
                found = _literal_buckets(ref, literals, f.param)
                if found is not None:
                    checks.append((i, found))
        if _table_bucket_column(self.spec, ref):
            found = _literal_buckets(ref, literals, self.spec.bucket_number)
            if found is not None:
                checks.append((None, found))
        for k, unit in enumerate(idx.tolist()):
            key = self.keys[unit]
            if key is None:
                continue
            for field, buckets in checks:
                value: int | str | None = key.bucket if field is None else key.values[field]
                if value is None:
                    continue  # null bucket values: nulls never equal a literal
                if int(value) not in buckets:
                    out[k] = False
                    break
        return out


def _multi_bucket(expr: Expr, spec: PartitionSpec, keys: list[PartitionKey | None]) -> Mask:
    """Table bucketing over several columns: top-level conjuncts must fix each column."""
    n = len(keys)
    keep = np.ones(n, dtype=bool)
    conj = flatten(expr) if isinstance(expr, And) else [expr]
    per_col: list[tuple[BoundRef, list[Any]]] = []
    for j, name in enumerate(spec.bucket_columns):
        cid = spec.bucket_column_ids[j] if j < len(spec.bucket_column_ids) else ""
        found: tuple[BoundRef, list[Any]] | None = None
        for c in conj:
            if isinstance(c, (Eq, In)) and isinstance(c.term, BoundRef) and (
                (cid and c.term.column.column_id == cid) or (not cid and c.term.name == name)
            ):
                lits = [c.literal] if isinstance(c, Eq) else list(c.literals)
                if found is None or len(lits) < len(found[1]):
                    found = (c.term, lits)
        if found is None:
            return keep
        per_col.append(found)
    combos = 1
    for _, lits in per_col:
        combos *= max(1, len(lits))
    if combos > _MAX_COMBINATIONS:
        return keep
    buckets: set[int] = set()
    for combo in itertools.product(*(lits for _, lits in per_col)):
        arrays = []
        for (ref, _), v in zip(per_col, combo, strict=True):
            t = ref.type
            if (t.is_integral or t.name in ("date", "timestamp", "decimal")) and type(v) is not int:
                return keep
            try:
                arrays.append(literal_array(v, t.name, t.precision, t.scale))
            except (ValueError, TypeError, OverflowError, UnicodeDecodeError, pa.ArrowException):
                return keep
        buckets.add(int(bucket_ids(arrays, spec.bucket_number)[0]))
    for k, key in enumerate(keys):
        if key is not None and key.bucket is not None and key.bucket not in buckets:
            keep[k] = False
    return keep
