"""Delete deltas: which rows of a data file row-level DML deleted (CarbonData's delete delta,
Delta Lake / Iceberg deletion vectors).

Contract (docs/format.md, "Delete deltas"):

- One live delta per data file per tablestatus version, **cumulative**: the set of every row
  position (0-based, in file order) of the file deleted so far. A DELETE of more rows of the
  file writes a new delta holding the union; it never appends to one.
- File ``<segment dir>/<data file stem>.<uuid>.deletedelta``, written once under a new name
  (put-if-absent), never rewritten: a reader of an older version keeps reading the delta its
  version names until clean files removes it (after the retention time).
- Bytes (format 2): a 24-byte header ``CSDD`` magic, format version (u16 = 2), flags
  (u16 = 0), cardinality (u64), payload length (u32), binding length (u32), all
  little-endian; the payload, a RoaringBitmap in the portable serialization (pyroaring
  ``BitMap.serialize()``, the format of the RoaringFormatSpec that Java, C and Go read);
  the binding, UTF-8 ``<segment folder>/<data file>`` (the data file it deletes from,
  relative to the segment folder: data file names carry 64 random bits, so this names one
  file of one table); then the xxh64 (u64) of every byte before it.
- Format 1 (written before bindings): the last header field is the CRC-32 of the payload,
  nothing follows the payload. Still read; every delta written now is format 2.
- The segment's tablestatus entry names each delta and its cardinality
  (``LoadEntry.delete_deltas``); a delta file that is missing, fails its checksum, whose
  cardinality differs from the entry or that names another data file or segment folder
  than the one it is read for (a delta copied over another) is damage
  (``CorruptMetadataError``), never "no rows deleted".

Readers turn a delta into a boolean mask per row group (:func:`deleted_mask`) or a sorted
position array (:func:`positions`).
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash
from pyroaring import BitMap

from carbonstore.errors import CorruptMetadataError
from carbonstore.store.entries import DeleteDelta, LoadEntry
from carbonstore.store.fs import StoreFS

__all__ = [
    "DELTA_SUFFIX",
    "DeletedRows",
    "decode_delta",
    "deleted_mask",
    "delta_name",
    "encode_delta",
    "entry_deltas",
    "live_rows",
    "positions",
    "read_delta",
    "read_live_file",
    "write_delta",
]

DELTA_SUFFIX = ".deletedelta"
_MAGIC = b"CSDD"
_HEADER = struct.Struct("<4sHHQII")
_SUM = struct.Struct("<Q")
_FORMAT_VERSION = 2
_UNBOUND_VERSION = 1  # no binding, a CRC-32 of the payload only


def encode_delta(bitmap: BitMap, binding: str = "") -> bytes:
    """A delta file's bytes: header, portable RoaringBitmap, binding, xxh64 of them.

    ``binding``: ``<segment folder>/<data file>`` (:func:`write_delta` always gives it;
    bytes that only travel between processes may go without)."""
    bitmap.run_optimize()
    payload = bitmap.serialize()
    bound = binding.encode()
    body = _HEADER.pack(_MAGIC, _FORMAT_VERSION, 0, len(bitmap), len(payload),
                        len(bound)) + payload + bound
    return body + _SUM.pack(xxhash.xxh64_intdigest(body))


def _damaged(path: str, why: str) -> CorruptMetadataError:
    return CorruptMetadataError(
        f"delete delta {path} is damaged ({why}); restore it from a backup - without it "
        "deleted rows would be read again, so the table's reads fail until then")


def _decode(data: bytes, path: str) -> tuple[BitMap, str | None]:
    """The positions and the binding (None: format 1) of a delta file's bytes, checked."""
    if len(data) < _HEADER.size:
        raise _damaged(path, "it is shorter than its header")
    magic, version, _flags, count, length, last = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        raise _damaged(path, "not a delete delta")
    binding: str | None = None
    if version == _UNBOUND_VERSION:
        payload = data[_HEADER.size:]
        if len(payload) != length or zlib.crc32(payload) != last:
            raise _damaged(path, "checksum mismatch")
    elif version == _FORMAT_VERSION:
        end = _HEADER.size + length + last
        if len(data) != end + _SUM.size or _SUM.unpack_from(data, end)[0] != \
                xxhash.xxh64_intdigest(data[:end]):
            raise _damaged(path, "checksum mismatch")
        payload = data[_HEADER.size:_HEADER.size + length]
        try:
            binding = data[_HEADER.size + length:end].decode()
        except UnicodeDecodeError as err:
            raise _damaged(path, "its binding is no text") from err
    else:
        raise _damaged(path, f"format version {version} is unknown to this carbonstore")
    try:
        bitmap = BitMap.deserialize(payload)
    except (ValueError, OverflowError) as err:
        raise _damaged(path, str(err)) from err
    if len(bitmap) != count:
        raise _damaged(path, f"it holds {len(bitmap)} positions, its header says {count}")
    if binding is not None:
        _check_binding(binding, path)
    return bitmap, binding


def _check_binding(binding: str, path: str) -> None:
    """``path`` (the delta's own, or the data file's it is read for) must be the one the
    delta names; other paths (``<delta>``: bytes in memory) are not checked."""
    folder, _, data_file = binding.partition("/")
    stem = data_file.removesuffix(".parquet")
    if path.endswith(DELTA_SUFFIX):  # <segment folder>/<data file stem>.<16 hex>.deletedelta
        named = path.removesuffix(DELTA_SUFFIX).rpartition(".")[0]
        want = f"/{folder}/{stem}"
    elif path.endswith(".parquet"):
        named, want = path, f"/{folder}/{data_file}"
    else:
        return
    if not data_file or not ("/" + named).endswith(want):
        raise _damaged(path, f"it is the delta of {binding!r}: another file's delta in its place")


def decode_delta(data: bytes, path: str = "<delta>") -> BitMap:
    """Decode and check a delta file's bytes; ``path``: the delta's path, or the path of
    the data file it is read for (its binding must name that file).

    Raises:
        CorruptMetadataError: bad magic, version, length, checksum, cardinality or binding.
    """
    return _decode(data, path)[0]


def delta_name(data_file: str) -> str:
    """A new write-once delta name next to ``data_file`` (relative to the segment folder)."""
    stem = data_file[: -len(".parquet")] if data_file.endswith(".parquet") else data_file
    return f"{stem}.{uuid.uuid4().hex[:16]}{DELTA_SUFFIX}"


def write_delta(sfs: StoreFS, segment_dir: str, data_file: str, bitmap: BitMap) -> DeleteDelta:
    """Write ``bitmap`` as a new delta of ``data_file``; returns the entry's record of it."""
    binding = f"{segment_dir.rstrip('/').rpartition('/')[2]}/{data_file}"
    while True:
        name = delta_name(data_file)
        if sfs.put_if_absent(f"{segment_dir}/{name}", encode_delta(bitmap, binding)):
            return DeleteDelta(data_file=data_file, delta_file=name, deleted_rows=len(bitmap))


def read_delta(sfs: StoreFS, segment_dir: str, delta: DeleteDelta) -> BitMap:
    """The positions of one recorded delta.

    Raises:
        CorruptMetadataError: the file is missing or damaged, or does not match the entry.
    """
    return _read_checked(sfs, segment_dir, delta)[1]


def _read_checked(sfs: StoreFS, segment_dir: str, delta: DeleteDelta) -> tuple[bytes, BitMap]:
    path = f"{segment_dir}/{delta.delta_file}"
    try:
        data = sfs.read_bytes(path)
    except FileNotFoundError as err:
        raise CorruptMetadataError(
            f"delete delta {path} named by the tablestatus is missing; restore it from a "
            "backup (without it deleted rows would be read again)") from err
    bitmap, binding = _decode(data, path)
    if binding is not None and binding.partition("/")[2] != delta.data_file:
        raise _damaged(path, f"it is the delta of {binding!r}, the tablestatus names it for "
                             f"{delta.data_file!r}")
    if len(bitmap) != delta.deleted_rows:
        raise CorruptMetadataError(
            f"delete delta {path} holds {len(bitmap)} positions, the tablestatus says "
            f"{delta.deleted_rows}; restore the file from a backup")
    return data, bitmap


def entry_deltas(entry: LoadEntry) -> dict[str, DeleteDelta]:
    """Data file (relative to the segment folder) -> its live delta."""
    return {d.data_file: d for d in entry.delete_deltas}


def positions(bitmap: BitMap) -> npt.NDArray[np.uint32]:
    """Sorted positions of a bitmap as a numpy array."""
    return np.frombuffer(bitmap.to_array(), dtype=np.uint32)


def deleted_mask(pos: npt.NDArray[np.uint32], start: int, n: int) -> npt.NDArray[np.bool_]:
    """Mask of the rows ``[start, start + n)`` of a file that ``pos`` (sorted) deletes."""
    mask = np.zeros(n, dtype=bool)
    lo, hi = np.searchsorted(pos, [start, start + n])
    if hi > lo:
        mask[pos[lo:hi].astype(np.int64) - start] = True
    return mask


@dataclass(frozen=True, slots=True)
class DeletedRows:
    """Deleted positions of one data file, ready for a reader (picklable: positions as bytes)."""

    data: bytes  # a delta file's bytes (checked when decoded)

    def positions(self) -> npt.NDArray[np.uint32]:
        return positions(decode_delta(self.data))


def live_rows(
    table: pa.Table, pos: npt.NDArray[np.uint32] | None, start: int = 0
) -> pa.Table:
    """``table`` (rows ``start``... of a file) without the rows ``pos`` deletes."""
    if pos is None or not len(pos):
        return table
    mask = deleted_mask(pos, start, table.num_rows)
    if not mask.any():
        return table
    return table.filter(pa.array(~mask))


def read_live_file(
    fs: object, path: str, pos: npt.NDArray[np.uint32] | None, *, columns: Iterable[str] | None = None,
    batch_rows: int = 1 << 20,
) -> Iterable[pa.RecordBatch]:
    """Batches of a whole data file without its deleted rows (``pos``: sorted positions)."""
    with fs.open_input_file(path) as fh:  # type: ignore[attr-defined]
        pf = pq.ParquetFile(fh)
        start = 0
        for batch in pf.iter_batches(batch_size=batch_rows, columns=list(columns) if columns else None,
                                     use_threads=False):
            n = batch.num_rows
            if pos is not None and len(pos):
                mask = deleted_mask(pos, start, n)
                if mask.any():
                    batch = batch.filter(pa.array(~mask))
            start += n
            if batch.num_rows:
                yield batch


def deltas_by_path(
    sfs: StoreFS, segment_dir: str, entry: LoadEntry
) -> Mapping[str, bytes]:
    """Absolute data file path -> its live delta's bytes (checked; decoded again with that
    path, which its binding names), for the mergers and readers."""
    return {f"{segment_dir}/{d.data_file}": _read_checked(sfs, segment_dir, d)[0]
            for d in entry.delete_deltas}
