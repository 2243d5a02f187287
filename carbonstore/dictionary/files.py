"""On-disk files of one dictionary column: paths, commit records, the checkpoint, chunks.

Format 2 (docs/dictionary.md, "Files"):

* ``<column_id>.dictlog/<n>.commit`` - commit record of dictionary version ``n`` (1, 2, ...),
  created with ``StoreFS.put_if_absent``: exactly one writer wins each version, and a
  record is never rewritten. It holds the version's ``DictMetaEntry`` (surrogates, the
  ``.dict`` byte range, the CRC32 of those bytes) **and a copy of the bytes**, under a CRC32
  of the whole record. The records are the committed truth.
* ``<column_id>.dict`` - the chunks of every version at the byte range its record names
  (appended before the commit; bytes no record names are ignored). Checked per version
  against the record's CRC32; a range that fails is read from the record instead.
* ``<column_id>.dictmeta`` - a checkpoint: the entries of versions 1..k as JSON under a
  CRC32, rewritten after commits. Never trusted over the records: a checkpoint naming more
  versions than exist is damage; a damaged or missing one is rebuilt from the records.

Format 1 (before commit records): ``.dictmeta`` without a checksum is the committed state
and ``.dict`` holds its entries back to back. It is read as committed, and the first
format-2 writer copies its entries into records 1..k (the upgrade).
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

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
    "DictState",
    "decode_record",
    "encode_record",
    "read_chunks",
    "read_sort_index",
    "read_state",
    "write_sort_index",
]

LEGACY_FORMAT = 1
FORMAT_VERSION = 2
_SORTINDEX_RE = re.compile(r"^(?P<cid>.+)_(?P<size>\d+)\.sortindex$")
_RECORD_RE = re.compile(r"^(?P<n>\d{10})\.commit$")
_RECORD_MAGIC = b"CSDC"
_U32 = struct.Struct("<I")


def crc32(data: bytes | memoryview) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


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

    @property
    def log_dir(self) -> str:
        return f"{self.directory}/{self.column_id}.dictlog"

    def record_path(self, version: int) -> str:
        return f"{self.log_dir}/{version:010d}.commit"

    def sortindex_path(self, dict_size: int) -> str:
        return f"{self.directory}/{self.column_id}_{dict_size}.sortindex"

    def list_versions(self) -> list[int]:
        """Version numbers of the commit records, ascending (names that are not records: damage)."""
        out = []
        for info in self.sfs.list_dir(self.log_dir):
            m = _RECORD_RE.match(info.base_name)
            if m is None or not info.is_file:
                if ".tmp" in info.base_name:  # a put_if_absent killed before its link
                    continue
                raise DictionaryError(
                    f"{info.path} is not a dictionary commit record; move it out of {self.log_dir}"
                )
            out.append(int(m.group("n")))
        return sorted(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class DictMetaEntry:
    """One version of a dictionary: its surrogates and the .dict byte range of its chunks."""

    min_surrogate: int
    max_surrogate: int
    start_offset: int
    end_offset: int
    chunk_count: int
    segment_id: str
    time_ms: int
    #: CRC32 of the entry's .dict bytes (None: a format-1 entry, not yet upgraded).
    crc32: int | None = None

    @property
    def num_values(self) -> int:
        return self.max_surrogate - self.min_surrogate + 1

    @property
    def num_bytes(self) -> int:
        return self.end_offset - self.start_offset

    def to_json(self) -> dict[str, Any]:
        d = {
            "minSurrogate": self.min_surrogate,
            "maxSurrogate": self.max_surrogate,
            "startOffset": self.start_offset,
            "endOffset": self.end_offset,
            "chunkCount": self.chunk_count,
            "segmentId": self.segment_id,
            "time": self.time_ms,
        }
        if self.crc32 is not None:
            d["crc32"] = self.crc32
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DictMetaEntry:
        crc = d.get("crc32")
        return cls(
            min_surrogate=int(d["minSurrogate"]),
            max_surrogate=int(d["maxSurrogate"]),
            start_offset=int(d["startOffset"]),
            end_offset=int(d["endOffset"]),
            chunk_count=int(d["chunkCount"]),
            segment_id=str(d["segmentId"]),
            time_ms=int(d["time"]),
            crc32=None if crc is None else int(crc),
        )

    def same_range(self, other: DictMetaEntry) -> bool:
        """Same surrogates, bytes and chunks (a record against a checkpoint entry)."""
        return (
            self.min_surrogate == other.min_surrogate and self.max_surrogate == other.max_surrogate
            and self.start_offset == other.start_offset and self.end_offset == other.end_offset
            and self.chunk_count == other.chunk_count
        )


def check_entries(entries: tuple[DictMetaEntry, ...], path: str, *, contiguous: bool) -> None:
    """Entries must continue each other: surrogates from 2 without gaps; byte ranges from
    0, in order and not overlapping (back to back for format 1)."""
    next_surrogate, next_offset = 2, 0
    for e in entries:
        if (
            e.min_surrogate != next_surrogate
            or e.max_surrogate < e.min_surrogate
            or (e.start_offset != next_offset if contiguous else e.start_offset < next_offset)
            or e.end_offset <= e.start_offset
            or e.chunk_count < 1
            or e.chunk_count > e.num_values
        ):
            raise DictionaryError(
                f"{path}: entry of segment {e.segment_id} does not continue the previous "
                f"one (surrogates {e.min_surrogate}..{e.max_surrogate}, bytes "
                f"{e.start_offset}..{e.end_offset})"
            )
        next_surrogate, next_offset = e.max_surrogate + 1, e.end_offset


@dataclass(frozen=True, slots=True, kw_only=True)
class DictMeta:
    """Entries of versions 1..k of a column's dictionary (a checkpoint or a format-1 file)."""

    column_id: str
    column_type: str
    entries: tuple[DictMetaEntry, ...] = field(default_factory=tuple)
    format: int = FORMAT_VERSION

    @property
    def dict_size(self) -> int:
        """Number of values (surrogate 1, null, is not counted)."""
        return self.entries[-1].max_surrogate - 1 if self.entries else 0

    @property
    def committed_end(self) -> int:
        return self.entries[-1].end_offset if self.entries else 0

    def with_entry(self, entry: DictMetaEntry) -> DictMeta:
        return replace(self, entries=(*self.entries, entry))

    def to_bytes(self) -> bytes:
        body = {
            "version": self.format,
            "columnId": self.column_id,
            "columnType": self.column_type,
            "entries": [e.to_json() for e in self.entries],
        }
        if self.format >= FORMAT_VERSION:
            body["crc32"] = crc32(orjson.dumps(body, option=orjson.OPT_SORT_KEYS))
        return orjson.dumps(body, option=orjson.OPT_INDENT_2)

    @classmethod
    def from_bytes(cls, data: bytes, *, path: str) -> DictMeta:
        try:
            d = orjson.loads(data)
            if not isinstance(d, dict):
                raise TypeError("not a JSON object")
            fmt = int(d.get("version", LEGACY_FORMAT))
            if fmt >= FORMAT_VERSION:
                stored = d.pop("crc32", None)
                if stored != crc32(orjson.dumps(d, option=orjson.OPT_SORT_KEYS)):
                    raise ValueError("its checksum does not match its content")
            elif fmt != LEGACY_FORMAT:
                raise ValueError(f"unknown version {fmt}")
            meta = cls(
                column_id=str(d["columnId"]),
                column_type=str(d["columnType"]),
                entries=tuple(DictMetaEntry.from_json(e) for e in d["entries"]),
                format=fmt,
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise DictionaryError(f"{path} is not a valid dictionary meta file: {err}") from err
        check_entries(meta.entries, path, contiguous=fmt == LEGACY_FORMAT)
        return meta


# ---- commit records ----------------------------------------------------------------------


def encode_record(
    column_id: str, column_type: str, version: int, entry: DictMetaEntry, data: bytes
) -> bytes:
    """The commit record of ``version``: magic, header length, JSON header, chunks, CRC32."""
    header = orjson.dumps({
        "format": FORMAT_VERSION, "columnId": column_id, "columnType": column_type,
        "version": version, "entry": entry.to_json(),
    })
    body = _RECORD_MAGIC + _U32.pack(len(header)) + header + data
    return body + _U32.pack(crc32(body))


def decode_record(
    raw: bytes, *, path: str, column_id: str, column_type: str, version: int
) -> tuple[DictMetaEntry, bytes]:
    """(entry, chunk bytes) of a commit record, every field checked against ``path``'s name."""
    head = 4 + _U32.size
    if len(raw) < head + _U32.size or raw[:4] != _RECORD_MAGIC:
        raise DictionaryError(f"{path} is not a dictionary commit record (truncated or overwritten)")
    (stored,) = _U32.unpack_from(raw, len(raw) - _U32.size)
    if stored != crc32(memoryview(raw)[: len(raw) - _U32.size]):
        raise DictionaryError(f"{path}: checksum mismatch (the commit record is damaged)")
    (hlen,) = _U32.unpack_from(raw, 4)
    if head + hlen > len(raw) - _U32.size:
        raise DictionaryError(f"{path}: header overruns the record")
    try:
        h = orjson.loads(raw[head : head + hlen])
        entry = DictMetaEntry.from_json(h["entry"])
        ok = (h["columnId"], h["columnType"], int(h["version"])) == (column_id, column_type, version)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise DictionaryError(f"{path}: unreadable record header: {err}") from err
    if not ok:
        raise DictionaryError(
            f"{path} records version {h.get('version')} of column {h.get('columnId')} "
            f"({h.get('columnType')}), not version {version} of {column_id} ({column_type})"
        )
    data = raw[head + hlen : len(raw) - _U32.size]
    if entry.crc32 is None or len(data) != entry.num_bytes or crc32(data) != entry.crc32:
        raise DictionaryError(f"{path}: the chunk bytes do not match the entry")
    return entry, data


def read_record(
    files: ColumnFiles, column_type: str, version: int
) -> tuple[DictMetaEntry, bytes]:
    path = files.record_path(version)
    try:
        raw = files.sfs.read_bytes(path)
    except FileNotFoundError as err:
        raise DictionaryError(f"{path} is missing (dictionary version {version})") from err
    return decode_record(raw, path=path, column_id=files.column_id, column_type=column_type,
                         version=version)


# ---- the committed state ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DictState:
    """What is committed: the entries of versions 1..n and how many records exist.

    ``records < len(meta.entries)`` only for a format-1 dictionary (not or partly upgraded).
    """

    meta: DictMeta
    records: int
    #: Versions the format-2 checkpoint on disk covers (0: none, damaged or format 1).
    checkpoint: int = 0

    @property
    def version(self) -> int:
        return len(self.meta.entries)


def _read_checkpoint(files: ColumnFiles, column_type: str) -> tuple[DictMeta | None, DictionaryError | None]:
    try:
        data = files.sfs.read_bytes(files.meta_path)
    except FileNotFoundError:
        return None, None
    try:
        meta = DictMeta.from_bytes(data, path=files.meta_path)
    except DictionaryError as err:
        return None, err
    if meta.column_id != files.column_id or meta.column_type != column_type:
        return None, DictionaryError(
            f"{files.meta_path} holds {meta.column_type} values of column {meta.column_id}, "
            f"not {column_type} values of {files.column_id}"
        )
    return meta, None


def read_state(files: ColumnFiles, column_type: str, *, known: DictState | None = None) -> DictState:
    """The committed state of a column's dictionary.

    ``known``: a state read before; only versions committed since are read (one probe when
    nothing changed).

    Raises:
        DictionaryError: the files contradict each other, or a version is unreadable.
    """
    if known is not None and known.records == known.version:
        entries = list(known.meta.entries)
        while files.sfs.exists(files.record_path(len(entries) + 1)):
            entries.append(read_record(files, column_type, len(entries) + 1)[0])
        if len(entries) == known.version:
            return known
        meta = replace(known.meta, entries=tuple(entries))
        check_entries(meta.entries, files.log_dir, contiguous=False)
        return DictState(meta=meta, records=len(entries), checkpoint=known.checkpoint)
    checkpoint, damage = _read_checkpoint(files, column_type)
    versions = files.list_versions()
    n = len(versions)
    if versions != list(range(1, n + 1)):
        missing = sorted(set(range(1, max(versions) + 1)) - set(versions))
        raise DictionaryError(
            f"{files.record_path(missing[0])} is missing: dictionary versions "
            f"{missing[0]}..{max(versions)} do not follow each other"
        )
    empty = DictMeta(column_id=files.column_id, column_type=column_type)
    if n == 0:
        if damage is not None:
            raise damage
        if checkpoint is None:
            # Bytes in .dict with no record yet are a writer's uncommitted append (format
            # 2 writers create the log folder first); without the folder they were format-1
            # commits whose .dictmeta is gone.
            if (
                not files.sfs.exists(files.log_dir)
                and files.sfs.exists(files.dict_path) and files.sfs.size(files.dict_path) > 0
            ):
                raise DictionaryError(
                    f"{files.meta_path} is missing but {files.dict_path} holds "
                    f"{files.sfs.size(files.dict_path)} bytes: the committed state is lost"
                )
            return DictState(meta=empty, records=0)
        if checkpoint.format >= FORMAT_VERSION and checkpoint.entries:
            raise DictionaryError(
                f"{files.log_dir} is missing but {files.meta_path} names "
                f"{len(checkpoint.entries)} committed version(s)"
            )
        return DictState(meta=checkpoint, records=0)
    if checkpoint is not None and checkpoint.format == LEGACY_FORMAT and len(checkpoint.entries) >= n:
        # A format-1 dictionary being upgraded: records 1..n copy its first entries.
        for v in versions:
            rec = read_record(files, column_type, v)[0]
            if not rec.same_range(checkpoint.entries[v - 1]):
                raise DictionaryError(f"{files.record_path(v)} contradicts {files.meta_path}")
        with_crc = [read_record(files, column_type, v)[0] for v in versions]
        meta = replace(checkpoint, entries=(*with_crc, *checkpoint.entries[n:]))
        return DictState(meta=meta, records=n)
    if checkpoint is not None and len(checkpoint.entries) > n:
        raise DictionaryError(
            f"{files.meta_path} names {len(checkpoint.entries)} committed versions but "
            f"{files.log_dir} holds {n}: commit records are missing"
        )
    base: tuple[DictMetaEntry, ...] = ()
    if checkpoint is not None and checkpoint.format >= FORMAT_VERSION:
        base = checkpoint.entries
    entries = [*base, *(read_record(files, column_type, v)[0] for v in versions[len(base):])]
    meta = DictMeta(column_id=files.column_id, column_type=column_type, entries=tuple(entries))
    check_entries(meta.entries, files.log_dir, contiguous=False)
    return DictState(meta=meta, records=n, checkpoint=len(base))


# ---- chunks -------------------------------------------------------------------------------


def _decode_frames(
    data: bytes, e: DictMetaEntry, target: pa.DataType, path: str
) -> list[pa.Array]:
    pos, stop = 0, len(data)
    got: list[pa.Array] = []
    while pos < stop:
        if pos + FRAME.size > stop:
            raise DictionaryError(f"{path}: chunk header crosses byte {e.end_offset}")
        (n,) = FRAME.unpack_from(data, pos)
        pos += FRAME.size
        if n > MAX_STRUCT_BYTES or pos + n > stop:
            raise DictionaryError(f"{path}: chunk at byte {e.start_offset + pos} overruns its entry")
        try:
            chunk = decode_struct(DictionaryChunk(), data[pos : pos + n])
            got.append(decode_chunk(chunk, target))
        except DictionaryError as err:
            raise DictionaryError(f"{path}: {err}") from err
        pos += n
    total = sum(len(a) for a in got)
    if len(got) != e.chunk_count or total != e.num_values:
        raise DictionaryError(
            f"{path}: segment {e.segment_id} committed {e.chunk_count} chunk(s) of "
            f"{e.num_values} values, found {len(got)} of {total}"
        )
    return got


def read_chunks(
    files: ColumnFiles,
    entries: tuple[DictMetaEntry, ...],
    target: pa.DataType,
    *,
    first_version: int = 1,
    column_type: str = "",
) -> tuple[list[pa.Array], list[int]]:
    """The values of committed ``entries`` (versions ``first_version``...).

    Each entry's bytes come from .dict when they match its CRC32, else from its commit
    record. Format-1 entries (no CRC32) can only come from .dict and are checked for
    structure. Returns the values and the versions whose .dict bytes were unusable.
    """
    if not entries:
        return [], []
    start, end = entries[0].start_offset, entries[-1].end_offset
    blob = b""
    try:
        with files.sfs.open_input_file(files.dict_path) as f:
            have = f.size()
            if have > start:
                blob = bytes(f.read_at(min(end, have) - start, start))
    except FileNotFoundError:
        pass
    out: list[pa.Array] = []
    unusable: list[int] = []
    for i, e in enumerate(entries):
        version = first_version + i
        data = blob[e.start_offset - start : e.end_offset - start]
        if e.crc32 is None:
            if len(data) != e.num_bytes:
                what = "missing" if not blob and not files.sfs.exists(files.dict_path) else "truncated"
                raise DictionaryError(
                    f"{files.dict_path} is {what}: it ends before byte {e.end_offset}, which "
                    "is committed"
                )
            out.extend(_decode_frames(data, e, target, files.dict_path))
            continue
        if len(data) != e.num_bytes or crc32(data) != e.crc32:
            unusable.append(version)
            _, data = read_record(files, column_type, version)
        out.extend(_decode_frames(data, e, target, files.record_path(version)
                                  if version in unusable else files.dict_path))
    return out, unusable


# ---- sort index ---------------------------------------------------------------------------


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
    """(sorted surrogates, ranks) from the sort index of ``dict_size`` values, None if absent.

    Checked for shape only: a permutation of the surrogates whose ranks invert it
    (``ColumnDictionary`` also checks the order against the values).

    Raises:
        DictionaryError: the file is not such a sort index.
    """
    path = files.sortindex_path(dict_size)
    try:
        data = files.sfs.read_bytes(path)
    except FileNotFoundError:
        return None
    si = decode_struct(SortIndex(), data)
    if si.dict_size != dict_size:
        raise DictionaryError(f"{path} is for {si.dict_size} values, not {dict_size}")
    raw_order, raw_ranks = si.sorted_surrogates or b"", si.ranks or b""
    if len(raw_order) != 4 * dict_size or len(raw_ranks) != 4 * dict_size:
        raise DictionaryError(f"{path} holds {len(raw_order)}/{len(raw_ranks)} bytes, not {4 * dict_size}")
    order = np.frombuffer(raw_order, dtype="<i4").astype(np.int32)
    ranks = np.frombuffer(raw_ranks, dtype="<i4").astype(np.int32)
    if dict_size and (
        order.min() < 2 or order.max() > dict_size + 1
        or ranks.min() < 0 or ranks.max() >= dict_size
        or not np.array_equal(ranks[order - 2], np.arange(dict_size, dtype=np.int32))
    ):
        raise DictionaryError(f"{path} is not a permutation of the dictionary's surrogates")
    return order, ranks


def list_sortindex_files(sfs: StoreFS, directory: str) -> list[tuple[str, str, int]]:
    """(path, column id, dict size) of every sort index file in ``directory``."""
    out = []
    for info in sfs.list_dir(directory):
        m = _SORTINDEX_RE.match(os.path.basename(info.path))
        if m and info.is_file:
            out.append((info.path, m.group("cid"), int(m.group("size"))))
    return sorted(out)
