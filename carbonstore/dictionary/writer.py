"""Adding values to a dictionary: the lock-free commit protocol and repair.

A writer

1. reads the committed state: the checkpoint and the commit records (``files.read_state``),
   ``n`` versions whose last entry ends at byte ``E`` of ``.dict``;
2. finds which distinct values are new and sorts them in the type's order;
3. appends them to ``.dict`` as chunks of at most ``carbon.dictionary.chunk.size`` values
   (``O_APPEND``, fsynced: concurrent writers' bytes never overlap) at some offset ``>= E``;
4. commits by creating the record of version ``n + 1`` with ``StoreFS.put_if_absent``: the
   entry (surrogates from the last one + 1, the byte range, its CRC32) and a copy of the
   bytes. If another writer created version ``n + 1`` first, it goes back to 1 (bounded,
   with back-off): its appended bytes stay as an unnamed gap and are never read;
5. writes ``<column_id>_<size>.sortindex`` and rewrites the ``.dictmeta`` checkpoint.

Exactly one writer wins each version, so no value is stored twice and no surrogate is
reused, whatever the filesystem's locks do. ``LockFiles/dictionary_<column_id>.lock`` is
still taken when it can be, as a courtesy (concurrent loads then queue instead of retrying)
and for tidying: only its holder cuts ``.dict`` back to the last committed byte (a dead
writer's tail) and rewrites ranges whose bytes failed their check from the records. A crash
before step 4 leaves the dictionary unchanged; after it, readers compute a missing sort
index and read versions past the checkpoint from their records.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from typing import Any

import filelock
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from carbonstore.dictionary.codec import encode_chunk, encoding_of, parse_text_values
from carbonstore.dictionary.column import (
    ColumnDictionary,
    build_dictionary,
    column_files,
    dictionary_column,
    load_column,
    remember,
)
from carbonstore.dictionary.files import (
    FORMAT_VERSION,
    ColumnFiles,
    DictMeta,
    DictMetaEntry,
    DictState,
    crc32,
    encode_record,
    list_sortindex_files,
    read_record,
    read_state,
)
from carbonstore.errors import DictionaryError, LockTimeoutError, UserError
from carbonstore.store.locks import acquire
from carbonstore.store.schema import Column
from carbonstore.store.tablestatus import now_ms

__all__ = [
    "add_values",
    "add_values_from_file",
    "lock_name",
    "obsolete_sortindex_files",
    "repair",
]

#: Take the courtesy lock (tests of the lock-free protocol turn it off in their processes).
COURTESY_LOCK = True
#: Commit attempts before a writer gives up (each lost race means another writer committed).
MAX_ATTEMPTS = 500
#: The .dictmeta checkpoint is rewritten once it is this many versions behind (readers read
#: the records past it). Every version: the checkpoint is then a second copy of every
#: entry, so a damaged newest record still leaves its entry and its .dict bytes readable;
#: a larger value saves two fsyncs per commit at that price.
CHECKPOINT_EVERY = 1


def lock_name(column: Column) -> str:
    return f"dictionary_{column.column_id}.lock"


def _chunk_size(table: Any) -> int:
    n = table.conf.get_int("carbon.dictionary.chunk.size")
    if n < 1:
        raise UserError(f"carbon.dictionary.chunk.size must be at least 1, got {n}")
    return n


def repair(files: ColumnFiles, committed_end: int) -> int:
    """Cut .dict back to ``committed_end`` on a local disk; return the bytes removed.

    Bytes past the last committed range belong to a writer that died (or lost a race)
    before its commit. Call only while holding the column's dictionary lock: a writer
    appending without it could be about to commit those bytes (its record keeps a copy,
    so even then nothing committed is lost, but the range would be read from the record).
    """
    sfs = files.sfs
    if not sfs.local or not sfs.exists(files.dict_path):
        return 0
    size = sfs.size(files.dict_path)
    if size <= committed_end:
        return 0
    sfs.truncate_durable(files.dict_path, committed_end)
    return size - committed_end


def _heal(files: ColumnFiles, column_type: str, versions: list[int]) -> None:
    """Rewrite the .dict ranges of ``versions`` from their commit records (local disks)."""
    if not versions or not files.sfs.local:
        return
    chunks = []
    for v in versions:
        entry, data = read_record(files, column_type, v)
        chunks.append((entry.start_offset, data))
    files.sfs.write_at_durable(files.dict_path, chunks)


def _append(files: ColumnFiles, committed_end: int, data: bytes) -> int:
    """Append ``data`` to .dict; return the offset it starts at (``>= committed_end``)."""
    sfs = files.sfs
    if sfs.local:
        end = sfs.append_durable(files.dict_path, data)
        # A concurrent write between ours, or a file cut below the committed end, makes
        # this offset wrong: the range then fails its CRC32 and is read from the record
        # (and rewritten there by the next lock holder).
        return max(committed_end, end - len(data))
    # Object stores cannot append: rewrite the committed prefix plus the new chunks.
    head = b""
    if committed_end and sfs.exists(files.dict_path) and sfs.size(files.dict_path) >= committed_end:
        with sfs.open_input_file(files.dict_path) as f:
            head = bytes(f.read_at(committed_end, 0))
    if len(head) == committed_end:
        sfs.write_atomic(files.dict_path, head + data)
    return committed_end


def _distinct(values: pa.Array) -> pa.Array:
    uniq = pc.unique(values.drop_null()) if values.null_count else pc.unique(values)
    return uniq


def _missing(current: ColumnDictionary, candidates: pa.Array) -> pa.Array:
    if current.size == 0 or len(candidates) == 0:
        return candidates
    return candidates.filter(pc.invert(pc.is_in(candidates, value_set=current.values)))


def _courtesy_lock(table: Any, col: Column) -> filelock.BaseFileLock | None:
    """The column's dictionary lock if it can be had; None means go on without it."""
    if not COURTESY_LOCK:
        return None
    try:
        lock = table.locks.lock(lock_name(col))
        acquire(lock, lock_name(col), table.conf)
    except (LockTimeoutError, OSError):
        return None
    return lock


def _upgrade(files: ColumnFiles, col: Column, state: DictState) -> None:
    """Copy a format-1 dictionary's entries into commit records 1..k (same content for
    every writer, so concurrent upgrades agree)."""
    column_type = str(col.type)
    for v in range(state.records + 1, state.version + 1):
        e = state.meta.entries[v - 1]
        with files.sfs.open_input_file(files.dict_path) as f:
            data = bytes(f.read_at(e.num_bytes, e.start_offset))
        entry = replace(e, crc32=crc32(data))
        files.sfs.put_if_absent(files.record_path(v),
                                encode_record(files.column_id, column_type, v, entry, data))


def _write_checkpoint(files: ColumnFiles, meta: DictMeta) -> None:
    files.sfs.write_atomic(files.meta_path, DictMeta(
        column_id=meta.column_id, column_type=meta.column_type, entries=meta.entries,
        format=FORMAT_VERSION,
    ).to_bytes())


def _checkpoint_due(state: DictState) -> bool:
    """A checkpoint is missing, damaged, or ``CHECKPOINT_EVERY`` versions behind."""
    return state.records == state.version > 0 and (
        state.checkpoint == 0 or state.version - state.checkpoint >= CHECKPOINT_EVERY
    )


def _settle(d: ColumnDictionary, state: DictState) -> None:
    """Rewrite derived files that are missing or wrong: the sort index, the checkpoint."""
    if not d.has_valid_sort_index():
        d.write_sort_index()
    if _checkpoint_due(state):
        _write_checkpoint(d.files, state.meta)
        remember(d.files, replace(state, checkpoint=state.version), d)


def add_values(
    table: Any, column: str | Column, values: Any, *, segment_id: str
) -> ColumnDictionary:
    """Add the values of ``values`` not yet in ``column``'s dictionary; return the result.

    Args:
        table: the ``Table``.
        column: a dictionary column (name or schema ``Column``).
        values: any Array / ChunkedArray / Python list of values; duplicates and nulls are
            fine (null is always surrogate 1).
        segment_id: the load (segment) adding the values, recorded in its version.

    Returns:
        The committed dictionary including every value of ``values``.

    Raises:
        DictionaryError: the dictionary is damaged, or no commit succeeded in
            ``MAX_ATTEMPTS`` attempts.
    """
    col = column if isinstance(column, Column) else dictionary_column(table, column)
    files = column_files(table, col)
    current, state = load_column(col, files)
    pending = _missing(current, _distinct(current.canonical(values)))
    if len(pending) == 0 and state.records == state.version:
        _settle(current, state)
        return current  # committed values never change: nothing to commit
    seen = current.size  # ``pending`` holds no value of the first ``seen``
    chunk_size = _chunk_size(table)
    files.sfs.makedirs(files.log_dir)
    lock = _courtesy_lock(table, col)
    try:
        known: DictState | None = None
        for attempt in range(MAX_ATTEMPTS):
            # A full read first (damage, an upgrade to do); after a lost race only the
            # versions committed since.
            state = read_state(files, str(col.type), known=known)
            known = state
            if state.records < state.version:  # format 1: copy it into records first
                _upgrade(files, col, state)
                continue
            current, _ = build_dictionary(col, files, state, current)
            if lock is not None:
                repair(files, state.meta.committed_end)
                _heal(files, str(col.type), list(current.unusable))
                current.unusable = ()
            new = pending
            if current.size > seen and len(pending):  # only versions committed meanwhile
                since = current.values.slice(seen)
                new = pending.filter(pc.invert(pc.is_in(pending, value_set=since)))
            if len(new) == 0:
                remember(files, state, current)
                _settle(current, state)
                return current
            result = _commit(files, col, state, current, new, chunk_size, str(segment_id))
            if result is not None:
                return result
            time.sleep(random.uniform(0.0, 0.01) * min(attempt + 1, 8))
    finally:
        if lock is not None:
            lock.release()
    raise DictionaryError(
        f"could not commit new values of column {col.name!r} in {MAX_ATTEMPTS} attempts: "
        "other writers kept committing first; retry the load"
    )


def _commit(
    files: ColumnFiles, col: Column, state: DictState, current: ColumnDictionary,
    new: pa.Array, chunk_size: int, segment_id: str,
) -> ColumnDictionary | None:
    """One attempt at version ``state.version + 1``; None when another writer won it."""
    version = state.version + 1
    if files.sfs.exists(files.record_path(version)):
        return None  # lost already: spare the append and its fsync
    new = new.take(pc.sort_indices(new))
    encoding = encoding_of(col.type)
    frames = [encode_chunk(new.slice(i, chunk_size), encoding) for i in range(0, len(new), chunk_size)]
    data = b"".join(frames)
    start = _append(files, state.meta.committed_end, data)
    entry = DictMetaEntry(
        min_surrogate=current.max_surrogate + 1,
        max_surrogate=current.max_surrogate + len(new),
        start_offset=start,
        end_offset=start + len(data),
        chunk_count=len(frames),
        segment_id=segment_id,
        time_ms=now_ms(),
        crc32=crc32(data),
    )
    record = encode_record(files.column_id, str(col.type), version, entry, data)
    if not files.sfs.put_if_absent(files.record_path(version), record):
        return None
    meta = state.meta.with_entry(entry)
    result = ColumnDictionary(col, files, meta, pa.concat_arrays([current.values, new]))
    result.write_sort_index()
    done = DictState(meta=meta, records=version, checkpoint=state.checkpoint)
    if _checkpoint_due(done):
        _write_checkpoint(files, meta)
        done = replace(done, checkpoint=version)
    remember(files, done, result)
    return result


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
    written by a concurrent commit is never reported. A column whose dictionary cannot be
    read keeps its files.
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
                try:
                    sizes[cid] = read_state(ColumnFiles(sfs, directory, cid), str(col.type)).meta.dict_size
                except DictionaryError:
                    sizes[cid] = -1
        if size < sizes[cid]:
            out.append(path)
    return out
