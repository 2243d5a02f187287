"""The table-level bloom pack: the bloom bitsets of many segments in one file, checked per chunk.

A ``k = key`` probe needs ONE 32-byte block of a bitset per hash, but a merge index checks
each bitset whole (one xxh64 over it), so a fresh plan over 1,600 segments reads and hashes
every bitset of the column. The pack (``Metadata/index/blooms_<ms>_<segments>_<hash>
.carbonbloom``, written beside the index snapshot and covering the same segments) holds
the bitsets of the covered segments' bloom columns in a data region cut into fixed chunks
(4 KiB by default), each with its own xxh64: a probe maps the file (local) or reads the
chunks it needs (object stores) and verifies only the chunks holding the blocks its hashes
select.

Bitsets of the same size are laid out in STRIPES of up to 128, block-major: row ``b`` of a
stripe holds block ``b`` of each of its bitsets, one after the other. A hash selects the
same block number in every bitset of one size, so the blocks a probe needs from 128
segments are one contiguous row (one 4 KiB chunk): a probe of 1,600 segments verifies 13
chunks, not 1,600.

Format 2 adds SUMMARIES: per segment and bitset class (group, size), the OR of its row-group
bitsets, in stripes after the row-group stripes; a probe tests the summaries first and then
only the row-group bitsets of the segments they keep, found through ``seg_start`` (format 2
lists the bitsets by segment). Format 3 (written; 1 and 2 are still read and planned as
before) lays each class out as one wide REGION and drops the per-bitset entries: see
bloom_pack_regions.py. Full layouts: docs/index-format.md.

Every format: a 64-byte prefix (magic, version, chunk bytes, directory length, chunks, data
offset, xxh64 of the directory and of the 48 bytes before it), the directory, the checksum of
each chunk (xxh3-64 in format 3, xxh64 before), the data region of whole chunks.

Block ``b`` of the bitset in slot ``k`` of stripe ``t`` is at byte ``first_chunk[t] * chunk +
(b * width[t] + k) * 32`` of the data region. A new pack takes the bitsets of the segments it
still covers from the previous one's verified chunks (no merge index read). The prefix and
the directory are verified whole when the pack is opened; a pack that fails them, whose size
disagrees, or that names another table is refused (:class:`CorruptIndexError`): the caller
plans without it. A chunk that fails its checksum makes the probe report its bitsets as not
answered (``ok`` False): the caller probes those segments from their merge indexes. A damaged
pack never says "absent" on its own authority.
"""

from __future__ import annotations

import functools
import mmap
import struct
import threading
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import xxhash

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.bloom import BLOCK_BYTES, SALTS
from carbonstore.indexfiles.bloom_pack_regions import (
    Regions,
    bitset_matrix,
    chunk_digest,
    decode_regions,
    probe_region,
    region_counts,
    region_entries,
    region_has,
)
from carbonstore.indexfiles.bloom_pack_regions import ranges as _ranges
from carbonstore.store.fs import AnyFS, as_store_fs

__all__ = [
    "BLOOM_PACK_PREFIX", "BLOOM_PACK_SUFFIX", "BLOOM_PACK_VERSION", "CHUNK_BYTES", "STRIPE_WIDTH",
    "PACK_HEAD", "PACK_MAGIC", "PACK_PREFIX_SIZE", "READ_VERSIONS", "BloomPack", "round_up",
]

BLOOM_PACK_PREFIX = "blooms_"
BLOOM_PACK_SUFFIX = ".carbonbloom"
BLOOM_PACK_VERSION = 3  # written; 2 (stripes, per-bitset entries) and 1 (no summaries) are still read
READ_VERSIONS = (1, 2, 3)
CHUNK_BYTES = 4096
_PROBE_BATCH = 1 << 16  # bitsets probed at a time for one hash
_GAP = 16  # chunks between two wanted ones that a ranged read fetches too (64 KiB) rather than split
STRIPE_WIDTH = 128  # bitsets per stripe: a row of 32-byte blocks fills one 4 KiB chunk
PACK_MAGIC = b"CSBLPACK"
PACK_HEAD = struct.Struct("<8sIIQQQQ")  # magic, version, chunk bytes, dir len, chunks, data offset, dir sum
PACK_PREFIX_SIZE = 64
_MASK32 = np.uint64(0xFFFFFFFF)
_OK, _BAD = 1, -1
_WORDS = np.arange(8, dtype=np.int64)  # the 32-bit words of a 32-byte block


def round_up(n: int, to: int) -> int:
    return -(-n // to) * to


class BloomPack:
    """An opened bloom pack: its directory, and verified access to its chunks.

    Attributes:
        segments: (segment id, merge index name) of each covered segment.
        groups: per group, the column name and the descriptor (``column_id``, ``kind``,
            ``physical_type``, ...) its bitsets were written with.
        st_chunk0, st_chunks, st_width, st_blocks: per stripe, its first chunk, its number
            of chunks, its number of bitsets and their number of 32-byte blocks.
        bs_seg, bs_group, bs_stripe, bs_slot: per bitset, its segment, group, stripe and
            place in the stripe.
    """

    def __init__(self, name: str, *, head: bytes, directory: bytes | memoryview, sums: npt.NDArray[np.uint64],
                 data: Any, fetch: Any, table_id: str | None) -> None:
        _, version, chunk, _, nchunks, doff, dsum = PACK_HEAD.unpack_from(head, 0)
        self.name = name
        self.chunk_bytes = int(chunk)
        self.num_chunks = int(nchunks)
        self.data_offset = int(doff)
        if xxhash.xxh64_intdigest(directory) != dsum:
            raise CorruptIndexError(f"{name}: bloom pack directory fails its checksum")
        try:
            jlen = struct.unpack_from("<I", directory, 0)[0]
            meta = orjson.loads(directory[4 : 4 + jlen])
            nst, nbs = int(meta.get("stripes", 0)), int(meta.get("bitsets", 0))
            self.table_id = str(meta["table_id"])
            # the covered segments' ids and merge index names, each joined by newlines (split
            # when asked: a plan compares the bytes, key_bytes, no string per segment)
            self._keys: tuple[tuple[npt.NDArray[Any], Any], ...] | None = None
            if version >= 2:  # the names as UTF-8 after the entries (no JSON string to unescape)
                self._joined = ("", "")
                self.num_segments = int(meta["segments"])
            else:
                self._joined = (str(meta["segment_ids"]), str(meta["merges"]))
                lines = [j.count("\n") + 1 for j in self._joined]
                if lines[0] != lines[1]:
                    raise ValueError("segment ids and merge index names disagree")
                self.num_segments = lines[0] if self._joined[0] else 0
            self.groups: list[dict[str, Any]] = [dict(g) for g in meta["groups"]]
            # format 2: stripes [0, bitset_stripes) of row-group bitsets (by segment), then summaries
            self.version = version
            self.regions: Regions | None = None
            pos = 4 + jlen
            if version >= 3:  # regions (bloom_pack_regions.py): no per-bitset entries
                self.regions, pos = decode_regions(meta, directory, pos, self.num_segments, len(self.groups),
                                                   int(nchunks), int(chunk))
                self.num_rg_stripes = self.regions.num_bitset_regions
                nst, nsm, nbs = len(self.regions.kind), 0, 0
                layout: list[tuple[str, int]] = [("<i4", self.num_segments)] * 2
            else:
                self.num_rg_stripes = int(meta.get("bitset_stripes", nst)) if version >= 2 else nst
                nsm = int(meta.get("summaries", 0)) if version >= 2 else 0
                layout = [("<i8", nst)] * 4 + [("<i4", nbs)] * 4
                if version >= 2:
                    layout += [("<i8", self.num_segments + 1)] + [("<i4", nsm)] * 4 + [("<i4", self.num_segments)] * 2
            arrays = []
            for dtype, count in layout:  # views of the directory: converted when used
                arrays.append(np.frombuffer(directory, dtype=dtype, count=count, offset=pos))
                pos += count * int(dtype[-1])
            if version >= 2:
                keys = []
                for lengths in arrays[-2:]:
                    size = int(lengths.sum(dtype=np.int64))
                    if len(lengths) and int(lengths.min()) < 0 or pos + size > len(directory):
                        raise ValueError("segment names outside the directory")
                    keys.append((lengths, directory[pos : pos + size]))  # views of the directory: no copy
                    pos += size
                self._keys = (keys[0], keys[1])
        except (ValueError, KeyError, TypeError, struct.error, orjson.JSONDecodeError) as err:
            raise CorruptIndexError(f"{name}: bloom pack directory does not decode: {err}") from err
        if pos != len(directory):
            raise CorruptIndexError(f"{name}: bloom pack directory has {len(directory) - pos} stray bytes")
        if table_id is not None and self.table_id != table_id:
            raise CorruptIndexError(f"{name}: bloom pack of another table ({self.table_id})")
        self.seg_start: npt.NDArray[np.int64] | None = None
        if self.regions is not None:  # a region is a (wide) stripe; its entries derived when asked
            reg = self.regions
            self.st_chunk0, self.st_chunks, self.st_width, self.st_blocks = reg.chunk0, reg.chunks, reg.width, reg.blocks
        else:
            self.st_chunk0, self.st_chunks, self.st_width, self.st_blocks = (a.astype(np.int64) for a in arrays[:4])
            self.__dict__["_bs_raw"] = arrays[4:8]  # per bitset: segment, group, stripe, slot (checked when used)
            self.__dict__["_sm_entries"] = (np.zeros(0, dtype=np.int64),) * 4
        if 2 <= version < 3:
            self.seg_start = arrays[8].astype(np.int64)
            self.__dict__["_sm_entries"] = tuple(a.astype(np.int64) for a in arrays[9:13])
        if self.regions is None:  # (format 3: checked as decoded)
            self._check_layout()
        if version < 2:  # format 1: every bitset checked on open, as always
            _ = self.bs_seg
        self.sums = sums
        self._data = data  # the whole file as words (local) or the data region (filled by fetch)
        # the same words as 32-byte blocks (8 words a row; the file and the data region are
        # whole chunks, whole blocks): a probe takes one row per bitset
        self._blocks = data[: len(data) // 8 * 8].reshape(-1, 8)
        self._block_base = 0 if fetch is not None else self.data_offset // BLOCK_BYTES
        self._fetch = fetch
        self._state = np.zeros(self.num_chunks, dtype=np.int8)  # 0 unchecked, _OK, _BAD
        self._lock = threading.Lock()
        self._by_name: dict[str, npt.NDArray[np.intp]] = {}

    @functools.cached_property
    def segment_ids(self) -> list[str]:
        """The covered segments' ids, in pack order."""
        return self._names(0)

    @functools.cached_property
    def merges(self) -> list[str]:
        """The covered segments' merge index names, in pack order."""
        return self._names(1)

    def _names(self, which: int) -> list[str]:
        if self._keys is None:
            return self._joined[which].split("\n") if self.num_segments else []
        lengths, raw = self._keys[which][0], bytes(self._keys[which][1])
        ends = np.cumsum(lengths).tolist()
        return [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip([0, *ends[:-1]], ends, strict=True)]

    def key_bytes(self) -> tuple[tuple[npt.NDArray[Any], Any], tuple[npt.NDArray[Any], Any]]:
        """(lengths, UTF-8 bytes) of the segment ids and of the merge index names, in pack
        order (arrow_numpy.strings_bytes of the lists): formats 2 and 3 give views of the
        directory (a memoryview: compare it with ``bytes.startswith``, one memcmp), format 1
        arrays and bytes from the joined text."""
        if self._keys is not None:
            return self._keys[0], self._keys[1]
        out = []
        for joined in self._joined:
            raw = joined.encode("utf-8", "surrogatepass")
            if not self.num_segments:
                out.append((np.zeros(0, dtype=np.int64), b""))
                continue
            ends = np.append(np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == 10), len(raw))
            out.append((np.diff(ends, prepend=-1) - 1, raw.replace(b"\n", b"")))
        return out[0], out[1]

    @functools.cached_property
    def segments(self) -> list[tuple[str, str]]:
        """Each covered segment as (segment id, merge index name), in pack order."""
        return list(zip(self.segment_ids, self.merges, strict=True))

    @functools.cached_property
    def index(self) -> dict[tuple[str, str], int]:
        """Each covered segment's place, by (segment id, merge index name)."""
        return {s: i for i, s in enumerate(self.segments)}

    def _check_layout(self) -> None:
        c0, cn, w, nb = self.st_chunk0, self.st_chunks, self.st_width, self.st_blocks
        bad = bool(len(c0) and (
            c0.min() < 0 or cn.min() < 0 or int((c0 + cn).max()) > self.num_chunks or w.min() < 1
            or nb.min() < 1 or (w * nb * BLOCK_BYTES > cn * self.chunk_bytes).any()))
        bad = bad or not 0 <= self.num_rg_stripes <= len(c0)
        start = self.seg_start
        if start is not None:  # the bitsets by segment: starts at 0, never falls, ends at the last
            bad = bad or (len(start) and (int(start[0]) != 0 or int(start[-1]) != len(self._bs_raw[0])
                                          or bool((np.diff(start) < 0).any())))
        if len(self.sm_seg):
            bad = bad or self._bad_entries(self.sm_seg, self.sm_group, self.sm_stripe, self.sm_slot,
                                           self.num_rg_stripes, len(c0))
        if bad or self.chunk_bytes < BLOCK_BYTES or self.chunk_bytes % BLOCK_BYTES:
            raise CorruptIndexError(f"{self.name}: bloom pack directory describes bitsets outside its data")

    def _bad_entries(self, seg: npt.NDArray[Any], group: npt.NDArray[Any], stripe: npt.NDArray[Any],
                     slot: npt.NDArray[Any], lo: int, hi: int) -> bool:
        """Whether one of these bitset entries names a segment, group, stripe (of [lo, hi)) or
        slot that does not exist."""
        if not len(stripe):
            return False
        return bool(seg.min() < 0 or seg.max() >= self.num_segments or group.min() < 0
                    or group.max() >= len(self.groups) or stripe.min() < lo or stripe.max() >= hi
                    or slot.min() < 0 or (slot >= self.st_width[stripe]).any())

    def _checked_bitsets(self) -> tuple[npt.NDArray[np.int64], ...]:
        got = self.__dict__.get("_bs")
        if got is None:
            got = tuple(a.astype(np.int64) for a in self._bs_raw)
            if self._bad_entries(*got, 0, self.num_rg_stripes) or (
                    self.seg_start is not None and len(got[0]) and bool((np.diff(got[0]) < 0).any())):
                raise CorruptIndexError(f"{self.name}: bloom pack directory describes bitsets outside its data")
            if self.seg_start is not None and len(got[0]) and not np.array_equal(
                    np.searchsorted(got[0], np.arange(self.num_segments + 1)), self.seg_start):
                raise CorruptIndexError(f"{self.name}: bloom pack directory lists bitsets out of order")
            self.__dict__["_bs"] = got
        return got  # type: ignore[no-any-return]

    @property
    def bs_seg(self) -> npt.NDArray[np.int64]:
        """Per bitset: its segment (every bitset's entry checked the first time one is asked)."""
        return self._checked_bitsets()[0]

    @property
    def bs_group(self) -> npt.NDArray[np.int64]:
        """Per bitset: its group."""
        return self._checked_bitsets()[1]

    @property
    def bs_stripe(self) -> npt.NDArray[np.int64]:
        """Per bitset: its stripe."""
        return self._checked_bitsets()[2]

    @property
    def bs_slot(self) -> npt.NDArray[np.int64]:
        """Per bitset: its place in its stripe."""
        return self._checked_bitsets()[3]

    @property
    def summarised(self) -> bool:
        """Whether the pack carries segment summaries (formats 2 and 3)."""
        return self.version >= 2

    @functools.cached_property
    def _bs_raw(self) -> list[npt.NDArray[np.int32]]:
        """Format 3: each bitset's segment, group, region and column (formats 1 and 2 store them)."""
        return region_entries(self.regions, range(self.num_rg_stripes), self.num_segments)

    @functools.cached_property
    def _sm_entries(self) -> tuple[npt.NDArray[np.int64], ...]:  # (formats 1 and 2 set these on open)
        summaries = range(self.num_rg_stripes, len(self.st_chunk0))
        return tuple(a.astype(np.int64) for a in region_entries(self.regions, summaries, self.num_segments))

    sm_seg = property(lambda self: self._sm_entries[0], doc="Per summary: its segment.")
    sm_group = property(lambda self: self._sm_entries[1], doc="Per summary: its group.")
    sm_stripe = property(lambda self: self._sm_entries[2], doc="Per summary: its stripe (region).")
    sm_slot = property(lambda self: self._sm_entries[3], doc="Per summary: its place in the stripe.")

    def column_regions(self, name: str) -> list[int]:
        """Format 3: the bitset regions of every group of column ``name``."""
        key = "\0regions:" + name
        got = self._by_name.get(key)
        if got is None:
            reg = self.regions
            assert reg is not None
            got = self._by_name[key] = np.array(
                [t for t in range(self.num_rg_stripes) if self.groups[int(reg.group[t])].get("name") == name],
                dtype=np.intp)
        return got.tolist()  # type: ignore[no-any-return]

    probe_region = probe_region  # format 3: (any, all, ok) per segment over a region (bloom_pack_regions)
    bitset_matrix = bitset_matrix  # bitsets as rows of bytes, verified (bloom_pack_regions)

    region_counts = region_counts  # format 3: bitsets per segment in a region (bloom_pack_regions)
    region_has = region_has  # format 3: whether each segment has one there

    def bitsets_of(self, segs: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64],
                                                             npt.NDArray[np.int64]]:
        """The bitsets of pack segments ``segs`` (format 2: read from the per-segment list,
        only their entries converted and checked): (bitsets, their segment, their group)."""
        start = self.seg_start
        if start is None or "_bs" in self.__dict__:
            if start is None:
                wanted = np.zeros(self.num_segments, dtype=bool)
                wanted[segs] = True
                b = np.flatnonzero(wanted[self.bs_seg]).astype(np.intp)
            else:
                b = _ranges(start[segs], start[np.asarray(segs) + 1])
            return b, self.bs_seg[b], self.bs_group[b]
        b = _ranges(start[segs], start[np.asarray(segs) + 1])
        seg, group, stripe, slot = (a[b].astype(np.int64) for a in self._bs_raw)
        if self._bad_entries(seg, group, stripe, slot, 0, self.num_rg_stripes) or not np.array_equal(
                seg, np.repeat(np.asarray(segs, dtype=np.int64), (start[segs + 1] - start[segs]))):
            raise CorruptIndexError(f"{self.name}: bloom pack directory describes bitsets outside its data")
        return b, seg, group

    def summaries_of(self, name: str) -> npt.NDArray[np.intp]:
        """The summaries of every group of column ``name``."""
        key = "\0summaries:" + name
        got = self._by_name.get(key)
        if got is None:
            groups = np.array([g.get("name") == name for g in self.groups] + [False], dtype=bool)
            got = self._by_name[key] = np.flatnonzero(groups[self.sm_group]).astype(np.intp)
        return got

    def summary_layout(self, summaries: npt.NDArray[np.intp]) -> tuple[npt.NDArray[Any], ...]:
        """:meth:`layout` of summaries ``summaries`` (for :meth:`probe`)."""
        t = self.sm_stripe[summaries]
        return (self.st_blocks[t].astype(np.uint64),
                self.st_chunk0[t] * self.chunk_bytes + self.sm_slot[summaries] * BLOCK_BYTES,
                self.st_width[t] * BLOCK_BYTES)

    def stripe_members(self, t: int) -> npt.NDArray[np.intp]:
        """The bitsets of stripe ``t`` (a row-group stripe), by bitset number."""
        order = self.__dict__.get("_by_stripe")
        if order is None:
            order = np.argsort(self.bs_stripe, kind="stable")
            bounds = np.searchsorted(self.bs_stripe[order], np.arange(len(self.st_chunk0) + 1))
            order = self.__dict__["_by_stripe"] = (order.astype(np.intp), bounds)
        return order[0][order[1][t] : order[1][t + 1]]  # type: ignore[no-any-return]

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, fs: AnyFS, path: str, *, table_id: str | None) -> BloomPack:
        """Open and verify the prefix and directory of the pack at ``path``.

        A local file is memory-mapped (a probe touches only the pages it needs); on other
        filesystems the chunks a probe needs are read with ranged reads.

        Raises:
            CorruptIndexError: a missing, short or damaged prefix / directory, a size that
                disagrees with it, or a pack of another table (``table_id``).
        """
        name = path.rsplit("/", 1)[-1]
        sfs = as_store_fs(fs)
        try:
            if sfs.local:
                with open(path, "rb") as f:
                    size = f.seek(0, 2)
                    if size < PACK_PREFIX_SIZE:
                        raise CorruptIndexError(f"{name}: bloom pack truncated")
                    mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                view = memoryview(mapped)
                doff, dlen, nchunks, chunk = cls._prefix(name, view[:PACK_PREFIX_SIZE], size)
                # a probe touches scattered chunks: no read-ahead there; the directory and the
                # checksums are read whole (a page fault per 4 KiB of them costs more than the hash)
                page = mmap.PAGESIZE
                random_from = -(-doff // page) * page
                if hasattr(mapped, "madvise") and random_from < size:
                    mapped.madvise(mmap.MADV_RANDOM, random_from, size - random_from)
                    if random_from:
                        mapped.madvise(mmap.MADV_WILLNEED, 0, random_from)
                words = np.frombuffer(mapped, dtype="<u4")
                sums = np.frombuffer(mapped, dtype="<u8", count=nchunks, offset=PACK_PREFIX_SIZE + dlen)
                return cls(name, head=bytes(view[:PACK_PREFIX_SIZE]),
                           directory=view[PACK_PREFIX_SIZE : PACK_PREFIX_SIZE + dlen], sums=sums,  # (no copy)
                           data=words, fetch=None, table_id=table_id)
            f = sfs.open_input_file(path)
            size = f.size()
            head = f.read_at(min(size, 1 << 16), 0)
            if len(head) < PACK_PREFIX_SIZE:
                raise CorruptIndexError(f"{name}: bloom pack truncated")
            doff, dlen, nchunks, chunk = cls._prefix(name, head[:PACK_PREFIX_SIZE], size)
            meta_end = PACK_PREFIX_SIZE + dlen + 8 * nchunks
            if meta_end > len(head):
                head = head + f.read_at(meta_end - len(head), len(head))
            sums = np.frombuffer(head, dtype="<u8", count=nchunks, offset=PACK_PREFIX_SIZE + dlen)
            data = np.zeros(nchunks * chunk // 4, dtype="<u4")  # calloc: pages only where written

            def fetch(first: int, count: int) -> bytes:
                return bytes(f.read_at(count * chunk, doff + first * chunk))

            return cls(name, head=bytes(head[:PACK_PREFIX_SIZE]),
                       directory=bytes(head[PACK_PREFIX_SIZE : PACK_PREFIX_SIZE + dlen]), sums=sums,
                       data=data, fetch=fetch, table_id=table_id)
        except (OSError, ValueError) as err:
            raise CorruptIndexError(f"{name}: cannot read bloom pack: {err}") from err

    @staticmethod
    def _prefix(name: str, head: Any, size: int) -> tuple[int, int, int, int]:
        if xxhash.xxh64_intdigest(bytes(head[:48])) != struct.unpack_from("<Q", head, 48)[0]:
            raise CorruptIndexError(f"{name}: bloom pack header fails its checksum")
        magic, version, chunk, dlen, nchunks, doff, _ = PACK_HEAD.unpack_from(head, 0)
        if magic != PACK_MAGIC or version not in READ_VERSIONS:
            raise CorruptIndexError(f"{name}: not a bloom pack of format version {READ_VERSIONS}")
        if (chunk < BLOCK_BYTES or chunk % BLOCK_BYTES or doff % chunk
                or doff < PACK_PREFIX_SIZE + dlen + 8 * nchunks or size != doff + nchunks * chunk):
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

    def layout(self, bitsets: npt.NDArray[np.intp]) -> tuple[npt.NDArray[Any], ...]:
        """What a probe of bitsets ``bitsets`` computes before it looks at a hash: per bitset
        its number of blocks, the data byte of its block 0 and the bytes between two blocks
        (a reused handle probes the same bitsets for a new key every plan: computed once)."""
        # (the entries as stored: every bitset number handed out was checked, by bitsets_of
        # or with every entry of the pack)
        t = self._bs_raw[2][bitsets].astype(np.int64)
        return (self.st_blocks[t].astype(np.uint64),
                self.st_chunk0[t] * self.chunk_bytes + self._bs_raw[3][bitsets].astype(np.int64) * BLOCK_BYTES,
                self.st_width[t] * BLOCK_BYTES)

    def probe(self, bitsets: npt.NDArray[np.intp], hashes: npt.NDArray[np.uint64],
              layout: tuple[npt.NDArray[Any], ...] | None = None) -> tuple[
            npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """Probe bitsets ``bitsets`` for ``hashes`` (``layout``: what :meth:`layout` gave for them).

        Returns:
            (hit, ok) per bitset: ``hit`` True unless the bitset proves every hash absent;
            ``ok`` False when a chunk holding one of its selected blocks failed its checksum
            or could not be read (then ``hit`` means nothing: probe that segment elsewhere).
        """
        h = np.asarray(hashes, dtype=np.uint64).reshape(-1)
        n = len(bitsets)
        if not n or not len(h):
            return np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
        nb, base, stride = self.layout(bitsets) if layout is None else layout
        # block b of the bitset in slot k of a stripe of width w: row b, column k
        if len(h) == 1:  # one hash (a lookup of one value): one block per bitset, one mask
            return self._probe_one(int(h[0]), nb, base, stride)
        block = ((h >> np.uint64(32))[None, :] * nb[:, None]) >> np.uint64(32)
        byte = base[:, None] + block.astype(np.int64) * stride[:, None]
        chunk = byte // self.chunk_bytes
        state = self._state[chunk]
        if not (state == _OK).all():
            self._verify(chunk[state == 0])  # only those not checked yet (a new key: one or two)
            state = self._state[chunk]
        ok = (state == _OK).all(axis=1)
        first = byte >> 2 if self._fetch is not None else (byte + self.data_offset) >> 2
        picked = self._data[first[:, :, None] + _WORDS]  # (bitset, hash, 8)
        key = (h & _MASK32).astype(np.uint32)
        bits = (key[:, None] * SALTS[None, :]) >> np.uint32(27)  # uint32 multiply wraps mod 2^32
        hit = ((picked >> bits[None, :, :]) & np.uint32(1)).all(axis=2).any(axis=1)
        return hit, ok

    def _probe_one(self, h: int, nb: npt.NDArray[Any], base: npt.NDArray[Any],
                   stride: npt.NDArray[Any]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """:meth:`probe` of one hash ``h``: the same blocks and bits, without a hash axis,
        in batches of bitsets (a table of 1,000,000 files probes 1,000,000 bitsets: batches
        keep the temporaries small enough to be reused, not fresh pages faulted in each time)."""
        n = len(nb)
        if n <= _PROBE_BATCH:
            return self._probe_batch(h, nb, base, stride)
        hit, ok = np.empty(n, dtype=bool), np.empty(n, dtype=bool)
        for i in range(0, n, _PROBE_BATCH):
            j = min(n, i + _PROBE_BATCH)
            hit[i:j], ok[i:j] = self._probe_batch(h, nb[i:j], base[i:j], stride[i:j])
        return hit, ok

    def _probe_batch(self, h: int, nb: npt.NDArray[Any], base: npt.NDArray[Any],
                     stride: npt.NDArray[Any]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        block = ((np.uint64(h >> 32) * nb) >> np.uint64(32)).astype(np.int64)
        byte = base + block * stride
        chunk = byte // self.chunk_bytes
        state = self._state[chunk]
        ok = state == _OK
        if not ok.all():
            self._verify(chunk[state == 0])  # only those not checked yet
            ok = self._state[chunk] == _OK
        picked = self._blocks[(byte >> 5) + self._block_base]  # (bitset, 8): its block (32 bytes)
        masks = np.uint32(1) << ((np.uint32(h & 0xFFFFFFFF) * SALTS) >> np.uint32(27))  # uint32 wraps
        hit = ((picked & masks) == masks).all(axis=1)
        return hit, ok

    def _verify(self, chunks: npt.NDArray[np.int64]) -> None:
        """Check every chunk of ``chunks`` (any shape, repeats allowed) not checked yet."""
        with self._lock:
            wanted = self._state == 0  # a mask over the chunks: sorted, once each, no hash
            hit = np.zeros(self.num_chunks, dtype=bool)  # of 65,536 block numbers per batch
            hit[chunks.reshape(-1)] = True
            todo = np.flatnonzero(hit & wanted)
            if not len(todo):
                return
            if self._fetch is not None:
                self._read(todo)
                todo = todo[self._state[todo] == 0]
            raw = memoryview(self._data).cast("B")
            cb = self.chunk_bytes
            digest = chunk_digest(self.version)  # (the digests compared at once: no numpy scalar per chunk)
            starts = (todo * cb + (self.data_offset if self._fetch is None else 0)).tolist()
            got = np.fromiter((digest(raw[a : a + cb]) for a in starts), dtype=np.uint64, count=len(starts))
            self._state[todo] = np.where(got == self.sums[todo], _OK, _BAD)

    def _read(self, chunks: npt.NDArray[np.int64]) -> None:
        """Fetch ``chunks`` (sorted) into the data buffer: chunks at most _GAP apart in one read
        (a format 3 key row is dense with survivors' chunks: a few reads, not thousands)."""
        raw = memoryview(self._data).cast("B")
        cb = self.chunk_bytes
        breaks = np.flatnonzero(np.diff(chunks) > _GAP) + 1
        for run in np.split(chunks, breaks):
            first, count = int(run[0]), int(run[-1]) - int(run[0]) + 1
            try:
                got = self._fetch(first, count)
            except OSError:
                self._state[run] = _BAD
                continue
            if len(got) != count * cb:
                self._state[run] = _BAD
                continue
            raw[first * cb : (first + count) * cb] = got

    def stripe_chunks(self, t: int) -> tuple[bytes, npt.NDArray[np.uint64]]:
        """Stripe ``t``'s chunks (bytes as stored, unverified) and their checksums."""
        first, count = int(self.st_chunk0[t]), int(self.st_chunks[t])
        return self._raw(first, count), self.sums[first : first + count]

    def stripe_bitsets(self, t: int) -> list[bytes] | None:
        """The bitsets of stripe ``t`` by slot, its chunks verified; None when one fails."""
        first, count = int(self.st_chunk0[t]), int(self.st_chunks[t])
        chunks = np.arange(first, first + count, dtype=np.int64)
        self._verify(chunks)
        if (self._state[chunks] != _OK).any():
            return None
        w, nb = int(self.st_width[t]), int(self.st_blocks[t])
        rows = np.frombuffer(self._raw(first, count), dtype=np.uint8, count=w * nb * BLOCK_BYTES)
        by_slot = rows.reshape(nb, w, BLOCK_BYTES).transpose(1, 0, 2)
        return [by_slot[k].tobytes() for k in range(w)]

    def _raw(self, first: int, count: int) -> bytes:
        cb = self.chunk_bytes
        if self._fetch is None:
            a = self.data_offset + first * cb
            return bytes(memoryview(self._data).cast("B")[a : a + count * cb])
        data = self._fetch(first, count) if count else b""
        if len(data) != count * cb:
            raise CorruptIndexError(f"{self.name}: bloom pack truncated")
        return bytes(data)

    def segment_bitsets(self, seg: int) -> npt.NDArray[np.intp]:
        """The bitsets of segment ``seg``, in order."""
        return self.bitsets_of(np.array([seg], dtype=np.intp))[0]

