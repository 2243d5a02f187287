"""Partitions of a table: per-segment specs, dynamic partition overwrite, show partitions.

Each segment's tablestatus entry records the spec its files were written with (key
``partitioning``, omitted for unpartitioned segments, so older versions decode unchanged);
a dynamic partition overwrite records in each older segment the partition folders it
replaced (key ``removedPartitions``, a sorted list of folder paths relative to the segment)
or, when it replaced every partition of a segment, marks that segment ``Marked for
Delete``. Readers of a version skip the removed folders of its entries; readers of an older
version (time travel) still see them. The files stay until their segment is removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from carbonstore.errors import UserError
from carbonstore.store.entries import MARKED_FOR_DELETE, LoadEntry
from carbonstore.store.partitioning import (
    PARTITIONING_KEY,
    REMOVED_KEY,
    REMOVED_ROWS_KEY,
    PartitionSpec,
    entry_spec,
    live_deleted_rows,
    parse_partition_path,
    partition_of,
    removed_partitions,
    removed_rows,
)
from carbonstore.store.records import replace
from carbonstore.store.schema import TableSchema

if TYPE_CHECKING:
    from carbonstore.store.table import Table
    from carbonstore.store.tablestatus import TableStatusSnapshot

__all__ = [
    "compacted_rows",
    "PARTITIONING_KEY",
    "REMOVED_KEY",
    "PartitionInfo",
    "entry_spec",
    "removed_partitions",
    "replace_partitions",
    "segment_files",
    "set_partition_spec",
    "show_partitions",
]

def live_files(table: Table, entry: LoadEntry, paths: Sequence[str]) -> list[str]:
    """``paths`` (full paths of the segment's data files) without removed partitions."""
    gone = removed_partitions(entry)
    if not gone:
        return list(paths)
    prefix = table.paths.segment_dir(entry.load_name).rstrip("/") + "/"
    return [p for p in paths if partition_of(p[len(prefix):] if p.startswith(prefix) else p) not in gone]


def compacted_rows(entry: LoadEntry) -> int:
    """Rows of the segment a compaction carries over: without the partitions a dynamic
    overwrite replaced and without rows deleted by DELETE / UPDATE / MERGE (deleted rows of a
    replaced partition are counted once)."""
    return entry.row_count - removed_rows(entry) - live_deleted_rows(entry)


def with_spec(extra: dict[str, Any], spec: PartitionSpec | None) -> dict[str, Any]:
    """An entry's extra keys with the segment's spec recorded (nothing when unpartitioned)."""
    if spec is None or spec.is_empty:
        return extra
    return {**extra, PARTITIONING_KEY: spec.to_json()}


def segment_files(table: Table, entry: LoadEntry) -> list[tuple[str, int]]:
    """(path relative to the segment, rows) of every data file of a committed segment."""
    from carbonstore.indexfiles.indexfile import read_index

    if not entry.segment_file:
        return []
    seg_dir = table.paths.segment_dir(entry.load_name)
    header = read_index(table.store.sfs, f"{seg_dir}/{entry.segment_file}").header
    return [(f.path or "", int(f.num_rows or 0)) for f in header.files or ()]


def _same_fields(a: PartitionSpec, b: PartitionSpec) -> bool:
    def key(s: PartitionSpec) -> list[tuple[str, str, int]]:
        return [(f.source_id or f.source, f.transform, f.param) for f in s.fields]

    return key(a) == key(b)


def replace_partitions(
    table: Table,
    snap: TableStatusSnapshot,
    segment_id: str,
    spec: PartitionSpec | None,
    written: Iterable[str],
    *,
    ts: int,
    cache: dict[tuple[str, str | None], dict[str, int]],
) -> list[LoadEntry]:
    """The entries of ``snap`` after a dynamic overwrite by ``segment_id``.

    ``written``: the new segment's data file paths; their partition folders are the
    touched partitions. An older readable segment written with the same partition fields
    loses exactly the touched folders it holds; one that holds nothing else is marked for
    delete. An older readable segment with other partition fields (or none) could hold rows
    of any partition: the overwrite is refused (compact it first, or overwrite the table).

    Raises:
        UserError: an older readable segment has another partition spec.
    """
    if spec is None or not spec.fields:
        raise UserError(f"table {table.name} is not partitioned: overwrite_partitions needs "
                        "partition_by")
    touched = {partition_of(p) for p in written}
    out: list[LoadEntry] = []
    for e in snap.entries:
        if e.load_name == segment_id or not e.readable or not touched:
            out.append(e)
            continue
        other = entry_spec(e)
        if not _same_fields(other, spec):
            raise UserError(
                f"cannot overwrite partitions of {table.name}: segment {e.load_name} was written "
                f"with partition spec '{other.partition_text or '(none)'}', not "
                f"'{spec.partition_text}'; compact the table first or use a full overwrite"
            )
        key = (e.load_name, e.segment_file)
        if key not in cache:
            rows: dict[str, int] = {}
            for p, n in segment_files(table, e):
                rows[partition_of(p)] = rows.get(partition_of(p), 0) + n
            cache[key] = rows
        gone = removed_partitions(e)
        live = set(cache[key]) - gone
        hit = live & touched
        if not hit:
            out.append(e)
        elif hit == live:
            out.append(e.with_status(MARKED_FOR_DELETE, modification_or_deletion_timestamp=ts))
        else:
            lost = removed_rows(e) + sum(cache[key][p] for p in hit)
            out.append(replace(e, extra={**e.extra, REMOVED_KEY: sorted(gone | hit),
                                         REMOVED_ROWS_KEY: lost}))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionInfo:
    """One partition of the table: its folder, values, files and rows over all segments."""

    partition: str
    values: dict[str, str | None]
    segments: tuple[str, ...]
    files: int
    rows: int

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "values": self.values,
                "segments": list(self.segments), "files": self.files, "rows": self.rows}


def show_partitions(table: Table) -> list[PartitionInfo]:
    """Partitions of the readable segments of the table's current (or pinned) version.

    Folders removed by a dynamic overwrite are left out. Unpartitioned segments show as one
    partition with the folder ``''``.
    """
    acc: dict[str, dict[str, Any]] = {}
    for e in table.status.read().readable:
        spec = entry_spec(e)
        gone = removed_partitions(e)
        for path, rows in segment_files(table, e):
            part = partition_of(path)
            if part in gone:
                continue
            slot = acc.get(part)
            if slot is None:
                key = parse_partition_path(spec.fields, path) if spec.fields else None
                values = ({f.name: v for f, v in zip(spec.fields, key.values, strict=True)}
                          if key is not None else {})
                slot = acc[part] = {"values": values, "segments": [], "files": 0, "rows": 0}
            if e.load_name not in slot["segments"]:
                slot["segments"].append(e.load_name)
            slot["files"] += 1
            slot["rows"] += rows
    return [PartitionInfo(partition=p, values=s["values"], segments=tuple(s["segments"]),
                          files=s["files"], rows=s["rows"]) for p, s in sorted(acc.items())]


def set_partition_spec(
    table: Table,
    partition_by: str | None,
    *,
    buckets: int | None = None,
    bucket_columns: Sequence[str] | str | None = None,
) -> Table:
    """Change the partition (and bucket) spec new loads write with; old segments keep theirs.

    ``partition_by`` ``""`` removes partitioning, None leaves it; ``buckets`` 0 removes
    bucketing, None leaves it. Returns the table re-opened with the new schema.

    Raises:
        SchemaError: a field or bucket column does not fit the schema.
    """
    from carbonstore.store.alter import alter_table

    def change(schema: TableSchema) -> TableSchema:
        props = dict(schema.properties)
        if partition_by is not None:
            if partition_by.strip():
                props["partition_by"] = partition_by.strip()
            else:
                props.pop("partition_by", None)
        if buckets is not None:
            if buckets == 0:
                props.pop("bucket_number", None)
                props.pop("bucket_columns", None)
            else:
                cols = bucket_columns if isinstance(bucket_columns, str) \
                    else ",".join(bucket_columns or ())
                if not cols.strip():
                    raise UserError("bucketing needs bucket columns (--bucket-columns)")
                props["bucket_number"] = str(buckets)
                props["bucket_columns"] = cols
        return replace(schema, properties=props)  # validated by alter_table

    # a schema version like any ALTER (store/schema_log.py): time travel keeps the old spec
    spec = [f"partition_by={partition_by!r}" if partition_by is not None else "",
            f"buckets={buckets}" if buckets is not None else ""]
    alter_table(table, change, operation=f"SET PARTITION SPEC {' '.join(x for x in spec if x)}")
    return table.store.table(table.name)
