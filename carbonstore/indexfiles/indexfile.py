"""The .carbonindex / .carbonindexmerge files: layout, checksums, durable writing, reading, merging.

Layout, format 2 (all integers little-endian)::

    magic (8 bytes: b"CARBIDX\\x00" task index, b"CARBMRG\\x00" merge index)
    u32 format version (2) | u32 reserved (0) | u64 header length H
    u64 xxh64 of the bloom region | u64 xxh64 of bytes [0, 32) and the header
    header: IndexHeader, Thrift compact protocol (H bytes)
    bloom region: per bitset, the SBBF bytes then u64 xxh64 of them
    trailer: u64 H | b"CIDX"

Every read verifies before it decodes: loading for min/max pruning reads the first 40 + H
bytes and checks the header checksum, then the size and the trailer; a bloom bitset is read
on demand together with its own checksum (several bitsets of a segment's column in one
ranged read, each checked from memory); reading the whole bloom region (merging) checks
the region checksum. Any mismatch, a truncated, empty or foreign file, or a file of the
other kind (a task index where a merge index is named, or the reverse) is a
:class:`CorruptIndexError` naming the file: the index is derived data, rebuilt from the
Parquet files with ``carbonstore index rebuild``. Format 1 files (no checksums) are refused
the same way (they need that rebuild once).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from typing import Literal

import xxhash

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles import tio
from carbonstore.indexfiles._gen.carbonindex.ttypes import IndexHeader
from carbonstore.indexfiles.arrays import BLOOM_CHECKSUM_SIZE, IndexArrays, load_arrays
from carbonstore.indexfiles.packing import FORMAT_VERSION, pack, unpack
from carbonstore.store.entries import check_relative_path
from carbonstore.store.fs import AnyFS, as_store_fs
from carbonstore.store.records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from carbonstore.indexfiles.footer import FileIndex

__all__ = [
    "MAGIC_MERGE",
    "MAGIC_TASK",
    "REBUILD_HINT",
    "IndexFileKind",
    "LoadedIndex",
    "bitsets_span",
    "build_task_index",
    "check_bitset",
    "expected_kind",
    "load_index",
    "load_indexes",
    "merge_indexes",
    "read_bitset",
    "read_bitsets",
    "read_index",
    "write_index",
]

MAGIC_TASK = b"CARBIDX\x00"
MAGIC_MERGE = b"CARBMRG\x00"
TRAILER_MAGIC = b"CIDX"
_PREFIX = struct.Struct("<8sIIQQQ")
_SUMMED = 32  # prefix bytes covered by the header checksum (all but the checksum itself)
_TRAILER = struct.Struct("<Q4s")
_BLOOM_SUM = struct.Struct("<Q")
IndexFileKind = Literal["task", "merge"]
_MAX_HEADER = 1 << 31
#: Ends every CorruptIndexError message about an index file.
REBUILD_HINT = "; the index is derived data: rebuild it with 'carbonstore index rebuild TABLE'"


class LoadedIndex(Record, kw_only=True):
    """A decoded index file: header, where its blooms are, and which kind it is."""

    path: str
    kind: IndexFileKind
    header: IndexHeader
    bloom_region_offset: int
    bloom_region: bytes | None = None
    bloom_checksum: int = 0


def _xxh64(*parts: bytes) -> int:
    h = xxhash.xxh64()
    for p in parts:
        h.update(p)
    return int(h.intdigest())


def expected_kind(path: str) -> IndexFileKind | None:
    """The kind a file's name promises (None when the name says neither)."""
    if path.endswith(".carbonindexmerge"):
        return "merge"
    if path.endswith(".carbonindex"):
        return "task"
    return None


def check_bitset(raw: bytes, length: int, path: str) -> bytes:
    """The bitset of ``raw`` (``length`` bytes followed by their u64 xxh64) once verified.

    Raises:
        CorruptIndexError: short read or checksum mismatch.
    """
    if length <= 0 or len(raw) != length + BLOOM_CHECKSUM_SIZE:
        raise CorruptIndexError(f"{path}: bloom bitset truncated{REBUILD_HINT}")
    bitset = bytes(raw[:length])
    if _BLOOM_SUM.unpack_from(raw, length)[0] != xxhash.xxh64_intdigest(bitset):
        raise CorruptIndexError(f"{path}: bloom bitset fails its checksum (damaged file){REBUILD_HINT}")
    return bitset


def encode_index(header: IndexHeader, blooms: bytes, kind: IndexFileKind) -> bytes:
    """Serialise a header and its bloom region (as :func:`packing.pack` builds it)."""
    header.bloom_region_length = len(blooms)
    header.format_version = FORMAT_VERSION
    hb = tio.encode(header)
    magic = MAGIC_TASK if kind == "task" else MAGIC_MERGE
    first = _PREFIX.pack(magic, FORMAT_VERSION, 0, len(hb), xxhash.xxh64_intdigest(blooms), 0)
    first = first[:_SUMMED] + struct.pack("<Q", _xxh64(first[:_SUMMED], hb))
    return b"".join([first, hb, blooms, _TRAILER.pack(len(hb), TRAILER_MAGIC)])


def write_index(
    fs: AnyFS,
    path: str,
    header: IndexHeader,
    blooms: bytes,
    *,
    kind: IndexFileKind = "task",
) -> int:
    """Write an index file durably and atomically (``StoreFS.write_atomic``); returns its size."""
    data = encode_index(header, blooms, kind)
    as_store_fs(fs).write_atomic(path, data, crash="index.before_rename")
    return len(data)


def build_task_index(
    fs: AnyFS,
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
    from carbonstore.indexfiles.footer import read_file_index

    files = [
        read_file_index(fs, f"{segment_dir.rstrip('/')}/{rel}", rel_path=rel) for rel in data_files
    ]
    header, blooms = pack(files, segment_id=segment_id, task_id=task_id, column_ids=column_ids)
    return write_index(fs, output_path, header, blooms, kind="task")


def decode_index_bytes(data: bytes, name: str) -> LoadedIndex:
    """Decode (after verifying) a whole index file held in memory, bloom region included."""
    loaded = _decode_head(data, len(data), name)
    _check_trailer(loaded, data[-_TRAILER.size :])
    start = loaded.bloom_region_offset
    region = data[start : start + (loaded.header.bloom_region_length or 0)]
    _check_region(loaded, region)
    loaded.bloom_region = region
    return loaded


def _decode_head(data: bytes, size: int, name: str) -> LoadedIndex:
    """Check the prefix and the header checksum of ``data`` (the file's first bytes), then
    decode the header and check it against the file size. Nothing is decoded unverified."""
    if size == 0:
        raise CorruptIndexError(f"{name}: index file is empty (0 bytes){REBUILD_HINT}")
    if len(data) < 8 or data[:8] not in (MAGIC_TASK, MAGIC_MERGE):
        raise CorruptIndexError(f"{name}: not a carbonindex file (bad magic){REBUILD_HINT}")
    kind: IndexFileKind = "task" if data[:8] == MAGIC_TASK else "merge"
    want = expected_kind(name)
    if want is not None and want != kind:
        raise CorruptIndexError(
            f"{name}: holds a {kind} index where a {want} index belongs (a file of the other "
            f"kind was put in its place){REBUILD_HINT}"
        )
    if len(data) >= 16:
        version = struct.unpack_from("<I", data, 8)[0]
        if version == 1:
            raise CorruptIndexError(
                f"{name}: index format 1 has no checksums, so it cannot be trusted; rewrite it "
                "in format 2 with 'carbonstore index rebuild TABLE'"
            )
        if version != FORMAT_VERSION:
            raise CorruptIndexError(
                f"{name}: unknown carbonindex format version {version} (damaged, or written by "
                f"a newer carbonstore){REBUILD_HINT}"
            )
    if size < _PREFIX.size + _TRAILER.size or len(data) < _PREFIX.size:
        raise CorruptIndexError(f"{name}: truncated: {size} bytes is too small for an index file{REBUILD_HINT}")
    _magic, _version, _reserved, hlen, region_sum, header_sum = _PREFIX.unpack_from(data, 0)
    if hlen > min(size, _MAX_HEADER) - _PREFIX.size - _TRAILER.size or len(data) < _PREFIX.size + hlen:
        raise CorruptIndexError(
            f"{name}: header length {hlen} does not fit the {size}-byte file (truncated or "
            f"damaged){REBUILD_HINT}"
        )
    hb = data[_PREFIX.size : _PREFIX.size + hlen]
    if _xxh64(data[:_SUMMED], hb) != header_sum:
        raise CorruptIndexError(f"{name}: index header fails its checksum (damaged file){REBUILD_HINT}")
    try:
        header = tio.decode(IndexHeader(), hb)
    except tio.DECODE_ERRORS as err:
        raise CorruptIndexError(f"{name}: cannot decode the index header: {err}{REBUILD_HINT}") from err
    blen = header.bloom_region_length or 0
    if blen < 0 or _PREFIX.size + hlen + blen + _TRAILER.size != size:
        raise CorruptIndexError(
            f"{name}: file size {size} does not match its header (truncated or appended "
            f"to){REBUILD_HINT}"
        )
    for df in header.files or ():
        # every reader joins these to the segment folder: none may leave it
        try:
            check_relative_path(df.path)
        except ValueError as err:
            raise CorruptIndexError(f"{name}: {err}{REBUILD_HINT}") from err
    return LoadedIndex(
        path=name, kind=kind, header=header, bloom_region_offset=_PREFIX.size + hlen,
        bloom_checksum=region_sum,
    )


def _check_trailer(loaded: LoadedIndex, tail: bytes) -> None:
    hlen, magic = _TRAILER.unpack(tail)
    if magic != TRAILER_MAGIC or hlen != loaded.bloom_region_offset - _PREFIX.size:
        raise CorruptIndexError(
            f"{loaded.path}: index trailer is missing or wrong (truncated or damaged file){REBUILD_HINT}"
        )


def _check_region(loaded: LoadedIndex, region: bytes) -> None:
    if len(region) != (loaded.header.bloom_region_length or 0):
        raise CorruptIndexError(f"{loaded.path}: bloom region truncated{REBUILD_HINT}")
    if xxhash.xxh64_intdigest(region) != loaded.bloom_checksum:
        raise CorruptIndexError(f"{loaded.path}: bloom region fails its checksum (damaged file){REBUILD_HINT}")


def read_index(fs: AnyFS, path: str, *, with_blooms: bool = False) -> LoadedIndex:
    """Read and verify an index file's header (and its bloom region when asked).

    The file's name says its kind (``.carbonindexmerge`` / ``.carbonindex``); a file of
    the other kind under that name is refused.

    Raises:
        CorruptIndexError: the file is missing, not an index, of the other kind, truncated,
            fails a checksum or does not decode.
    """
    try:
        with as_store_fs(fs).open_input_file(path) as f:
            size = f.size()
            head = f.read_at(min(size, 64 * 1024), 0)
            if len(head) >= _PREFIX.size:
                hlen = _PREFIX.unpack_from(head, 0)[3]
                if _PREFIX.size + hlen > len(head) and _PREFIX.size + hlen <= size:
                    head = f.read_at(_PREFIX.size + hlen, 0)
            loaded = _decode_head(head, size, path)
            _check_trailer(loaded, f.read_at(_TRAILER.size, size - _TRAILER.size))
            if with_blooms:
                region = f.read_at(loaded.header.bloom_region_length or 0, loaded.bloom_region_offset)
                _check_region(loaded, region)
                loaded.bloom_region = region
            return loaded
    except CorruptIndexError:
        raise
    except FileNotFoundError as err:
        raise CorruptIndexError(f"{path}: index file is missing{REBUILD_HINT}") from err
    except (OSError, ValueError, struct.error) as err:
        raise CorruptIndexError(f"{path}: cannot read index file: {err}{REBUILD_HINT}") from err


def _read_range(fs: AnyFS, path: str, position: int, out: memoryview) -> int:
    """Read ``len(out)`` bytes at ``position`` into ``out``; returns how many were there. A
    local file is read with one ``preadv`` straight into ``out`` (a fifth of the cost of
    opening it through pyarrow, which matters when a plan reads one range from each of
    1,600 merge indexes)."""
    sfs = as_store_fs(fs)
    try:
        if sfs.local:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            try:
                return os.preadv(fd, [out], position)
            finally:
                os.close(fd)
        with sfs.open_input_file(path) as f:
            data = f.read_at(len(out), position)
        out[: len(data)] = data
        return len(data)
    except (OSError, ValueError) as err:
        raise CorruptIndexError(f"{path}: cannot read bloom bitset: {err}{REBUILD_HINT}") from err


def read_bitset(fs: AnyFS, path: str, position: int, length: int) -> bytes:
    """One bloom bitset at ``position`` of the file, verified against its checksum."""
    raw = bytearray(length + BLOOM_CHECKSUM_SIZE)
    got = _read_range(fs, path, position, memoryview(raw))
    return check_bitset(raw[:got], length, path)


def bitsets_span(offsets: Sequence[int], lengths: Sequence[int]) -> tuple[int, int]:
    """The range ``[first, end)`` of the bloom region that bitsets at ``offsets`` and their
    checksums cover (one read, see :func:`read_bitsets`)."""
    first = min(offsets)
    return first, max(o + n for o, n in zip(offsets, lengths, strict=True)) + BLOOM_CHECKSUM_SIZE


def read_bitsets(
    fs: AnyFS, path: str, base: int, offsets: Sequence[int], lengths: Sequence[int],
    into: memoryview | None = None,
) -> tuple[memoryview, int]:
    """Several bloom bitsets of one file in ONE read, each verified against its checksum.

    ``offsets`` / ``lengths`` are relative to ``base`` (the bloom region). The bloom region
    holds a column's bitsets of all row groups one after the other (packing.py), so the
    bitsets of a segment's column are one contiguous range. Reads :func:`bitsets_span`
    (into ``into`` when given: at least that many bytes) and returns the bytes and the
    span's first offset; a bitset ``o, n`` is ``data[o - first : o - first + n]``.

    Raises:
        CorruptIndexError: a short read, a bitset that fails its checksum (naming the file).
    """
    if not len(offsets):
        return memoryview(b""), 0
    first, end = bitsets_span(offsets, lengths)
    data = memoryview(bytearray(end - first)) if into is None else into[: end - first]
    got = _read_range(fs, path, base + first, data)
    for o, n in zip(offsets, lengths, strict=True):
        a = o - first
        if n <= 0 or a < 0 or a + n + BLOOM_CHECKSUM_SIZE > got:
            raise CorruptIndexError(f"{path}: bloom bitset truncated{REBUILD_HINT}")
        if _BLOOM_SUM.unpack_from(data, a + n)[0] != xxhash.xxh64_intdigest(data[a : a + n]):
            raise CorruptIndexError(f"{path}: bloom bitset fails its checksum (damaged file){REBUILD_HINT}")
    return data, first


def _bloom_reader(fs: AnyFS, path: str, base: int) -> object:
    def read(off: int, ln: int) -> bytes:
        return read_bitset(fs, path, base + off, ln)

    return read


def load_index(fs: AnyFS, path: str) -> IndexArrays:
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
    fs: AnyFS, task_index_paths: Sequence[str], output_path: str, *, segment_id: str = ""
) -> int:
    """Merge task indexes into one ``.carbonindexmerge`` (written atomically); returns its size."""
    loaded = [read_index(fs, p, with_blooms=True) for p in task_index_paths]
    header, blooms = _merged(
        loaded, segment_id or (loaded[0].header.segment_id if loaded else "") or ""
    )
    return write_index(fs, output_path, header, blooms, kind="merge")


def load_indexes(fs: AnyFS, paths: Sequence[str]) -> IndexArrays:
    """Arrays over several index files (e.g. every task index of an unmerged segment)."""
    if len(paths) == 1:
        return load_index(fs, paths[0])
    loaded = [read_index(fs, p, with_blooms=True) for p in paths]
    header, blooms = _merged(loaded, loaded[0].header.segment_id or "" if loaded else "")
    return load_arrays(header, lambda off, ln: blooms[off : off + ln])
