"""The segment-level bloom probe (pruning/segment_blooms.py) drops exactly the segments whose
every row-group bitset excludes every literal.

Oracle: each segment's bitsets read independently (read_index with the whole bloom region,
checked against its region checksum) and probed one by one with bloom.might_contain. Plans
run in random sequences over one process, so the packed bitset table is built, grown (only
candidate segments are read), merged and reused between them, with and without the index
snapshot (the merge-index path reads bitset by bitset).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.indexfiles import bloom_pack
from carbonstore.indexfiles.arrays import load_arrays
from carbonstore.indexfiles.bloom import hash_value, might_contain
from carbonstore.indexfiles.indexfile import read_index
from carbonstore.pruning.cache import COUNTERS, clear_cache
from carbonstore.pruning.plan import prune
from carbonstore.pruning.plan_types import TablePlan
from carbonstore.pruning.table_index import refresh_index_snapshot
from carbonstore.segments.manage import delete_segments
from carbonstore.store import CarbonConf, load_conf
from carbonstore.store.table import Table
from tests.indexfiles.segbuild import add_segments

SEGMENTS, ROWS, RG = 12, 300, 100
LOCAL = pafs.LocalFileSystem()


def _keys(seg: int, rng: np.random.Generator) -> list[str]:
    if seg % 3 == 0:  # keys over the whole range: min/max keeps the segment for any literal
        return [f"{v:016x}" for v in rng.integers(0, 2**63, ROWS).tolist()]
    return [f"{seg:02x}{v:014x}" for v in rng.integers(0, 2**55, ROWS).tolist()]  # a range of its own


def _build(root: Path, *, snapshot: bool, pack: bool = False, declared: bool = False) -> tuple[Table, list[list[str]]]:
    """``declared``: ``k`` is one of the table's bloom columns (its probes ask the pack first)."""
    conf = load_conf(None).with_overrides({"carbon.index.snapshot.max.lag": "1000"})
    t = Store(str(root), conf=conf).create_table(
        "db.t", "k string, n long", properties={"bloom_columns": "k"} if declared else None)
    rng = np.random.default_rng(11)
    keys = [_keys(s, rng) for s in range(SEGMENTS)]
    add_segments(t, [pa.table({"k": ks, "n": np.arange(ROWS)}) for ks in keys], row_group_size=RG,
                 page_rows=50, bloom_columns=["k"], bloom_fpp=0.05)
    if snapshot:
        assert refresh_index_snapshot(t) is not None
    packs = list(Path(t.paths.index_snapshot_dir).glob("*.carbonbloom"))
    assert len(packs) == snapshot  # the snapshot's refresh writes the bloom pack beside it
    if not pack:
        for p in packs:
            p.unlink()
    return t, keys


@pytest.fixture(scope="module", params=[(True, True, True), (True, True, False), (True, False, False),
                                        (False, False, False)],
                ids=["bloom-pack-first", "bloom-pack", "snapshot", "merge-indexes"])
def table(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[Table, list[list[str]], dict[str, list[bytes]]]]:
    snapshot, pack, declared = request.param
    t, keys = _build(tmp_path_factory.mktemp("blooms") / "store", snapshot=snapshot, pack=pack, declared=declared)
    bitsets = _oracle_bitsets(t)
    clear_cache()
    yield t, keys, bitsets
    clear_cache()


def _oracle_bitsets(t: Table) -> dict[str, list[bytes]]:
    bitsets: dict[str, list[bytes]] = {}
    status = t.status.read()
    for sid in (e.load_name for e in status.readable_in_order()):
        path = f"{t.paths.segment_dir(sid)}/{status.get(sid).segment_file}"
        loaded = read_index(LOCAL, path, with_blooms=True)  # the region checksum verified
        region = loaded.bloom_region or b""
        arrays = load_arrays(loaded.header, lambda off, ln, region=region: region[off : off + ln])
        got = [arrays.bloom_bitset(rg, "k") for rg in range(arrays.num_row_groups)]
        assert len(got) == ROWS // RG and all(b is not None for b in got)
        bitsets[sid] = [b for b in got if b is not None]
    return bitsets


literal = st.one_of(
    st.tuples(st.integers(0, SEGMENTS - 1), st.integers(0, ROWS - 1)).map(lambda p: ("row", p)),
    st.tuples(st.integers(0, SEGMENTS - 1), st.integers(0, 2**55)).map(lambda p: ("absent", p)),
)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(literal, min_size=1, max_size=4), min_size=1, max_size=5), st.booleans())
def test_bloom_drops_match_probing_each_bitset(
    table: tuple[Table, list[list[str]], dict[str, list[bytes]]], queries: list[list[tuple[str, tuple[int, int]]]],
    fresh: bool,
) -> None:
    t, keys, bitsets = table
    if fresh:
        clear_cache()
    for lits in queries:
        values = [keys[s][r] if kind == "row" else f"{s:02x}{r:014x}" for kind, (s, r) in lits]
        plan = _check(t, values, bitsets)
        for kind, (s, _) in lits:  # and never a segment that holds a literal
            if kind == "row":
                assert str(s) in plan.segments


def _check(t: Table, values: list[str], bitsets: dict[str, list[bytes]]) -> TablePlan:
    """Plan ``k`` = / IN ``values``; the segments dropped by bloom must be the oracle's."""
    where = (f"k = '{values[0]}'" if len(values) == 1
             else "k in (" + ", ".join(f"'{v}'" for v in values) + ")")
    plan = prune(t, where, explain=True)
    seg_drops = {d.segment: d.reason for d in plan.dropped if d.level == "segment"}
    hashes = [hash_value(v, "BYTE_ARRAY") for v in values]
    for sid, bs in bitsets.items():
        if seg_drops.get(sid) in ("counts", "minmax"):
            continue  # not a candidate of the bloom probe
        excluded = not any(might_contain(b, h) for b in bs for h in hashes)
        assert (seg_drops.get(sid) == "bloom") == excluded, (where, sid, seg_drops.get(sid))
    return plan


def test_packed_table_grown_segment_by_segment(
    table: tuple[Table, list[list[str]], dict[str, list[bytes]]],
) -> None:
    """One plan per range-of-its-own segment, each reading one more segment (its chunks
    merged on the way), then all of them again from the kept table."""
    t, keys, bitsets = table
    clear_cache()
    own = [s for s in range(SEGMENTS) if s % 3]
    for _ in range(2):
        for s in own:
            for values in ([keys[s][5]], [f"{s:02x}{12345:014x}"], [keys[s][9], f"{s:02x}{99:014x}"]):
                _check(t, values, bitsets)


def test_one_read_per_segment_and_none_for_a_reused_plan(
    table: tuple[Table, list[list[str]], dict[str, list[bytes]]],
) -> None:
    t, keys, _ = table
    clear_cache()
    COUNTERS.clear()
    first = prune(t, f"k = '{keys[0][7]}'")
    candidates = len(range(0, SEGMENTS, 3))  # the full-range segments; min/max drops the others
    assert dict(first.levels["segments"].dropped)["minmax"] == SEGMENTS - candidates
    assert "0" in first.segments
    per_segment = ROWS // RG
    if list(Path(t.paths.index_snapshot_dir).glob("*.carbonbloom")):
        # the segments' probe reads the pack's blocks only; the survivors' row-group probe
        # reads their bitsets from their merge indexes
        assert COUNTERS["bloom_pack_probes"] == 1
        assert COUNTERS["bloom_bitsets"] == len(first.segments) * per_segment
    else:
        assert COUNTERS["bloom_bitsets"] == candidates * per_segment  # survivors' not read again
    if list(Path(t.paths.index_snapshot_dir).glob("*.carbonbloom")):
        assert COUNTERS["bloom_reads"] == len(first.segments) * per_segment
    elif list(Path(t.paths.index_snapshot_dir).glob("*.carbonsnap")):
        assert COUNTERS["bloom_reads"] == candidates  # one read per segment's bitsets
    else:
        assert COUNTERS["bloom_reads"] == candidates * per_segment  # bitset by bitset
    COUNTERS.clear()
    again = prune(t, f"k = '{keys[0][7]}'")
    assert again.segments == first.segments and again.levels == first.levels
    assert COUNTERS.get("bloom_reads", 0) == 0


def test_a_new_view_copies_what_an_older_one_read(tmp_path: Path) -> None:
    """After a load, the next plan (a new view of the table) reads only the new segment's
    bitsets: the others come from the packed table of the view before, and the drops are
    still the oracle's."""
    t, keys = _build(tmp_path / "store", snapshot=True)
    clear_cache()
    before = _oracle_bitsets(t)
    for s in range(SEGMENTS):  # one chunk per segment of a range of its own: merged on the way
        _check(t, [keys[s][3]], before)
    rng = np.random.default_rng(12)
    more = [f"{v:016x}" for v in rng.integers(0, 2**63, ROWS).tolist()]
    add_segments(t, [pa.table({"k": more, "n": np.arange(ROWS)})], row_group_size=RG, page_rows=50,
                 bloom_columns=["k"], bloom_fpp=0.05)
    bitsets = _oracle_bitsets(t)
    COUNTERS.clear()
    assert str(SEGMENTS) in _check(t, [more[8]], bitsets).segments  # same candidates as before
    assert COUNTERS["bloom_bitsets"] == ROWS // RG  # and the new one: its bitsets only are read
    for s in range(SEGMENTS):
        for values in ([keys[s][3]], [keys[s][1], f"{s:02x}{777:014x}"]):
            _check(t, values, bitsets)
    assert COUNTERS["bloom_bitsets"] == ROWS // RG  # nothing read twice
    delete_segments(t, ["1"])  # the next view numbers every later segment one lower
    bitsets = _oracle_bitsets(t)
    COUNTERS.clear()
    for s in range(SEGMENTS):
        for values in ([keys[s][3]], [keys[s][1], f"{s:02x}{777:014x}"]):
            _check(t, values, bitsets)
    assert COUNTERS.get("bloom_bitsets", 0) == 0


@pytest.mark.parametrize("width", [128, 2])
def test_a_new_pack_takes_the_previous_ones_bitsets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    width: int) -> None:
    """Each refresh after a load or a delete writes a pack from the previous one (every
    bitset of a segment still covered taken from its verified chunks; the stripe width of
    formats 1 and 2 no longer matters) and reads only new segments' merge indexes; the drops
    stay the oracle's."""
    monkeypatch.setattr(bloom_pack, "STRIPE_WIDTH", width)
    t, keys = _build(tmp_path / "store", snapshot=True, pack=True)
    rng = np.random.default_rng(13)
    for step in range(3):
        more = [f"{v:016x}" for v in rng.integers(0, 2**63, ROWS).tolist()]
        add_segments(t, [pa.table({"k": more, "n": np.arange(ROWS)})], row_group_size=RG, page_rows=50,
                     bloom_columns=["k"], bloom_fpp=0.05)
        keys.append(more)
        if step == 1:
            delete_segments(t, ["4"])
        COUNTERS.clear()
        refresh_index_snapshot(t)
        assert COUNTERS["bloom_bitsets"] == ROWS // RG  # the new segment's bitsets only
        assert COUNTERS["bloom_pack_writes"] == 1 and not COUNTERS["bloom_pack_errors"]
        clear_cache()
        bitsets = _oracle_bitsets(t)
        COUNTERS.clear()
        for s in range(len(keys)):
            if s != 4 or step == 0:
                for values in ([keys[s][3]], [keys[s][1], f"{s:02x}{777:014x}"]):
                    _check(t, values, bitsets)
        assert COUNTERS["bloom_pack_probes"] and not COUNTERS["bloom_pack_fallbacks"]


@pytest.mark.parametrize("declared", [True, False], ids=["bloom-column", "not-declared"])
@pytest.mark.parametrize("row_groups", [1, 3])
def test_the_row_group_level_takes_the_packs_answers(tmp_path: Path, row_groups: int, declared: bool) -> None:
    """Where every row group's bitset of a surviving segment answered the pack's probe alike
    (always, with one row group per segment), the row-group level reads none of them again
    from the merge index; plans at every level are the same as without the pack (the
    merge-index bitsets probed), for present and absent keys, one plan per new key."""
    conf = load_conf(None).with_overrides({"carbon.index.snapshot.max.lag": "1000"})
    t = Store(str(tmp_path / "store"), conf=conf).create_table(
        "db.t", "k string, n long", properties={"bloom_columns": "k"} if declared else None)
    rng = np.random.default_rng(21)
    keys = [[f"{v:016x}" for v in rng.integers(0, 2**63, ROWS).tolist()] for _ in range(SEGMENTS)]
    add_segments(t, [pa.table({"k": ks, "n": np.arange(ROWS)}) for ks in keys],
                 row_group_size=ROWS // row_groups, page_rows=50, bloom_columns=["k"], bloom_fpp=0.2)
    assert refresh_index_snapshot(t) is not None
    wheres = [f"k = '{keys[s][r]}'" for s, r in ((0, 0), (3, 150), (7, 299), (11, 42))]
    wheres += [f"k = '{v:016x}'" for v in rng.integers(0, 2**63, 40).tolist()]  # absent: fpp 0.2 keeps some
    wheres.append(f"k in ('{keys[1][1]}', '{keys[2][2]}')")

    def plans() -> list[tuple[object, ...]]:
        return _plans(tmp_path, conf, wheres)

    COUNTERS.clear()
    with_pack = plans()
    reads = COUNTERS.get("bloom_bitsets", 0)
    assert COUNTERS["bloom_pack_probes"] and not COUNTERS["bloom_pack_fallbacks"]
    survivors = sum(len(p[0]) for p in with_pack)
    assert survivors > 10  # false positives (absent keys) reached the row-group level too
    if row_groups == 1:
        assert reads == 0
    else:
        assert reads <= survivors * row_groups
    for pack in Path(t.paths.index_snapshot_dir).glob("*.carbonbloom"):
        pack.unlink()
    COUNTERS.clear()
    assert plans() == with_pack
    assert not COUNTERS.get("bloom_pack_probes") and COUNTERS["bloom_bitsets"]


@pytest.mark.parametrize("row_groups", [1, 3])
def test_chunks_failing_their_checksums_leave_the_plans_as_they_were(tmp_path: Path, row_groups: int) -> None:
    """Every data chunk of the pack damaged (one byte flipped in each): each probe's chunks
    fail their checksums, the segments are probed from their merge indexes instead, and the
    plans at every level are those of the sound pack - also with one bitset per segment
    (one row group each), whose probe answers segments straight from the pack's answer."""
    conf = load_conf(None).with_overrides({"carbon.index.snapshot.max.lag": "1000"})
    t = Store(str(tmp_path / "store"), conf=conf).create_table(
        "db.t", "k string, n long", properties={"bloom_columns": "k"})
    rng = np.random.default_rng(31)
    keys = [[f"{v:016x}" for v in rng.integers(0, 2**63, ROWS).tolist()] for _ in range(SEGMENTS)]
    add_segments(t, [pa.table({"k": ks, "n": np.arange(ROWS)}) for ks in keys],
                 row_group_size=ROWS // row_groups, page_rows=50, bloom_columns=["k"], bloom_fpp=0.2)
    assert refresh_index_snapshot(t) is not None
    wheres = [f"k = '{keys[s][r]}'" for s, r in ((0, 0), (5, 150), (11, 299))]
    wheres += [f"k = '{v:016x}'" for v in rng.integers(0, 2**63, 30).tolist()]

    def plans() -> list[tuple[object, ...]]:
        return _plans(tmp_path, conf, wheres)

    COUNTERS.clear()
    sound = plans()
    assert COUNTERS["bloom_pack_probes"] and not COUNTERS["bloom_pack_fallbacks"]
    assert sum(len(p[0]) for p in sound) > 3  # present keys and false positives survive
    (path,) = Path(t.paths.index_snapshot_dir).glob("*.carbonbloom")
    pack = bloom_pack.BloomPack.open(LOCAL, str(path), table_id=None)
    first, size, count = pack.data_offset, pack.chunk_bytes, pack.num_chunks
    del pack
    data = bytearray(path.read_bytes())
    for c in range(count):
        data[first + c * size + 7] ^= 0x5A
    path.write_bytes(bytes(data))
    COUNTERS.clear()
    assert plans() == sound
    assert COUNTERS["bloom_pack_fallbacks"]


def _plans(tmp_path: Path, conf: CarbonConf, wheres: list[str]) -> list[tuple[object, ...]]:
    """Each filter's plan at every level (segments, level counts, files, what was dropped),
    planned on a fresh handle of ``db.t`` with the caches cleared."""
    clear_cache()
    handle = Store(str(tmp_path / "store"), conf=conf).table("db.t")
    out = []
    for where in wheres:
        p = prune(handle, where, explain=True)
        out.append((p.segments, p.levels, sorted(repr(f.to_json()) for f in p.files),
                    sorted(map(str, p.dropped))))
    return out


def test_a_new_pack_reads_again_only_the_segments_a_damaged_chunk_holds(tmp_path: Path) -> None:
    """Format 3: the next pack takes every bitset of the previous one from its verified
    chunks; the segments with a bitset in a chunk that fails its checksum are read from
    their merge indexes again (not the whole table), and the plans stay the oracle's."""
    t, keys = _build(tmp_path / "store", snapshot=True, pack=True)
    (path,) = Path(t.paths.index_snapshot_dir).glob("*.carbonbloom")
    pack = bloom_pack.BloomPack.open(LOCAL, str(path), table_id=None)
    assert pack.version == 3
    (reg,) = pack.column_regions("k")
    regions = pack.regions
    assert regions is not None
    start, width = regions.start[reg], int(regions.width[reg])
    bad = int(regions.chunk0[reg]) + 1  # the region's second chunk
    held = {i for i in range(pack.num_segments) for b in range(int(regions.blocks[reg]))
            for k in range(int(start[i]), int(start[i + 1]))
            if (int(regions.chunk0[reg]) * pack.chunk_bytes + (b * width + k) * 32) // pack.chunk_bytes == bad}
    assert 0 < len(held) < SEGMENTS
    data = bytearray(path.read_bytes())
    data[pack.data_offset + bad * pack.chunk_bytes + 9] ^= 0x21
    del pack
    path.write_bytes(bytes(data))
    more = [f"{v:016x}" for v in np.random.default_rng(3).integers(0, 2**63, ROWS).tolist()]
    add_segments(t, [pa.table({"k": more, "n": np.arange(ROWS)})], row_group_size=RG, page_rows=50,
                 bloom_columns=["k"], bloom_fpp=0.05)
    keys.append(more)
    COUNTERS.clear()
    refresh_index_snapshot(t)
    assert COUNTERS["bloom_bitsets"] == (len(held) + 1) * (ROWS // RG)  # the damaged ones and the new one
    assert COUNTERS["bloom_pack_writes"] == 1 and COUNTERS["bloom_pack_errors"] == 1
    clear_cache()
    bitsets = _oracle_bitsets(t)
    COUNTERS.clear()
    for s in range(len(keys)):
        for values in ([keys[s][3]], [keys[s][1], f"{s:02x}{777:014x}"]):
            _check(t, values, bitsets)
    assert COUNTERS["bloom_pack_probes"] and not COUNTERS["bloom_pack_fallbacks"]
