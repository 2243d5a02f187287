"""The table-level bloom pack: the bloom bitsets of many segments in one file, checked per chunk.

A ``k = key`` probe needs ONE 32-byte block of a bitset per hash, but a merge index checks
each bitset whole (one xxh64 over it), so a fresh plan over 1,600 segments reads and hashes
every bitset of the column. The pack (``Metadata/index/blooms_<ms>_<segments>_<hash>
.carbonbloom``, written beside the index snapshot and covering the same segments) holds
the bitsets of the covered segments' bloom columns in one data region cut into fixed chunks
(4 KiB by default), each with its own xxh64: a probe maps the file (local) or reads the
chunks it needs (object stores) and verifies only the chunks holding the blocks its hashes
select.

Layout (little-endian)::

    prefix (64 bytes): magic "CSBLPACK" | u32 version | u32 chunk bytes | u64 directory length
        | u64 chunks | u64 data offset | u64 xxh64 of the directory | u64 xxh64 of bytes [0, 48)
        | 8 zero bytes
    directory: u32 JSON length | JSON {"table_id", "segments": [[segment id, merge index name]],
        "groups": [{"name", column descriptor}], "bitsets": n} | int64 first chunk of each
        segment | int64 chunks of each segment | int32 segment of each bitset | int32 group of
        each bitset | int64 byte offset of each bitset in the data region | int64 32-byte
        blocks of each bitset
    chunk checksums: u64 xxh64 of each chunk
    data region (at the data offset, a multiple of the chunk size): the chunks

Each segment's bitsets start on a chunk boundary and its last chunk is zero-padded, so a
segment's chunks and their checksums are copied verbatim into the next pack (no merge index
read, no re-hashing). The prefix and the directory are verified whole when the pack is
opened; a pack that fails them, whose size disagrees, or that names another table is refused
(:class:`CorruptIndexError`): the caller plans without it. A chunk that fails its checksum
makes the probe report its bitsets as not answered (``ok`` False): the caller probes those
segments from their merge indexes. A damaged pack never says "absent" on its own authority.
"""

from __future__ import annotations

import mmap
import struct
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow.fs as pafs
import xxhash

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.bloom import BLOCK_BYTES, SALTS

__all__ = [
    "BLOOM_PACK_PREFIX", "BLOOM_PACK_SUFFIX", "BLOOM_PACK_VERSION", "CHUNK_BYTES", "BloomPack",
    "PackBuilder",
]

BLOOM_PACK_PREFIX = "blooms_"
BLOOM_PACK_SUFFIX = ".carbonbloom"
BLOOM_PACK_VERSION = 1
CHUNK_BYTES = 4096
_MAGIC = b"CSBLPACK"
_PREFIX = struct.Struct("<8sIIQQQQ")  # magic, version, chunk bytes, dir len, chunks, data offset, dir sum
_PREFIX_SIZE = 64
_MASK32 = np.uint64(0xFFFFFFFF)
_OK, _BAD = 1, -1


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


class BloomPack:
    """An opened bloom pack: its directory, and verified access to its chunks.

    Attributes:
        segments: (segment id, merge index name) of each covered segment.
        groups: per group, the column name and the descriptor (``column_id``, ``kind``,
            ``physical_type``, ...) its bitsets were written with.
        bs_seg, bs_group, bs_offset, bs_blocks: per bitset, its segment, group, byte offset
            in the data region and number of 32-byte blocks (row groups in segment order).
    """

    def __init__(self, name: str, *, head: bytes, directory: bytes, sums: npt.NDArray[np.uint64],
                 data: Any, fetch: Any, table_id: str | None) -> None:
        magic, version, chunk, dlen, nchunks, doff, dsum = _PREFIX.unpack_from(head, 0)
        self.name = name
        self.chunk_bytes = int(chunk)
        self.num_chunks = int(nchunks)
        self.data_offset = int(doff)
        if xxhash.xxh64_intdigest(directory) != dsum:
            raise CorruptIndexError(f"{name}: bloom pack directory fails its checksum")
        try:
            jlen = struct.unpack_from("<I", directory, 0)[0]
            meta = orjson.loads(directory[4 : 4 + jlen])
            nseg, nbs = len(meta["segments"]), int(meta["bitsets"])
            pos = 4 + jlen
            arrays = []
            for dtype, count in (("<i8", nseg), ("<i8", nseg), ("<i4", nbs), ("<i4", nbs), ("<i8", nbs),
                                 ("<i8", nbs)):
                arrays.append(np.frombuffer(directory, dtype=dtype, count=count, offset=pos))
                pos += arrays[-1].nbytes
            self.table_id = str(meta["table_id"])
            self.segments = [(str(s), str(m)) for s, m in meta["segments"]]
            self.groups: list[dict[str, Any]] = [dict(g) for g in meta["groups"]]
        except (ValueError, KeyError, TypeError, struct.error, orjson.JSONDecodeError) as err:
            raise CorruptIndexError(f"{name}: bloom pack directory does not decode: {err}") from err
        if pos != len(directory):
            raise CorruptIndexError(f"{name}: bloom pack directory has {len(directory) - pos} stray bytes")
        if table_id is not None and self.table_id != table_id:
            raise CorruptIndexError(f"{name}: bloom pack of another table ({self.table_id})")
        self.seg_chunk0, self.seg_chunks, self.bs_seg, self.bs_group, self.bs_offset, self.bs_blocks = arrays
        self._check_layout()
        self.sums = sums
        self.index = {s: i for i, s in enumerate(self.segments)}
        self._data = data  # the whole file as words (local) or the data region (filled by fetch)
        self._fetch = fetch
        self._state = np.zeros(self.num_chunks, dtype=np.int8)  # 0 unchecked, _OK, _BAD
        self._lock = threading.Lock()
        self._by_name: dict[str, npt.NDArray[np.intp]] = {}

    def _check_layout(self) -> None:
        c0, cn, off, nb = self.seg_chunk0, self.seg_chunks, self.bs_offset, self.bs_blocks
        bad = (
            len(c0) and (c0.min() < 0 or cn.min() < 0 or int((c0 + cn).max()) > self.num_chunks)
        ) or (len(self.bs_seg) and (
            self.bs_seg.min() < 0 or self.bs_seg.max() >= len(self.segments) or self.bs_group.min() < 0
            or self.bs_group.max() >= len(self.groups) or nb.min() < 1 or off.min() < 0
            or (off % BLOCK_BYTES).any()
            or (off < c0[self.bs_seg] * self.chunk_bytes).any()
            or (off + nb * BLOCK_BYTES > (c0 + cn)[self.bs_seg] * self.chunk_bytes).any()))
        if bad or self.chunk_bytes < BLOCK_BYTES or self.chunk_bytes % BLOCK_BYTES:
            raise CorruptIndexError(f"{self.name}: bloom pack directory describes bitsets outside its data")

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, fs: pafs.FileSystem, path: str, *, table_id: str | None) -> BloomPack:
        """Open and verify the prefix and directory of the pack at ``path``.

        A local file is memory-mapped (a probe touches only the pages it needs); on other
        filesystems the chunks a probe needs are read with ranged reads.

        Raises:
            CorruptIndexError: a missing, short or damaged prefix / directory, a size that
                disagrees with it, or a pack of another table (``table_id``).
        """
        name = path.rsplit("/", 1)[-1]
        try:
            if isinstance(fs, pafs.LocalFileSystem):
                with open(path, "rb") as f:
                    size = f.seek(0, 2)
                    if size < _PREFIX_SIZE:
                        raise CorruptIndexError(f"{name}: bloom pack truncated")
                    mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                if hasattr(mapped, "madvise"):  # a probe touches scattered chunks: no read-ahead
                    mapped.madvise(mmap.MADV_RANDOM)
                view = memoryview(mapped)
                doff, dlen, nchunks, chunk = cls._prefix(name, view[:_PREFIX_SIZE], size)
                words = np.frombuffer(mapped, dtype="<u4")
                sums = np.frombuffer(mapped, dtype="<u8", count=nchunks, offset=_PREFIX_SIZE + dlen)
                return cls(name, head=bytes(view[:_PREFIX_SIZE]),
                           directory=bytes(view[_PREFIX_SIZE : _PREFIX_SIZE + dlen]), sums=sums,
                           data=words, fetch=None, table_id=table_id)
            f = fs.open_input_file(path)
            size = f.size()
            head = f.read_at(min(size, 1 << 16), 0)
            if len(head) < _PREFIX_SIZE:
                raise CorruptIndexError(f"{name}: bloom pack truncated")
            doff, dlen, nchunks, chunk = cls._prefix(name, head[:_PREFIX_SIZE], size)
            meta_end = _PREFIX_SIZE + dlen + 8 * nchunks
            if meta_end > len(head):
                head = head + f.read_at(meta_end - len(head), len(head))
            sums = np.frombuffer(head, dtype="<u8", count=nchunks, offset=_PREFIX_SIZE + dlen)
            data = np.zeros(nchunks * chunk // 4, dtype="<u4")  # calloc: pages only where written

            def fetch(first: int, count: int) -> bytes:
                return bytes(f.read_at(count * chunk, doff + first * chunk))

            return cls(name, head=bytes(head[:_PREFIX_SIZE]),
                       directory=bytes(head[_PREFIX_SIZE : _PREFIX_SIZE + dlen]), sums=sums,
                       data=data, fetch=fetch, table_id=table_id)
        except (OSError, ValueError) as err:
            raise CorruptIndexError(f"{name}: cannot read bloom pack: {err}") from err

    @staticmethod
    def _prefix(name: str, head: Any, size: int) -> tuple[int, int, int, int]:
        if xxhash.xxh64_intdigest(bytes(head[:48])) != struct.unpack_from("<Q", head, 48)[0]:
            raise CorruptIndexError(f"{name}: bloom pack header fails its checksum")
        magic, version, chunk, dlen, nchunks, doff, _ = _PREFIX.unpack_from(head, 0)
        if magic != _MAGIC or version != BLOOM_PACK_VERSION:
            raise CorruptIndexError(f"{name}: not a bloom pack of format version {BLOOM_PACK_VERSION}")
        if (chunk < BLOCK_BYTES or chunk % BLOCK_BYTES or doff % chunk
                or doff < _PREFIX_SIZE + dlen + 8 * nchunks or size != doff + nchunks * chunk):
            raise CorruptIndexError(f"{name}: bloom pack of {size} bytes disagrees with its header (cut?)")
        return int(doff), int(dlen), int(nchunks), int(chunk)

    # -- probing ----------------------------------------------------------------------------
    def column_bitsets(self, name: str) -> npt.NDArray[np.intp]:
        """The bitsets of every group of column ``name``."""
        got = self._by_name.get(name)
        if got is None:
            groups = np.array([g.get("name") == name for g in self.groups] + [False], dtype=bool)
            got = self._by_name[name] = np.flatnonzero(groups[self.bs_group]).astype(np.intp)
        return got

    def probe(self, bitsets: npt.NDArray[np.intp], hashes: npt.NDArray[np.uint64]) -> tuple[
            npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """Probe bitsets ``bitsets`` for ``hashes``.

        Returns:
            (hit, ok) per bitset: ``hit`` True unless the bitset proves every hash absent;
            ``ok`` False when a chunk holding one of its selected blocks failed its checksum
            or could not be read (then ``hit`` means nothing: probe that segment elsewhere).
        """
        h = np.asarray(hashes, dtype=np.uint64).reshape(-1)
        n = len(bitsets)
        if not n or not len(h):
            return np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
        nb = self.bs_blocks[bitsets].astype(np.uint64)
        block = (((h >> np.uint64(32))[None, :] * nb[:, None]) >> np.uint64(32)).astype(np.int64)
        byte = self.bs_offset[bitsets][:, None] + block * BLOCK_BYTES  # (bitset, hash)
        chunk = byte // self.chunk_bytes
        self._verify(chunk)
        ok = np.all(self._state[chunk] == _OK, axis=1)
        base = self.data_offset if self._fetch is None else 0
        first = (byte + base) // 4
        picked = self._data[first[:, :, None] + np.arange(8, dtype=np.int64)]  # (bitset, hash, 8)
        key = (h & _MASK32).astype(np.uint32)
        bits = (key[:, None] * SALTS[None, :]) >> np.uint32(27)  # uint32 multiply wraps mod 2^32
        hit = np.all((picked >> bits[None, :, :]) & np.uint32(1), axis=2).any(axis=1)
        return hit, ok

    def _verify(self, chunks: npt.NDArray[np.int64]) -> None:
        """Check every chunk of ``chunks`` (any shape, repeats allowed) not checked yet."""
        with self._lock:
            need = self._state == 0
            seen = np.zeros(self.num_chunks, dtype=bool)
            seen[chunks.reshape(-1)] = True
            todo = np.flatnonzero(seen & need)  # sorted, once each
            if not len(todo):
                return
            if self._fetch is not None:
                self._read(todo)
                todo = todo[self._state[todo] == 0]
            raw = memoryview(self._data).cast("B")
            base = self.data_offset if self._fetch is None else 0
            cb = self.chunk_bytes
            sums = self.sums
            state = self._state
            digest = xxhash.xxh64_intdigest
            for c in todo.tolist():
                a = base + c * cb
                state[c] = _OK if digest(raw[a : a + cb]) == sums[c] else _BAD

    def _read(self, chunks: npt.NDArray[np.int64]) -> None:
        """Fetch ``chunks`` (sorted) into the data buffer, consecutive ones in one read."""
        raw = memoryview(self._data).cast("B")
        cb = self.chunk_bytes
        breaks = np.flatnonzero(np.diff(chunks) != 1) + 1
        for run in np.split(chunks, breaks):
            first, count = int(run[0]), len(run)
            try:
                got = self._fetch(first, count)
            except OSError:
                self._state[run] = _BAD
                continue
            if len(got) != count * cb:
                self._state[run] = _BAD
                continue
            raw[first * cb : (first + count) * cb] = got

    def segment_chunks(self, seg: int) -> tuple[bytes, npt.NDArray[np.uint64]]:
        """Segment ``seg``'s chunks (bytes as stored, unverified) and their checksums."""
        first, count = int(self.seg_chunk0[seg]), int(self.seg_chunks[seg])
        cb = self.chunk_bytes
        if self._fetch is None:
            raw = memoryview(self._data).cast("B")
            a = self.data_offset + first * cb
            data = bytes(raw[a : a + count * cb])
        else:
            data = self._fetch(first, count) if count else b""
            if len(data) != count * cb:
                raise CorruptIndexError(f"{self.name}: bloom pack truncated")
        return data, self.sums[first : first + count]

    def segment_bitsets(self, seg: int) -> npt.NDArray[np.intp]:
        """The bitsets of segment ``seg``, in order."""
        return np.flatnonzero(self.bs_seg == seg).astype(np.intp)


class PackBuilder:
    """Builds a bloom pack segment by segment (new bitsets, or chunks copied from a pack)."""

    def __init__(self, table_id: str, *, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.table_id = table_id
        self.chunk_bytes = chunk_bytes
        self.segments: list[tuple[str, str]] = []
        self.groups: list[dict[str, Any]] = []
        self._group_ids: dict[bytes, int] = {}
        self.seg_chunk0: list[int] = []
        self.seg_chunks: list[int] = []
        self.bs_seg: list[int] = []
        self.bs_group: list[int] = []
        self.bs_offset: list[int] = []
        self.bs_blocks: list[int] = []
        self.parts: list[bytes] = []
        self.sums: list[npt.NDArray[np.uint64]] = []
        self.chunks = 0

    def _group(self, group: dict[str, Any]) -> int:
        key = orjson.dumps(group, option=orjson.OPT_SORT_KEYS)
        g = self._group_ids.get(key)
        if g is None:
            g = self._group_ids[key] = len(self.groups)
            self.groups.append(group)
        return g

    def add_segment(self, segment_id: str, merge: str,
                    bitsets: Sequence[tuple[dict[str, Any], bytes]]) -> None:
        """Add a segment's bitsets: (group: column name and descriptor, bitset bytes) each."""
        seg = len(self.segments)
        self.segments.append((segment_id, merge))
        base = self.chunks * self.chunk_bytes
        pos = 0
        for group, bitset in bitsets:
            n = len(bitset)
            if n < BLOCK_BYTES or n % BLOCK_BYTES:
                raise CorruptIndexError(f"bloom bitset of {n} bytes is not a whole number of 32-byte blocks")
            self.bs_seg.append(seg)
            self.bs_group.append(self._group(group))
            self.bs_offset.append(base + pos)
            self.bs_blocks.append(n // BLOCK_BYTES)
            pos += n
        body = b"".join(b for _, b in bitsets)
        body += bytes(_round_up(len(body), self.chunk_bytes) - len(body))
        cb = self.chunk_bytes
        count = len(body) // cb
        self.sums.append(np.array([xxhash.xxh64_intdigest(body[i * cb : (i + 1) * cb]) for i in range(count)],
                                  dtype=np.uint64))
        self._append(body, count)

    def copy_segment(self, pack: BloomPack, seg: int) -> None:
        """Copy segment ``seg`` of ``pack``: its chunks and their checksums verbatim."""
        if pack.chunk_bytes != self.chunk_bytes:
            raise ValueError("chunk sizes differ")
        data, sums = pack.segment_chunks(seg)
        mine = len(self.segments)
        self.segments.append(pack.segments[seg])
        shift = self.chunks * self.chunk_bytes - int(pack.seg_chunk0[seg]) * pack.chunk_bytes
        for b in pack.segment_bitsets(seg).tolist():
            self.bs_seg.append(mine)
            self.bs_group.append(self._group(pack.groups[int(pack.bs_group[b])]))
            self.bs_offset.append(int(pack.bs_offset[b]) + shift)
            self.bs_blocks.append(int(pack.bs_blocks[b]))
        self.sums.append(np.array(sums, dtype=np.uint64))
        self._append(data, len(sums))

    def _append(self, body: bytes, count: int) -> None:
        self.seg_chunk0.append(self.chunks)
        self.seg_chunks.append(count)
        self.parts.append(body)
        self.chunks += count

    def encode(self) -> bytes:
        """The pack file's bytes."""
        meta = orjson.dumps({"table_id": self.table_id, "segments": self.segments, "groups": self.groups,
                             "bitsets": len(self.bs_seg)})
        directory = b"".join([
            struct.pack("<I", len(meta)), meta,
            np.array(self.seg_chunk0, dtype="<i8").tobytes(), np.array(self.seg_chunks, dtype="<i8").tobytes(),
            np.array(self.bs_seg, dtype="<i4").tobytes(), np.array(self.bs_group, dtype="<i4").tobytes(),
            np.array(self.bs_offset, dtype="<i8").tobytes(), np.array(self.bs_blocks, dtype="<i8").tobytes(),
        ])
        sums = (np.concatenate(self.sums) if self.sums else np.zeros(0, np.uint64)).astype("<u8").tobytes()
        doff = _round_up(_PREFIX_SIZE + len(directory) + len(sums), self.chunk_bytes)
        head = _PREFIX.pack(_MAGIC, BLOOM_PACK_VERSION, self.chunk_bytes, len(directory), self.chunks, doff,
                            xxhash.xxh64_intdigest(directory))
        head += struct.pack("<Q", xxhash.xxh64_intdigest(head)) + bytes(8)
        pad = bytes(doff - _PREFIX_SIZE - len(directory) - len(sums))
        return b"".join([head, directory, sums, pad, *self.parts])
