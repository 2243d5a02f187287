"""Rebuild a segment's index files from its Parquet files (``carbonstore index rebuild``).

The ``.carbonindex`` / ``.carbonindexmerge`` files are derived data: everything in them
comes from the Parquet footers, page indexes and bloom filters of the segment's files,
except the NaN counts per row group and page, which the Parquet writer does not record.
A rebuild therefore reads the footers again and recounts NaNs by reading the float columns
one row group at a time (the load writer's NaN tracker, reused), so pruning on floats stays
exactly as sound as after the load.

Protocol, per segment (under its segment lock, so two rebuilds never race):

1. the data files: those the current index names, or, when it is unreadable, the
   ``.parquet`` files of the folder (a commit removes unnamed files before it succeeds);
   their row count must equal the entry's;
2. one new ``.carbonindex`` per load task, then a new ``<id>_<ts>.carbonindexmerge``;
3. one new tablestatus version sets the entry's ``segmentFile`` / ``indexSize``;
4. the old index files are deleted, except a readable old merge index: a query that
   planned on an earlier version reads it, so clean files removes it after
   ``carbon.segment.retention.minutes``.

A crash before step 3 leaves unnamed index files next to the old ones, which the next
rebuild deletes; the entry still names the old merge index.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from carbonstore.errors import CarbonStoreError, CorruptIndexError, SegmentNotFoundError
from carbonstore.indexfiles.footer import FileIndex, read_file_index
from carbonstore.indexfiles.indexfile import merge_indexes, read_index, write_index
from carbonstore.indexfiles.packing import pack
from carbonstore.pruning.table_index import refresh_if_lagging
from carbonstore.segments.writer import NanTracker
from carbonstore.store.entries import check_plain_file_name
from carbonstore.store.evolution import index_column_ids, written_schema
from carbonstore.store.leases import StatementLease
from carbonstore.store.locks import acquire
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import (
    LoadEntry,
    StatusChange,
    TableStatusSnapshot,
    now_ms,
    segment_sort_key,
)

__all__ = ["RebuildResult", "rebuild_indexes", "rebuild_segment"]

_PART_RE = re.compile(r"^part-(.+)-[0-9a-f]+\.parquet$")


@dataclass(frozen=True, slots=True, kw_only=True)
class RebuildResult:
    """What the rebuild of one segment wrote."""

    segment: str
    files: int
    rows: int
    task_indexes: int
    segment_file: str
    index_size: int
    removed: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "segment": self.segment,
            "files": self.files,
            "rows": self.rows,
            "taskIndexes": self.task_indexes,
            "segmentFile": self.segment_file,
            "indexSize": self.index_size,
            "removed": list(self.removed),
        }


def _choose(snap: TableStatusSnapshot, table: Table, ids: Sequence[str] | None) -> list[LoadEntry]:
    readable = sorted(snap.readable, key=lambda e: segment_sort_key(e.load_name))
    if ids is None:
        return readable
    by_name = {e.load_name: e for e in readable}
    missing = [i for i in ids if i not in by_name]
    if missing:
        raise SegmentNotFoundError(
            f"index rebuild: segment(s) {','.join(missing)} of {table.name} are not readable "
            "(see 'carbonstore show-segments')"
        )
    return [by_name[i] for i in ids]


def _data_files(table: Table, entry: LoadEntry) -> list[str]:
    """Relative names of the segment's data files (see the module docstring, step 1)."""
    sfs = table.store.sfs
    seg_dir = table.paths.segment_dir(entry.load_name)
    names = sorted(i.base_name for i in sfs.list_dir(seg_dir) if i.is_file)
    if any(not i.is_file for i in sfs.list_dir(seg_dir)):  # partition folders (partitioning.md)
        names = _all_files(table, seg_dir)
    if entry.segment_file and entry.segment_file in names:
        try:
            header = read_index(sfs, f"{seg_dir}/{check_plain_file_name(entry.segment_file)}").header
            listed = [f.path for f in header.files or []]
            if listed and all(n in names for n in listed):
                return listed
        except CorruptIndexError:
            pass  # the usual reason to rebuild: fall back to the folder
    return [n for n in names if n.endswith(".parquet")]


def _all_files(table: Table, seg_dir: str) -> list[str]:
    """Paths relative to ``seg_dir`` of every file below it."""
    base = seg_dir.rstrip("/") + "/"
    infos = table.store.sfs.walk(seg_dir)
    return sorted(i.path[len(base):] for i in infos if i.is_file)


def _readable_index(table: Table, seg_dir: str, entry: LoadEntry) -> bool:
    if not entry.segment_file:
        return False
    try:
        read_index(table.store.sfs, f"{seg_dir}/{check_plain_file_name(entry.segment_file)}")
    except (CorruptIndexError, OSError):
        return False
    return True


def _task_of(name: str) -> str:
    m = _PART_RE.match(name.rpartition("/")[2])
    return m.group(1) if m else "0"


def _index_file(table: Table, seg_dir: str, rel: str, float_cols: tuple[str, ...]) -> FileIndex:
    """The file's index with NaN counts per row group and page recounted from the data."""
    fs = table.store.sfs
    path = f"{seg_dir}/{rel}"
    fi = read_file_index(fs, path, rel_path=rel)
    if not float_cols:
        return fi
    tracker = NanTracker(float_cols)
    try:
        with fs.open_input_file(path) as f:
            pf = pq.ParquetFile(f)
            for i in range(pf.metadata.num_row_groups):
                tracker.add_row_group(pf.read_row_group(i, columns=list(float_cols)))
    except (OSError, ValueError) as err:
        raise CorruptIndexError(
            f"{path}: cannot read the float columns to count NaNs: {err}; the data file is "
            "damaged - restore it from a backup or delete the segment and reload it"
        ) from err
    tracker.apply(fi)
    return fi


def rebuild_segment(
    table: Table, entry: LoadEntry, *, on_file: Callable[[int], None] | None = None
) -> RebuildResult:
    """Rebuild one readable segment's index files (see the module docstring).

    Args:
        table: the table.
        entry: the segment's tablestatus entry.
        on_file: called with 1 after each data file is indexed (progress).

    Raises:
        CorruptIndexError: a data file is not readable Parquet, or the files hold a
            different number of rows than the entry records.
    """
    sfs = table.store.sfs
    sid = entry.load_name
    seg_dir = table.paths.segment_dir(sid)

    written_with = written_schema(table, entry)  # the names and ids its files were written with
    dict_cols = set(written_with.dictionary_columns)
    float_cols = tuple(
        c.name for c in written_with.columns
        if c.type.name in ("float", "double") and c.name not in dict_cols
    )
    column_ids = index_column_ids(written_with)
    lock = table.locks.segment(sid)
    acquire(lock, f"Segment_{sid}.lock", table.store.conf)
    try:
        before = {i.base_name for i in sfs.list_dir(seg_dir) if i.is_file}
        files = _data_files(table, entry)
        by_task: dict[str, list[FileIndex]] = {}
        for rel in files:
            by_task.setdefault(_task_of(rel), []).append(_index_file(table, seg_dir, rel, float_cols))
            if on_file is not None:
                on_file(1)
        rows = sum(fi.num_rows for group in by_task.values() for fi in group)
        if entry.row_count and rows != entry.row_count:
            raise CorruptIndexError(
                f"segment {sid} of {table.name}: its {len(files)} data file(s) in {seg_dir} hold "
                f"{rows} rows but tablestatus records {entry.row_count}; data files are missing "
                "or foreign - restore them, or delete the segment and reload it"
            )
        from carbonstore.segments.commit import lease_seconds

        # Clean files keeps the files written while this lease is renewed (store/leases.py).
        lease = StatementLease(table.status, "REBUILD INDEX", lease_seconds(table))
        try:
            merge_name, written, index_size = _write_and_commit(
                table, sid, seg_dir, by_task, column_ids, before, lease)
        finally:
            lease.release()
        keep = {*written, merge_name}
        # A readable old merge index stays for readers of earlier versions (clean files
        # removes it after the retention time); a damaged one is of use to nobody.
        kept_old = {entry.segment_file} if _readable_index(table, seg_dir, entry) else set()
        removed = tuple(sorted(
            n for n in before
            if n.endswith((".carbonindex", ".carbonindexmerge")) and n not in keep | kept_old
        ))
        for name in removed:
            sfs.delete_file(f"{seg_dir}/{name}")
    finally:
        lock.release()
    return RebuildResult(
        segment=sid, files=len(files), rows=rows, task_indexes=len(written),
        segment_file=merge_name, index_size=index_size, removed=removed,
    )


def _write_and_commit(
    table: Table, sid: str, seg_dir: str, by_task: dict[str, list[FileIndex]],
    column_ids: Any, before: set[str], lease: StatementLease,
) -> tuple[str, list[str], int]:
    """Write the task indexes and the merge index, commit the version naming it."""
    sfs = table.store.sfs
    written: list[str] = []
    task_bytes = 0
    for task, group in sorted(by_task.items()):
        header, blooms = pack(group, segment_id=sid, task_id=task, column_ids=column_ids)
        name = f"{task}-{uuid.uuid4().hex[:16]}.carbonindex"
        task_bytes += write_index(sfs, f"{seg_dir}/{name}", header, blooms)
        written.append(name)
    merge_name = f"{sid}_{now_ms()}.carbonindexmerge"
    while merge_name in before:  # same millisecond as the old one
        merge_name = f"{sid}_{now_ms() + 1}.carbonindexmerge"
    merge_size = merge_indexes(
        sfs, [f"{seg_dir}/{n}" for n in written], f"{seg_dir}/{merge_name}", segment_id=sid
    )
    index_size = task_bytes + merge_size
    _commit(table, sid, seg_dir, merge_name, index_size, lease)
    return merge_name, written, index_size


def _commit(
    table: Table, sid: str, seg_dir: str, merge_name: str, index_size: int,
    lease: StatementLease,
) -> None:
    def apply(snap: TableStatusSnapshot) -> StatusChange:
        e = snap.find(sid)
        if e is None:
            raise CarbonStoreError(
                f"segment {sid} of {table.name} was removed while its index was rebuilt"
            )
        lease.check([f"{seg_dir}/{merge_name}"])  # after the version was read
        return StatusChange(upserts=(  # its own entry only, not the table
            e.with_status(e.status, segment_file=merge_name, index_size=index_size),))

    table.status.update(apply, operation="REBUILD INDEX")


def rebuild_indexes(
    table: Table,
    segment_ids: Sequence[str] | None = None,
    *,
    on_file: Callable[[int], None] | None = None,
) -> list[RebuildResult]:
    """Rebuild the index files of the chosen readable segments (default: all of them).

    Raises:
        SegmentNotFoundError: a named segment does not exist or is not readable.
        CorruptIndexError: a data file is damaged (nothing of that segment changes).
    """
    results = [rebuild_segment(table, e, on_file=on_file)
               for e in _choose(table.status.read(), table, segment_ids)]
    refresh_if_lagging(table)  # after the commits, best effort: planning never writes it
    return results


def count_data_files(table: Table, segment_ids: Sequence[str] | None = None) -> int:
    """How many data files a rebuild of these segments indexes (for progress totals)."""
    return sum(len(_data_files(table, e))
               for e in _choose(table.status.read(), table, segment_ids))
