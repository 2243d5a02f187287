"""The index snapshot file (format 6): a verified prefix and directory, then sections.

Layout and checks: see carbonstore.indexfiles.snapshot and docs/index-format.md. This module
frames a whole snapshot table into sections (:func:`frame_snapshot`) and opens a file for
ranged, verified section reads (:class:`SnapshotFile`); what the sections hold is
snapshot.py's and snapshot_write.py's business.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa
import xxhash

from carbonstore.errors import CorruptIndexError

__all__ = ["CORE", "SNAPSHOT_MAGIC", "SNAPSHOT_VERSION", "SnapshotFile", "SnapshotSectionError", "frame_snapshot",
           "section_of", "snapshot_table"]

# 5: segment bounds keyed by column id (docs/schema-evolution.md); 6: checksummed sections
SNAPSHOT_VERSION = "6"
SNAPSHOT_MAGIC = b"CARBSNAP"
_SNAP_PREFIX = struct.Struct("<8sIIQQ")
_SNAP_SUMMED = 24  # prefix bytes covered by the checksum (all but the checksum itself)
CORE = "core"
_FIRST_READ = 1 << 16  # the first read: the prefix and (nearly always) the whole directory


def section_of(column: str) -> str:
    """The section holding snapshot column ``column``: ``core``, ``<slot>`` (row-group
    statistics) or ``<slot>:p`` (page statistics, suffixes ``p_*``)."""
    key, sep, suffix = column.partition(":")
    if not sep or column.startswith("bounds."):
        return CORE
    return f"{key}:p" if suffix.startswith("p_") else key  # page statistics: p_*


def _ipc(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def frame_snapshot(table: pa.Table) -> bytes:
    """The snapshot file of the whole snapshot ``table`` (its schema metadata: version, kinds,
    slots): prefix, directory, one Arrow IPC section per column group."""
    groups: dict[str, list[str]] = {}
    for name in table.column_names:
        groups.setdefault(section_of(name), []).append(name)
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    sections: dict[str, list[int]] = {}
    blobs = []
    pos = 0
    for sec in sorted(groups, key=lambda g: (g != CORE, g)):
        blob = _ipc(table.select(groups[sec]).replace_schema_metadata(None))
        sections[sec] = [pos, len(blob), xxhash.xxh64_intdigest(blob)]
        blobs.append(blob)
        pos += len(blob)
    directory = orjson.dumps({"length": pos, "meta": meta, "sections": sections})
    first = _SNAP_PREFIX.pack(SNAPSHOT_MAGIC, int(SNAPSHOT_VERSION), 0, len(directory), 0)[:_SNAP_SUMMED]
    h = xxhash.xxh64(first)
    h.update(directory)
    return b"".join([first, struct.pack("<Q", h.intdigest()), directory, *blobs])


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
        if str(version) != SNAPSHOT_VERSION:
            raise CorruptIndexError(f"{what}: snapshot format {version}, expected {SNAPSHOT_VERSION}")
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
    """Every section of snapshot file bytes ``data``, verified, as one table (schema metadata:
    the directory's)."""
    f = SnapshotFile(name, lambda off, n: memoryview(data)[off:off + n], len(data))
    parts = [f.read(sec) for sec in f.sections]
    cols: dict[str, pa.ChunkedArray] = {}
    for p in parts:
        cols.update(zip(p.column_names, p.columns, strict=True))
    return pa.table(cols).replace_schema_metadata(f.meta)
