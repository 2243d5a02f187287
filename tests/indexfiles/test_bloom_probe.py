"""Probing many bitsets at once answers exactly as probing them one by one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.bloom import build_bloom, hash_plain, might_contain_many
from carbonstore.indexfiles.bloom_probe import might_contain_any, might_contain_packed


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(st.none(), st.tuples(st.lists(st.binary(max_size=12), min_size=1, max_size=60),
                                       st.sampled_from([32, 64, 256, 1024]))),
        max_size=12,
    ),
    st.lists(st.binary(max_size=12), max_size=6),
    st.integers(min_value=0, max_value=3),
)
def test_same_answers_as_one_by_one(
    specs: list[tuple[list[bytes], int] | None], probes: list[bytes], from_inserted: int
) -> None:
    bitsets = [None if s is None else build_bloom(s[0], num_bytes=s[1]) for s in specs]
    values = list(probes)
    for s in specs[:from_inserted]:  # some probes that are in some bitsets
        if s is not None:
            values.append(s[0][0])
    hashes = np.array([hash_plain(v) for v in values], dtype=np.uint64)
    want = [True if b is None else bool(might_contain_many(b, hashes).any()) for b in bitsets]
    assert might_contain_any(bitsets, hashes).tolist() == want
    for b, s in zip(bitsets, specs, strict=True):  # no false negatives
        if b is not None and s is not None:
            assert might_contain_any([b], np.array([hash_plain(s[0][0])], dtype=np.uint64)).tolist() == [True]


def test_memoryview_bitsets_and_no_hashes() -> None:
    b = build_bloom([b"a", b"b"], num_bytes=64)
    h = np.array([hash_plain(b"a")], dtype=np.uint64)
    assert might_contain_any([memoryview(b), None], h).tolist() == [True, True]
    assert might_contain_any([b, None], np.zeros(0, dtype=np.uint64)).tolist() == [False, True]
    assert might_contain_any([], h).tolist() == []


def test_bad_bitset_size() -> None:
    with pytest.raises(CorruptIndexError, match="32-byte blocks"):
        might_contain_any([b"\x00" * 32, b"\x00" * 33], np.array([1], dtype=np.uint64))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.lists(st.binary(max_size=12), min_size=1, max_size=60),
                       st.sampled_from([32, 64, 256, 1024]), st.integers(0, 3)), max_size=12),
    st.lists(st.binary(max_size=12), max_size=6),
    st.integers(min_value=0, max_value=3),
)
def test_packed_same_answers_as_one_by_one(
    specs: list[tuple[list[bytes], int, int]], probes: list[bytes], from_inserted: int
) -> None:
    """Bitsets laid out in one word array (with gaps between them, as the checksums leave
    in an index file's bloom region) answer as probed one by one."""
    bitsets = [build_bloom(s[0], num_bytes=s[1]) for s in specs]
    parts, start, pos = [], [], 0
    for b, (_, _, gap) in zip(bitsets, specs, strict=True):
        parts.append(b"\xff" * 4 * gap)  # words that are no bitset's
        pos += gap
        start.append(pos)
        parts.append(b)
        pos += len(b) // 4
    words = np.frombuffer(b"".join(parts) or b"", dtype="<u4")
    values = list(probes) + [s[0][0] for s in specs[:from_inserted]]
    hashes = np.array([hash_plain(v) for v in values], dtype=np.uint64)
    got = might_contain_packed(words, np.array(start, dtype=np.int64),
                               np.array([len(b) // 32 for b in bitsets], dtype=np.int64), hashes)
    assert got.tolist() == (might_contain_any(bitsets, hashes).tolist() if len(hashes) else [False] * len(bitsets))
