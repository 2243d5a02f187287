"""A snapshot's DataFiles (the ``files`` and, since format 8, ``file_path`` columns): built
only for the files asked for, a chunk's at a time; a plan's kept files need only their
paths (format 8 reads the ``paths`` sections alone for them)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from carbonstore.indexfiles._gen.carbonindex.ttypes import DataFile
from carbonstore.indexfiles.snapshot_file import FILE_PATH, SnapshotSectionError
from carbonstore.store.arrow_numpy import take_pylist

__all__ = ["FILE_STRUCT", "SnapshotDataFiles"]

FILE_STRUCT = pa.struct([
    ("path", pa.string()), ("size", pa.int64()), ("num_rows", pa.int64()),
    ("footer_offset", pa.int64()), ("footer_length", pa.int32()), ("created_by", pa.string()),
    ("first_row_group", pa.int32()), ("num_row_groups", pa.int32()),
])


class SnapshotDataFiles:
    """The DataFiles part of :class:`~carbonstore.indexfiles.snapshot.Snapshot` (its
    chunk lists, offsets and damage bookkeeping are the snapshot's)."""

    version: str
    source: Any
    chunk_starts: Any
    _files: list[DataFile] | None
    _file_cols: dict[int, dict[str, pa.Array]]
    _file_objs: dict[int, DataFile]

    def _chunk_list(self, column: str, k: int) -> pa.Array | None:
        raise NotImplementedError

    def offsets(self, column: str) -> Any:
        raise NotImplementedError

    def _found_damaged(self) -> None:
        raise NotImplementedError

    def files(self) -> list[DataFile]:
        """Every segment's DataFiles, concatenated (built once)."""
        if self._files is None:
            everything = range(int(self.offsets("files")[-1]))
            self.prefetch_files(everything)
            self._files = [self.file(i) for i in everything]
        return self._files

    def file(self, i: int) -> DataFile:
        """DataFile ``i`` of :meth:`files` (built on first use: a plan needs few of them)."""
        got = self._file_objs.get(i)
        if got is None:
            self.prefetch_files([i])
            got = self._file_objs[i]
        return got

    def _file_fields(self, k: int, *, path_only: bool = False) -> dict[str, pa.Array]:
        """Chunk ``k``'s files, field by field (``path_only``: at least the paths; format 8
        keeps them apart, and a plan's kept files need nothing else)."""
        got = self._file_cols.get(k)
        if got is None or (not path_only and len(got) == 1):
            got = dict(got or {})
            if self.version != "7" and "path" not in got:
                paths = self._chunk_list(FILE_PATH, k)
                got["path"] = paths if paths is not None else pa.array([], pa.string())
            if not path_only or "path" not in got:
                arr = self._chunk_list("files", k)
                if arr is None:
                    arr = pa.array([], FILE_STRUCT)
                got.update({f.name: arr.field(f.name) for f in arr.type if f.name not in got})
                if set(got) != set(FILE_STRUCT.names) or len({len(a) for a in got.values()}) > 1:
                    self._found_damaged()
                    raise SnapshotSectionError(f"{self.source.what}: the files of chunk {k} do not match their paths")
            self._file_cols[k] = got
        return got

    def _by_chunk(self, indices: Sequence[int]) -> Iterator[tuple[int, list[int], list[int]]]:
        """Global file ``indices`` by chunk: (chunk, positions in ``indices``, local indices)."""
        idx = np.asarray(indices, dtype=np.int64)
        firsts = self.offsets("files")[self.chunk_starts]
        chunk = np.searchsorted(firsts, idx, side="right") - 1
        for k in np.flatnonzero(np.bincount(chunk)).tolist():  # distinct, sorted (np.unique loads numpy.ma)
            pos = np.flatnonzero(chunk == k)
            yield k, pos.tolist(), (idx[pos] - firsts[k]).tolist()

    def prefetch_files(self, indices: Sequence[int]) -> None:
        """Build DataFiles ``indices`` of :meth:`files` now, in one batch per chunk: a plan
        builds only the files it keeps (never a Python object per file of the table)."""
        todo = [i for i in indices if i not in self._file_objs]
        if not todo:
            return
        names = FILE_STRUCT.names
        for k, pos, local in self._by_chunk(todo):
            cols = {f: take_pylist(a, local) for f, a in self._file_fields(k).items()}
            for j, p in enumerate(pos):
                self._file_objs[todo[p]] = DataFile(**{f: cols[f][j] for f in names})

    def file_paths(self, indices: Sequence[int]) -> list[str]:
        """The paths of DataFiles ``indices`` (no DataFile built)."""
        out: list[str] = [""] * len(indices)
        for k, pos, local in self._by_chunk(indices):
            for p, path in zip(pos, take_pylist(self._file_fields(k, path_only=True)["path"], local), strict=True):
                out[p] = path
        return out
