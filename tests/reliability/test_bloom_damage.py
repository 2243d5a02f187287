"""A damaged bloom bitset is detected by the segment-level probe, which reads a segment's
bitsets of a column in one ranged read and checks each against its own checksum from memory.

Each case damages one byte of a candidate segment's merge index inside its bloom region -
the first, a middle or the last bitset of the segment's column, the bitset's bytes or its
checksum - or cuts the file inside the range, then plans ``k = literal`` as a fresh process
would (caches cleared), from the index snapshot and from the merge indexes: the plan fails
with a one-line CorruptIndexError naming the file and ``carbonstore index rebuild``, never
a plan from the damaged bytes. Undamaged again, the plan is the one from before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from carbonstore import Store
from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.arrays import BLOOM_CHECKSUM_SIZE, load_arrays
from carbonstore.indexfiles.indexfile import read_index
from carbonstore.pruning.cache import clear_cache
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
