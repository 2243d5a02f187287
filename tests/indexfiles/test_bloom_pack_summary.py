"""Segment summaries of the bloom pack (format 2, indexfiles/bloom_pack_build.py): a summary
never drops a segment that a probe of its row-group bitsets keeps, whatever the bitset sizes;
a format 1 pack still opens and answers alike; a lookup verifies the summaries' chunks and
the surviving segments' only; a summary chunk failing its checksum sends its segments to the
row-group probe and leaves every plan as it was."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.indexfiles import bloom_pack
from carbonstore.indexfiles.bloom import bloom_insert, might_contain
from carbonstore.indexfiles.bloom_pack import BloomPack
from carbonstore.indexfiles.bloom_pack_build import PackBuilder
from carbonstore.pruning.cache import COUNTERS, clear_cache
from carbonstore.pruning.plan import prune
from carbonstore.pruning.segment_blooms import SegmentBlooms, bloom_pack_names, open_pack
from carbonstore.pruning.table_index import refresh_index_snapshot
from carbonstore.store import load_conf
from carbonstore.store.table import Table
from tests.indexfiles.segbuild import add_segments

LOCAL = pafs.LocalFileSystem()
K = {"name": "k", "column_id": "c1", "kind": 3, "physical_type": 6}
K2 = {"name": "k", "column_id": "c9", "kind": 3, "physical_type": 6}  # k dropped and added again
OTHER = {"name": "j", "column_id": "c2", "kind": 3, "physical_type": 6}


def _bitset(blocks: int, values: list[int]) -> bytes:
    b = bytearray(blocks * 32)
    bloom_insert(b, np.array(values, dtype=np.uint64))
    return bytes(b)


hash_st = st.integers(0, 2**64 - 1)
segment_st = st.lists(  # per segment: bitsets (group, blocks, hashes set)
    st.tuples(st.sampled_from([0, 0, 1, 2]), st.sampled_from([1, 2, 7]), st.lists(hash_st, max_size=30)),
    max_size=6)


def _segment_hits(pack: BloomPack, hashes: np.ndarray, summaries: bool) -> dict[int, bool]:
    """Per segment with bitsets (summaries) of column k: whether one of them might hold a hash."""
    if summaries:
        mine = pack.summaries_of("k")
        got, ok = pack.probe(mine, hashes, pack.summary_layout(mine))
        owners = pack.sm_seg[mine]
    else:
        mine = pack.column_bitsets("k")
        got, ok = pack.probe(mine, hashes)
        owners = pack.bs_seg[mine]
    assert ok.all()
    out: dict[int, bool] = {}
    for seg, hit in zip(owners.tolist(), got.tolist(), strict=True):
        out[seg] = out.get(seg, False) or hit
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(segment_st, min_size=1, max_size=8), st.lists(st.lists(hash_st, min_size=1, max_size=3),
       min_size=1, max_size=6), st.sampled_from([32, 256, 4096]), st.integers(1, 5))
def test_a_summary_never_drops_a_segment_its_row_groups_keep(
        tmp_path: Path, segments: list[list[tuple[int, int, list[int]]]], probes: list[list[int]],
        chunk: int, width: int) -> None:
    groups = [K, K2, OTHER]
    built = {}
    for version in (1, 2, 3):
        builder = PackBuilder("t", chunk_bytes=chunk, stripe_width=width, version=version)
        for s, bitsets in enumerate(segments):
            builder.add_segment(str(s), f"m{s}", [(groups[g], _bitset(n, vals)) for g, n, vals in bitsets])
        path = tmp_path / f"v{version}.carbonbloom"
        path.write_bytes(builder.encode())
        built[version] = BloomPack.open(LOCAL, str(path), table_id="t")
    # format 3 with the bitsets handed over from the last segment to the first: laid out by segment
    shuffled = PackBuilder("t", chunk_bytes=chunk, stripe_width=width, version=3)
    for s in range(len(segments)):
        shuffled.segment(str(s), f"m{s}")
    for s in reversed(range(len(segments))):
        for g, n, vals in segments[s]:
            shuffled.add_bitset(s, groups[g], _bitset(n, vals))
    (tmp_path / "v3r.carbonbloom").write_bytes(shuffled.encode())
    built["3r"] = BloomPack.open(LOCAL, str(tmp_path / "v3r.carbonbloom"), table_id="t")
    old = built[1]
    assert old.version == 1 and not old.summarised
    for new in (built[2], built[3]):
        _check_summaries(new, old, segments, probes)
    for values in probes:  # the planner's probe (SegmentBlooms): format 3 answers as format 2
        hashes = np.array(values, dtype=np.uint64)
        answers = [_pack_answers(built[v], hashes) for v in (2, 3)]
        assert answers[0] == answers[1] == _pack_answers(built["3r"], hashes)
        # a view whose segments are not the pack's (one not in it, the others reversed, every other one probed)
        pack = built[3]
        where = np.arange(pack.num_segments, dtype=np.intp)[::-1].copy()
        where[0] = -1
        segs = np.arange(0, pack.num_segments, 2, dtype=np.intp)
        want = [(False, True) if where[i] < 0 else answers[1][where[i]] for i in segs.tolist()]
        assert _pack_answers(pack, hashes, where, segs) == want
        for s, (done, hit) in enumerate(answers[1]):
            truth = any(groups[g] is K2 or (groups[g] is K and any(might_contain(_bitset(n, vals), int(h))
                                                                    for h in values))
                        for g, n, vals in segments[s])
            assert hit or not truth  # never dropped when one of its row groups may hold it
            assert done == any(groups[g]["name"] == "k" for g, _, _ in segments[s])


def _pack_answers(pack: BloomPack, hashes: np.ndarray, where: np.ndarray | None = None,
                  segs: np.ndarray | None = None) -> list[tuple[bool, bool]]:
    """(answered, might hold) per view segment ``segs`` (each one's place in the pack:
    ``where``; default every segment of the pack), from the planner's pack probe for column
    k (id c1)."""
    blooms = SegmentBlooms(SimpleNamespace(snapshot=None))
    blooms._hashes = lambda d, ref, literals: hashes  # type: ignore[method-assign]
    ref = SimpleNamespace(name="k", column=SimpleNamespace(column_id="c1"))
    every = np.arange(pack.num_segments, dtype=np.intp)
    where, segs = every if where is None else where, every if segs is None else segs
    done, hit = blooms._probe_pack((pack, where, {}, {}), ref, (), segs)  # type: ignore[arg-type]
    return list(zip(done.tolist(), hit.tolist(), strict=True))


def _check_summaries(new: BloomPack, old: BloomPack, segments: list[list[tuple[int, int, list[int]]]],
                     probes: list[list[int]]) -> None:
    groups = [K, K2, OTHER]
    assert new.summarised
    for s, bitsets in enumerate(segments):  # each segment's bitsets found in one run
        b, seg, _ = new.bitsets_of(np.array([s], dtype=np.intp))
        assert len(b) == len(bitsets) and (seg == s).all()
        classes = {(g, n) for g, n, _ in bitsets}
        summarised = {(int(new.sm_group[i]), int(new.st_blocks[new.sm_stripe[i]]))
                      for i in np.flatnonzero(new.sm_seg == s)}
        # a segment is summarised whole (a summary per class) or not at all (one bitset per class)
        worth = len(bitsets) > len(classes)
        assert len(summarised) == (len(classes) if worth else 0)
    for values in probes:
        hashes = np.array(values, dtype=np.uint64)
        rows_old, rows_new = _segment_hits(old, hashes, False), _segment_hits(new, hashes, False)
        assert rows_old == rows_new  # format 1 and 2 (3) answer alike
        summary = _segment_hits(new, hashes, True)
        for seg, hit in rows_new.items():
            if hit and seg in summary:
                assert summary[seg]  # never dropped by its summary
        for seg, hit in summary.items():  # and a summary hit is the OR of its members'
            members = [(g, n, vals) for g, n, vals in segments[seg] if groups[g]["name"] == "k"]
            expect = any(any(x in vals for x in values) for _, _, vals in members)
            if expect:
                assert hit


# ---- through the planner, on a real table ------------------------------------------------------
SEGMENTS, ROWS, RG = 24, 200, 50


def _table(root: Path) -> tuple[Table, list[list[str]]]:
    conf = load_conf(None).with_overrides({"carbon.index.snapshot.max.lag": "1000"})
    t = Store(str(root), conf=conf).create_table("db.t", "k string, n long", properties={"bloom_columns": "k"})
    rng = np.random.default_rng(5)
    keys = [[f"{v:016x}" for v in rng.integers(0, 2**63, ROWS).tolist()] for _ in range(SEGMENTS)]
    add_segments(t, [pa.table({"k": ks, "n": np.arange(ROWS)}) for ks in keys], row_group_size=RG,
                 page_rows=50, bloom_columns=["k"], bloom_fpp=0.0001)
    assert refresh_index_snapshot(t) is not None
    return t, keys


def _plans(t: Table, wheres: list[str]) -> list[tuple[object, ...]]:
    clear_cache()
    handle = Store(t.store.location, conf=t.store.conf).table("db.t")
    out = []
    for where in wheres:
        p = prune(handle, where, explain=True)
        out.append((p.segments, p.levels, sorted(repr(f.to_json()) for f in p.files)))
    return out


def test_a_lookup_verifies_the_summaries_and_the_survivors_chunks_only(tmp_path: Path) -> None:
    """Format 3: a lookup of one segment's key verifies the one summary-row chunk the key
    selects and the chunks of the survivors' runs - and builds no array over every bitset
    or summary (no per-bitset entries: regions are found by arithmetic)."""
    t, keys = _table(tmp_path / "store")
    name = bloom_pack_names(t)[-1]
    for s in (0, 9, 23):
        clear_cache()
        COUNTERS.clear()
        p = prune(Store(t.store.location, conf=t.store.conf).table("db.t"), f"k = '{keys[s][17]}'")
        assert p.levels["segments"].kept >= 1 and str(s) in [str(x) for x in p.segments]
        pack = open_pack(t, name)
        assert pack is not None and pack.version == 3
        assert not {"_bs", "_bs_raw", "_sm_entries"} & set(pack.__dict__)  # nothing over every bitset
        verified = int(np.count_nonzero(pack._state))
        survivors = SEGMENTS - COUNTERS["bloom_pack_summary_drops"]
        assert 1 <= survivors <= 3  # fpp 0.0001 per row group
        # the summary row (24 x 32 bytes: at most 2 chunks of 4 KiB), a run of 4 blocks per survivor
        assert verified <= 2 + 2 * survivors
        assert len(pack.sm_seg) == SEGMENTS  # (derived when asked: every segment summarised)


def test_a_damaged_summary_chunk_sends_its_segments_to_the_row_groups(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bloom_pack, "STRIPE_WIDTH", 4)
    t, keys = _table(tmp_path / "store")
    rng = np.random.default_rng(8)
    wheres = [f"k = '{keys[s][r]}'" for s, r in ((0, 0), (7, 120), (23, 199))]
    wheres += [f"k = '{v:016x}'" for v in rng.integers(0, 2**63, 20).tolist()]
    wheres.append(f"k in ('{keys[1][1]}', '{keys[2][2]}')")
    COUNTERS.clear()
    sound = _plans(t, wheres)
    assert COUNTERS["bloom_pack_summary_drops"] and not COUNTERS["bloom_pack_summary_fallbacks"]
    (path,) = Path(t.paths.index_snapshot_dir).glob("*.carbonbloom")
    pack = BloomPack.open(LOCAL, str(path), table_id=None)
    first, size = pack.data_offset, pack.chunk_bytes
    summary_chunks = range(int(pack.st_chunk0[pack.num_rg_stripes]), pack.num_chunks)
    del pack
    data = bytearray(path.read_bytes())
    for c in summary_chunks:
        data[first + c * size + 5] ^= 0x81
    path.write_bytes(bytes(data))
    COUNTERS.clear()
    assert _plans(t, wheres) == sound
    assert COUNTERS["bloom_pack_summary_fallbacks"] and not COUNTERS.get("bloom_pack_summary_drops")
    assert not COUNTERS.get("bloom_pack_fallbacks")  # the row-group chunks are sound: answered there


def _rewrite_as(path: Path, version: int) -> None:
    """Rewrite the pack at ``path`` with the same bitsets as a format ``version`` writer left them."""
    pack = BloomPack.open(LOCAL, str(path), table_id=None)
    old = PackBuilder(pack.table_id, version=version)
    segs = np.array([old.segment(*s) for s in pack.segments], dtype=np.intp)
    for t_ in range(pack.num_rg_stripes):
        old.copy_stripe(pack, t_, segs)
    del pack
    path.write_bytes(old.encode())
    assert BloomPack.open(LOCAL, str(path), table_id=None).version == version


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_format_pack_still_plans_and_the_next_write_upgrades_it(tmp_path: Path, version: int) -> None:
    t, keys = _table(tmp_path / "store")
    wheres = [f"k = '{keys[s][r]}'" for s, r in ((0, 0), (7, 120))] + ["k = '0000000000000001'"]
    current = _plans(t, wheres)
    (path,) = Path(t.paths.index_snapshot_dir).glob("*.carbonbloom")
    assert BloomPack.open(LOCAL, str(path), table_id=None).version == bloom_pack.BLOOM_PACK_VERSION == 3
    _rewrite_as(path, version)
    COUNTERS.clear()
    assert _plans(t, wheres) == current
    assert COUNTERS["bloom_pack_probes"]
    assert bool(COUNTERS.get("bloom_pack_summary_drops")) == (version == 2)
    add_segments(t, [pa.table({"k": ["00000000000000ff"] * 10, "n": np.arange(10)})], row_group_size=5,
                 page_rows=5, bloom_columns=["k"], bloom_fpp=0.01)
    COUNTERS.clear()
    refresh_index_snapshot(t)
    assert COUNTERS["bloom_bitsets"] == 2  # the new segment's only: the old pack's bitsets copied
    new = open_pack(t, bloom_pack_names(t)[-1])
    assert new is not None and new.version == 3 and len(new.sm_seg) == SEGMENTS + 1
    COUNTERS.clear()
    assert [(p[0], p[2]) for p in _plans(t, wheres)] == [(p[0], p[2]) for p in current]  # (one more segment)
    assert COUNTERS["bloom_pack_summary_drops"]


def test_entries_checked_as_a_probe_reaches_them_fall_back_to_the_merge_indexes(tmp_path: Path) -> None:
    """A format 2 pack checks a segment's bitset entries when a probe reaches them, not on
    open: entries that point outside their stripes (under a valid directory checksum, as a
    faulty writer would leave them) make that probe unanswered, and the merge indexes plan
    exactly what the sound pack planned."""
    import struct

    import xxhash

    t, keys = _table(tmp_path / "store")
    rng = np.random.default_rng(9)
    wheres = [f"k = '{keys[s][r]}'" for s, r in ((0, 0), (7, 120), (23, 199))]
    wheres += [f"k = '{v:016x}'" for v in rng.integers(0, 2**63, 10).tolist()]
    sound = _plans(t, wheres)
    (path,) = Path(t.paths.index_snapshot_dir).glob("*.carbonbloom")
    _rewrite_as(path, 2)
    data = bytearray(path.read_bytes())
    pack = BloomPack.open(LOCAL, str(path), table_id=None)
    m, n = len(pack.st_chunk0), len(pack._bs_raw[0])
    del pack
    dlen = struct.unpack_from("<Q", data, 16)[0]
    jlen = struct.unpack_from("<I", data, 64)[0]
    slots = 64 + 4 + jlen + 32 * m + 12 * n  # the bitsets' slot entries
    data[slots : slots + 4 * n] = np.full(n, 999, dtype="<i4").tobytes()
    struct.pack_into("<Q", data, 40, xxhash.xxh64_intdigest(bytes(data[64 : 64 + dlen])))
    struct.pack_into("<Q", data, 48, xxhash.xxh64_intdigest(bytes(data[:48])))
    path.write_bytes(bytes(data))
    assert BloomPack.open(LOCAL, str(path), table_id=None).summarised  # opens: entries unchecked
    COUNTERS.clear()
    assert _plans(t, wheres) == sound
    assert COUNTERS["bloom_pack_errors"] and COUNTERS["bloom_bitsets"]  # the merge indexes answered
