"""Writing a bloom pack (indexfiles/bloom_pack.py): the row-group bitsets laid out in stripes,
then one summary bitset per segment and bitset class, the bitwise OR of the segment's bitsets
of one group (column descriptor) and one size.

Split-block bloom filters of one size OR together exactly: a hash selects the same block and
the same bits in each, so the OR holds every bit a member sets, and a probe that finds a bit
missing in the summary finds it missing in every member: a summary never drops a segment
a probe of its row groups keeps. Summaries are derived from the row-group bitsets as this
pack holds them (a stripe copied from the previous pack is verified against its checksums
first); a segment with a bitset in a stripe that fails them, or whose every class has one
bitset (its summary would be that bitset), gets no summary: a probe reads its row-group
bitsets as in format 1. Every other segment gets a summary for each of its classes, so a
segment with a summary of a column is covered whole for it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import xxhash

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles import bloom_pack as pack_format
from carbonstore.indexfiles.bloom import BLOCK_BYTES
from carbonstore.indexfiles.bloom_pack import (
    BLOOM_PACK_VERSION,
    CHUNK_BYTES,
    PACK_HEAD,
    PACK_MAGIC,
    PACK_PREFIX_SIZE,
    BloomPack,
    round_up,
)

__all__ = ["PackBuilder"]


class PackBuilder:
    """Builds a bloom pack: segments, then their bitsets (new, or whole stripes copied from a
    pack); :meth:`encode` lays the pending bitsets out in stripes of equal block counts and
    adds the segments' summaries (``version=1``: the format 1 layout, without them: what
    older writers left, for tests of the readers)."""

    def __init__(self, table_id: str, *, chunk_bytes: int = CHUNK_BYTES, stripe_width: int | None = None,
                 version: int = BLOOM_PACK_VERSION) -> None:
        self.table_id = table_id
        self.chunk_bytes = chunk_bytes
        self.stripe_width = pack_format.STRIPE_WIDTH if stripe_width is None else stripe_width
        self.version = version
        self.segments: list[tuple[str, str]] = []
        self._seg_ids: dict[tuple[str, str], int] = {}
        self.groups: list[dict[str, Any]] = []
        self._group_ids: dict[bytes, int] = {}
        self.stripes: list[tuple[int, int, int, int]] = []  # first chunk, chunks, width, blocks
        self.bitsets: list[tuple[int, int, int, int]] = []  # segment, group, stripe, slot
        self.summaries: list[tuple[int, int, int, int]] = []  # segment, group, stripe, slot
        self.pending: dict[int, list[tuple[int, int, bytes]]] = {}  # blocks -> (segment, group, bytes)
        self.parts: list[bytes] = []
        self.sums: list[npt.NDArray[np.uint64]] = []
        self.copied: set[int] = set()  # stripes taken verbatim (checked before summarised)
        self.chunks = 0

    def segment(self, segment_id: str, merge: str) -> int:
        """The index of a covered segment (added the first time)."""
        key = (segment_id, merge)
        got = self._seg_ids.get(key)
        if got is None:
            got = self._seg_ids[key] = len(self.segments)
            self.segments.append(key)
        return got

    def _group(self, group: dict[str, Any]) -> int:
        key = orjson.dumps(group, option=orjson.OPT_SORT_KEYS)
        g = self._group_ids.get(key)
        if g is None:
            g = self._group_ids[key] = len(self.groups)
            self.groups.append(group)
        return g

    def add_bitset(self, seg: int, group: dict[str, Any], bitset: bytes) -> None:
        """Add a bitset of segment ``seg`` (group: its column name and descriptor)."""
        n = len(bitset)
        if n < BLOCK_BYTES or n % BLOCK_BYTES:
            raise CorruptIndexError(f"bloom bitset of {n} bytes is not a whole number of 32-byte blocks")
        self.pending.setdefault(n // BLOCK_BYTES, []).append((seg, self._group(group), bytes(bitset)))

    def add_segment(self, segment_id: str, merge: str, bitsets: Sequence[tuple[dict[str, Any], bytes]]) -> None:
        """Add a segment and its bitsets."""
        seg = self.segment(segment_id, merge)
        for group, bitset in bitsets:
            self.add_bitset(seg, group, bitset)

    def copy_stripe(self, pack: BloomPack, t: int, segs: npt.NDArray[np.intp],
                    raw: tuple[bytes, npt.NDArray[np.uint64]] | None = None) -> None:
        """Copy row-group stripe ``t`` of ``pack`` verbatim (chunks and checksums, or ``raw``:
        what ``pack.stripe_chunks(t)`` returned); ``segs[i]`` is this pack's index of
        ``pack``'s segment ``i``."""
        if pack.chunk_bytes != self.chunk_bytes:
            raise ValueError("chunk sizes differ")
        data, sums = pack.stripe_chunks(t) if raw is None else raw
        mine = len(self.stripes)
        self.stripes.append((self.chunks, len(sums), int(pack.st_width[t]), int(pack.st_blocks[t])))
        for b in pack.stripe_members(t).tolist():
            self.bitsets.append((int(segs[pack.bs_seg[b]]), self._group(pack.groups[int(pack.bs_group[b])]),
                                 mine, int(pack.bs_slot[b])))
        self.sums.append(np.array(sums, dtype=np.uint64))
        self.parts.append(data)
        self.copied.add(mine)
        self.chunks += len(sums)

    def _lay_out(self, items: list[tuple[int, int, bytes]], blocks: int, into: list[tuple[int, int, int, int]]) -> None:
        """Lay bitsets ``items`` (segment, group, bytes) of ``blocks`` blocks out in stripes."""
        cb = self.chunk_bytes
        for at in range(0, len(items), self.stripe_width):
            these = items[at : at + self.stripe_width]
            w = len(these)
            mine = len(self.stripes)
            cols = np.frombuffer(b"".join(b for _, _, b in these), dtype=np.uint8).reshape(w, blocks, BLOCK_BYTES)
            body = cols.transpose(1, 0, 2).tobytes()  # row b: block b of every bitset
            body += bytes(round_up(len(body), cb) - len(body))
            count = len(body) // cb
            self.stripes.append((self.chunks, count, w, blocks))
            for k, (seg, group, _) in enumerate(these):
                into.append((seg, group, mine, k))
            view = memoryview(body)
            self.sums.append(np.fromiter((xxhash.xxh64_intdigest(view[i * cb : (i + 1) * cb]) for i in range(count)),
                                         dtype=np.uint64, count=count))
            self.parts.append(body)
            self.chunks += count

    def _flush(self) -> None:
        for blocks, items in sorted(self.pending.items()):
            self._lay_out(items, blocks, self.bitsets)
        self.pending.clear()

    def _summarise(self) -> None:
        """Lay out the summaries of the row-group stripes written so far (see the module)."""
        nst = len(self.stripes)
        if not self.bitsets or not nst:
            return
        bs = np.array(self.bitsets, dtype=np.int64).reshape(-1, 4)
        order = np.argsort(bs[:, 2], kind="stable")
        bounds = np.searchsorted(bs[order, 2], np.arange(nst + 1))
        bad = np.zeros(len(self.segments), dtype=bool)
        by_size: dict[int, tuple[list[npt.NDArray[np.uint64]], list[npt.NDArray[np.int64]]]] = {}
        cb = self.chunk_bytes
        for t in range(nst):
            members = order[bounds[t] : bounds[t + 1]]
            if not len(members):
                continue
            _, count, w, nb = self.stripes[t]
            data = self.parts[t]
            if t in self.copied:  # verbatim from the previous pack: checked before it is summarised
                view = memoryview(data)
                if len(data) != count * cb or any(
                        xxhash.xxh64_intdigest(view[i * cb : (i + 1) * cb]) != int(self.sums[t][i])
                        for i in range(count)):
                    bad[bs[members, 0]] = True
                    continue
            rows = np.frombuffer(data, dtype=np.uint8, count=w * nb * BLOCK_BYTES).reshape(nb, w, BLOCK_BYTES)
            words = np.ascontiguousarray(rows.transpose(1, 0, 2)).view("<u8").reshape(w, nb * 4)
            mats, keys = by_size.setdefault(nb, ([], []))
            mats.append(words[bs[members, 3]])
            keys.append(bs[members, :2])
        ngroups = max(1, len(self.groups))
        classes: list[tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.uint64]]] = []
        for nb in sorted(by_size):
            mats, keys = by_size[nb]
            m, k = np.concatenate(mats), np.concatenate(keys)
            key = k[:, 0] * ngroups + k[:, 1]
            o = np.argsort(key, kind="stable")
            key = key[o]
            starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
            sizes = np.diff(np.r_[starts, len(key)])
            classes.append((nb, key[starts], sizes, np.bitwise_or.reduceat(m[o], starts, axis=0)))
        # a segment gets summaries when none of its bitsets failed and some class has two or more
        worth = np.zeros(len(self.segments), dtype=bool)
        for _, key, sizes, _ in classes:
            worth[key[sizes > 1] // ngroups] = True
        worth &= ~bad
        for nb, key, _, ors in classes:
            take = np.flatnonzero(worth[key // ngroups])
            items = [(int(c // ngroups), int(c % ngroups), ors[i].astype("<u8").tobytes())
                     for i, c in zip(take.tolist(), key[take].tolist(), strict=True)]
            self._lay_out(items, nb, self.summaries)

    def encode(self) -> bytes:
        """The pack file's bytes."""
        self._flush()
        nrg = len(self.stripes)
        if self.version >= 2:
            self._summarise()
        meta: dict[str, Any] = {"table_id": self.table_id, "groups": self.groups,
                                "stripes": len(self.stripes), "bitsets": len(self.bitsets)}
        if self.version >= 2:  # the names after the entries, as UTF-8 with their lengths
            meta.update(segments=len(self.segments), bitset_stripes=nrg, summaries=len(self.summaries))
            names = [[x.encode("utf-8", "surrogatepass") for x in col] for col in zip(*self.segments, strict=True)]
            names = names or [[], []]
        else:
            if any("\n" in x for seg in self.segments for x in seg):
                raise ValueError("a segment id or merge index name holds a line break")
            meta.update(segment_ids="\n".join(s for s, _ in self.segments),
                        merges="\n".join(m for _, m in self.segments))
        text = orjson.dumps(meta)
        st = np.array(self.stripes, dtype=np.int64).reshape(-1, 4)
        bs = np.array(self.bitsets, dtype=np.int64).reshape(-1, 4)
        parts = [struct.pack("<I", len(text)), text, *[st[:, i].astype("<i8").tobytes() for i in range(4)]]
        if self.version >= 2:
            bs = bs[np.argsort(bs[:, 0], kind="stable")]  # listed by segment: a probe takes a segment's run
        parts += [bs[:, i].astype("<i4").tobytes() for i in range(4)]
        if self.version >= 2:
            start = np.r_[0, np.cumsum(np.bincount(bs[:, 0], minlength=len(self.segments)))].astype("<i8")
            sm = np.array(self.summaries, dtype=np.int64).reshape(-1, 4)
            parts += [start.tobytes(), *[sm[:, i].astype("<i4").tobytes() for i in range(4)]]
            parts += [np.array([len(x) for x in col], dtype="<i4").tobytes() for col in names]
            parts += [b"".join(col) for col in names]
        directory = b"".join(parts)
        sums = (np.concatenate(self.sums) if self.sums else np.zeros(0, np.uint64)).astype("<u8").tobytes()
        doff = round_up(PACK_PREFIX_SIZE + len(directory) + len(sums), self.chunk_bytes)
        head = PACK_HEAD.pack(PACK_MAGIC, self.version, self.chunk_bytes, len(directory), self.chunks, doff,
                            xxhash.xxh64_intdigest(directory))
        head += struct.pack("<Q", xxhash.xxh64_intdigest(head)) + bytes(8)
        pad = bytes(doff - PACK_PREFIX_SIZE - len(directory) - len(sums))
        return b"".join([head, directory, sums, pad, *self.parts])
