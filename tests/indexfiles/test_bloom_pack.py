"""The bloom pack format (indexfiles/bloom_pack.py): probes agree with probing each bitset
whole (bloom.might_contain), through a mapped local file and through ranged reads, whatever the
chunk size and stripe width; a pack built from another (full stripes copied, the others laid
out again, a segment dropped and one added) answers the same; a damaged chunk makes exactly
the bitsets whose probed blocks lie in it unanswered."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.fs as pafs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.bloom import bloom_insert, might_contain
from carbonstore.indexfiles.bloom_pack import BloomPack
from carbonstore.indexfiles.bloom_pack_build import PackBuilder
from carbonstore.store.arrow_numpy import strings_bytes

LOCAL = pafs.LocalFileSystem()
GROUP = {"name": "k", "column_id": "c1", "kind": 3, "physical_type": 6}


def _bitset(blocks: int, values: list[int]) -> bytes:
    b = bytearray(blocks * 32)
    bloom_insert(b, np.array(values, dtype=np.uint64))
    return bytes(b)


segment_st = st.lists(  # per segment: bitsets (blocks, hashes set)
    st.tuples(st.sampled_from([1, 2, 7, 128, 300]), st.lists(st.integers(0, 2**64 - 1), max_size=40)),
    max_size=4)


def _open(path: Path, ranged: bool) -> BloomPack:
    if ranged:  # not a LocalFileSystem: the chunks are fetched with ranged reads
        return BloomPack.open(pafs.SubTreeFileSystem(str(path.parent), LOCAL), path.name, table_id="t")
    return BloomPack.open(LOCAL, str(path), table_id="t")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(segment_st, min_size=1, max_size=6), st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=5),
       st.booleans(), st.sampled_from([32, 256, 4096]), st.integers(1, 5), st.integers(1, 5),
       st.sampled_from([1 << 16, 2]), st.sampled_from([1, 2, 3]))
def test_probe_matches_each_bitset(tmp_path: Path, segments: list[list[tuple[int, list[int]]]],
                                   probes: list[int], ranged: bool, chunk: int, width: int, width2: int,
                                   batch: int, version: int) -> None:
    # (batch: bitsets a one-hash probe takes at a time; 2 makes small packs probe in batches)
    import carbonstore.indexfiles.bloom_pack as bloom_pack_mod
    import carbonstore.indexfiles.bloom_pack_regions as regions_mod

    saved, bloom_pack_mod._PROBE_BATCH = bloom_pack_mod._PROBE_BATCH, batch
    saved3, regions_mod._BATCH = regions_mod._BATCH, batch
    try:
        _probe_matches_each_bitset(tmp_path, segments, probes, ranged, chunk, width, width2, version)
    finally:
        bloom_pack_mod._PROBE_BATCH = saved
        regions_mod._BATCH = saved3


def _probe_matches_each_bitset(tmp_path: Path, segments: list[list[tuple[int, list[int]]]],
                               probes: list[int], ranged: bool, chunk: int, width: int, width2: int,
                               version: int) -> None:
    builder = PackBuilder("t", chunk_bytes=chunk, stripe_width=width, version=version)
    whole: list[list[bytes]] = []
    for s, bitsets in enumerate(segments):
        got = [_bitset(n, vals) for n, vals in bitsets]
        whole.append(got)
        builder.add_segment(str(s), f"{s}_1.carbonindexmerge", [(GROUP, b) for b in got])
    path = tmp_path / f"p{chunk}{ranged}{width}.carbonbloom"
    path.write_bytes(builder.encode())
    pack = _open(path, ranged)
    # the segment lists' bytes, taken from the directory's joined text, are the lists'
    for (lengths, data), values in zip(pack.key_bytes(), (pack.segment_ids, pack.merges), strict=True):
        want = strings_bytes(values)
        assert lengths.tolist() == want[0].tolist() and data == want[1]
    assert pack.segment_ids == [str(s) for s in range(len(segments))] == [k for k, _ in pack.segments]
    assert len(pack.column_bitsets("k")) == sum(map(len, whole)) and not len(pack.column_bitsets("other"))
    # some of the probed values are inserted: the probe must find them
    hashes = np.array(probes + [v for _, vals in segments[0][:1] for v in vals[:2]], dtype=np.uint64)

    def answers(p: BloomPack) -> dict[tuple[str, str], bool]:
        mine = p.column_bitsets("k")
        hit, ok = p.probe(mine, hashes)
        assert ok.all()
        layout = p.layout(mine)  # computed once, then one hash at a time (a lookup's own path)
        one = [p.probe(mine, np.array([h], dtype=np.uint64), layout) for h in hashes.tolist()]
        assert all(o.all() for _, o in one)
        assert hit.tolist() == np.logical_or.reduce([h for h, _ in one]).tolist()
        out = {k: False for k in p.segments}
        for b, h in zip(mine.tolist(), hit.tolist(), strict=True):
            out[p.segments[int(p.bs_seg[b])]] |= h
        if p.regions is not None:  # format 3's own probe: per segment, by arithmetic
            rows = np.arange(p.num_segments, dtype=np.int64)
            some = np.zeros(p.num_segments, dtype=bool)
            for t in p.column_regions("k"):
                got, every, ok = p.probe_region(t, rows, hashes)
                has = p.region_counts(t, rows) > 0
                assert ok.all() and not got[~has].any() and every[~has].all()
                some |= got
            assert some.tolist() == [out[k] for k in p.segments]
            for t in range(len(p.regions.kind)):  # a run of segments (slices) or gathered: alike
                for part in (rows, rows[1:], rows[:-1]):
                    by_run, gathered = p.probe_region(t, part, hashes), p.probe_region(t, part, hashes, -1)
                    assert all(np.array_equal(a, b) for a, b in zip(by_run, gathered, strict=True))
                    counts = p.region_counts(t, part, -1)
                    assert np.array_equal(p.region_counts(t, part), counts)
                    assert np.array_equal(p.region_has(t, part), counts > 0)
        return out

    expected = {(str(s), f"{s}_1.carbonindexmerge"): any(might_contain(b, int(h)) for b in bs for h in hashes)
                for s, bs in enumerate(whole)}
    assert answers(pack) == expected
    # a new pack (another stripe width) from this one: full stripes copied verbatim, the
    # others' bitsets taken from their verified chunks; one segment dropped, one added
    again = PackBuilder("t", chunk_bytes=chunk, stripe_width=width2, version=version)
    keep = pack.segments[1:] if len(pack.segments) > 1 else pack.segments
    mine = np.array([again.segment(*k) if k in keep else -1 for k in pack.segments], dtype=np.intp)
    for t in range(len(pack.st_chunk0)):
        members = np.flatnonzero(pack.bs_stripe == t)
        if (mine[pack.bs_seg[members]] >= 0).all() and len(members) == width2:
            again.copy_stripe(pack, t, mine)
            continue
        got = pack.stripe_bitsets(t)
        assert got is not None
        for b in members.tolist():
            if mine[pack.bs_seg[b]] >= 0:
                assert got[int(pack.bs_slot[b])] in whole[int(pack.segments[int(pack.bs_seg[b])][0])]
                again.add_bitset(int(mine[pack.bs_seg[b]]), pack.groups[int(pack.bs_group[b])], got[int(pack.bs_slot[b])])
    again.add_segment("new", "new_1.carbonindexmerge", [(GROUP, _bitset(3, [1, 2, 3]))])
    path2 = tmp_path / f"q{chunk}{ranged}{width}.carbonbloom"
    path2.write_bytes(again.encode())
    copy = _open(path2, ranged)
    got = answers(copy)
    assert got.pop(("new", "new_1.carbonindexmerge")) == any(might_contain(_bitset(3, [1, 2, 3]), int(h))
                                                             for h in hashes)
    assert got == {k: v for k, v in expected.items() if k in keep}


@pytest.mark.parametrize("ranged", [False, True], ids=["mapped", "ranged"])
def test_a_damaged_chunk_leaves_its_bitsets_unanswered(tmp_path: Path, ranged: bool) -> None:
    builder = PackBuilder("t", chunk_bytes=256, stripe_width=1, version=2)
    bitsets = [_bitset(8, [i * 7919 + j for j in range(20)]) for i in range(6)]  # 256 bytes: one chunk each
    for i, b in enumerate(bitsets):
        builder.add_segment(str(i), "m", [(GROUP, b)])
    data = builder.encode()
    (tmp_path / "clean").mkdir()
    path = tmp_path / "clean" / "p.carbonbloom"
    path.write_bytes(data)
    clean = _open(path, ranged)
    damaged = bytearray(data)
    damaged[clean.data_offset + 2 * 256 + 17] ^= 0x01  # chunk 2: segment 2's bitset
    path = tmp_path / "p.carbonbloom"
    path.write_bytes(bytes(damaged))
    pack = _open(path, ranged)
    hashes = np.array([5, 2**40 + 3, 2**63 + 11], dtype=np.uint64)
    hit, ok = pack.probe(pack.column_bitsets("k"), hashes)
    assert ok.tolist() == [True, True, False, True, True, True]
    expected, _ = clean.probe(clean.column_bitsets("k"), hashes)
    assert hit[ok].tolist() == expected[ok].tolist()


@pytest.mark.parametrize("damage", ["magic", "header sum", "directory", "cut", "other table", "empty"])
def test_a_damaged_header_or_directory_is_refused(tmp_path: Path, damage: str) -> None:
    builder = PackBuilder("t", chunk_bytes=64)
    builder.add_segment("0", "m", [(GROUP, _bitset(2, [1]))])
    data = bytearray(builder.encode())
    table_id = "t"
    if damage == "magic":
        data[0] ^= 1
    elif damage == "header sum":
        data[50] ^= 1
    elif damage == "directory":
        data[70] ^= 1
    elif damage == "cut":
        data = data[:-1]
    elif damage == "other table":
        table_id = "u"
    else:
        data = bytearray()
    path = tmp_path / "p.carbonbloom"
    path.write_bytes(bytes(data))
    for ranged in (False, True):
        with pytest.raises(CorruptIndexError, match="p.carbonbloom"):
            BloomPack.open(pafs.SubTreeFileSystem(str(tmp_path), LOCAL) if ranged else LOCAL,
                           path.name if ranged else str(path), table_id=table_id)


@pytest.mark.parametrize("ranged", [False, True], ids=["mapped", "ranged"])
def test_a_damaged_region_chunk_leaves_exactly_its_segments_unanswered(tmp_path: Path, ranged: bool) -> None:
    """Format 3: a region's rows run across chunks; a segment is unanswered exactly when a
    block a hash selects of one of its bitsets lies in the damaged chunk."""
    builder = PackBuilder("t", chunk_bytes=64)
    whole = [[_bitset(4, [i * 7919 + j * 31 + r for j in range(6)]) for r in range(1 + i % 3)] for i in range(9)]
    for i, bitsets in enumerate(whole):
        builder.add_segment(str(i), "m", [(GROUP, b) for b in bitsets])
    data = builder.encode()
    (tmp_path / "clean").mkdir()
    path = tmp_path / "clean" / "p.carbonbloom"
    path.write_bytes(data)
    clean = _open(path, ranged)
    (t,) = clean.column_regions("k")
    rows = np.arange(9, dtype=np.int64)
    hashes = np.array([5, 2**40 + 3, 2**63 + 11, 3 * 2**62 + 7], dtype=np.uint64)
    sound = clean.probe_region(t, rows, hashes)
    start = clean.regions.start[t]
    width, first = int(clean.regions.width[t]), int(clean.regions.chunk0[t])
    unanswered = 0
    for bad_chunk in range(first, first + int(clean.regions.chunks[t])):
        damaged = bytearray(data)
        damaged[clean.data_offset + bad_chunk * 64 + 3] ^= 0x10
        path = tmp_path / f"p{bad_chunk}.carbonbloom"
        path.write_bytes(bytes(damaged))
        pack = _open(path, ranged)
        got, every, ok = pack.probe_region(t, rows, hashes)
        blocks = [((int(h) >> 32) * 4) >> 32 for h in hashes.tolist()]
        want = [all((first * 64 + (b * width + k) * 32) // 64 != bad_chunk
                    for b in blocks for k in range(int(start[i]), int(start[i + 1]))) for i in range(9)]
        assert ok.tolist() == want
        unanswered += want.count(False)
        assert got[ok].tolist() == sound[0][ok].tolist() and every[ok].tolist() == sound[1][ok].tolist()
        assert sound[2].all() and sound[0].tolist() == [any(might_contain(b, int(h)) for b in bs for h in hashes)
                                                        for bs in whole]
    assert unanswered


@pytest.mark.parametrize("forged", ["start", "width", "summary twice"])
def test_a_format_3_directory_that_describes_bitsets_outside_the_data_is_refused(tmp_path: Path, forged: str) -> None:
    """Under a valid checksum (a faulty writer), region lists that do not add up are refused
    on open: a plan then probes the merge indexes, never blocks outside a region."""
    import struct

    import orjson
    import xxhash

    builder = PackBuilder("t", chunk_bytes=64)
    for i in range(3):
        builder.add_segment(str(i), "m", [(GROUP, _bitset(2, [i])), (GROUP, _bitset(2, [i + 7]))])
    data = bytearray(builder.encode())
    dlen = struct.unpack_from("<Q", data, 16)[0]
    jlen = struct.unpack_from("<I", data, 64)[0]
    meta = orjson.loads(bytes(data[68 : 68 + jlen]))
    rest = bytes(data[68 + jlen : 64 + dlen])
    if forged == "start":  # segment 1's run of the bitset region ends past segment 2's
        rest = rest[:16] + struct.pack("<q", 7) + rest[24:]
    elif forged == "width":  # (one digit for another: the directory keeps its length)
        assert meta["regions"][0][2] == 6
        meta["regions"][0][2] = 9
    else:  # a summary region's segment list counts two summaries for segment 0
        rest = rest[: 32 + 8] + struct.pack("<q", 2) + rest[32 + 16 :]
    text = orjson.dumps(meta)
    directory = struct.pack("<I", len(text)) + text + rest
    assert len(directory) == dlen
    data[64 : 64 + dlen] = directory
    struct.pack_into("<Q", data, 40, xxhash.xxh64_intdigest(bytes(data[64 : 64 + dlen])))
    struct.pack_into("<Q", data, 48, xxhash.xxh64_intdigest(bytes(data[:48])))
    path = tmp_path / "p.carbonbloom"
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptIndexError, match="does not decode"):
        BloomPack.open(LOCAL, str(path), table_id="t")


def test_a_ranged_lookup_of_scattered_survivors_reads_few_ranges(tmp_path: Path) -> None:
    """On an object store a format 3 probe of every segment's summary and of the scattered
    survivors' runs fetches near chunks together (gaps of up to 64 KiB read through), and
    answers as the mapped file does."""
    builder = PackBuilder("t", chunk_bytes=256)
    for i in range(400):
        builder.add_segment(str(i), "m", [(GROUP, _bitset(4, [i * 1000 + j * 7 + r for j in range(8)]))
                                          for r in range(3)])
    path = tmp_path / "p.carbonbloom"
    path.write_bytes(builder.encode())
    mapped, ranged = _open(path, False), _open(path, True)
    reads: list[tuple[int, int]] = []
    fetch = ranged._fetch

    def counted(first: int, count: int) -> bytes:
        reads.append((first, count))
        return fetch(first, count)  # type: ignore[no-any-return]

    ranged._fetch = counted
    (t,) = ranged.column_regions("k")
    survivors = np.arange(0, 400, 13, dtype=np.int64)  # scattered: every 13th segment
    hashes = np.array([12345, 2**40 + 99, 2**63 + 7], dtype=np.uint64)
    got = ranged.probe_region(t, survivors, hashes)
    want = mapped.probe_region(t, survivors, hashes)
    assert all(a.tolist() == b.tolist() for a, b in zip(got, want, strict=True)) and got[2].all()
    wanted = int(np.count_nonzero(ranged._state))
    assert wanted > 3 * len(reads) and len(reads) <= 3  # one per hash row, not one per chunk
