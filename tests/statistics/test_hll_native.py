"""The compiled HLL kernels hash every key as the numpy implementation (and DataSketches) do."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from datasketches import hll_sketch, tgt_hll_type
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.statistics import hll, hll_native
from carbonstore.statistics.model import DEFAULT_LG_K, SKETCH_TYPE


def _native_slots(keys: pa.Array, lg_k: int) -> tuple[np.ndarray, np.ndarray]:
    if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
        return hll_native.slots_ranks_strings(*hll._string_buffers(keys), lg_k)
    words, doubles = hll._words(keys)
    return hll_native.slots_ranks_words(words, lg_k, doubles)


def _assert_same_slots(keys: pa.Array, lg_k: int = DEFAULT_LG_K) -> None:
    got_slot, got_rank = _native_slots(keys, lg_k)
    want_slot, want_rank = hll.key_slots_numpy(keys, lg_k)
    np.testing.assert_array_equal(got_slot, want_slot)
    np.testing.assert_array_equal(got_rank, want_rank)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=70), min_size=1, max_size=60), st.integers(0, 59),
       st.booleans())
def test_strings_hash_like_numpy(values: list[str], start: int, large: bool) -> None:
    """Every length around the 8- and 16-byte blocks, multi-byte UTF-8, slices, and the
    strings at the very end of the buffer (no whole word after them)."""
    arr = pa.array(values, type=pa.large_string() if large else pa.string())
    _assert_same_slots(arr.slice(min(start, len(values) - 1)))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=200),
       st.integers(4, 21))
def test_longs_hash_like_numpy(values: list[int], lg_k: int) -> None:
    _assert_same_slots(pa.array(values, type=pa.int64()), lg_k)


def test_doubles_hash_like_numpy() -> None:
    d = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-310, 1.5, -2.25e300])
    _assert_same_slots(pa.array(np.concatenate([d, np.random.default_rng(1).normal(size=5000)])))


def test_unaligned_string_buffer_is_hashed_like_numpy() -> None:
    values = ["", "a", "abcdefgh", "abcdefghi", "é" * 9, "x" * 33]
    good = pa.array(values)
    raw = np.frombuffer(good.buffers()[2], dtype=np.uint8)
    shifted = np.zeros(len(raw) + 1, dtype=np.uint8)[1:]  # an odd address
    shifted[:] = raw
    odd = pa.StringArray.from_buffers(len(values), good.buffers()[1], pa.py_buffer(shifted))
    assert np.frombuffer(odd.buffers()[2], dtype=np.uint8).ctypes.data % 8 != 0
    _assert_same_slots(odd)


@pytest.mark.parametrize("keys", [
    pa.array(np.random.default_rng(2).integers(0, 50_000, 200_000)),
    pa.array(np.random.default_rng(2).normal(size=200_000)),
    pa.array(np.char.add("k", np.random.default_rng(3).integers(0, 50_000, 200_000).astype(str))),
])
def test_compiled_update_is_datasketches_hll8_byte_for_byte(keys: pa.Array) -> None:
    """Registers, HIP estimator and KxQ sums after the compiled update are the bytes a
    DataSketches HLL_8 sketch fed every key holds."""
    plain = hll_sketch(DEFAULT_LG_K, tgt_hll_type.HLL_8)
    values = keys.to_pylist()
    for v in values[:30_000]:  # past list and set modes into HLL mode
        plain.update(v)
    image = bytes(plain.serialize_updatable())
    registers = np.frombuffer(image, np.uint8, offset=40).copy()
    state = np.array(struct.unpack_from("<3d", image, 8))
    rest = keys.slice(30_000)
    raised = hll.hll_update(rest, registers, state)
    for v in values[30_000:]:
        plain.update(v)
    want = bytes(plain.serialize_updatable())
    assert 0 < raised < len(rest)
    assert registers.tobytes() == want[40:]
    assert struct.pack("<3d", *state.tolist()) == want[8:32]


def test_numpy_filter_keeps_every_key_that_raises_a_register() -> None:
    keys = pa.array(np.random.default_rng(2).integers(0, 50_000, 200_000))
    registers = np.zeros(1 << DEFAULT_LG_K, dtype=np.uint8)
    keep = hll.raise_registers(keys, registers)
    slot, rank = hll.key_slots_numpy(keys, DEFAULT_LG_K)
    replay = np.zeros_like(registers)
    for s, r, k in zip(slot.tolist(), rank.tolist(), keep.tolist(), strict=True):
        if r > replay[s]:
            assert k
            replay[s] = r
    np.testing.assert_array_equal(registers, replay)


def test_kept_keys_give_the_sketch_every_key_gives() -> None:
    keys = pa.array(np.char.add("v", np.random.default_rng(4).integers(0, 10**6, 300_000)
                                .astype(str)))
    plain = hll_sketch(DEFAULT_LG_K, SKETCH_TYPE)
    for v in keys.to_pylist():
        plain.update(v)
    fed = hll_sketch(DEFAULT_LG_K, SKETCH_TYPE)
    warm = keys.slice(0, 50_000)  # past list and set modes into HLL mode
    for v in warm.to_pylist():
        fed.update(v)
    registers = np.zeros(1 << DEFAULT_LG_K, dtype=np.uint8)
    np.maximum.at(registers, *hll.key_slots(warm, DEFAULT_LG_K))
    rest = keys.slice(50_000)
    kept = rest.filter(pa.array(hll.raise_registers(rest, registers)))
    assert len(kept) < len(rest) // 10
    for v in kept.to_pylist():
        fed.update(v)
    assert fed.get_estimate() == plain.get_estimate()
