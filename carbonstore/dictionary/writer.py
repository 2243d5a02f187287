"""Adding values to a dictionary: the commit protocol and crash repair.

Under ``LockFiles/dictionary_<column_id>.lock`` a writer

1. re-reads the committed state (.dictmeta) and truncates .dict back to the committed
   end offset (bytes beyond it are from a writer that died before its commit);
2. finds which distinct values are new and sorts them in the type's order;
3. appends them to .dict in chunks of at most ``carbon.dictionary.chunk.size`` values and
   fsyncs the file;
4. commits by rewriting .dictmeta atomically with one more entry;
5. writes ``<column_id>_<dict_size>.sortindex`` (older ones stay for clean files).

A crash before step 4 leaves the dictionary as it was; after step 4 and before step 5 the
readers compute the sort index themselves until the next writer writes it.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from carbonstore.dictionary.codec import encode_chunk, encoding_of, parse_text_values
from carbonstore.dictionary.column import (
    ColumnDictionary,
    _build,
    _load,
    _remember,
    column_files,
    dictionary_column,
)
from carbonstore.dictionary.files import (
    ColumnFiles,
    DictMetaEntry,
    list_sortindex_files,
    read_meta,
    write_sort_index,
)
from carbonstore.errors import DictionaryError, UserError
from carbonstore.store.schema import Column
from carbonstore.store.tablestatus import now_ms

__all__ = [
    "add_values",
    "add_values_from_file",
    "lock_name",
    "obsolete_sortindex_files",
    "repair",
]


def lock_name(column: Column) -> str:
    return f"dictionary_{column.column_id}.lock"


def _chunk_size(table: Any) -> int:
    n = table.conf.get_int("carbon.dictionary.chunk.size")
    if n < 1:
        raise UserError(f"carbon.dictionary.chunk.size must be at least 1, got {n}")
    return n


def repair(files: ColumnFiles, committed_end: int) -> int:
    """Cut .dict back to ``committed_end``; return the number of bytes removed.

    Call only under the column's dictionary lock.
    """
    sfs = files.sfs
    if not sfs.exists(files.dict_path):
        if committed_end:
            raise DictionaryError(f"{files.dict_path} is missing but {committed_end} bytes are committed")
        return 0
    size = sfs.size(files.dict_path)
    if size < committed_end:
        raise DictionaryError(
            f"{files.dict_path} has {size} bytes but {committed_end} are committed; "
            "the dictionary file was truncated outside carbonstore"
        )
    if size == committed_end:
        return 0
    if sfs.local:
        with open(files.dict_path, "r+b") as f:
            f.truncate(committed_end)
            f.flush()
            os.fsync(f.fileno())
    else:
        with sfs.fs.open_input_file(files.dict_path) as f:
            head = bytes(f.read_at(committed_end, 0)) if committed_end else b""
        sfs.write_atomic(files.dict_path, head)
    return size - committed_end


def _append(files: ColumnFiles, committed_end: int, data: bytes) -> None:
    sfs = files.sfs
    if sfs.local:
        created = not os.path.exists(files.dict_path)
        fd = os.open(files.dict_path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.lseek(fd, committed_end, os.SEEK_SET)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            dfd = os.open(files.directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    else:
        # Object stores cannot append: rewrite the committed prefix plus the new chunks.
        head = b""
        if committed_end:
            with sfs.fs.open_input_file(files.dict_path) as f:
                head = bytes(f.read_at(committed_end, 0))
        sfs.write_atomic(files.dict_path, head + data)


def _distinct(values: pa.Array) -> pa.Array:
    uniq = pc.unique(values.drop_null()) if values.null_count else pc.unique(values)
    return uniq


def add_values(
    table: Any, column: str | Column, values: Any, *, segment_id: str
) -> ColumnDictionary:
    """Add the values of ``values`` not yet in ``column``'s dictionary; return the result.

    Args:
        table: the ``Table``.
        column: a dictionary column (name or schema ``Column``).
        values: any Array / ChunkedArray / Python list of values; duplicates and nulls are
            fine (null is always surrogate 1).
        segment_id: the load (segment) adding the values, recorded in .dictmeta.

    Returns:
        The committed dictionary including every value of ``values``.
    """
    col = column if isinstance(column, Column) else dictionary_column(table, column)
    files = column_files(table, col)
    current = _load(col, files)
    candidates = _distinct(current.canonical(values))
    nothing_new = len(candidates) == 0 or (
        current.size > 0
        and not pc.any(pc.invert(pc.is_in(candidates, value_set=current.values))).as_py()
    )
    if nothing_new and (
        current.size == 0 or files.sfs.exists(files.sortindex_path(current.size))
    ):
        return current  # committed values never change: no lock needed
    chunk_size = _chunk_size(table)
    table.store.sfs.makedirs(files.directory)
    with table.locks.hold(lock_name(col)):
        stamp = files.meta_stamp()
        meta = read_meta(files, str(col.type))
        repair(files, meta.committed_end)
        current = _build(col, files, current)
        if current.size:
            new = candidates.filter(pc.invert(pc.is_in(candidates, value_set=current.values)))
        else:
            new = candidates
        if len(new) == 0:
            _remember(files, stamp, current)
            _ensure_sort_index(current)
            return current
        new = new.take(pc.sort_indices(new))
        encoding = encoding_of(col.type)
        frames = [
            encode_chunk(new.slice(i, chunk_size), encoding) for i in range(0, len(new), chunk_size)
        ]
        data = b"".join(frames)
        start = meta.committed_end
        _append(files, start, data)
        entry = DictMetaEntry(
            min_surrogate=current.max_surrogate + 1,
            max_surrogate=current.max_surrogate + len(new),
            start_offset=start,
            end_offset=start + len(data),
            chunk_count=len(frames),
            segment_id=str(segment_id),
            time_ms=now_ms(),
        )
        new_meta = meta.with_entry(entry)
        files.sfs.write_atomic(files.meta_path, new_meta.to_bytes())
        result = ColumnDictionary(col, files, new_meta, pa.concat_arrays([current.values, new]))
        order, ranks = result.sort_index()
        write_sort_index(files, result.size, order, ranks)
        _remember(files, files.meta_stamp(), result)
        return result


def _ensure_sort_index(d: ColumnDictionary) -> None:
    if d.size and not d.files.sfs.exists(d.files.sortindex_path(d.size)):
        order, ranks = d.sort_index()
        write_sort_index(d.files, d.size, order, ranks)


def add_values_from_file(
    table: Any, column: str | Column, path: str, *, segment_id: str
) -> ColumnDictionary:
    """Add the values of a pre-built dictionary file (UTF-8, one value per line).

    Lines are values as text (``2024-01-31`` for dates, ``12.50`` for decimals); a line
    ending is not part of the value. Loads given such a file skip their distinct pass for
    the column, so every value of the loaded data must be in the file or the dictionary.
    """
    col = column if isinstance(column, Column) else dictionary_column(table, column)
    try:
        with open(path, encoding="utf-8", newline="") as f:
            lines = f.read().splitlines()
    except OSError as err:
        raise UserError(f"cannot read the pre-built dictionary {path}: {err}") from err
    except UnicodeDecodeError as err:
        raise UserError(f"pre-built dictionary {path} is not UTF-8: {err}") from err
    return add_values(table, col, parse_text_values(lines, col.type), segment_id=segment_id)


def obsolete_sortindex_files(table: Any) -> list[str]:
    """Sort index files superseded by a newer one (safe to delete after the retention time).

    Lists the folder before reading each column's committed size, so a sort index being
    written by a concurrent commit is never reported.
    """
    sfs = table.store.sfs
    directory = table.paths.dictionary_dir
    listed = list_sortindex_files(sfs, directory)
    by_id = {c.column_id: c for c in table.schema.columns}
    sizes: dict[str, int] = {}
    out = []
    for path, cid, size in listed:
        if cid not in sizes:
            col = by_id.get(cid)
            if col is None:
                sizes[cid] = np.iinfo(np.int64).max  # column dropped: every file is obsolete
            else:
                files = ColumnFiles(sfs, directory, cid)
                sizes[cid] = read_meta(files, str(col.type)).dict_size
        if size < sizes[cid]:
            out.append(path)
    return out


