"""The index snapshot file (format 7): a verified prefix and directory, then sections.

Layout and checks: see carbonstore.indexfiles.snapshot and docs/index-format.md. This module
frames a snapshot into sections (:func:`frame_snapshot`, :func:`frame_parts`) and opens a
file for ranged, verified section reads (:class:`SnapshotFile`); what the sections hold is
snapshot.py's and snapshot_write.py's business.

Since format 7 every section but ``core`` is cut by **chunks** of segments (rows of the
snapshot): the section of base name ``b`` for the segments of chunk ``k`` is ``b#k``, and the
directory's meta ``carbonstore.chunks`` lists each chunk's first row. A plan reads ``core``
(one small row per segment) and then only the chunks of the segments it keeps; a writer
copies the bytes of unchanged chunks (checksums included) and encodes only new ones.

Format 8 cuts each chunk by what a plan reads (:func:`section_of`): the row groups' files,
indices and rows (``rows``) apart from their byte ranges (``rgpos``), the files' paths
(``paths``) apart from the rest of each file (``files``), a column's row-group statistics
apart from its bloom references (``<slot>:b``) and its page statistics apart from the
pages' byte ranges (``<slot>:q``). A scan then reads about half the bytes it read in
format 7. Format 7 files are still read (their sections grouped as they were written);
every write is format 8.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import xxhash

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles._gen.carbonindex.ttypes import ValueKind

__all__ = ["CHUNKS_META", "COL_COLUMNS", "CORE", "PAGE_COLUMNS", "RG_COLUMNS", "VALUE_TYPES", "declared_type",
           "narrow_ints", "widen_ints", "FILE_PATH", "READ_VERSIONS", "ROWS", "ROWS_COLUMNS", "SNAPSHOT_MAGIC",
           "SNAPSHOT_VERSION", "SnapshotFile", "SnapshotSectionError",
           "chunk_section", "frame_parts", "frame_pieces", "ipc_bytes", "frame_snapshot", "join_files", "section_of", "snapshot_table",
           "split_files"]

# 5: segment bounds keyed by column id (docs/schema-evolution.md); 6: checksummed sections;
# 7: sections cut by chunks of segments, the per-segment summary alone in core; 8: each chunk
# cut by what a plan reads (paths, byte ranges and bloom references apart)
SNAPSHOT_VERSION = "8"
#: the formats read (the newest is written)
READ_VERSIONS = ("7", "8")
CHUNKS_META = "carbonstore.chunks"
SNAPSHOT_MAGIC = b"CARBSNAP"
_SNAP_PREFIX = struct.Struct("<8sIIQQ")
_SNAP_SUMMED = 24  # prefix bytes covered by the checksum (all but the checksum itself)
CORE = "core"
_FIRST_READ = 1 << 16  # the first read: the prefix and (nearly always) the whole directory


# per segment: column -> (array attribute of IndexArrays, arrow type)
RG_COLUMNS = {"rg_file": ("rg_file", pa.int32()), "rg_index": ("rg_index", pa.int32()),
       "rg_rows": ("rg_num_rows", pa.int64()), "rg_offset": ("rg_offset", pa.int64()),
       "rg_length": ("rg_length", pa.int64())}
# per slot, row-group level and page level: suffix -> (attribute, arrow type); None = by kind
COL_COLUMNS = {"flags": ("flags", pa.uint8()), "nulls": ("null_count", pa.int64()), "nans": ("nan_count", pa.int64()),
        "has_pages": ("has_pages", pa.uint8()), "boundary": ("boundary_order", pa.int8()),
        "bloom_off": ("bloom_offset", pa.int64()), "bloom_len": ("bloom_length", pa.int32()),
        "min": ("min", None), "max": ("max", None)}
PAGE_COLUMNS = {"p_rg": ("row_group", pa.int32()), "p_first": ("first_row_index", pa.int64()),
         "p_rows": ("row_count", pa.int64()), "p_offset": ("offset", pa.int64()),
         "p_size": ("compressed_size", pa.int32()), "p_flags": ("flags", pa.uint8()),
         "p_nulls": ("null_count", pa.int64()), "p_nans": ("nan_count", pa.int64()),
         "p_min": ("min", None), "p_max": ("max", None)}
VALUE_TYPES = {ValueKind.INT64: pa.int64(), ValueKind.FLOAT64: pa.float64(), ValueKind.BYTES: pa.binary(),
           ValueKind.BIGINT: pa.binary()}


ROWS = "rows"
#: the paths of the files (format 8: a column of their own, ``files`` holds the rest)
FILE_PATH = "file_path"
#: the per-file and per-row-group list columns of every segment (format 7: base section ``rows``)
ROWS_COLUMNS = frozenset({"files", FILE_PATH, "rg_file", "rg_index", "rg_rows", "rg_offset", "rg_length"})
# format 8: the base section of each per-file and per-row-group column
_ROWS_8 = {"files": "files", FILE_PATH: "paths", "rg_file": ROWS, "rg_index": ROWS, "rg_rows": ROWS,
           "rg_offset": "rgpos", "rg_length": "rgpos"}
_SLOT_8 = {"bloom_off": ":b", "bloom_len": ":b", "p_offset": ":q", "p_size": ":q"}


def section_of(column: str, version: str = SNAPSHOT_VERSION) -> str:
    """The base section holding snapshot column ``column`` in a file of format ``version``:
    ``core`` (one value per segment), the files and row groups (format 7: ``rows``; 8:
    ``rows``, ``rgpos``, ``files``, ``paths``), ``<slot>`` (row-group statistics) or
    ``<slot>:p`` (page statistics, suffixes ``p_*``) - in format 8 also ``<slot>:b`` (bloom
    references) and ``<slot>:q`` (the pages' byte ranges); every one but ``core`` is cut by
    chunks."""
    if column in ROWS_COLUMNS:
        return _ROWS_8[column] if version != "7" else ROWS
    key, sep, suffix = column.partition(":")
    if not sep or column.startswith("bounds."):
        return CORE
    if version != "7" and suffix in _SLOT_8:
        return key + _SLOT_8[suffix]
    return f"{key}:p" if suffix.startswith("p_") else key  # page statistics: p_*


def chunk_section(base: str, chunk: int) -> str:
    """The name of base section ``base`` (not ``core``) of chunk ``chunk``."""
    return f"{base}#{chunk}"


def ipc_bytes(t: pa.Table) -> bytes:
    """``t`` as one Arrow IPC file (one record batch)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, t.schema) as w:
        w.write_table(t, max_chunksize=max(t.num_rows, 1))
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def declared_type(column: str, kinds: dict[str, int | None]) -> pa.DataType | None:
    """The type of snapshot list column ``column``'s values as rows hold them (``kinds``:
    slot key -> value kind, for minima and maxima); None for other columns."""
    if column in RG_COLUMNS:
        return RG_COLUMNS[column][1]
    key, sep, suffix = column.partition(":")
    got = COL_COLUMNS.get(suffix) or PAGE_COLUMNS.get(suffix) if sep else None
    if got is None:
        return None
    return got[1] if got[1] is not None else VALUE_TYPES.get(kinds.get(key) or 0)


_NARROW = (pa.int8(), pa.int16(), pa.int32())


def narrow_ints(t: pa.Table) -> pa.Table:
    """Snapshot section ``t`` with each list column of signed integers in the narrowest
    signed type holding its values (format 8: counts, row numbers and small minima take a
    byte or two, and a plan reads a quarter of the bytes); readers widen them back."""
    for i, name in enumerate(t.column_names):
        col = t.column(i)
        arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        typ = arr.type
        if not pa.types.is_list(typ) or not pa.types.is_signed_integer(typ.value_type) or typ.value_type == pa.int8():
            continue
        values = arr.values.slice(arr.offsets[0].as_py(), arr.offsets[-1].as_py() - arr.offsets[0].as_py())
        nums = values.to_numpy(zero_copy_only=False) if values.null_count else np.frombuffer(
            values.buffers()[1], dtype=typ.value_type.to_pandas_dtype())[values.offset:values.offset + len(values)]
        lo, hi = (int(nums.min()), int(nums.max())) if len(nums) else (0, 0)
        to = next((n for n in _NARROW if n.bit_width < typ.value_type.bit_width
                   and np.iinfo(n.to_pandas_dtype()).min <= lo and hi <= np.iinfo(n.to_pandas_dtype()).max), None)
        if to is not None and not values.null_count:
            narrow = pa.ListArray.from_arrays(pa.array(arr.offsets.to_numpy() - arr.offsets[0].as_py(), pa.int32()),
                                              pa.array(nums.astype(to.to_pandas_dtype()), to))
            t = t.set_column(i, name, narrow)
    return t


def widen_ints(cols: dict[str, Any], kinds: dict[str, int | None]) -> dict[str, Any]:
    """Columns ``cols`` (name -> list array) of snapshot rows with narrowed integers back in
    their declared types (:func:`declared_type`)."""
    for name, col in cols.items():
        want = declared_type(name, kinds)
        if want is not None and pa.types.is_integer(want) and col.type.value_type != want:
            cols[name] = col.cast(pa.list_(want))
    return cols


def split_files(t: pa.Table) -> pa.Table:
    """Snapshot rows ``t`` as format 8 stores them: the paths of column ``files`` (a list of
    file structs) as column FILE_PATH of their own, the files without them (nothing to do
    when they are apart already)."""
    if "files" not in t.column_names:
        return t
    col = t.column("files")
    arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    typ = arr.type.value_type
    if typ.get_field_index("path") < 0:
        return t
    values = arr.values
    rest = [f.name for f in typ if f.name != "path"]
    others = pa.StructArray.from_arrays([values.field(f) for f in rest], fields=[typ.field(f) for f in rest])
    at = t.schema.get_field_index("files")
    t = t.set_column(at, "files", pa.ListArray.from_arrays(arr.offsets, others))
    return t.add_column(at, FILE_PATH, pa.ListArray.from_arrays(arr.offsets, values.field("path")))


def join_files(cols: dict[str, Any]) -> dict[str, Any]:
    """Columns ``cols`` (name -> array) of snapshot rows with FILE_PATH folded back into
    ``files`` (each file's struct starting with its path), as rows are written."""
    if FILE_PATH not in cols or "files" not in cols:
        return cols
    paths, files = (c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
                    for c in (cols.pop(FILE_PATH), cols["files"]))
    if paths.null_count or files.null_count or len(paths) != len(files) or not np.array_equal(
            np.diff(paths.offsets.to_numpy()), np.diff(files.offsets.to_numpy())):
        raise ValueError("snapshot file paths do not match the files")
    pv = paths.values.slice(paths.offsets[0].as_py(), len(files.values))
    values = files.values
    typ = values.type
    struct = pa.StructArray.from_arrays([pv, *(values.field(i) for i in range(typ.num_fields))],
                                        fields=[pa.field("path", pa.string()), *typ])
    cols["files"] = pa.ListArray.from_arrays(files.offsets, struct)
    return cols


def frame_parts(meta: dict[str, str], sections: Sequence[tuple[str, Any, int | None]],
                version: str = SNAPSHOT_VERSION) -> bytes:
    """The snapshot file of ``sections`` (name, IPC bytes, their xxh64 or None to compute),
    ``core`` first; ``meta`` names the chunks (CHUNKS_META)."""
    return b"".join(frame_pieces(meta, sections, version))


def frame_pieces(meta: dict[str, str], sections: Sequence[tuple[str, Any, int | None]],
                 version: str = SNAPSHOT_VERSION) -> list[Any]:
    """:func:`frame_parts` as the pieces of the file in order (header, directory, each
    section's buffer as given): written one after another, no copy of the whole file."""
    table: dict[str, list[int]] = {}
    pos = 0
    for name, blob, checksum in sections:
        table[name] = [pos, len(blob), xxhash.xxh64_intdigest(blob) if checksum is None else checksum]
        pos += len(blob)
    directory = orjson.dumps({"length": pos, "meta": meta, "sections": table})
    first = _SNAP_PREFIX.pack(SNAPSHOT_MAGIC, int(version), 0, len(directory), 0)[:_SNAP_SUMMED]
    h = xxhash.xxh64(first)
    h.update(directory)
    return [first, struct.pack("<Q", h.intdigest()), directory, *(b for _, b, _ in sections)]


def frame_snapshot(table: pa.Table, chunk_rows: int = 1024, version: str = SNAPSHOT_VERSION) -> bytes:
    """The snapshot file of the whole snapshot ``table`` (its schema metadata: version, kinds,
    slots, and the chunks' first rows - else chunks of ``chunk_rows`` rows): ``core``, then one
    Arrow IPC section per column group and chunk, grouped as format ``version`` groups them."""
    table = split_files(table) if version != "7" else table
    groups: dict[str, list[str]] = {}
    for name in table.column_names:
        groups.setdefault(section_of(name, version), []).append(name)
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    starts = orjson.loads(meta[CHUNKS_META]) if CHUNKS_META in meta else list(
        range(0, table.num_rows, chunk_rows)) or [0]
    meta[CHUNKS_META] = orjson.dumps(starts).decode()
    bounds = [*starts, table.num_rows]
    sections = [(CORE, ipc_bytes(table.select(groups.get(CORE, [])).replace_schema_metadata(None)), None)]
    for k in range(len(starts)):
        part = table.slice(bounds[k], bounds[k + 1] - bounds[k])
        for sec in sorted(g for g in groups if g != CORE):
            sections.append((chunk_section(sec, k), ipc_bytes(part.select(groups[sec]).replace_schema_metadata(None)),
                             None))
    return frame_parts(meta, sections, version)


class SnapshotSectionError(CorruptIndexError):
    """A section of an opened snapshot fails its checksum or structure checks."""


class SnapshotFile:
    """An opened snapshot file: its verified directory, and sections read on demand.

    Args:
        name: the file name (for messages).
        read_at: ``(offset, length) -> bytes`` of the file (a ranged read).
        size: the file's size in bytes.

    Raises:
        CorruptIndexError: empty, truncated, not a snapshot, another format version, the
            directory fails its checksum or does not describe the file.
    """

    def __init__(self, name: str, read_at: Callable[[int, int], Any], size: int) -> None:
        what = self.what = f"index snapshot {name}"
        self.name = name
        self._read_at = read_at
        if size <= 0:
            raise CorruptIndexError(f"{what}: empty file")
        head = memoryview(read_at(0, min(size, _FIRST_READ)))
        if len(head) < _SNAP_PREFIX.size or bytes(head[:8]) != SNAPSHOT_MAGIC:
            raise CorruptIndexError(f"{what}: not an index snapshot (bad magic or truncated)")
        _magic, version, _reserved, length, checksum = _SNAP_PREFIX.unpack_from(head, 0)
        if str(version) not in READ_VERSIONS:
            raise CorruptIndexError(f"{what}: snapshot format {version}, expected {SNAPSHOT_VERSION}")
        #: the file's format (its sections are grouped by section_of of this version)
        self.version = str(version)
        end = _SNAP_PREFIX.size + length
        if end > size:
            raise CorruptIndexError(f"{what}: {size} bytes, shorter than its directory (truncated)")
        directory = head[_SNAP_PREFIX.size:end] if end <= len(head) else memoryview(
            read_at(_SNAP_PREFIX.size, length))
        h = xxhash.xxh64(head[:_SNAP_SUMMED])
        h.update(directory)
        if h.intdigest() != checksum or len(directory) != length:
            raise CorruptIndexError(f"{what}: fails its checksum (damaged file)")
        try:
            d = orjson.loads(directory)
            total = int(d["length"])
            self.meta: dict[str, str] = {str(k): str(v) for k, v in d["meta"].items()}
            self.sections = {str(k): (int(o), int(n), int(c)) for k, (o, n, c) in d["sections"].items()}
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as err:
            raise CorruptIndexError(f"{what}: unreadable directory ({err})") from None
        if end + total != size:
            raise CorruptIndexError(f"{what}: {size} bytes where the directory says {end + total} (truncated)")
        for sec, (o, n, _) in self.sections.items():
            if o < 0 or n <= 0 or o + n > total:
                raise CorruptIndexError(f"{what}: section {sec} lies outside the file")
        self.base = end

    def raw(self, section: str) -> tuple[bytes | memoryview, int]:
        """Section ``section``'s bytes (verified; of a mapped file, a view of the mapping:
        no copy) and checksum, to copy into a newer snapshot.

        Raises:
            SnapshotSectionError: no such section, short read or fails its checksum.
        """
        got = self.sections.get(section)
        if got is None:
            raise SnapshotSectionError(f"{self.what}: no section {section}")
        off, n, checksum = got
        try:
            data = self._read_at(self.base + off, n)
        except OSError as err:
            raise SnapshotSectionError(f"{self.what}: section {section} unreadable ({err})") from None
        if len(data) != n or xxhash.xxh64_intdigest(data) != checksum:
            raise SnapshotSectionError(f"{self.what}: section {section} fails its checksum (damaged file)")
        return data, checksum

    def read(self, section: str) -> pa.Table:
        """Section ``section`` (read, verified, opened without copying its buffers).

        Raises:
            SnapshotSectionError: no such section, short read, fails its checksum or is
                not an Arrow IPC file.
        """
        got = self.sections.get(section)
        if got is None:
            raise SnapshotSectionError(f"{self.what}: no section {section}")
        off, n, checksum = got
        try:
            data = self._read_at(self.base + off, n)
        except OSError as err:
            raise SnapshotSectionError(f"{self.what}: section {section} unreadable ({err})") from None
        if len(data) != n or xxhash.xxh64_intdigest(data) != checksum:
            raise SnapshotSectionError(f"{self.what}: section {section} fails its checksum (damaged file)")
        try:
            return pa.ipc.open_file(pa.py_buffer(data)).read_all()
        except (pa.ArrowException, ValueError) as err:
            raise SnapshotSectionError(f"{self.what}: section {section} unreadable ({err})") from None


def snapshot_table(name: str, data: bytes) -> pa.Table:
    """Every section of snapshot file bytes ``data``, verified, as one table (chunks
    concatenated; schema metadata: the directory's)."""
    f = SnapshotFile(name, lambda off, n: memoryview(data)[off:off + n], len(data))
    cols: dict[str, pa.ChunkedArray] = {}
    core = f.read(CORE)
    cols.update(zip(core.column_names, core.columns, strict=True))
    chunks = len(orjson.loads(f.meta.get(CHUNKS_META, "[0]")))
    kinds = {k: d.get("kind") for k, d in orjson.loads(f.meta.get("carbonstore.slots", "{}")).items()}
    bases = sorted({sec.rpartition("#")[0] for sec in f.sections if sec != CORE})
    for base in bases:
        parts = [f.read(chunk_section(base, k)) for k in range(chunks)]
        for c in parts[0].column_names:
            want = declared_type(c, kinds)
            cols[c] = pa.chunked_array([p.column(c).combine_chunks() if want is None else
                                        p.column(c).combine_chunks().cast(pa.list_(want)) for p in parts])
    return pa.table(join_files(cols)).replace_schema_metadata(f.meta)
