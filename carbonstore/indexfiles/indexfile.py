"""The .carbonindex / .carbonindexmerge files: layout, atomic writing, reading, merging.

Layout (all integers little-endian)::

    magic (8 bytes: b"CARBIDX\\x00" task index, b"CARBMRG\\x00" merge index)
    u32 format version | u32 reserved (0) | u64 header length H
    header: IndexHeader, Thrift compact protocol (H bytes)
    bloom region: concatenated SBBF bitsets (header.bloom_region_length bytes)
    trailer: u64 H | b"CIDX"

Loading for min/max pruning reads the first 24 + H bytes only.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow.fs as pafs

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles import tio
from carbonstore.indexfiles._gen.carbonindex.ttypes import IndexHeader
from carbonstore.indexfiles.arrays import IndexArrays, load_arrays
from carbonstore.indexfiles.footer import FileIndex, read_file_index
from carbonstore.indexfiles.packing import FORMAT_VERSION, pack, unpack
from carbonstore.store.faults import crash_point

__all__ = [
    "MAGIC_MERGE",
    "MAGIC_TASK",
    "IndexFileKind",
    "LoadedIndex",
    "atomic_write",
    "build_task_index",
    "load_index",
    "load_indexes",
    "merge_indexes",
    "read_index",
    "write_index",
]

MAGIC_TASK = b"CARBIDX\x00"
MAGIC_MERGE = b"CARBMRG\x00"
TRAILER_MAGIC = b"CIDX"
_PREFIX = struct.Struct("<8sIIQ")
_TRAILER = struct.Struct("<Q4s")
IndexFileKind = Literal["task", "merge"]
_MAX_HEADER = 1 << 31


@dataclass(slots=True, kw_only=True)
class LoadedIndex:
    """A decoded index file: header, where its blooms are, and which kind it is."""

    path: str
    kind: IndexFileKind
    header: IndexHeader
    bloom_region_offset: int
    bloom_region: bytes | None = None


def atomic_write(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """Write ``data`` to a temporary sibling, then rename it over ``path``.

    On local and HDFS filesystems the rename is atomic, so readers see the old file or
    the whole new one; object stores (S3) have no atomic rename - there the write of a
    new, uniquely named file is what keeps readers safe.
    """
    parent, _, name = path.rpartition("/")
    tmp = (
        f"{parent}/.{name}.{uuid.uuid4().hex}.tmp" if parent else f".{name}.{uuid.uuid4().hex}.tmp"
    )
    try:
        with fs.open_output_stream(tmp) as out:
            out.write(data)
        crash_point("index.before_rename")
        fs.move(tmp, path)
    except BaseException:
        try:
            fs.delete_file(tmp)
        except OSError:
            pass
        raise


def encode_index(header: IndexHeader, blooms: bytes, kind: IndexFileKind) -> bytes:
    """Serialise a header and its bloom region into the file layout."""
    header.bloom_region_length = len(blooms)
    hb = tio.encode(header)
    magic = MAGIC_TASK if kind == "task" else MAGIC_MERGE
    return b"".join(
        [
            _PREFIX.pack(magic, FORMAT_VERSION, 0, len(hb)),
            hb,
            blooms,
            _TRAILER.pack(len(hb), TRAILER_MAGIC),
        ]
    )


def write_index(
    fs: pafs.FileSystem,
    path: str,
    header: IndexHeader,
    blooms: bytes,
    *,
    kind: IndexFileKind = "task",
) -> int:
    """Atomically write an index file; returns its size in bytes."""
    data = encode_index(header, blooms, kind)
    atomic_write(fs, path, data)
    return len(data)


def build_task_index(
    fs: pafs.FileSystem,
    segment_dir: str,
    data_files: Sequence[str],
    output_path: str,
    *,
    segment_id: str = "",
    task_id: str = "",
    column_ids: dict[str, str] | None = None,
) -> int:
    """Index the Parquet files a load task wrote and write its ``.carbonindex``.

    Args:
        fs: filesystem of the store.
        segment_dir: the segment folder; ``data_files`` are relative to it.
        data_files: relative paths of the task's Parquet files.
        output_path: full path of the ``.carbonindex`` to write.
        segment_id: recorded in the header.
        task_id: recorded in the header.
        column_ids: leaf column name -> column id (UUID) from the table schema.

    Returns:
        The size of the written index file in bytes.
    """
    files = [
        read_file_index(fs, f"{segment_dir.rstrip('/')}/{rel}", rel_path=rel) for rel in data_files
    ]
    header, blooms = pack(files, segment_id=segment_id, task_id=task_id, column_ids=column_ids)
    return write_index(fs, output_path, header, blooms, kind="task")


def decode_index_bytes(data: bytes, name: str) -> LoadedIndex:
    """Decode a whole index file held in memory (header and bloom region)."""
    loaded = _decode_prefix(data, len(data), name)
    _check_trailer(loaded, data[-_TRAILER.size :])
    start = loaded.bloom_region_offset
    loaded.bloom_region = data[start : start + (loaded.header.bloom_region_length or 0)]
    return loaded


def _decode_prefix(data: bytes, size: int, name: str) -> LoadedIndex:
    if size < _PREFIX.size + _TRAILER.size or len(data) < _PREFIX.size:
        raise CorruptIndexError(f"{name}: too small to be a carbonindex file ({size} bytes)")
    magic, version, _reserved, hlen = _PREFIX.unpack_from(data, 0)
    if magic not in (MAGIC_TASK, MAGIC_MERGE):
        raise CorruptIndexError(f"{name}: not a carbonindex file (bad magic)")
    if version != FORMAT_VERSION:
        raise CorruptIndexError(
            f"{name}: carbonindex format version {version} is not supported (expected {FORMAT_VERSION}); rebuild the index"
        )
    if (
        hlen > min(size, _MAX_HEADER) - _PREFIX.size - _TRAILER.size
        or len(data) < _PREFIX.size + hlen
    ):
        raise CorruptIndexError(
            f"{name}: header length {hlen} does not fit the {size}-byte file (truncated?)"
        )
    try:
        header = tio.decode(IndexHeader(), data[_PREFIX.size : _PREFIX.size + hlen])
    except tio.DECODE_ERRORS as err:
        raise CorruptIndexError(f"{name}: cannot decode the index header: {err}") from err
    blen = header.bloom_region_length or 0
    if blen < 0 or _PREFIX.size + hlen + blen + _TRAILER.size != size:
        raise CorruptIndexError(
            f"{name}: file size {size} does not match its header (truncated or appended to)"
        )
    return LoadedIndex(
        path=name,
        kind="task" if magic == MAGIC_TASK else "merge",
        header=header,
        bloom_region_offset=_PREFIX.size + hlen,
    )


def _check_trailer(loaded: LoadedIndex, tail: bytes) -> None:
    hlen, magic = _TRAILER.unpack(tail)
    if magic != TRAILER_MAGIC or hlen != loaded.bloom_region_offset - _PREFIX.size:
        raise CorruptIndexError(
            f"{loaded.path}: index trailer is missing or wrong (truncated file?)"
        )


def read_index(fs: pafs.FileSystem, path: str, *, with_blooms: bool = False) -> LoadedIndex:
    """Read an index file's header (and its bloom region when asked).

    Raises:
        CorruptIndexError: the file is not an index, truncated or undecodable.
    """
    try:
        with fs.open_input_file(path) as f:
            size = f.size()
            head = f.read_at(min(size, 64 * 1024), 0)
            if len(head) >= _PREFIX.size:
                hlen = _PREFIX.unpack_from(head, 0)[3]
                if _PREFIX.size + hlen > len(head) and _PREFIX.size + hlen <= size:
                    head = f.read_at(_PREFIX.size + hlen, 0)
            loaded = _decode_prefix(head, size, path)
            _check_trailer(loaded, f.read_at(_TRAILER.size, size - _TRAILER.size))
            if with_blooms:
                loaded.bloom_region = f.read_at(
                    loaded.header.bloom_region_length or 0, loaded.bloom_region_offset
                )
            return loaded
    except CorruptIndexError:
        raise
    except (OSError, ValueError, struct.error) as err:
        raise CorruptIndexError(f"{path}: cannot read index file: {err}") from err


def _bloom_reader(fs: pafs.FileSystem, path: str, base: int) -> object:
    def read(off: int, ln: int) -> bytes:
        try:
            with fs.open_input_file(path) as f:
                data = f.read_at(ln, base + off)
        except OSError as err:
            raise CorruptIndexError(f"{path}: cannot read bloom bitset: {err}") from err
        if len(data) != ln:
            raise CorruptIndexError(f"{path}: bloom bitset truncated")
        return data

    return read


def load_index(fs: pafs.FileSystem, path: str) -> IndexArrays:
    """Load an index file into arrays; blooms are fetched lazily from the file."""
    loaded = read_index(fs, path)
    return load_arrays(loaded.header, _bloom_reader(fs, path, loaded.bloom_region_offset))  # type: ignore[arg-type]


def _merged(loaded: Sequence[LoadedIndex], segment_id: str) -> tuple[IndexHeader, bytes]:
    files: list[FileIndex] = []
    for li in loaded:
        files.extend(unpack(li.header, li.bloom_region))
    column_ids = {c.name: c.column_id for li in loaded for c in (li.header.columns or [])}
    task_ids = ",".join(sorted({li.header.task_id or "" for li in loaded} - {""}))
    return pack(files, segment_id=segment_id, task_id=task_ids, column_ids=column_ids)


def merge_indexes(
    fs: pafs.FileSystem, task_index_paths: Sequence[str], output_path: str, *, segment_id: str = ""
) -> int:
    """Merge task indexes into one ``.carbonindexmerge`` (written atomically); returns its size."""
    loaded = [read_index(fs, p, with_blooms=True) for p in task_index_paths]
    header, blooms = _merged(
        loaded, segment_id or (loaded[0].header.segment_id if loaded else "") or ""
    )
    return write_index(fs, output_path, header, blooms, kind="merge")


def load_indexes(fs: pafs.FileSystem, paths: Sequence[str]) -> IndexArrays:
    """Arrays over several index files (e.g. every task index of an unmerged segment)."""
    if len(paths) == 1:
        return load_index(fs, paths[0])
    loaded = [read_index(fs, p, with_blooms=True) for p in paths]
    header, blooms = _merged(loaded, loaded[0].header.segment_id or "" if loaded else "")
    return load_arrays(header, lambda off, ln: blooms[off : off + ln])
