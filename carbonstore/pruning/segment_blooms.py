"""The segment-level bloom probe: drop a segment when every row group's bitset excludes the value.

A ``k = key`` plan over 1,600 segments probes a bitset of every candidate segment. Probing
them one by one (a directory lookup, a cache lookup, a checksum and a numpy call each) cost
more than the rest of the plan; here a column's bitsets over the view's segments are read
once per segment - one ranged read of the segment's contiguous bitsets of the column, each
bitset verified against its checksum from memory (indexfiles.indexfile.read_bitsets) - and
laid out in one array of 32-bit words (a "packed table", kept in the bitset budget of the
driver cache, pruning/cache.py). A probe is then a few numpy operations over all of them
(indexfiles.bloom_probe.might_contain_packed), whatever the number of segments.

Only candidate segments are read (those min/max kept), the first time a plan needs them;
segments whose directory entry names another column (dropped or renamed away) or whose
literal cannot be hashed are kept unread, as before. Uses the bloom directory
(table_index.TableIndex.bloom_dir), so a segment known only from the index snapshot is
probed without decoding its index header.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from carbonstore.errors import CorruptIndexError
from carbonstore.expressions.expr import BoundRef, Eq, Expr, In
from carbonstore.indexfiles import bloom as bloom_mod
from carbonstore.indexfiles.bloom_pack import (
    BLOOM_PACK_PREFIX,
    BLOOM_PACK_SUFFIX,
    BloomPack,
)
from carbonstore.indexfiles.bloom_pack_regions import run_start
from carbonstore.indexfiles.bloom_probe import might_contain_packed, remember_verdicts
from carbonstore.pruning import planner as planner_mod
from carbonstore.pruning.cache import (
    COUNTERS,
    keep_packed,
    latest_packed,
    open_bloom_pack,
    packed_bitsets,
    view_bloom_pack,
)
from carbonstore.pruning.packed_bitsets import KEEP, PACK_DESC, Packed
from carbonstore.pruning.view_keys import KeyBytes, key_bytes_of
from carbonstore.store.arrow_numpy import same_bytes
from carbonstore.store.table import Table

__all__ = ["PACK_DESC", "SegmentBlooms", "bloom_pack_names", "open_pack"]

class SegmentBlooms:
    """Bloom probe over the segments of a table view (the ``bloom`` of a StatsEvaluator)."""

    def __init__(self, view: Any) -> None:
        self.view = view
        self.hashes: dict[tuple[Any, ...], Any] = {}

    def _hashes(self, d: dict[str, Any], ref: BoundRef, literals: tuple[Any, ...]) -> Any:
        col = _desc_column(d)
        key = (ref.name, literals, id(col))
        if key not in self.hashes:
            hashes = None
            if planner_mod.value_kind(col, ref) is not None:  # type: ignore[arg-type]
                encoded: list[bytes] = []
                for v in literals:
                    enc = planner_mod.bloom_encodings(v, col, ref)  # type: ignore[arg-type]
                    if enc is None:
                        encoded = []
                        break
                    encoded.extend(enc)
                else:
                    hashes = np.array([bloom_mod.hash_plain(e) for e in encoded], dtype=np.uint64)
            self.hashes[key] = hashes
        return self.hashes[key]

    def may_probe(self, ref: BoundRef) -> bool:
        """False when :meth:`__call__` keeps every segment for a leaf on ``ref``: not a bloom
        column of the table, and the snapshot shows no segment with a bitset of it."""
        view = self.view
        segments = getattr(view, "bloom_segments", None)
        return segments is None or _is_bloom_column(view, ref.name) or bool(segments(ref.name).any())

    def __call__(self, expr: Expr, idx: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
        out = np.ones(len(idx), dtype=bool)
        if not isinstance(expr, (Eq, In)) or not isinstance(expr.term, BoundRef) or not len(idx):
            return out
        ref = expr.term
        literals = (expr.literal,) if isinstance(expr, Eq) else tuple(expr.literals)
        view = self.view
        # A bloom column of the table: the pack first, and the snapshot asked which segments
        # have bitsets (a section decode in a fresh process) only for those it leaves; the
        # pack holds bitsets of segments that have them only, so the answers are the same.
        # Another column (bitsets only in segments written before it left the bloom
        # columns, if any): the snapshot first, so a plan on it never opens the pack.
        has = None if _is_bloom_column(view, ref.name) else view.bloom_segments(ref.name)
        if has is not None and not has[idx].any():
            return out
        rest = np.ones(len(idx), dtype=bool) if has is None else has[idx]  # positions still to probe
        found = view_bloom_pack(view, lambda: _find_pack(view))
        if found is not None:  # segments in the table's bloom pack: only the blocks probed
            pos = None if has is None else np.flatnonzero(rest)  # (None: every one of idx)
            segs = idx if pos is None else idx[pos]
            try:  # the view's answers so far (a reused handle plans the same filter again),
                # under a digest of the segments (no copy of them), checked against them
                key: Any = (ref.name, ref.column.column_id, literals, len(segs),
                            xxhash.xxh3_128_digest(np.ascontiguousarray(segs).data))
                got = found[2].get(key)
            except TypeError:  # an unhashable literal
                key, got = None, None
            if got is not None and not np.array_equal(got[2], segs):
                got = None
            if got is None:
                try:  # (the segments kept as a copy: the caller's array is the caller's)
                    got = (*self._probe_pack(found, ref, literals, segs), segs.copy())
                except CorruptIndexError:  # entries checked as they are reached (format 2):
                    COUNTERS["bloom_pack_errors"] += 1  # the merge indexes answer instead
                    got = (np.zeros(len(segs), dtype=bool), np.ones(len(segs), dtype=bool), segs)
                    key = None
                if key is not None:
                    if len(found[2]) >= 64:
                        found[2].clear()
                    found[2][key] = got
            done, hit, _ = got
            if done.any():
                at = done if pos is None else pos[done]
                out[at] = hit[done]
                rest[at] = False
        if rest.any():
            if has is None:
                has = view.bloom_segments(ref.name)
                rest &= has[idx]
            at = np.flatnonzero(rest)
            if len(at):
                out[at] = self._probe_segments(ref, literals, idx[at], has)
        return out

    def _pack_layout(self, found: tuple[Any, ...], ref: BoundRef, segs: npt.NDArray[np.intp]) -> tuple[Any, ...]:
        """What probing segments ``segs`` in the pack needs besides the literal, computed once
        per view, column and candidate set (a reused handle looking up a new key every plan
        probes the same candidates): each segment's place in the pack, and per descriptor
        group of the column its bitsets, their segments and their pack layout."""
        pack, where, _, layouts = found
        key = (ref.name, ref.column.column_id, segs.tobytes())
        got = layouts.get(key)
        if got is not None:
            return got  # type: ignore[no-any-return]
        rows = where[segs]  # each segment's place in the pack, or -1
        inside = rows >= 0
        r = rows[inside]
        seg_has = np.zeros(pack.num_segments, dtype=bool)
        groups: list[tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], dict[str, Any] | None, Any]] = []
        if pack.summarised and len(r) < pack.num_segments:  # (format 2: the candidates' runs only)
            mine, seg_of, group_of = pack.bitsets_of(r)
            col = np.array([g.get("name") == ref.name for g in pack.groups], dtype=bool)
            keep = col[group_of]
            mine, seg_of, group_of = mine[keep], seg_of[keep], group_of[keep]
        else:
            mine = pack.column_bitsets(ref.name)
            if len(mine) and len(r) and len(r) < pack.num_segments:  # (else all of mine)
                wanted = np.zeros(pack.num_segments, dtype=bool)
                wanted[r] = True
                mine = mine[wanted[pack.bs_seg[mine]]]
            seg_of, group_of = pack.bs_seg[mine], pack.bs_group[mine]
        if len(mine) and len(r):
            of_group = None if len(pack.groups) == 1 else group_of  # (one: all of mine)
            present = [] if not len(mine) else [0] if of_group is None else np.flatnonzero(
                np.bincount(of_group)).tolist()
            for g in present:
                these = mine if of_group is None else mine[of_group == g]
                owners = seg_of if of_group is None else seg_of[of_group == g]
                seg_has[owners] = True
                d = pack.groups[g]
                if (d.get("column_id") or ref.name) not in (ref.column.column_id, ref.name):
                    groups.append((these, owners, None, None))  # another column of that name
                else:  # (dropped, or renamed away): may hold anything
                    groups.append((these, owners, d, pack.layout(these)))
        fast = None  # one group, one bitset per segment (a row group each): per answered
        if len(groups) == 1 and groups[0][2] is not None:  # position of segs, its bitset
            these, owners, d, layout = groups[0]
            of_seg = np.full(pack.num_segments, -1, dtype=np.intp)
            of_seg[owners] = np.arange(len(owners), dtype=np.intp)
            if int(np.count_nonzero(of_seg >= 0)) == len(owners):
                b = np.full(len(segs), -1, dtype=np.intp)
                b[inside] = of_seg[r]
                at = np.flatnonzero(b >= 0)
                fast = (at, b[at], these, d, layout)
        got = (inside, r, seg_has, groups, fast)
        if len(layouts) >= 16:
            layouts.clear()
        layouts[key] = got
        return got

    def _probe_pack(self, found: tuple[Any, ...], ref: BoundRef,
                    literals: tuple[Any, ...], segs: npt.NDArray[np.intp]) -> tuple[
                        npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """Probe segments ``segs`` in the pack. Returns (answered, might hold) per segment:
        a segment not in the pack, without a bitset of the column there, or with a chunk that
        failed its checksum is not answered (its merge index is probed instead)."""
        pack = found[0]
        if pack.regions is not None:  # format 3: regions, no per-bitset entries
            return self._probe_regions(found, ref, literals, segs)
        if pack.summarised and len(pack.sm_seg):  # the segments' summaries first
            keep = self._probe_summaries(found, ref, literals, segs)
            if not keep.all():
                done, hit = ~keep, keep.copy()  # proven absent by a summary: answered, dropped
                at = np.flatnonzero(keep)
                if len(at):
                    done[at], hit[at] = self._probe_row_groups(found, ref, literals, segs[at])
                return done, hit
        return self._probe_row_groups(found, ref, literals, segs)

    def _region_hashes(self, pack: BloomPack, ref: BoundRef, literals: tuple[Any, ...]) -> list[tuple[int, Any]]:
        """Per bitset region of column ``ref`` in format 3 pack ``pack``: (region, what to
        probe it with): the hashes, or ``"other"`` (a descriptor of another column of that
        name, or a literal it cannot hash: may hold anything), ``"bad"`` (a descriptor the
        pack does not carry: probe elsewhere)."""
        out: list[tuple[int, Any]] = []
        groups = pack.regions.group  # type: ignore[union-attr]
        for t in pack.column_regions(ref.name):
            d = pack.groups[int(groups[t])]
            if (d.get("column_id") or ref.name) not in (ref.column.column_id, ref.name):
                out.append((t, "other"))  # (dropped, or renamed away)
                continue
            try:
                hashes = self._hashes(d, ref, literals)
            except KeyError:
                out.append((t, "bad"))
                continue
            out.append((t, "other" if hashes is None else hashes))
        return out

    def _probe_regions(self, found: tuple[Any, ...], ref: BoundRef, literals: tuple[Any, ...],
                       segs: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """:meth:`_probe_pack` of a format 3 pack: the summaries, then the row-group bitsets
        of the segments they keep, each region probed by arithmetic over its segment list
        (the same answers as the format 2 probes)."""
        pack, where = found[0], found[1]
        rows = where[segs]
        pos = None if len(rows) and int(rows.min()) >= 0 else np.flatnonzero(rows >= 0)  # None: all in the pack
        r = rows if pos is None else rows[pos]
        done = np.zeros(len(segs), dtype=bool)
        hit = np.ones(len(segs), dtype=bool)
        plan = self._region_hashes(pack, ref, literals)
        if not len(r) or not plan:
            return done, hit
        # a segment is dropped when, for every region it has bitsets in, its summary there
        # proves the value absent (a summary that fails its checksum, a region without a
        # summary of it, another column's: kept for its row groups)
        drop = np.ones(len(r), dtype=bool)
        has_any = np.zeros(len(r), dtype=bool)
        fallbacks = 0
        run = run_start(r)  # (every segment of the pack, in order: slices, not gathers)
        holds = [pack.region_has(t, r, run) for t, _ in plan]  # per region: the segments in it
        for (t, how), has in zip(plan, holds, strict=True):
            has_any |= has
            s = int(pack.regions.summary_of[t])
            if isinstance(how, str) or s < 0:
                drop &= ~has
                continue
            if not len(how):
                continue  # no value: absent from every bitset
            covered = has & pack.region_has(s, r, run)
            drop &= ~has | covered
            every = bool(covered.all())  # (the common case: the rows as they are, no gather)
            at = None if every else np.flatnonzero(covered)
            if every or len(at):  # type: ignore[arg-type]
                got, _, ok = pack.probe_region(s, r, how, run) if at is None else pack.probe_region(s, r[at], how)
                drop[(got | ~ok) if at is None else at[got | ~ok]] = False
                fallbacks += int(np.count_nonzero(~ok))
        drop &= has_any
        if fallbacks:
            COUNTERS["bloom_pack_summary_fallbacks"] += fallbacks
        COUNTERS["bloom_pack_summary_drops"] += int(np.count_nonzero(drop))
        gone = drop if pos is None else pos[drop]
        done[gone] = True
        hit[gone] = False
        kept = np.flatnonzero(~drop)
        if not len(kept):
            return done, hit
        rr = r[kept]
        seg_has = np.zeros(len(rr), dtype=bool)
        seg_hit = np.zeros(len(rr), dtype=bool)
        seg_bad = np.zeros(len(rr), dtype=bool)
        seg_unsure = np.zeros(len(rr), dtype=bool)  # some bitset not probed, or missed
        probed: npt.NDArray[np.uint64] | None = None
        for (t, how), has in zip(plan, holds, strict=True):
            has = has[kept]
            seg_has |= has
            if isinstance(how, str):
                if how == "bad":
                    seg_bad |= has
                else:
                    seg_hit |= has
                    seg_unsure |= has
                continue
            if not len(how):
                seg_unsure |= has
                continue
            got, every, ok = pack.probe_region(t, rr, how)
            seg_hit |= got
            seg_unsure |= has & ~every
            seg_bad |= has & ~ok
            probed = how if probed is None or np.array_equal(probed, how) else np.zeros(0, np.uint64)
        COUNTERS["bloom_pack_probes"] += 1
        bad = int(np.count_nonzero(seg_bad))
        if bad:
            COUNTERS["bloom_pack_fallbacks"] += bad
        answered = seg_has & ~seg_bad
        at = kept if pos is None else pos[kept]
        done[at] = answered
        hit[at] = seg_hit | ~answered
        if probed is not None and len(probed):  # every row group of these may hold the value
            self._tell_row_groups(segs[at[answered & ~seg_unsure]], ref.name, probed)
        return done, hit

    def _probe_summaries(self, found: tuple[Any, ...], ref: BoundRef, literals: tuple[Any, ...],
                         segs: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
        """Per segment of ``segs``: False when its summaries of the column prove the value
        absent from every row group (a segment with a summary of the column has one for each
        of its bitset classes of it: bloom_pack_build); True for any other (a hit, a chunk
        that failed its checksum, a descriptor of another column, no summary)."""
        pack, where = found[0], found[1]
        rows = where[segs]
        inside = rows >= 0
        r = rows[inside]
        keep = np.ones(len(segs), dtype=bool)
        mine = pack.summaries_of(ref.name)
        if not len(mine) or not len(r):
            return keep
        if len(r) < pack.num_segments:
            wanted = np.zeros(pack.num_segments, dtype=bool)
            wanted[r] = True
            mine = mine[wanted[pack.sm_seg[mine]]]
        seg_has = np.zeros(pack.num_segments, dtype=bool)
        seg_may = np.zeros(pack.num_segments, dtype=bool)
        groups = None if len(pack.groups) == 1 else pack.sm_group[mine]  # (one: all of mine)
        for g in [0] if groups is None else np.flatnonzero(np.bincount(groups)).tolist():
            these = mine if groups is None else mine[groups == g]
            owners = pack.sm_seg[these]
            seg_has[owners] = True
            d = pack.groups[g]
            if (d.get("column_id") or ref.name) not in (ref.column.column_id, ref.name):
                seg_may[owners] = True  # another column of that name: the row groups say so
                continue
            try:
                hashes = self._hashes(d, ref, literals)
            except KeyError:
                hashes = None
            if hashes is None:
                seg_may[owners] = True
                continue
            if not len(hashes):
                continue
            got, ok = pack.probe(these, hashes, pack.summary_layout(these))
            seg_may[owners[got | ~ok]] = True
            if not ok.all():
                COUNTERS["bloom_pack_summary_fallbacks"] += int(np.count_nonzero(~ok))
        keep[inside] = ~seg_has[r] | seg_may[r]
        COUNTERS["bloom_pack_summary_drops"] += int(np.count_nonzero(~keep))
        return keep

    def _probe_row_groups(self, found: tuple[Any, ...], ref: BoundRef,
                          literals: tuple[Any, ...], segs: npt.NDArray[np.intp]) -> tuple[
                              npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """:meth:`_probe_pack` over the segments' row-group bitsets."""
        pack = found[0]
        inside, r, seg_has, groups, fast = self._pack_layout(found, ref, segs)
        if fast is not None:  # one bitset per segment: its answer is the segment's
            at, b, these, d, layout = fast
            try:
                hashes = self._hashes(d, ref, literals)
            except KeyError:  # a descriptor the pack does not carry: the general path says so
                hashes = None
            if hashes is not None and len(hashes):
                got, ok = pack.probe(these, hashes, layout)
                if ok.all():  # (a chunk that failed its checksum: the general path)
                    COUNTERS["bloom_pack_probes"] += 1
                    done = np.zeros(len(segs), dtype=bool)
                    done[at] = True
                    hit = np.ones(len(segs), dtype=bool)
                    mine = got[b]
                    hit[at] = mine
                    self._tell_row_groups(segs[at[mine]], ref.name, hashes)
                    return done, hit
        done = np.zeros(len(segs), dtype=bool)
        hit = np.ones(len(segs), dtype=bool)
        if not groups:
            return done, hit
        seg_hit = np.zeros(pack.num_segments, dtype=bool)
        seg_bad = np.zeros(pack.num_segments, dtype=bool)
        seg_unsure = np.zeros(pack.num_segments, dtype=bool)  # some bitset not probed, or missed
        probed: npt.NDArray[np.uint64] | None = None
        for these, owners, d, layout in groups:
            if d is None:
                seg_hit[owners] = seg_unsure[owners] = True
                continue
            try:
                hashes = self._hashes(d, ref, literals)
            except KeyError:  # a descriptor the pack does not carry: probe elsewhere
                seg_bad[owners] = True
                continue
            if hashes is None:
                seg_hit[owners] = seg_unsure[owners] = True
                continue
            if not len(hashes):
                seg_unsure[owners] = True
                continue
            got, ok = pack.probe(these, hashes, layout)
            seg_hit[owners[got]] = True
            seg_unsure[owners[~got]] = True
            if not ok.all():
                seg_bad[owners[~ok]] = True
            probed = hashes if probed is None or np.array_equal(probed, hashes) else np.zeros(0, np.uint64)
        COUNTERS["bloom_pack_probes"] += 1
        bad = int(seg_bad.sum())
        if bad:
            COUNTERS["bloom_pack_fallbacks"] += bad
        done[inside] = seg_has[r] & ~seg_bad[r]
        hit[inside] = seg_hit[r] | ~done[inside]
        if probed is not None and len(probed):  # every row group of these may hold the value:
            self._tell_row_groups(segs[inside][done[inside] & ~seg_unsure[r]], ref.name, probed)
        return done, hit

    def _tell_row_groups(self, segs: npt.NDArray[np.intp], column: str, hashes: npt.NDArray[np.uint64]) -> None:
        """Keep what the pack proved of candidate segments ``segs`` (every bitset of
        ``column`` might hold ``hashes``) for the row-group level (bloom_probe.known_verdict),
        which then reads none of their bitsets again."""
        snapshot = getattr(self.view, "snapshot", None)
        if snapshot is None or not len(segs):
            return
        rows = [row for row in (self.view.snapshot_row(i) for i in segs.tolist()) if row is not None]
        remember_verdicts(snapshot, rows, column, hashes, True)

    def _probe_segments(self, ref: BoundRef, literals: tuple[Any, ...], idx: npt.NDArray[np.intp],
                        has: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """Probe segments ``idx`` through their merge indexes (the packed bitset table)."""
        out = np.ones(len(idx), dtype=bool)
        view = self.view
        cand = idx[has[idx]]
        if not len(cand):
            return out
        packed = packed_bitsets(view, ref.name)
        fresh = packed is None
        if fresh:  # a new view (e.g. after a load): what an older one read is taken over
            packed = Packed(list(zip(view.names, view.files, strict=True)),
                             latest_packed(view, ref.name))
        with packed.lock:
            out, grown = self._probe(packed, ref, literals, idx, cand, out)
        if fresh or grown:
            keep_packed(view, ref.name, packed, packed.nbytes)
        return out

    def _probe(self, packed: Packed, ref: BoundRef, literals: tuple[Any, ...], idx: npt.NDArray[np.intp],
               cand: npt.NDArray[np.intp], out: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.bool_], bool]:
        view = self.view
        packed.classify(view, ref.name, cand)
        group = packed.group[idx]
        grown = False
        for g, d in enumerate(packed.descs):
            mine = group == g
            if not mine.any():
                continue
            if (d.get("column_id") or ref.name) not in (ref.column.column_id, ref.name):
                continue  # another column of that name (dropped, or renamed away)
            hashes = self._hashes(d, ref, literals)
            if hashes is None:
                continue
            if not len(hashes):
                out[mine] = False
                continue
            segs = idx[mine]
            unread = segs[~packed.read[segs]]
            if len(unread):
                packed.load(unread.tolist())
                grown = True
            wanted = np.zeros(view.size, dtype=bool)
            wanted[segs] = True
            hit = np.zeros(view.size, dtype=bool)
            for words, start, blocks, owner in packed.chunks:
                b = np.flatnonzero(wanted[owner])
                if len(b):
                    hit[owner[b[might_contain_packed(words, start[b], blocks[b], hashes)]]] = True
            out[mine] = hit[segs] | (packed.group[segs] == KEEP)  # (a bitset that was None)
            packed.remember(hit)
        return out, grown


def _desc_column(d: dict[str, Any]) -> Any:
    """A bitset group's descriptor ``d`` as the column planner.value_kind / bloom_encodings
    read (KeyError: a descriptor without one of its keys), kept per descriptor object: a
    pack's descriptors live as long as the pack, and a new literal is probed against the
    same ones every plan."""
    hit = _DESC_COLUMNS.get(id(d))
    if hit is not None and hit[0] is d:
        return hit[1]
    desc = SimpleNamespace(**{k: d[k] for k in ("column_id", "physical_type", "type_length",
                                                "logical_type", "unit", "scale", "nested")})
    col = SimpleNamespace(kind=d["kind"], desc=desc)
    if len(_DESC_COLUMNS) >= 1024:  # a few packs are live at a time: start over
        _DESC_COLUMNS.clear()
    _DESC_COLUMNS[id(d)] = (d, col)  # holding the descriptor keeps its id unique
    return col


_DESC_COLUMNS: dict[int, tuple[dict[str, Any], Any]] = {}


def _is_bloom_column(view: Any, name: str) -> bool:
    """Whether column ``name`` is one of the table's bloom columns now."""
    table = getattr(view, "table", None)
    try:
        schema = table.schema  # type: ignore[union-attr]
    except AttributeError:
        return False
    hit = _BLOOM_COLUMNS.get(id(schema))
    if hit is None or hit[0] is not schema:
        try:
            names = frozenset(c.strip().lower() for c in schema.bloom_columns)
        except AttributeError:
            return False
        if len(_BLOOM_COLUMNS) >= 256:  # a few schemas are live at a time: start over
            _BLOOM_COLUMNS.clear()
        hit = _BLOOM_COLUMNS[id(schema)] = (schema, names)  # holding the schema keeps its id unique
    return name in hit[1]


#: id of a table schema -> (the schema, its bloom columns): a schema object is immutable, and
#: its property parses the table properties on every call (once or twice per plan)
_BLOOM_COLUMNS: dict[int, tuple[Any, frozenset[str]]] = {}


# ---- the table-level bloom pack (indexfiles/bloom_pack.py) ---------------------------------------
def bloom_pack_names(table: Table) -> list[str]:
    """The table's bloom packs, oldest first."""
    infos = table.store.sfs.list_dir(table.paths.index_snapshot_dir)
    return sorted(i.base_name for i in infos
                  if i.is_file and i.base_name.startswith(BLOOM_PACK_PREFIX) and i.base_name.endswith(BLOOM_PACK_SUFFIX))


def open_pack(table: Table, name: str) -> BloomPack | None:
    """The pack ``name`` of ``table`` (cached), or None when it is damaged or of another table."""
    path = f"{table.paths.index_snapshot_dir}/{name}"
    table_id = table.schema.table_id
    try:
        return open_bloom_pack(path, lambda: BloomPack.open(table.store.sfs, path, table_id=table_id))  # type: ignore[no-any-return]
    except CorruptIndexError:
        COUNTERS["bloom_pack_errors"] += 1  # only speed is lost: probe the merge indexes
        return None


def _same_segments(a: KeyBytes, b: KeyBytes) -> bool:
    """Two (lengths, bytes) pairs of segment ids and merge index names are equal (the bytes
    may be a view of the pack's directory: compared with one memcmp, not byte by byte)."""
    return all(np.array_equal(x[0], y[0]) and _same_bytes(x[1], y[1]) for x, y in zip(a, b, strict=True))


def _same_bytes(a: Any, b: Any) -> bool:
    if len(a) != len(b):
        return False
    if isinstance(a, bytes):
        return a.startswith(b)
    if isinstance(b, bytes):
        return b.startswith(a)
    # two views (a checkpoint's column, the pack's directory): a memcmp per 64 KiB piece
    return same_bytes(np.frombuffer(a, dtype=np.uint8), np.frombuffer(b, dtype=np.uint8))


def _find_pack(view: Any) -> tuple[BloomPack, npt.NDArray[np.intp], dict[Any, Any], dict[Any, Any]] | None:
    """The table's newest usable pack, each view segment's place in it (-1: not in it), the
    answers of the view's probes of it (a chunk's verdict never changes: remembered) and
    the layouts of those probes (SegmentBlooms._pack_layout)."""
    table = view.table
    try:
        names = bloom_pack_names(table)
    except OSError:
        return None
    for name in reversed(names[-2:]):  # a damaged newest one: the one before still serves
        pack = open_pack(table, name)
        if pack is None:
            continue
        if _same_segments(key_bytes_of(view.entries), pack.key_bytes()):  # written over this view's segments
            where = np.arange(pack.num_segments, dtype=np.intp)
        else:
            names, files = list(view.names), list(view.files)
            index = pack.index
            where = np.fromiter((index.get(k, -1) for k in zip(names, files, strict=True)),
                                dtype=np.intp, count=len(names))
        return pack, where, {}, {}
    return None
