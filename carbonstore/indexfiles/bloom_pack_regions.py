"""Format 3 of the bloom pack (indexfiles/bloom_pack.py): one REGION per bitset class, found
by arithmetic instead of per-bitset entries.

A class is a group (column name and descriptor) and a bitset size in 32-byte blocks. Its
row-group bitsets are one region, listed by segment and laid out block-major: row ``b`` of
the region holds block ``b`` of every bitset of the class, one after the other. A hash
selects the same block number in every bitset of one size, so what one key needs of a
segment (its bitsets' blocks of that row) is one run of adjacent 32-byte blocks, and what
it needs of every segment is one contiguous row. The segments' summaries of the class
(the OR of each segment's bitsets of it: bloom_pack_build.py) are a region of their own
laid out alike: a lookup probes 100,000 summaries by reading one contiguous row of 32-byte
blocks, then the survivors' runs of the bitset region.

Per region the directory holds ``start`` (segments + 1 int64): segment ``i``'s bitsets of
the region are columns ``[start[i], start[i+1])``; a summary region holds at most one per
segment. Block ``b`` of column ``k`` of a region of width ``W`` is at byte ``first_chunk *
C + (b * W + k) * 32`` of the data region, as a stripe of formats 1 and 2 (a region IS a
stripe, only wide: readers of the older formats' entries derive them from ``start``).
There are no per-bitset entries to read, convert or check: a lookup reads the small
directory (checked whole), the summary row and the survivors' runs (each chunk checked
before its blocks are used).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from carbonstore.indexfiles.bloom import BLOCK_BYTES, SALTS

__all__ = ["REGION_BITSETS", "REGION_SUMMARIES", "Regions", "bitset_matrix", "chunk_digest", "decode_regions", "probe_region", "ranges",
           "region_counts", "region_entries", "region_has", "run_start"]

REGION_BITSETS, REGION_SUMMARIES = 0, 1
_OK = 1


class Regions:
    """The regions of a format 3 directory: per region its group, block count, width, first
    chunk, chunk count, kind and ``start``; ``summary_of[t]``: the summary region of bitset
    region ``t`` (same group and size), or -1."""

    def __init__(self, table: list[list[int]], starts: list[npt.NDArray[np.int64]]) -> None:
        arr = np.array(table, dtype=np.int64).reshape(-1, 6)
        self.group, self.blocks, self.width, self.chunk0, self.chunks, self.kind = (arr[:, i] for i in range(6))
        self.start = starts
        self.summary_of = np.full(len(arr), -1, dtype=np.int64)
        pairs = {(int(g), int(b)): t for t, (g, b, k) in enumerate(zip(self.group, self.blocks, self.kind, strict=True))
                 if k == REGION_BITSETS}
        for t in np.flatnonzero(self.kind == REGION_SUMMARIES).tolist():
            owner = pairs.get((int(self.group[t]), int(self.blocks[t])), -1)
            if owner < 0 or self.summary_of[owner] >= 0:
                raise ValueError("a summary region without its bitset region")
            self.summary_of[owner] = t
        self.num_bitset_regions = int(np.count_nonzero(self.kind == REGION_BITSETS))
        if (self.kind[: self.num_bitset_regions] != REGION_BITSETS).any():
            raise ValueError("bitset regions must come first")


def decode_regions(meta: dict[str, Any], directory: Any, pos: int, segments: int, groups: int,
                   num_chunks: int, chunk_bytes: int) -> tuple[Regions, int]:
    """The regions of a format 3 directory whose ``start`` arrays begin at byte ``pos``;
    the byte after them. Raises ValueError / KeyError / TypeError on anything that does not
    describe bitsets inside the data region."""
    table = [[int(x) for x in row] for row in meta["regions"]]
    starts = []
    for row in table:
        if len(row) != 6:
            raise ValueError("a region is six numbers")
        start = np.frombuffer(directory, dtype="<i8", count=segments + 1, offset=pos)  # (a view: no copy)
        pos += 8 * (segments + 1)
        g, nb, w, c0, cn, kind = row
        if not (0 <= g < groups and nb >= 1 and w >= 0 and c0 >= 0 and cn >= 0 and c0 + cn <= num_chunks
                and w * nb * BLOCK_BYTES <= cn * chunk_bytes and kind in (REGION_BITSETS, REGION_SUMMARIES)):
            raise ValueError("a region outside the data")
        # (compared in place: a count per segment made only for a summary region)
        if int(start[0]) != 0 or int(start[-1]) != w or (segments and not bool((start[1:] >= start[:-1]).all())):
            raise ValueError("a region's segment list does not add up")
        if kind == REGION_SUMMARIES and segments and int((start[1:] - start[:-1]).max()) > 1:
            raise ValueError("two summaries of one segment and class")
        starts.append(start)
    return Regions(table, starts), pos


def chunk_digest(version: int) -> Callable[[Any], int]:
    """The checksum of a data chunk in a pack of format ``version``: xxh3-64 from format 3
    (a third cheaper than xxh64 over 4 KiB: a lookup checks about 6,000 chunks), xxh64 before."""
    return xxhash.xxh3_64_intdigest if version >= 3 else xxhash.xxh64_intdigest


def region_entries(reg: Any, regions: range, segments: int) -> list[npt.NDArray[np.int32]]:
    """Segment, group, region and column of each bitset of ``regions``, one region after the
    other (what formats 1 and 2 store per bitset)."""
    parts = [(np.repeat(np.arange(segments, dtype=np.int32), np.diff(reg.start[t])),
              np.full(int(reg.width[t]), reg.group[t], dtype=np.int32),
              np.full(int(reg.width[t]), t, dtype=np.int32), np.arange(int(reg.width[t]), dtype=np.int32))
             for t in regions]
    return [np.concatenate([p[i] for p in parts] + [np.zeros(0, np.int32)]) for i in range(4)]


def ranges(first: npt.NDArray[Any], end: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """The numbers of every range ``[first[i], end[i])``, one after the other."""
    n = np.asarray(end, dtype=np.int64) - np.asarray(first, dtype=np.int64)
    total = int(n.sum())
    if not total:
        return np.zeros(0, dtype=np.intp)
    step = np.ones(total, dtype=np.int64)
    keep = n > 0
    f, n = np.asarray(first, dtype=np.int64)[keep], n[keep]
    at = np.cumsum(n)[:-1]
    step[0] = f[0]
    step[at] = f[1:] - (f[:-1] + n[:-1]) + 1
    return np.cumsum(step, out=step).astype(np.intp, copy=False)  # (in place: one array of them)


def run_start(rows: npt.NDArray[np.int64]) -> int:
    """``rows[0]`` when ``rows`` are consecutive numbers (every segment of a pack, in order:
    taken as slices, not gathered), else -1."""
    n = len(rows)
    if not n:
        return -1
    lo = int(rows[0])
    if int(rows[-1]) - lo != n - 1 or (n > 1 and not bool((rows[1:] - rows[:-1] == 1).all())):
        return -1
    return lo


def region_counts(pack: Any, t: int, rows: npt.NDArray[np.int64], run: int | None = None) -> npt.NDArray[np.int64]:
    """Format 3: the number of bitsets of each pack segment of ``rows`` in region ``t``
    (``run``: what :func:`run_start` gives of ``rows``, when known)."""
    start = pack.regions.start[t]
    lo = run_start(rows) if run is None else run
    if lo >= 0:
        return start[lo + 1 : lo + len(rows) + 1] - start[lo : lo + len(rows)]  # type: ignore[no-any-return]
    return start[rows + 1] - start[rows]  # type: ignore[no-any-return]


def region_has(pack: Any, t: int, rows: npt.NDArray[np.int64], run: int | None = None) -> npt.NDArray[np.bool_]:
    """``region_counts(...) > 0``: whether each pack segment of ``rows`` has a bitset in region ``t``."""
    start = pack.regions.start[t]
    lo = run_start(rows) if run is None else run
    if lo >= 0:
        return start[lo + 1 : lo + len(rows) + 1] > start[lo : lo + len(rows)]  # type: ignore[no-any-return]
    return start[rows + 1] > start[rows]  # type: ignore[no-any-return]


def probe_region(pack: Any, t: int, rows: npt.NDArray[np.int64], hashes: npt.NDArray[np.uint64],
                 run: int | None = None) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Probe the bitsets of pack segments ``rows`` in region ``t`` of ``pack`` for ``hashes``
    (``run``: what :func:`run_start` gives of ``rows``, when known).

    Returns:
        (any, all, ok) per row: some bitset of it might hold a hash; every bitset of it
        might (True for a row without bitsets there); every chunk its blocks are in passed
        its checksum (else ``any`` and ``all`` mean nothing).
    """
    reg = pack.regions
    start = reg.start[t]
    lo = run_start(rows) if run is None else run
    n: Any = None
    if lo >= 0:
        first = start[lo : lo + len(rows)]  # consecutive segments (a lookup of every one): slices
        # a summary region holds at most one a segment (decode_regions): every segment one
        # when they add up (no count per segment to make)
        if reg.kind[t] != REGION_SUMMARIES or int(start[lo + len(rows)]) - int(first[0]) != len(rows):
            n = start[lo + 1 : lo + len(rows) + 1] - first
        else:
            ones = True
    else:
        first = start[rows]
        n = start[rows + 1] - first
    if n is not None:
        ones = bool(len(n)) and int(n.min()) == 1 and int(n.max()) == 1
    # the blocks' columns: one run (every segment one bitset: a summary region), or gathered
    run = int(first[0]) if ones and int(first[-1]) - int(first[0]) == len(first) - 1 else -1
    cols = None if run >= 0 else first if ones else ranges(first, first + n)
    count = len(first) if run >= 0 else len(cols)  # type: ignore[arg-type]
    nb, width = int(reg.blocks[t]), int(reg.width[t])
    base = int(reg.chunk0[t]) * pack.chunk_bytes
    cb = pack.chunk_bytes
    hit = np.zeros(count, dtype=bool)
    ok = np.ones(count, dtype=bool)
    for h in np.asarray(hashes, dtype=np.uint64).reshape(-1).tolist():
        block = ((h >> 32) * nb) >> 32  # the hash's block in a bitset of nb blocks
        row0 = base + block * width * BLOCK_BYTES  # byte of the region row the hash selects
        if run >= 0:  # one run of blocks: its chunks in order, each block's chunk by division
            a = row0 + run * BLOCK_BYTES
            c0, c1 = a // cb, (a + count * BLOCK_BYTES - 1) // cb
            chunks = np.arange(c0, c1 + 1, dtype=np.int64)
            if not (pack._state[chunks] == _OK).all():
                pack._verify(chunks)
            good = (pack._state[chunks] == _OK).repeat(cb // BLOCK_BYTES)
            ok &= good[(a - c0 * cb) // BLOCK_BYTES :][:count]
            at: Any = slice((a >> 5) + pack._block_base, (a >> 5) + pack._block_base + count)
        else:  # (row0 is a whole block: each column's block number, then its chunk, in two arrays)
            at = cols + (row0 >> 5)  # type: ignore[operator]
            chunk = at // (cb // BLOCK_BYTES)
            state = pack._state[chunk]
            good = state == _OK
            if not good.all():
                pack._verify(chunk[state == 0])  # only those not checked yet
                good = pack._state[chunk] == _OK
            ok &= good
            at += pack._block_base
        hit |= _block_hits(pack._blocks, at, count, h)
    if ones:
        return hit, hit, ok
    row_of = np.repeat(np.arange(len(rows), dtype=np.intp), n)
    hits = np.bincount(row_of[hit], minlength=len(rows))
    return hits > 0, hits == n, np.bincount(row_of[~ok], minlength=len(rows)) == 0


_BATCH = 1 << 12  # blocks tested at a time: small temporaries, reused (no fresh pages faulted in)


def _block_hits(blocks: npt.NDArray[np.uint32], at: Any, count: int, h: int) -> npt.NDArray[np.bool_]:
    """Per block ``blocks[at]`` (a slice or block numbers; ``count`` of them): whether it has
    every bit hash ``h`` sets (split-block filter: one bit in each of its eight words)."""
    masks = (np.uint32(1) << ((np.uint32(h & 0xFFFFFFFF) * SALTS) >> np.uint32(27))).view("<u8")  # 4 words of 64
    out = np.empty(count, dtype=bool)
    size = min(count, _BATCH)
    picked = np.empty((size, 8), dtype=np.uint32)
    anded = np.empty((size, 4), dtype=np.uint64)
    equal = np.empty((size, 4), dtype=bool)
    for i in range(0, count, _BATCH):
        j = min(count, i + _BATCH)
        if isinstance(at, slice):
            src = blocks[at.start + i : at.start + j]
        else:
            src = np.take(blocks, at[i:j], axis=0, out=picked[: j - i])
        np.bitwise_and(src.view("<u8"), masks, out=anded[: j - i])
        np.equal(anded[: j - i], masks, out=equal[: j - i])
        out[i:j] = equal[: j - i].view("<u4").reshape(-1) == 0x01010101  # all four words
    return out


def bitset_matrix(pack: Any, bitsets: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """Bitsets ``bitsets`` of ``pack`` (any format; all of one size) as rows of bytes, and
    per bitset whether every chunk it is in passed its checksum (a writer takes those only)."""
    b = np.asarray(bitsets, dtype=np.intp)
    t = pack.bs_stripe[b]
    nb = int(pack.st_blocks[t[0]]) if len(b) else 1
    if len(b) and (pack.st_blocks[t] != nb).any():
        raise ValueError("bitsets of different sizes")
    byte = ((pack.st_chunk0[t] * pack.chunk_bytes + pack.bs_slot[b] * BLOCK_BYTES)[:, None]
            + np.arange(nb, dtype=np.int64)[None, :] * (pack.st_width[t] * BLOCK_BYTES)[:, None])
    chunk = byte // pack.chunk_bytes
    pack._verify(chunk)
    ok = (pack._state[chunk] == _OK).all(axis=1)
    words = pack._blocks[(byte >> 5) + pack._block_base]  # (bitset, block, 8)
    return np.ascontiguousarray(words).view(np.uint8).reshape(len(b), nb * BLOCK_BYTES), ok
