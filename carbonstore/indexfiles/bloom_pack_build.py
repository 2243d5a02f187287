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
from carbonstore.indexfiles.bloom_pack_regions import REGION_BITSETS, REGION_SUMMARIES, chunk_digest

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
        self.taken: list[tuple[npt.NDArray[np.int64], int, int, npt.NDArray[np.uint8]]] = []  # format 3

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

    def add_matrix(self, segs: npt.NDArray[np.int64], group: dict[str, Any], matrix: npt.NDArray[np.uint8]) -> None:
        """Format 3: add bitsets of one group and size, ``matrix[i]`` one of segment ``segs[i]``
        (verified by the caller: bloom_pack_regions.bitset_matrix)."""
        n = matrix.shape[1] if matrix.ndim == 2 else 0
        if n < BLOCK_BYTES or n % BLOCK_BYTES:
            raise CorruptIndexError(f"bloom bitset of {n} bytes is not a whole number of 32-byte blocks")
        self.taken.append((np.asarray(segs, dtype=np.int64), self._group(group), n // BLOCK_BYTES, matrix))

    def take(self, pack: BloomPack, bitsets: npt.NDArray[np.intp], segs: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
        """Format 3: take bitsets ``bitsets`` of ``pack`` (any format), checked against their
        chunks' checksums; ``segs[i]`` is this pack's index of ``pack``'s segment ``i``.
        Returns per bitset whether it passed (those that did not are not taken)."""
        b = np.asarray(bitsets, dtype=np.intp)
        ok = np.ones(len(b), dtype=bool)
        if not len(b):
            return ok
        blocks = pack.st_blocks[pack.bs_stripe[b]]
        group = pack.bs_group[b]
        for nb in np.unique(blocks).tolist():
            these = np.flatnonzero(blocks == nb)
            matrix, good = pack.bitset_matrix(b[these])
            ok[these] = good
            for g in np.unique(group[these]).tolist():
                mine = np.flatnonzero((group[these] == g) & good)
                if len(mine):
                    self.add_matrix(segs[pack.bs_seg[b[these[mine]]]], pack.groups[g], matrix[mine])
        return ok

    def copy_stripe(self, pack: BloomPack, t: int, segs: npt.NDArray[np.intp],
                    raw: tuple[bytes, npt.NDArray[np.uint64]] | None = None) -> None:
        """Copy row-group stripe ``t`` of ``pack`` verbatim (chunks and checksums, or ``raw``:
        what ``pack.stripe_chunks(t)`` returned); ``segs[i]`` is this pack's index of
        ``pack``'s segment ``i``. Format 3 takes the stripe's bitsets (a failing chunk raises
        CorruptIndexError)."""
        if self.version >= 3:
            if not self.take(pack, pack.stripe_members(t), segs).all():
                raise CorruptIndexError(f"{pack.name}: a chunk fails its checksum")
            return
        if pack.chunk_bytes != self.chunk_bytes:
            raise ValueError("chunk sizes differ")
        data, sums = pack.stripe_chunks(t) if raw is None else raw
        own, theirs = chunk_digest(self.version), chunk_digest(pack.version)
        if own is not theirs:  # (a format 3 stripe into an older pack: checked, then summed anew)
            cb, view = self.chunk_bytes, memoryview(data)
            if len(data) != len(sums) * cb or any(theirs(view[i * cb : (i + 1) * cb]) != int(sums[i])
                                                  for i in range(len(sums))):
                raise CorruptIndexError(f"{pack.name}: a chunk fails its checksum")
            sums = np.array([own(view[i * cb : (i + 1) * cb]) for i in range(len(sums))], dtype=np.uint64)
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

    def _chunked(self, body: bytes) -> int:
        """Append ``body`` from a chunk boundary (zero-padded, checksummed); its first chunk.
        (The padding is a part of its own: the body is not copied.)"""
        cb = self.chunk_bytes
        pad = bytes(round_up(len(body), cb) - len(body))
        whole, view = len(body) // cb, memoryview(body)
        digest = chunk_digest(self.version)
        sums = [digest(view[i * cb : (i + 1) * cb]) for i in range(whole)]
        if pad:  # the last chunk: the body's tail and the zeros
            sums.append(digest(bytes(view[whole * cb:]) + pad))
        count = len(sums)
        self.sums.append(np.array(sums, dtype=np.uint64))
        self.parts += [body, pad] if pad else [body]
        first = self.chunks
        self.chunks += count
        return first

    def _classes(self) -> dict[tuple[int, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]]:
        """Format 3: per class (group, blocks) every bitset of it, by segment: (segments, rows)."""
        parts: dict[tuple[int, int], list[tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]]] = {}
        for segs, g, nb, matrix in self.taken:
            parts.setdefault((g, nb), []).append((segs, matrix))
        for nb, items in self.pending.items():
            groups = np.array([g for _, g, _ in items], dtype=np.int64)
            segs = np.array([s for s, _, _ in items], dtype=np.int64)
            matrix = np.frombuffer(b"".join(b for _, _, b in items), dtype=np.uint8).reshape(len(items), nb * BLOCK_BYTES)
            for g in np.unique(groups).tolist():
                mine = groups == g
                parts.setdefault((g, nb), []).append((segs[mine], matrix[mine]))
        out = {}
        for key in sorted(parts):  # (one part, or parts already in segment order: not copied again)
            got = parts.pop(key)
            segs = got[0][0] if len(got) == 1 else np.concatenate([p[0] for p in got])
            matrix = got[0][1] if len(got) == 1 else np.concatenate([p[1] for p in got])
            if len(segs) > 1 and not bool((segs[1:] >= segs[:-1]).all()):
                order = np.argsort(segs, kind="stable")
                segs, matrix = segs[order], matrix[order]
            out[key] = (segs, matrix)
        return out

    def _encode_regions(self) -> bytes:
        """Format 3 (bloom_pack_regions.py): per class a region of its bitsets by segment, then
        per class a region of the summaries of the segments that get them (see the module)."""
        nseg = len(self.segments)
        classes = self._classes()
        regions: list[list[int]] = []
        starts: list[npt.NDArray[np.int64]] = []
        worth = np.zeros(nseg, dtype=bool)  # summarised: some class of the segment has two bitsets
        ors: dict[tuple[int, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]] = {}
        for (g, nb), (segs, matrix) in classes.items():
            w = len(segs)
            counts = np.bincount(segs, minlength=nseg)
            starts.append(np.r_[0, np.cumsum(counts)].astype(np.int64))
            body = matrix.reshape(w, nb, BLOCK_BYTES).transpose(1, 0, 2).tobytes()  # row b: block b of each
            first = self._chunked(body)
            regions.append([g, nb, w, first, self.chunks - first, REGION_BITSETS])
            owners = np.flatnonzero(counts)
            worth[owners[counts[owners] > 1]] = True
            words = matrix.view("<u8").reshape(w, nb * 4)
            ors[(g, nb)] = (owners, np.bitwise_or.reduceat(words, starts[-1][owners], axis=0))
        for (g, nb), (owners, summary) in ors.items():
            take = worth[owners]
            if not take.any():
                continue
            has = np.zeros(nseg, dtype=np.int64)
            has[owners[take]] = 1
            starts.append(np.r_[0, np.cumsum(has)].astype(np.int64))
            w = int(np.count_nonzero(take))
            body = summary[take].astype("<u8").view(np.uint8).reshape(w, nb, BLOCK_BYTES).transpose(1, 0, 2).tobytes()
            first = self._chunked(body)
            regions.append([g, nb, w, first, self.chunks - first, REGION_SUMMARIES])
        meta = {"table_id": self.table_id, "segments": nseg, "groups": self.groups, "regions": regions}
        text = orjson.dumps(meta)
        names = [[x.encode("utf-8", "surrogatepass") for x in col] for col in zip(*self.segments, strict=True)]
        names = names or [[], []]
        parts = [struct.pack("<I", len(text)), text, *[s.astype("<i8").tobytes() for s in starts]]
        parts += [np.array([len(x) for x in col], dtype="<i4").tobytes() for col in names]
        parts += [b"".join(col) for col in names]
        return b"".join(parts)

    def encode(self) -> bytes:
        """The pack file's bytes."""
        return b"".join(self.encode_pieces())

    def encode_pieces(self) -> list[Any]:
        """The pack file as its pieces in order (written one after another: the file is
        never one buffer in memory)."""
        if self.version >= 3:
            directory = self._encode_regions()
            return self._file(directory)
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
        return self._file(b"".join(parts))  # (pieces)

    def _file(self, directory: bytes) -> list[Any]:
        sums = (np.concatenate(self.sums) if self.sums else np.zeros(0, np.uint64)).astype("<u8").tobytes()
        doff = round_up(PACK_PREFIX_SIZE + len(directory) + len(sums), self.chunk_bytes)
        head = PACK_HEAD.pack(PACK_MAGIC, self.version, self.chunk_bytes, len(directory), self.chunks, doff,
                            xxhash.xxh64_intdigest(directory))
        head += struct.pack("<Q", xxhash.xxh64_intdigest(head)) + bytes(8)
        pad = bytes(doff - PACK_PREFIX_SIZE - len(directory) - len(sums))
        return [head, directory, sums, pad, *self.parts]
