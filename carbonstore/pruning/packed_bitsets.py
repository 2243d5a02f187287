"""The bitsets of a column read from the segments' merge indexes (where the table's bloom pack
does not answer): a column's bitsets over the view's segments are read once per segment -
one ranged read of the segment's contiguous bitsets of the column, each bitset verified
against its checksum from memory (indexfiles.indexfile.read_bitsets) - and laid out in one
array of 32-bit words (a "packed table", kept in the bitset budget of the driver cache,
pruning/cache.py), probed by segment_blooms.py with a few numpy operations over all of them."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.bloom import BLOCK_BYTES
from carbonstore.indexfiles.indexfile import bitsets_span

__all__ = ["KEEP", "PACK_DESC", "Packed"]

UNSEEN = -2  # segment not looked at yet
KEEP = -1  # no usable bitsets of the column: kept as it is
PACK_DESC = ("column_id", "kind", "physical_type", "type_length", "logical_type", "unit", "scale", "nested")


class Packed:
    """A column's bitsets of the segments of one view read so far.

    ``group[i]``: segment ``i``'s directory group (same column id and encoding), or
    UNSEEN / KEEP; ``read[i]``: its bitsets are in a chunk. A chunk is (words, start word
    of each bitset, its number of 32-byte blocks, its segment).
    """

    def __init__(self, ids: list[tuple[str, str]], seed: Packed | None = None) -> None:
        size = len(ids)
        self.ids = ids  # each segment's (segment id, merge index name)
        self.group = np.full(size, UNSEEN, dtype=np.int32)
        self.read = np.zeros(size, dtype=bool)
        self.remembered = np.zeros(size, dtype=bool)  # bitsets handed to the bitset cache
        self.descs: list[dict[str, Any]] = []
        self._desc_ids: dict[tuple[Any, ...], int] = {}
        self.where: dict[int, tuple[list[int], list[int], Any]] = {}  # each segment's bitsets
        self.chunks: list[tuple[Any, Any, Any, Any]] = []
        self.nbytes = 0
        self.lock = threading.Lock()  # one plan at a time reads into it
        if seed is not None:
            with seed.lock:
                self._adopt(seed)

    def _adopt(self, old: Packed) -> None:
        """Take over what ``old`` (a table view before this one: same table and column) read
        of the segments both views have (same segment id and merge index: the same bitsets,
        verified then): its chunks' words are shared, not copied, and not read again."""
        mine = {x: i for i, x in enumerate(self.ids)}
        moved = np.array([mine.get(x, -1) for x in old.ids], dtype=np.intp)
        both = np.flatnonzero(moved >= 0)
        self.descs = list(old.descs)
        self._desc_ids = dict(old._desc_ids)
        self.group[moved[both]] = old.group[both]
        self.read[moved[both]] = old.read[both]
        self.remembered[moved[both]] = old.remembered[both]
        self.where = {int(moved[i]): w for i, w in old.where.items() if moved[i] >= 0}
        for words, start, blocks, owner in old.chunks:
            to = moved[owner]
            kept = to >= 0
            if not kept.any():
                continue
            if not kept.all():
                start, blocks, to = start[kept], blocks[kept], to[kept]
            self.chunks.append((words, start, blocks, to))
            self.nbytes += words.nbytes + 24 * len(to)

    def classify(self, view: Any, name: str, segs: npt.NDArray[np.intp]) -> None:
        for i in segs[self.group[segs] == UNSEEN].tolist():
            found = view.bloom_dir(i, name)
            if found is None:
                self.group[i] = KEEP
                continue
            d, read = found
            offsets, lengths = d["offset"], d["length"]
            if not offsets or min(offsets) < 0:
                self.group[i] = KEEP  # a row group without a bloom may hold anything
                continue
            key = tuple(repr(d.get(k)) for k in PACK_DESC)
            g = self._desc_ids.get(key)
            if g is None:
                g = self._desc_ids[key] = len(self.descs)
                self.descs.append({k: d.get(k) for k in PACK_DESC})
            self.group[i] = g
            self.where[i] = (offsets, lengths, read)

    def load(self, segs: list[int]) -> None:
        """Read the bitsets of ``segs`` (classified, unread) into one new chunk: each
        segment's in one ranged read straight into the chunk's words where its reader can
        (indexfile.read_bitsets), else bitset by bitset."""
        ranged: list[tuple[int, list[int], list[int], Any, int, int]] = []
        single: list[int] = []
        size = 0
        for i in segs:
            offsets, lengths, read = self.where[i]
            for n in lengths:
                if n < BLOCK_BYTES or n % BLOCK_BYTES:
                    raise CorruptIndexError(f"bloom bitset of {n} bytes is not a whole number of 32-byte blocks")
            if getattr(read, "block", None) is None:
                single.append(i)
                continue
            first, end = bitsets_span(offsets, lengths)
            ranged.append((i, offsets, lengths, read, first, size))
            size += -(-(end - first) // 4) * 4
        words = np.empty(size // 4, dtype="<u4")
        raw = memoryview(words).cast("B")
        start: list[int] = []
        blocks: list[int] = []
        owner: list[int] = []
        for i, offsets, lengths, read, first, pos in ranged:
            read.block(offsets, lengths, raw[pos:])
            start.extend((pos + o - first) // 4 for o in offsets)
            blocks.extend(n // BLOCK_BYTES for n in lengths)
            owner.extend([i] * len(lengths))
            self.read[i] = True
        extra: list[Any] = []
        pos = len(words)
        for i in single:
            offsets, lengths, read = self.where[i]
            got = [read(int(o), int(n)) for o, n in zip(offsets, lengths, strict=True)]
            if any(b is None for b in got):  # no bitset after all: the segment may hold anything
                self.group[i] = KEEP
                continue
            for b in got:
                extra.append(np.frombuffer(b, dtype="<u4"))
                start.append(pos)
                pos += len(b) // 4
            blocks.extend(n // BLOCK_BYTES for n in lengths)
            owner.extend([i] * len(lengths))
            self.read[i] = True
        if not owner:
            return
        if extra:
            words = np.concatenate([words, *extra])
        self.chunks.append((words, np.array(start, dtype=np.int64), np.array(blocks, dtype=np.int64),
                            np.array(owner, dtype=np.intp)))
        self.nbytes += words.nbytes + 24 * len(owner)
        if len(self.chunks) > 4:  # few chunks: a probe costs a few numpy calls per chunk;
            big = max(range(len(self.chunks)), key=lambda k: len(self.chunks[k][0]))
            rest = [c for k, c in enumerate(self.chunks) if k != big]  # the largest is not copied
            ws = [c[0] for c in rest]
            offs = np.cumsum([0, *[len(w) for w in ws[:-1]]])
            self.chunks = [self.chunks[big], (
                np.concatenate(ws), np.concatenate([c[1] + o for c, o in zip(rest, offs, strict=True)]),
                np.concatenate([c[2] for c in rest]), np.concatenate([c[3] for c in rest]))]

    def remember(self, segs: npt.NDArray[np.bool_]) -> None:
        """Hand the bitsets of segments ``segs`` (a mask: those the probe keeps) to their
        readers' bitset cache, so the row-group probe that follows does not read them again
        (a few: beyond 256 bitsets, that probe reads them itself, once)."""
        segs = segs & ~self.remembered  # once per segment (the cache may drop them: then that
        if not segs.any() or sum(int(segs[c[3]].sum()) for c in self.chunks) > 256:  # probe reads)
            return
        self.remembered |= segs
        for words, start, blocks, owner in self.chunks:
            b = np.flatnonzero(segs[owner])
            if not len(b):
                continue
            seen: dict[int, int] = {}
            for j, i in zip(b.tolist(), owner[b].tolist(), strict=True):
                offsets, lengths, read = self.where[i]
                remember = getattr(read, "remember", None)
                if remember is None:
                    continue
                k = seen[i] = seen.get(i, -1) + 1  # the segment's k-th bitset
                a = int(start[j])
                remember(int(offsets[k]), int(lengths[k]), memoryview(words[a : a + int(blocks[j]) * 8]))
