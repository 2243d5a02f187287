"""ADD SEGMENT: adopt an existing folder of Parquet files as a new segment.

The files are COPIED into ``Fact/Part0/Segment_<id>/`` (so clean files, compaction and
drop table own them like any other segment, and the source folder may be removed
afterwards); their schema must match the table's exactly (same column names, Arrow types
that store as the table types, no NOT NULL column with nulls). One ``.carbonindex`` covers
all adopted files and the segment gets its ``.carbonindexmerge`` like a load.

A table with global-dictionary columns stores INT32 surrogates in those columns, so the
files cannot be copied as they are: their values are added to the dictionaries first (as a
load does) and the rows are rewritten, encoded, by the load's task writer into new files of
the segment (rows in the given order). Files that name a column in another case (``ID``
for ``id``) are rewritten the same way, so every file of the store names its columns as
the table does (its index, pruning and every reader match columns by name). Copied files
keep their own nullability: readers map it onto the table's (segments/unify.py). A source inside the store is refused: adopting the
store's own files would duplicate their rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.parquet as pq

from carbonstore.dictionary import distinct_values, prepare_dictionaries
from carbonstore.errors import CarbonStoreError, CommitConflictError, SchemaError, UserError
from carbonstore.indexfiles.footer import read_file_index
from carbonstore.indexfiles.indexfile import build_task_index, merge_indexes
from carbonstore.pruning.table_index import refresh_if_lagging
from carbonstore.segments.commit import (
    abort_segment,
    begin_segment,
    dead_load_error,
    dead_segment_message,
)
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import arrow_type, write_task
from carbonstore.store.fs import FileInfo, FileType, StoreFS, resolve_fs
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import (
    IN_PROGRESS,
    SUCCESS,
    LoadEntry,
    StatusChange,
    TableStatusSnapshot,
    now_ms,
)

__all__ = ["add_segment", "check_file_schema"]

_LEASE_KEYS = ("leaseExpiryMs", "writerHost", "writerPid")  # a finished entry keeps "writer"

# Arrow types that store the same values as the table type (read back through a cast).
_COMPATIBLE: dict[pa.DataType, tuple[pa.DataType, ...]] = {
    pa.string(): (pa.large_string(), pa.string_view()),
    pa.binary(): (pa.large_binary(), pa.binary_view()),
}


def check_file_schema(table: Table, schema: pa.Schema, path: str) -> None:
    """Refuse a file whose columns differ from the table's (names and types)."""
    file_cols = {f.name.lower(): f for f in schema}
    table_cols = {c.name for c in table.schema.columns}
    extra = sorted(set(file_cols) - table_cols)
    missing = sorted(table_cols - set(file_cols))
    if extra or missing:
        raise SchemaError(
            f"{path} does not match table {table.name}: "
            + (f"missing columns {', '.join(missing)}" if missing else "")
            + ("; " if extra and missing else "")
            + (f"unknown columns {', '.join(extra)}" if extra else "")
        )
    for col in table.schema.columns:
        want = arrow_type(col.type)
        got = file_cols[col.name].type
        if got == want or got in _COMPATIBLE.get(want, ()):
            continue
        if pa.types.is_timestamp(got) and pa.types.is_timestamp(want) and got.tz is not None:
            continue
        raise SchemaError(
            f"{path}: column {col.name} is {got} but table {table.name} stores {col.type} "
            f"as {want}; cast the data or load it with 'carbonstore load' instead"
        )


def _parquet_files(fs: StoreFS, folder: str) -> list[FileInfo]:
    info = fs.file_info(folder)
    if info.type == FileType.NotFound:
        raise UserError(f"add-segment: {folder} does not exist")
    if info.is_file:
        return [info]
    infos = fs.walk(folder)
    files = [
        i for i in infos
        if i.is_file and i.base_name.endswith(".parquet")
        and not i.base_name.startswith((".", "_"))
    ]
    if not files:
        raise UserError(f"add-segment: no .parquet files under {folder}")
    return sorted(files, key=lambda i: i.path)


def _batches(
    src: StoreFS, files: list[FileInfo], columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The rows of ``files`` with the table's (lower-case) column names."""
    for f in files:
        with src.open_input_file(f.path) as fh:
            pf = pq.ParquetFile(fh)
            by_lower = {n.lower(): n for n in pf.schema_arrow.names}
            wanted = None if columns is None else [by_lower[c] for c in columns]
            for batch in pf.iter_batches(columns=wanted):
                yield batch.rename_columns([n.lower() for n in batch.schema.names])


def _encode_into(
    table: Table, segment_id: str, src: StoreFS, files: list[FileInfo]
) -> tuple[list[str], str]:
    """Add the files' dictionary values (if any), then write their rows - encoded, under the
    table's column names - into the segment.

    Returns the data file names and the task index path, like the copy path.
    """

    dict_cols = list(table.schema.dictionary_columns)
    if dict_cols:
        prepare_dictionaries(table, distinct_values(_batches(src, files, dict_cols), dict_cols),
                             segment_id)
    settings = write_settings(table, segment_id, parse_load_options(table, {"sort_scope": "no_sort"}))
    result = write_task(_batches(src, files), settings, task_id="added", fs=table.store.sfs)
    if result.index_file is None or result.bad_records:
        raise UserError(f"add-segment: the rows of {src.base} could not be written as a segment")
    return list(result.files), f"{settings.segment_dir}/{result.index_file}"


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _refuse_store_paths(table: Table, src: StoreFS, files: list[FileInfo], path: str) -> None:
    """Refuse a source inside the store (or holding it): adopting it would duplicate rows.

    Local paths are compared after resolving symlinks, the source folder's and every file's.
    """
    store = table.store.sfs
    if src.local and store.local:
        root = os.path.realpath(store.base)
        chosen = [os.path.realpath(src.base), *(os.path.realpath(f.path) for f in files)]
    elif src.same_kind(store):
        root = store.base.rstrip("/") or "/"
        chosen = [src.base.rstrip("/") or "/", *(f.path for f in files)]
    else:
        return
    if any(_inside(p, root) for p in chosen) or _inside(root, chosen[0]):
        raise UserError(
            f"add-segment: {path} is inside the store {store.base} (or holds it); adopting "
            "the store's own files would duplicate their rows - give a folder outside the store"
        )


def source_location(path: str, store_location: str) -> str:
    """``path`` with the S3 settings (endpoint, region, addressing) of the store's location
    that ``path`` does not give itself, when both are on s3://: a bucket folder is read
    through the endpoint the store is reached by (credentials: the store's conf)."""
    if not (path.startswith("s3://") and store_location.startswith("s3://")):
        return path
    parts = urlsplit(path)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    for key, value in parse_qsl(urlsplit(store_location).query, keep_blank_values=True):
        query.setdefault(key, value)
    return urlunsplit(parts._replace(query=urlencode(query)))


def add_segment(table: Table, path: str) -> LoadEntry:
    """Copy the Parquet files under ``path`` into a new segment, index and commit it."""
    src = resolve_fs(source_location(path, table.store.location), table.store.conf)
    _refuse_store_paths(table, src, [], path)
    files = _parquet_files(src, src.base)
    _refuse_store_paths(table, src, files, path)  # symlinks under the folder
    # Validate everything before the segment exists: footers (our own reader, which also
    # refuses encrypted and corrupt files), schema, nullability.
    other_names = False  # a file names a column in another case: its rows are rewritten
    for f in files:
        index = read_file_index(src, f.path, with_blooms=False)
        with src.open_input_file(f.path) as fh:
            file_schema = pq.read_schema(fh)
        check_file_schema(table, file_schema, f.path)
        other_names = other_names or any(n != n.lower() for n in file_schema.names)
        for col in table.schema.columns:
            if col.nullable:
                continue
            pos = next(
                (i for i, d in enumerate(index.columns) if (d.name or "").lower() == col.name), None
            )
            for rg in index.row_groups:
                if pos is None or rg.chunks[pos].null_count != 0:
                    raise SchemaError(
                        f"{f.path}: NOT NULL column {col.name} holds nulls (or the file does "
                        "not say); load it with 'carbonstore load' to handle bad records"
                    )

    # The shared load path allocates the entry and takes its segment lock in one update,
    # so clean-files --stale-inprogress can never see this entry unlocked.
    entry, seg_lock = begin_segment(table)
    sfs = table.store.sfs
    seg_dir = table.paths.segment_dir(entry.load_name)
    try:
        sfs.makedirs(seg_dir)
        if table.schema.dictionary_columns or other_names:
            names, task_index = _encode_into(table, entry.load_name, src, files)
        else:
            names = []
            for i, f in enumerate(files):
                name = f"part-added{i:05d}-{uuid.uuid4().hex[:12]}.parquet"
                sfs.copy_from(src, f.path, f"{seg_dir}/{name}")
                names.append(name)
            column_ids = {c.name: c.column_id for c in table.schema.columns}
            task_index = f"{seg_dir}/added-{uuid.uuid4().hex[:12]}.carbonindex"
            build_task_index(sfs, seg_dir, names, task_index, segment_id=entry.load_name,
                             task_id="added", column_ids=column_ids)
        merge_name = f"{entry.load_name}_{now_ms()}.carbonindexmerge"
        index_size = merge_indexes(sfs, [task_index], f"{seg_dir}/{merge_name}",
                                   segment_id=entry.load_name)
        rows = sum(
            pq.ParquetFile(sfs.open_input_file(f"{seg_dir}/{n}")).metadata.num_rows
            for n in names
        )
        data_size = sum(sfs.size(f"{seg_dir}/{n}") for n in names)
        fields = {"row_count": rows, "data_size": data_size,
                  "index_size": index_size + sfs.size(task_index), "segment_file": merge_name}
        return _commit(table, entry.load_name, fields, path)
    except (CarbonStoreError, OSError) as err:
        # Clean files marked it dead (and removed its folder, which the copy may have made
        # again): the load's one-line error, and nothing of it is left.
        dead = dead_load_error(table, entry.load_name)
        abort_segment(table, entry.load_name, reason=str(err)[:500] or type(err).__name__)
        if dead is not None and not isinstance(err, CommitConflictError):
            raise dead from err
        raise
    finally:
        if seg_lock is not None:
            seg_lock.release()


def _commit(table: Table, sid: str, fields: dict[str, object], path: str) -> LoadEntry:
    """Flip the running entry to Success; a clear error when clean files marked it dead."""
    holder: list[LoadEntry] = []

    def flip(snap: TableStatusSnapshot) -> StatusChange:
        mine = snap.find(sid)
        if mine is None or mine.status != IN_PROGRESS:
            raise CommitConflictError(dead_segment_message(table, sid, mine))
        holder.clear()
        extra = {k: v for k, v in mine.extra.items() if k not in _LEASE_KEYS}
        holder.append(mine.with_status(SUCCESS, timestamp=now_ms(),
                                       extra={**extra, "addedFrom": path}, **fields))
        return StatusChange(upserts=(holder[0],))  # its own entry only, not the table

    table.status.update(flip, operation="ADD SEGMENT")
    refresh_if_lagging(table)  # after the commit, best effort: planning never writes it
    return holder[0]
