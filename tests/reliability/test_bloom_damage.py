"""A damaged bloom bitset is detected by the segment-level probe, which reads a segment's
bitsets of a column in one ranged read and checks each against its own checksum from memory.

Each case damages one byte of a candidate segment's merge index inside its bloom region -
the first, a middle or the last bitset of the segment's column, the bitset's bytes or its
checksum - or cuts the file inside the range, then plans ``k = literal`` as a fresh process
would (caches cleared), from the index snapshot and from the merge indexes: the plan fails
with a one-line CorruptIndexError naming the file and ``carbonstore index rebuild``, never
a plan from the damaged bytes. Undamaged again, the plan is the one from before.

The table's bloom pack (indexfiles/bloom_pack.py) is damaged the same way - a byte flipped
in a chunk a probe reads, in its checksum, in the directory or the header, anywhere at
random; the file cut; a pack of another table claiming the same segments: the plan never
drops a segment on the damaged bytes' word. The chunk that fails its checksum sends its
segment to the merge index, a pack whose header or directory fails is ignored, and the plan
is the one made without any pack.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.arrays import BLOOM_CHECKSUM_SIZE, load_arrays
from carbonstore.indexfiles.bloom import hash_value
from carbonstore.indexfiles.bloom_pack import BloomPack
from carbonstore.indexfiles.bloom_pack_build import PackBuilder
from carbonstore.indexfiles.indexfile import read_index
from carbonstore.pruning.cache import COUNTERS, clear_cache
from carbonstore.pruning.plan import prune
from carbonstore.pruning.table_index import refresh_index_snapshot
from carbonstore.store import load_conf
from carbonstore.store.table import Table
from tests.indexfiles.segbuild import add_segments

SEGMENTS, ROWS, RG = 4, 300, 100  # 3 row groups, so 3 bitsets of k per segment
LOCAL = pafs.LocalFileSystem()


@pytest.fixture(scope="module", params=[True, False], ids=["snapshot", "merge-indexes"])
def table(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[Table, list[list[str]]]]:
    conf = load_conf(None).with_overrides({"carbon.index.snapshot.max.lag": "1000"})
    t = Store(str(tmp_path_factory.mktemp("bloomdamage") / "store"), conf=conf).create_table(
        "db.t", "k string, n long")
    rng = np.random.default_rng(5)
    keys = [[f"{v:016x}" for v in rng.integers(0, 2**63, ROWS).tolist()] for _ in range(SEGMENTS)]
    add_segments(t, [pa.table({"k": ks, "n": np.arange(ROWS)}) for ks in keys], row_group_size=RG,
                 page_rows=50, bloom_columns=["k"], bloom_fpp=0.001)
    if request.param:
        assert refresh_index_snapshot(t) is not None
        for p in Path(t.paths.index_snapshot_dir).glob("*.carbonbloom"):
            p.unlink()  # these cases damage the merge indexes: the pack would answer instead
    clear_cache()
    yield t, keys
    clear_cache()


def _bitsets(t: Table, sid: str) -> tuple[Path, list[tuple[int, int]]]:
    """The merge index of segment ``sid`` and its bitsets of k: (file position, length)."""
    path = Path(t.paths.segment_dir(sid)) / (t.status.read().get(sid).segment_file or "")
    loaded = read_index(LOCAL, str(path))
    col = load_arrays(loaded.header).column("k")
    return path, [(loaded.bloom_region_offset + int(o), int(n))
                  for o, n in zip(col.bloom_offset.tolist(), col.bloom_length.tolist(), strict=True)]


def _damages(data: bytes, where: list[tuple[int, int]]) -> Iterator[tuple[str, bytes]]:
    for which, (pos, n) in zip(("first", "middle", "last"), where, strict=True):
        for part, at in (("bytes", pos + n // 2), ("bytes", pos), ("checksum", pos + n),
                         ("checksum", pos + n + BLOOM_CHECKSUM_SIZE - 1)):
            b = bytearray(data)
            b[at] ^= 0x10
            yield f"{which} bitset's {part} at {at}", bytes(b)
    pos, n = where[1]
    yield "cut inside the middle bitset", data[: pos + n // 2]
    pos, n = where[-1]
    yield "cut inside the last checksum", data[: pos + n + 3]


def test_damaged_bitset_of_a_candidate_segment_is_detected(table: tuple[Table, list[list[str]]]) -> None:
    t, keys = table
    where = f"k = '{keys[0][10]}'"
    before = prune(t, where)
    assert before.levels["segments"].dropped == (("counts", 0), ("minmax", 0), ("bloom", 3), ("row_groups", 0))
    victim, spots = _bitsets(t, "2")  # a candidate (min/max keeps it) the bloom probe drops
    assert len(spots) == ROWS // RG
    original = victim.read_bytes()
    try:
        for what, damaged in _damages(original, spots):
            victim.write_bytes(damaged)
            clear_cache()  # a fresh process: nothing read before the damage
            with pytest.raises(CorruptIndexError) as err:
                prune(t, where)
            msg = str(err.value)
            assert victim.name in msg and "carbonstore index rebuild" in msg and "\n" not in msg, (what, msg)
    finally:
        victim.write_bytes(original)
        clear_cache()
    assert prune(t, where).levels == before.levels


def test_damage_outside_the_candidates_is_not_read(table: tuple[Table, list[list[str]]]) -> None:
    """Only candidate segments' bitsets are read: a literal below every segment's minimum
    reads none, so damage there does not stop the plan (a full read would refuse it)."""
    t, _ = table
    victim, spots = _bitsets(t, "2")
    original = victim.read_bytes()
    pos, n = spots[1]
    b = bytearray(original)
    b[pos + n // 2] ^= 0x10
    try:
        victim.write_bytes(bytes(b))
        clear_cache()
        plan = prune(t, "k = '0000'")
        assert plan.segments == () and dict(plan.levels["segments"].dropped)["minmax"] == SEGMENTS
        with pytest.raises(CorruptIndexError, match=victim.name):
            read_index(LOCAL, str(victim), with_blooms=True)
    finally:
        victim.write_bytes(original)
        clear_cache()


# ---- the bloom pack ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Table, list[list[str]], Path]]:
    conf = load_conf(None).with_overrides({"carbon.index.snapshot.max.lag": "1000"})
    t = Store(str(tmp_path_factory.mktemp("packdamage") / "store"), conf=conf).create_table(
        "db.t", "k string, n long")
    rng = np.random.default_rng(6)
    keys = [[f"{v:016x}" for v in rng.integers(0, 2**63, ROWS).tolist()] for _ in range(SEGMENTS)]
    add_segments(t, [pa.table({"k": ks, "n": np.arange(ROWS)}) for ks in keys], row_group_size=RG,
                 page_rows=50, bloom_columns=["k"], bloom_fpp=0.001)
    assert refresh_index_snapshot(t) is not None
    (pack,) = Path(t.paths.index_snapshot_dir).glob("*.carbonbloom")
    clear_cache()
    yield t, keys, pack
    clear_cache()


def _plans(t: Table, wheres: list[str]) -> list[tuple[tuple[str, ...], Any]]:
    clear_cache()  # a fresh process
    out = []
    for w in wheres:
        plan = prune(t, w)
        out.append((plan.segments, plan.levels))
    return out


def _wheres(keys: list[list[str]]) -> list[str]:
    """A value of each segment, absent values, and an IN list of both."""
    return ([f"k = '{keys[s][10 + s]}'" for s in range(SEGMENTS)]
            + [f"k = '{v:016x}'" for v in (1, 2**62 + 7, 2**63 - 9)]
            + [f"k in ('{keys[1][3]}', '{5:016x}', '{keys[3][200]}')"])


def _oracle(t: Table, pack: Path, wheres: list[str]) -> list[tuple[tuple[str, ...], Any]]:
    """The plans without any pack (the merge indexes' answers)."""
    data = pack.read_bytes()
    pack.unlink()
    try:
        return _plans(t, wheres)
    finally:
        pack.write_bytes(data)
        clear_cache()


def _chunks_read(t: Table, pack: Path, keys: list[list[str]]) -> list[int]:
    """Byte positions (in the pack file) of the chunks the probes of _wheres read."""
    clear_cache()
    bp = BloomPack.open(LOCAL, str(pack), table_id=t.schema.table_id)
    spots: set[int] = set()
    mine = bp.column_bitsets("k")
    t = bp.bs_stripe[mine]
    nb = bp.st_blocks[t].astype(np.uint64)
    for s in range(SEGMENTS):
        h = np.uint64(hash_value(keys[s][10 + s], "BYTE_ARRAY"))
        block = ((h >> np.uint64(32)) * nb) >> np.uint64(32)  # row of the stripe; the column is the slot
        byte = bp.st_chunk0[t] * bp.chunk_bytes + (block.astype(np.int64) * bp.st_width[t] + bp.bs_slot[mine]) * 32
        spots.update((bp.data_offset + byte + 5).tolist())
    return sorted(spots)


def _flip(data: bytes, at: int, mask: int = 0x10) -> bytes:
    b = bytearray(data)
    b[at] ^= mask
    return bytes(b)


def _pack_damages(t: Table, pack: Path, keys: list[list[str]]) -> Iterator[tuple[str, bytes]]:
    data = pack.read_bytes()
    bp = BloomPack.open(LOCAL, str(pack), table_id=t.schema.table_id)
    for at in _chunks_read(t, pack, keys):
        yield f"a probed block's bytes at {at}", _flip(data, at)
        chunk = (at - bp.data_offset) // bp.chunk_bytes
        sums_at = 64 + _dir_len(data) + 8 * chunk  # the chunk checksums follow the directory
        yield f"the checksum of chunk {chunk}", _flip(data, sums_at)
    for at in (0, 9, 20, 47, 50, 64, 70, 64 + _dir_len(data) // 2, 64 + _dir_len(data) - 1):
        yield f"header / directory byte {at}", _flip(data, at)
    for cut in (0, 10, 63, 64 + _dir_len(data) // 2, bp.data_offset, bp.data_offset + 100, len(data) - 1):
        yield f"cut at {cut}", data[:cut]


def _dir_len(data: bytes) -> int:
    return int(struct.unpack_from("<Q", data, 16)[0])


def _assert_same(t: Table, wheres: list[str], oracle: list[Any], what: str) -> None:
    got = _plans(t, wheres)
    for w, g, o in zip(wheres, got, oracle, strict=True):
        assert g == o, (what, w)


def test_damaged_pack_never_drops_a_segment_on_its_word(
        packed: tuple[Table, list[list[str]], Path]) -> None:
    t, keys, pack = packed
    wheres = _wheres(keys)
    oracle = _oracle(t, pack, wheres)
    for s in range(SEGMENTS):
        assert str(s) in oracle[s][0]
    COUNTERS.clear()
    _assert_same(t, wheres, oracle, "undamaged")
    assert COUNTERS["bloom_pack_probes"] >= SEGMENTS and not COUNTERS["bloom_pack_fallbacks"]
    original = pack.read_bytes()
    try:
        for what, damaged in _pack_damages(t, pack, keys):
            pack.write_bytes(damaged)
            COUNTERS.clear()
            _assert_same(t, wheres, oracle, what)
            assert COUNTERS["bloom_pack_fallbacks"] or COUNTERS["bloom_pack_errors"], what
    finally:
        pack.write_bytes(original)
        clear_cache()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.floats(0, 1, exclude_max=True), st.integers(1, 255))
def test_a_byte_flipped_anywhere_in_the_pack_keeps_the_plans(
        packed: tuple[Table, list[list[str]], Path], where: float, mask: int) -> None:
    t, keys, pack = packed
    wheres = _wheres(keys)
    oracle = _oracle(t, pack, wheres)
    original = pack.read_bytes()
    at = int(where * len(original))
    try:
        pack.write_bytes(_flip(original, at, mask))
        _assert_same(t, wheres, oracle, f"byte {at} ^ {mask:#x}")
    finally:
        pack.write_bytes(original)
        clear_cache()


def test_a_pack_of_another_table_is_ignored(packed: tuple[Table, list[list[str]], Path]) -> None:
    """A pack claiming this table's segments with empty bitsets (they would drop every
    segment) but written for another table: ignored."""
    t, keys, pack = packed
    wheres = _wheres(keys)
    oracle = _oracle(t, pack, wheres)
    bp = BloomPack.open(LOCAL, str(pack), table_id=t.schema.table_id)
    for table_id in ("another-table", ""):
        forged = PackBuilder(table_id)
        for seg in range(len(bp.segments)):
            bits = bp.segment_bitsets(seg).tolist()
            forged.add_segment(*bp.segments[seg], [
                (bp.groups[int(bp.bs_group[b])], bytes(int(bp.st_blocks[bp.bs_stripe[b]]) * 32)) for b in bits])
        newer = pack.with_name(pack.name.replace("blooms_", "blooms_9"))
        newer.write_bytes(forged.encode())
        try:
            COUNTERS.clear()
            _assert_same(t, wheres, oracle, f"table id {table_id!r}")
            assert COUNTERS["bloom_pack_errors"] >= 1
            assert COUNTERS["bloom_pack_probes"] >= 1  # the pack before it still serves
        finally:
            newer.unlink()
            clear_cache()
