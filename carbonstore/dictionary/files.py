"""On-disk files of one dictionary column: paths, the .dictmeta log, chunk and sort-index IO.

``<column_id>.dictmeta`` is a JSON document rewritten atomically; its last entry's
``endOffset`` is the committed length of ``<column_id>.dict``. Bytes of .dict beyond it
belong to a writer that crashed before committing and are never read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.fs as pafs

from carbonstore.dictionary._gen.carbonstore_dictionary.ttypes import DictionaryChunk, SortIndex
from carbonstore.dictionary.codec import (
    FRAME,
    MAX_STRUCT_BYTES,
    decode_chunk,
    decode_struct,
    encode_struct,
)
from carbonstore.errors import DictionaryError
from carbonstore.store.fs import StoreFS

__all__ = [
    "ColumnFiles",
    "DictMeta",
    "DictMetaEntry",
    "read_chunks",
    "read_sort_index",
    "write_sort_index",
]

FORMAT_VERSION = 1
_SORTINDEX_RE = re.compile(r"^(?P<cid>.+)_(?P<size>\d+)\.sortindex$")


@dataclass(frozen=True, slots=True)
class ColumnFiles:
    """The paths of one column's dictionary files."""

    sfs: StoreFS
    directory: str
    column_id: str

    @property
    def dict_path(self) -> str:
        return f"{self.directory}/{self.column_id}.dict"

    @property
    def meta_path(self) -> str:
        return f"{self.directory}/{self.column_id}.dictmeta"

    def sortindex_path(self, dict_size: int) -> str:
        return f"{self.directory}/{self.column_id}_{dict_size}.sortindex"

    def meta_stamp(self) -> tuple[int, int] | None:
        """(size, mtime ns) of the .dictmeta file, None when there is none."""
        info = self.sfs.fs.get_file_info(self.meta_path)
        if info.type == pafs.FileType.NotFound:
            return None
        return int(info.size or 0), int(info.mtime_ns or 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class DictMetaEntry:
    """One load's addition to a dictionary: surrogates and the .dict byte range it wrote."""

    min_surrogate: int
    max_surrogate: int
    start_offset: int
    end_offset: int
    chunk_count: int
    segment_id: str
    time_ms: int

    @property
    def num_values(self) -> int:
        return self.max_surrogate - self.min_surrogate + 1

    def to_json(self) -> dict[str, Any]:
        return {
            "minSurrogate": self.min_surrogate,
            "maxSurrogate": self.max_surrogate,
            "startOffset": self.start_offset,
            "endOffset": self.end_offset,
            "chunkCount": self.chunk_count,
            "segmentId": self.segment_id,
            "time": self.time_ms,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DictMetaEntry:
        return cls(
            min_surrogate=int(d["minSurrogate"]),
            max_surrogate=int(d["maxSurrogate"]),
            start_offset=int(d["startOffset"]),
            end_offset=int(d["endOffset"]),
            chunk_count=int(d["chunkCount"]),
            segment_id=str(d["segmentId"]),
            time_ms=int(d["time"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class DictMeta:
    """The committed state of a column's dictionary."""

    column_id: str
    column_type: str
    entries: tuple[DictMetaEntry, ...] = field(default_factory=tuple)

    @property
    def dict_size(self) -> int:
        """Number of values (surrogate 1, null, is not counted)."""
        return self.entries[-1].max_surrogate - 1 if self.entries else 0

    @property
    def committed_end(self) -> int:
        return self.entries[-1].end_offset if self.entries else 0

    def with_entry(self, entry: DictMetaEntry) -> DictMeta:
        return DictMeta(
            column_id=self.column_id, column_type=self.column_type, entries=(*self.entries, entry)
        )

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "version": FORMAT_VERSION,
                "columnId": self.column_id,
                "columnType": self.column_type,
                "entries": [e.to_json() for e in self.entries],
            },
            option=orjson.OPT_INDENT_2,
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, path: str) -> DictMeta:
        try:
            d = orjson.loads(data)
            meta = cls(
                column_id=str(d["columnId"]),
                column_type=str(d["columnType"]),
                entries=tuple(DictMetaEntry.from_json(e) for e in d["entries"]),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise DictionaryError(f"{path} is not a valid dictionary meta file: {err}") from err
        meta.check(path)
        return meta

    def check(self, path: str) -> None:
        """Entries must continue each other: surrogates from 2, byte ranges from 0."""
        next_surrogate, next_offset = 2, 0
        for e in self.entries:
            if (
                e.min_surrogate != next_surrogate
                or e.max_surrogate < e.min_surrogate
                or e.start_offset != next_offset
                or e.end_offset <= e.start_offset
                or e.chunk_count < 1
            ):
                raise DictionaryError(
                    f"{path}: entry of segment {e.segment_id} does not continue the previous "
                    f"one (surrogates {e.min_surrogate}..{e.max_surrogate}, bytes "
                    f"{e.start_offset}..{e.end_offset}); the dictionary needs repair by hand"
                )
            next_surrogate, next_offset = e.max_surrogate + 1, e.end_offset


def read_meta(files: ColumnFiles, column_type: str) -> DictMeta:
    """The committed state; an empty dictionary when no .dictmeta exists yet."""
    try:
        data = files.sfs.read_bytes(files.meta_path)
    except FileNotFoundError:
        return DictMeta(column_id=files.column_id, column_type=column_type)
    meta = DictMeta.from_bytes(data, path=files.meta_path)
    if meta.column_type != column_type:
        raise DictionaryError(
            f"{files.meta_path} holds {meta.column_type} values but the column is {column_type}"
        )
    return meta


def read_chunks(
    files: ColumnFiles, entries: tuple[DictMetaEntry, ...], target: pa.DataType
) -> list[pa.Array]:
    """The values of committed ``entries`` (consecutive), read from .dict in one range."""
    if not entries:
        return []
    start, end = entries[0].start_offset, entries[-1].end_offset
    try:
        with files.sfs.fs.open_input_file(files.dict_path) as f:
            if f.size() < end:
                raise DictionaryError(
                    f"{files.dict_path} has {f.size()} bytes but {end} are committed; "
                    "the dictionary file was truncated"
                )
            data = bytes(f.read_at(end - start, start))
    except FileNotFoundError as err:
        raise DictionaryError(f"{files.dict_path} is missing but {end} bytes are committed") from err
    out: list[pa.Array] = []
    for e in entries:
        pos, stop = e.start_offset - start, e.end_offset - start
        got: list[pa.Array] = []
        while pos < stop:
            if pos + FRAME.size > stop:
                raise DictionaryError(f"{files.dict_path}: chunk header crosses byte {e.end_offset}")
            (n,) = FRAME.unpack_from(data, pos)
            pos += FRAME.size
            if n > MAX_STRUCT_BYTES or pos + n > stop:
                raise DictionaryError(f"{files.dict_path}: chunk at byte {start + pos} overruns its entry")
            chunk = decode_struct(DictionaryChunk(), data[pos : pos + n])
            got.append(decode_chunk(chunk, target))
            pos += n
        total = sum(len(a) for a in got)
        if len(got) != e.chunk_count or total != e.num_values:
            raise DictionaryError(
                f"{files.dict_path}: segment {e.segment_id} committed {e.chunk_count} chunk(s) of "
                f"{e.num_values} values, found {len(got)} of {total}"
            )
        out.extend(got)
    return out


def write_sort_index(
    files: ColumnFiles, dict_size: int, sorted_surrogates: np.ndarray, ranks: np.ndarray
) -> str:
    """Write ``<column_id>_<dict_size>.sortindex`` atomically; return its path."""
    si = SortIndex(
        dict_size=dict_size,
        sorted_surrogates=np.asarray(sorted_surrogates, dtype="<i4").tobytes(),
        ranks=np.asarray(ranks, dtype="<i4").tobytes(),
    )
    path = files.sortindex_path(dict_size)
    files.sfs.write_atomic(path, encode_struct(si))
    return path


def read_sort_index(files: ColumnFiles, dict_size: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(sorted surrogates, ranks) from the sort index of ``dict_size`` values, None if absent."""
    path = files.sortindex_path(dict_size)
    try:
        data = files.sfs.read_bytes(path)
    except FileNotFoundError:
        return None
    si = decode_struct(SortIndex(), data)
    if si.dict_size != dict_size:
        raise DictionaryError(f"{path} is for {si.dict_size} values, not {dict_size}")
    order = np.frombuffer(si.sorted_surrogates or b"", dtype="<i4").astype(np.int32)
    ranks = np.frombuffer(si.ranks or b"", dtype="<i4").astype(np.int32)
    if len(order) != dict_size or len(ranks) != dict_size:
        raise DictionaryError(f"{path} holds {len(order)}/{len(ranks)} entries, not {dict_size}")
    return order, ranks


def list_sortindex_files(sfs: StoreFS, directory: str) -> list[tuple[str, str, int]]:
    """(path, column id, dict size) of every sort index file in ``directory``."""
    out = []
    for info in sfs.list_dir(directory):
        m = _SORTINDEX_RE.match(os.path.basename(info.path))
        if m and info.type == pafs.FileType.File:
            out.append((info.path, m.group("cid"), int(m.group("size"))))
    return sorted(out)
