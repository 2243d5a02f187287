"""Where statistics live (DESIGN.md 8): ``Metadata/stats/segment_<id>.stats`` (JSON, sketches
base64) per segment, written atomically. Table-level statistics are derived from the
``Success``/``Partial Success`` segments of one tablestatus snapshot and cached in
``Metadata/stats/table.stats`` keyed by the snapshot version and the segment files' sizes and
modification times.

A segment's file is signed (first key ``checksum``, store/checksums.py) and names what it
belongs to: ``tableId`` and ``segmentId``. A file that fails its checksum, holds a key no
writer writes, is another table's or another segment's, or does not decode (its sketches
included) is ``CorruptMetadataError`` naming it - refused, never shown, never a traceback;
callers that recompute what is missing (compaction, ``analyze --missing``) treat it as
missing. Files written before checksums read as before (checked by the table name).
"""

from __future__ import annotations

import binascii
import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson

from carbonstore.errors import CorruptMetadataError
from carbonstore.statistics.evolution import current_statistics
from carbonstore.statistics.model import (
    TABLE_CACHE,
    SegmentStatistics,
    TableStatistics,
    merge_same_segment,
    merge_segments,
    sketch_estimate,
)
from carbonstore.store.checksums import checked_object, with_checksum
from carbonstore.store.paths import check_segment_id
from carbonstore.store.tablestatus import TableStatusSnapshot

if TYPE_CHECKING:
    from carbonstore.store.table import Table

__all__ = [
    "delete_segment_statistics",
    "delete_table_statistics",
    "get_segment_statistics",
    "get_table_statistics",
    "segment_bounds",
    "stats_path",
    "update_segment_statistics",
]


def stats_path(table: Table, segment_id: str) -> str:
    return f"{table.paths.stats_dir}/segment_{check_segment_id(segment_id)}.stats"


def _cache_path(table: Table) -> str:
    return f"{table.paths.stats_dir}/{TABLE_CACHE}"


#: every top-level key of a segment's statistics file
_KEYS = frozenset({"formatVersion", "tableId", "table", "segmentId", "rowCount", "source",
                   "columns", "sketches"})


def _encode(table: Table, stats: SegmentStatistics) -> bytes:
    obj = stats.to_json()
    obj["tableId"] = table.table_id
    return with_checksum(orjson.dumps(obj))


def _decode(table: Table, data: bytes, path: str, segment_id: str | None) -> SegmentStatistics:
    """A segment's statistics file, checked to be whole, this table's and (``segment_id``
    given) that segment's; its sketches decoded once here so that no reader meets a damaged
    one later.

    Raises:
        CorruptMetadataError: naming ``path`` and the fix.
    """
    def bad(why: str) -> CorruptMetadataError:
        return CorruptMetadataError(
            f"statistics file {path} {why}; delete it and run 'carbonstore analyze' for that "
            "segment (or 'carbonstore analyze TABLE --missing')")

    try:
        obj, signed = checked_object(data, _KEYS)
        owner = obj.pop("tableId", None)
        if owner is not None and owner != table.table_id:
            raise bad(f"belongs to table id {owner!r}, not to {table.name} ({table.table_id})")
        if owner is None and (signed or obj.get("table") != str(table.name)):
            raise bad(f"belongs to table {obj.get('table')!r}, not to {table.name}")
        stats = SegmentStatistics.from_json(obj)
        for raw, col in zip(obj["columns"], stats.columns, strict=True):
            if raw.keys() != col.to_json().keys():  # a flipped key: a count read as absent
                raise bad(f"holds keys {sorted(raw)} for column {col.column!r}, not the "
                          f"keys of its kind {col.kind!r}")
        for sketch in stats.sketches.values():
            sketch_estimate(sketch)
    except CorruptMetadataError as err:
        if str(err).startswith(f"statistics file {path}"):
            raise
        raise bad(f"is corrupt ({err})") from err
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError,
            binascii.Error) as err:  # a sketch that is none, a column that is no object
        raise bad(f"is corrupt ({type(err).__name__}: {err})") from err
    if segment_id is not None and stats.segment_id != segment_id:
        raise bad(f"holds the statistics of segment {stats.segment_id!r}, not {segment_id!r}")
    return stats


def update_segment_statistics(
    table: Table, stats: SegmentStatistics, *, replace_all: bool = False
) -> SegmentStatistics:
    """Store one segment's statistics (Hive ``update_partition_column_statistics``).

    Columns already stored and not in ``stats`` are kept unless ``replace_all``.
    Returns what is stored now.
    """
    sfs = table.paths.sfs
    path = stats_path(table, stats.segment_id)
    sfs.makedirs(table.paths.stats_dir)
    with table.locks.hold("statistics.lock"):
        merged = stats
        if not replace_all and sfs.exists(path):
            old = _decode(table, sfs.read_bytes(path), path, stats.segment_id)
            merged = merge_same_segment(old, stats)
        sfs.write_atomic(path, _encode(table, merged))
    return merged


def get_segment_statistics(
    table: Table,
    segment_id: str,
    *,
    columns: Sequence[str] | None = None,
    damaged_as_missing: bool = False,
) -> SegmentStatistics | None:
    """One segment's stored statistics (Hive ``get_partitions_statistics_req``), or None.

    Raises:
        CorruptMetadataError: the file is damaged (or is another segment's) - unless
            ``damaged_as_missing``: then None, for callers that recompute what is missing
            (statistics are derived data: a damaged file must not fail a compaction).
    """
    path = stats_path(table, segment_id)
    sfs = table.paths.sfs
    if not sfs.exists(path):
        return None
    try:
        stats = _decode(table, sfs.read_bytes(path), path, segment_id)
    except CorruptMetadataError:
        if damaged_as_missing:
            return None
        raise
    return stats.select(columns)


def delete_segment_statistics(
    table: Table, segment_id: str, *, columns: Sequence[str] | None = None
) -> bool:
    """Delete one segment's statistics, all or some columns (Hive
    ``delete_partition_column_statistics``). Returns whether anything was deleted."""
    sfs = table.paths.sfs
    path = stats_path(table, segment_id)
    with table.locks.hold("statistics.lock"):
        if not sfs.exists(path):
            return False
        if columns is None:
            sfs.delete_file(path)
            return True
        old = _decode(table, sfs.read_bytes(path), path, segment_id)
        drop = {c.lower() for c in columns}
        keep = [c.column for c in old.columns if c.column not in drop]
        if len(keep) == len(old.columns):
            return False
        if keep:
            sfs.write_atomic(path, _encode(table, old.select(keep)))
        else:
            sfs.delete_file(path)
        return True


def delete_table_statistics(table: Table, *, columns: Sequence[str] | None = None) -> list[str]:
    """Delete the statistics of every segment (all or some columns) and the table cache.

    Returns the ids of the segments whose statistics changed.
    """
    sfs = table.paths.sfs
    changed = [
        sid for sid in _stored_segment_ids(table) if delete_segment_statistics(table, sid, columns=columns)
    ]
    sfs.delete_file(_cache_path(table))
    return changed


def _stored_segment_ids(table: Table) -> list[str]:
    out = []
    for info in table.paths.sfs.list_dir(table.paths.stats_dir):
        name = info.base_name
        if info.is_file and name.startswith("segment_") and name.endswith(".stats"):
            out.append(name[len("segment_"):-len(".stats")])
    return out


def _digest(stats_json: Any) -> str:
    return hashlib.sha256(orjson.dumps(stats_json)).hexdigest()


def _fingerprint(table: Table, snapshot: TableStatusSnapshot) -> tuple[str, list[str], list[str]]:
    """(fingerprint, segments with stats, segments without) for the readable segments."""
    files = {
        i.base_name: (i.size, i.mtime_ns)
        for i in table.paths.sfs.list_dir(table.paths.stats_dir)
        if i.is_file
    }
    have, missing, parts = [], [], [f"{snapshot.table_id}:{snapshot.version}"]
    for e in snapshot.readable:
        name = f"segment_{e.load_name}.stats"
        if name in files:
            have.append(e.load_name)
            parts.append(f"{name}:{files[name][0]}:{files[name][1]}")
        else:
            missing.append(e.load_name)
    return hashlib.sha256("|".join(parts).encode()).hexdigest(), have, missing


def get_table_statistics(
    table: Table,
    *,
    columns: Sequence[str] | None = None,
    snapshot: TableStatusSnapshot | None = None,
    use_cache: bool = True,
) -> TableStatistics:
    """Table-level statistics (Hive ``get_table_statistics_req``), merged on read from the
    readable segments of ``snapshot`` (default: the current one)."""
    snap = snapshot if snapshot is not None else table.status.read()
    sfs = table.paths.sfs
    key, have, missing = _fingerprint(table, snap)
    cache = _cache_path(table)
    if use_cache and sfs.exists(cache):
        try:
            obj = orjson.loads(sfs.read_bytes(cache))
            # The cache is derived data: used only when its checksum holds (a flipped bit
            # in it answered a table named "eb.t"), else recomputed and rewritten below.
            if obj.get("key") == key and obj.get("sha256") == _digest(obj["stats"]):
                cached = TableStatistics.from_json(obj["stats"])
                if columns is None:
                    return cached
                want = {c.lower() for c in columns}
                return replace(cached, columns=tuple(c for c in cached.columns if c.column in want))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError,
                CorruptMetadataError):
            pass  # a damaged cache is recomputed and rewritten below
    stats = []
    for sid in have:
        s = get_segment_statistics(table, sid)
        if s is None:  # deleted since the listing
            missing.append(sid)
        else:
            stats.append(s)
    result = merge_segments(  # segments of older schema versions: as the current columns
        current_statistics(table, stats, snap), table=str(table.name),
        snapshot_version=str(snap.version), missing=missing,
    )
    if use_cache:
        try:
            sfs.makedirs(table.paths.stats_dir)
            body = result.to_json()
            sfs.write_atomic(cache, orjson.dumps({"key": key, "stats": body,
                                                  "sha256": _digest(body)}))
        except OSError:  # a reader without write access still gets its answer
            pass
    if columns is not None:
        want = {c.lower() for c in columns}
        result = replace(result, columns=tuple(c for c in result.columns if c.column in want))
    return result


def segment_bounds(
    table: Table, column: str, *, snapshot: TableStatusSnapshot | None = None
) -> dict[str, tuple[Any, Any]]:
    """``{segment id: (low, high)}`` of a column for the readable segments that have them.

    A segment that is missing from the result has no known bounds: it might match.
    Families without low/high (boolean, string, binary) give an empty dict.
    """
    snap = snapshot if snapshot is not None else table.status.read()
    out: dict[str, tuple[Any, Any]] = {}
    for e in snap.readable:
        s = get_segment_statistics(table, e.load_name, columns=[column])
        c = s.find(column) if s is not None else None
        if c is None or not hasattr(c, "low_value"):
            continue
        low, high = c.low_value, c.high_value  # type: ignore[attr-defined]
        if low is None and high is None and s is not None and c.num_nulls < s.row_count:
            continue  # non-null values without bounds (all NaN): unknown
        out[e.load_name] = (low, high)
    return out
