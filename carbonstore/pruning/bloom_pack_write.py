"""Writing the bloom pack: the bloom bitsets of every readable segment in one file, copied
from the previous pack where a segment is unchanged (read by ``segment_blooms.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.bloom_pack import BLOOM_PACK_PREFIX, BLOOM_PACK_SUFFIX
from carbonstore.indexfiles.bloom_pack_build import PackBuilder
from carbonstore.pruning.cache import (
    COUNTERS,
)
from carbonstore.pruning.segment_blooms import PACK_DESC, bloom_pack_names, open_pack
from carbonstore.pruning.view_keys import names_files_of
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import now_ms

__all__ = ["write_bloom_pack"]


def write_bloom_pack(table: Table, view: Any) -> str | None:
    """Write the table's bloom pack over ``view``'s segments (its bloom columns' bitsets).

    Stripes of the newest readable pack whose bitsets all belong to segments of ``view``
    are copied with their checksums; the bitsets of its other stripes come from their
    verified chunks; segments it does not cover are read from their merge indexes
    (verified). The two newest packs are kept (a reader mid-switch), older ones deleted.

    Returns:
        The new pack's file name, or None when the view has no segment.
    """
    if not view.entries:
        return None
    sfs = table.store.sfs
    folder = table.paths.index_snapshot_dir
    builder = PackBuilder(table.schema.table_id or "")
    keys = list(zip(*names_files_of(view.entries), strict=True))
    for key in keys:
        builder.segment(*key)
    done = _copy_previous(table, builder, set(keys))
    names = [c.name for c in table.schema.columns]
    for i, key in enumerate(keys):
        if key not in done:
            builder.add_segment(*key, _segment_bitsets(view, i, names))
    data = builder.encode_pieces()
    sfs.makedirs(folder)
    covered = ",".join(f"{k[0]}:{k[1]}" for k in keys)
    import hashlib  # here: loading OpenSSL is not a plan's cost (a writer names files)

    digest = hashlib.sha1(covered.encode()).hexdigest()[:12]
    name = f"{BLOOM_PACK_PREFIX}{now_ms():015d}_{len(keys)}_{digest}{BLOOM_PACK_SUFFIX}"
    sfs.write_atomic(f"{folder}/{name}", data)
    COUNTERS["bloom_pack_writes"] += 1
    for old in bloom_pack_names(table)[:-2]:
        try:
            sfs.delete_file(f"{folder}/{old}")
        except OSError:
            pass
    return name


def _copy_previous(table: Table, builder: PackBuilder, keys: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Take what the newest readable pack holds of segments ``keys`` into ``builder``; the
    segments taken. Format 3: a segment with a bitset in a chunk that fails its checksum is
    not taken (it is read from its merge index); older builders: a stripe whose chunks fail
    makes the pack unused."""
    previous = None
    for name in reversed(bloom_pack_names(table)):
        previous = open_pack(table, name)
        if previous is not None:
            break
    if previous is None:
        return set()
    mine = np.array([builder.segment(*k) if k in keys else -1 for k in previous.segments], dtype=np.intp)
    if builder.version >= 3:  # every bitset of a covered segment, checked against its chunks
        before = len(builder.taken)
        try:
            b = np.flatnonzero(mine[previous.bs_seg] >= 0)
            ok = builder.take(previous, b, mine)
        except (CorruptIndexError, OSError, ValueError):
            del builder.taken[before:]  # (nothing half taken: every segment is read again)
            COUNTERS["bloom_pack_errors"] += 1
            return set()
        bad = np.zeros(previous.num_segments, dtype=bool)
        bad[previous.bs_seg[b[~ok]]] = True
        if bad.any():  # their bitsets that passed were taken: those segments are read again
            COUNTERS["bloom_pack_errors"] += 1
            drop = _moved(bad, mine, builder)
            builder.taken = [(s[~drop[s]], g, nb, m[~drop[s]]) for s, g, nb, m in builder.taken]
        return {k for i, k in enumerate(previous.segments) if k in keys and not bad[i]}
    loose: list[tuple[int, int, bytes]] = []
    copy: list[tuple[int, tuple[bytes, Any]]] = []
    try:  # read everything first: a failure leaves the builder untouched
        for t in range(previous.num_rg_stripes):  # (summaries are derived again)
            members = previous.stripe_members(t)
            if (mine[previous.bs_seg[members]] >= 0).all() and len(members) == builder.stripe_width:
                copy.append((t, previous.stripe_chunks(t)))
                continue
            got = previous.stripe_bitsets(t)
            if got is None:
                raise CorruptIndexError(f"{previous.name}: a chunk fails its checksum")
            for b in members.tolist():
                seg = int(mine[previous.bs_seg[b]])
                if seg >= 0:
                    loose.append((seg, int(previous.bs_group[b]), got[int(previous.bs_slot[b])]))
    except (CorruptIndexError, OSError):
        COUNTERS["bloom_pack_errors"] += 1
        return set()
    for t, raw in copy:
        builder.copy_stripe(previous, t, mine, raw)
    for seg, g, bitset in loose:
        builder.add_bitset(seg, previous.groups[g], bitset)
    return {k for k in previous.segments if k in keys}


def _moved(bad: Any, mine: Any, builder: PackBuilder) -> Any:
    """``bad`` (over the previous pack's segments) over the new pack's segments."""
    out = np.zeros(len(builder.segments), dtype=bool)
    out[mine[bad & (mine >= 0)]] = True
    return out


def _segment_bitsets(view: Any, i: int, names: list[str]) -> list[tuple[dict[str, Any], bytes]]:
    """Segment ``i``'s bitsets of columns ``names`` read from its merge index (verified); a
    column with a row group without bitset, or whose bitsets do not read, is left out."""
    out: list[tuple[dict[str, Any], bytes]] = []
    for name in names:
        if not view.bloom_segments(name)[i]:
            continue
        try:
            found = view.bloom_dir(i, name)
            if found is None:
                continue
            d, read = found
            offsets, lengths = list(d["offset"]), list(d["length"])
            if not offsets or min(offsets) < 0:
                continue
            if getattr(read, "block", None) is not None:
                raw, first = read.block(offsets, lengths)
                got = [bytes(raw[o - first : o - first + n]) for o, n in zip(offsets, lengths, strict=True)]
            else:
                got = [read(int(o), int(n)) for o, n in zip(offsets, lengths, strict=True)]
        except CorruptIndexError:
            continue  # planning meets the damage on the merge index path, as without a pack
        if any(b is None for b in got):
            continue
        group = {"name": name, **{k: d.get(k) for k in PACK_DESC}}
        out.extend((group, bytes(b)) for b in got)
    return out
