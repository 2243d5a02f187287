"""Which chunks a new index snapshot copies and which it encodes (written by
table_index.write_snapshot; format: indexfiles/snapshot.py).

A chunk of the previous snapshot whose segments are, in order, the table's next ones is
copied as it is (its bytes and checksums) when it is full or the table's last and the
snapshot is of the current format (an older one's rows are encoded anew: upgrade on write); the other
segments - the open tail chunk and segments committed since - are encoded into new chunks
of CHUNK_SEGMENTS, from the previous snapshot's rows or their merge indexes (loaded in
bounded batches). The segment bounds come with them, one piece per chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from carbonstore.indexfiles.segment_bounds import SegmentBounds
from carbonstore.indexfiles.snapshot import DESC_FIELDS, SNAPSHOT_VERSION, Snapshot
from carbonstore.indexfiles.snapshot_write import CHUNK_SEGMENTS, index_rows, new_chunk
from carbonstore.pruning.segment_index import SegmentIndex, load_segment
from carbonstore.pruning.view_keys import first_keys, key_bytes_of, names_files_of, snapshot_holds
from carbonstore.store.readable import ReadableEntries
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry

__all__ = ["SnapshotSource", "snapshot_chunks"]

#: Segments whose loaded merge indexes are encoded into snapshot rows at a time: a first
#: snapshot of a large table holds a batch of decoded indexes, never all of them (100,000
#: segments held at once used 7.6 GB).
_ENCODE_BATCH = 512


class SnapshotSource:
    """What a snapshot writer needs of a view, without the bounds of every segment first:
    segments ``snapshot`` covers (row counts agreeing) are its rows, the others are loaded
    from their merge indexes when they are encoded - once each, not through the driver cache
    (a first snapshot of 100,000 segments would otherwise load each twice)."""

    def __init__(self, table: Table, entries: Sequence[LoadEntry], snapshot: Snapshot | None) -> None:
        # (readable entries build an entry when it is used: the segments loaded, a few)
        self.table, self.entries, self.snapshot = table, entries, snapshot
        self.size = len(entries)
        self._rows: list[int | None] = [None] * self.size
        if snapshot is None:
            return
        counts = snapshot.bounds.num_rows
        mine = (entries.row_counts if isinstance(entries, ReadableEntries)
                else np.array([e.row_count or 0 for e in entries], dtype=np.int64))
        head = min(snapshot.size, self.size)  # the common case: the snapshot's rows are the
        if head and snapshot_holds(snapshot, first_keys(key_bytes_of(entries), head)):  # first
            agree = (mine[:head] == 0) | (counts[:head] == mine[:head])  # segments, compared as bytes
            self._rows[:head] = [i if ok else None for i, ok in enumerate(agree.tolist())]
            return  # (the segments after them are not its rows: a name is one entry)
        names, files = names_files_of(entries)  # (columns: no entry built)
        for i, key in enumerate(zip(names, files, strict=True)):
            row = snapshot.rows.get(key)
            if row is not None and not (mine[i] and counts[row] != mine[i]):
                self._rows[i] = row

    def snapshot_row(self, i: int) -> int | None:
        return self._rows[i]

    def segment(self, i: int) -> SegmentIndex:
        return load_segment(self.table, self.entries[i])


def snapshot_chunks(view: Any) -> tuple[list[Any], dict[str, dict[str, Any]], SegmentBounds]:
    """``view``'s segments (a TableIndex or a SnapshotSource) as snapshot chunks: a chunk of its snapshot whose segments are
    the view's next ones, in order, is copied when it is full (or the view's last); the
    other segments are encoded into new chunks of CHUNK_SEGMENTS, from the snapshot's rows
    (their chunks verified) or their (loaded) merge indexes."""
    chunks: list[Any] = []
    slots: dict[str, dict[str, Any]] = {}
    snap = view.snapshot
    if snap is not None:
        slots.update({k: {f: getattr(d, f) for f in DESC_FIELDS} for k, d in snap.slots.items()})
    rows_of = [view.snapshot_row(i) for i in range(view.size)]
    pending: list[pa.Table] = []
    pending_n = 0
    copied: list[int] = []
    loaded: list[tuple[str, str, int, Any]] = []
    bounds: list[SegmentBounds] = []  # of the open chunk: runs of snapshot rows, loaded segments
    sealed: list[SegmentBounds] = []  # of the chunks done, one piece each
    snap_rows: list[int] = []

    def bound(piece: SegmentBounds | None, rows: Sequence[int] = ()) -> None:
        if rows:
            snap_rows.extend(rows)
            return
        if snap_rows and snap is not None:
            bounds.append(snap.bounds.take(np.array(snap_rows, dtype=np.intp)))
            snap_rows.clear()
        if piece is not None:
            bounds.append(piece)

    def flush() -> None:
        if copied and snap is not None:
            pending.extend(snap.rows_tables(np.array(copied, dtype=np.intp)))
            copied.clear()
        if loaded:
            rows, used = index_rows(loaded)
            pending.append(rows)
            slots.update(used)
            loaded.clear()

    def close() -> None:
        nonlocal pending_n
        flush()
        if pending:
            chunks.append(new_chunk(pending))
            pending.clear()
            seal()
        pending_n = 0

    def seal() -> None:  # a chunk's bounds as one piece, not objects per segment
        bound(None)
        if bounds:
            sealed.append(bounds[0] if len(bounds) == 1 else SegmentBounds.concat(bounds))
            bounds.clear()

    i, n = 0, view.size
    while i < n:
        row = rows_of[i]
        if row is not None and snap is not None and pending_n == 0 and snap.version == SNAPSHOT_VERSION:
            k = int(snap.chunk_of(np.array([row], dtype=np.intp))[0])
            first, end = int(snap.chunk_starts[k]), int(snap.chunk_starts[k + 1])
            count = end - first
            if (row == first and i + count <= n and (count >= CHUNK_SEGMENTS or i + count == n)
                    and rows_of[i:i + count] == list(range(first, end))):
                chunks.append((snap.core_rows(first, end), snap.chunk_raw(k)))
                bound(None, range(first, end))
                seal()
                i += count
                continue
        if row is not None and snap is not None:
            if loaded or (copied and row <= copied[-1]):
                flush()
            copied.append(row)
            bound(None, [row])
        else:
            if copied:
                flush()
            item = view.segment(i)
            bound(item.bounds)
            loaded.append((view.entries[i].load_name, view.entries[i].segment_file or "", item.bloom_base,
                           item.arrays))
            if len(loaded) >= _ENCODE_BATCH:  # bounded memory: merge indexes are held only
                flush()  # until their rows are encoded (compact Arrow rows from then on)
        pending_n += 1
        i += 1
        if pending_n >= CHUNK_SEGMENTS:
            close()
    close()
    seal()
    return chunks, slots, SegmentBounds.concat(sealed)
