"""Curve keys: the column encodings preserve order, the grid is monotone, Z-order and
Hilbert are bijections of the grid (and Hilbert steps to a neighbouring cell)."""

from __future__ import annotations

import datetime as dt
import itertools
import math
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.errors import CompactionError
from carbonstore.segments.curves import (
    bits_per_column,
    curve_keys,
    encode,
    grid_bounds,
    grid_cells,
    grid_of,
    hilbert,
    zorder,
)

_UTC = dt.UTC


def _double_key(v: float) -> tuple[int, float]:
    """Spark's order of doubles: NaN after every number, -0.0 == 0.0."""
    return (1, 0.0) if math.isnan(v) else (0, v)


# (arrow type, value strategy, sort key of the type's order, strictly monotone)
_CASES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any], Any, bool]] = {
    "byte": (pa.int8(), st.integers(-(2**7), 2**7 - 1), None, True),
    "int": (pa.int32(), st.integers(-(2**31), 2**31 - 1), None, True),
    "long": (pa.int64(), st.integers(-(2**63), 2**63 - 1), None, True),
    "double": (pa.float64(), st.floats(allow_nan=True) | st.sampled_from([0.0, -0.0, math.nan]),
               _double_key, False),  # -0.0 and 0.0 share a code; NaNs share one
    "float": (pa.float32(), st.floats(width=32, allow_nan=True), _double_key, False),
    "dec": (pa.decimal128(9, 2), st.decimals(min_value=Decimal("-9999999.99"),
                                             max_value=Decimal("9999999.99"), places=2),
            None, True),
    "dec18": (pa.decimal128(18, 0), st.decimals(min_value=-(10**18) + 1, max_value=10**18 - 1,
                                                places=0), None, True),
    "bigdec": (pa.decimal128(30, 3), st.decimals(min_value=Decimal("-1e26"),
                                                 max_value=Decimal("1e26"), places=3),
               None, False),  # through the double: monotone, not strict
    "date": (pa.date32(), st.dates(), None, True),
    "ts": (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(_UTC)), None, True),
    "string": (pa.string(), st.text(max_size=12), lambda s: s.encode(), False),  # 8-byte prefix
    "binary": (pa.binary(), st.binary(max_size=12), None, False),
    "bool": (pa.bool_(), st.booleans(), None, True),
}


@settings(max_examples=60, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(_CASES)))
def test_encoding_preserves_order(data: st.DataObject, name: str) -> None:
    arrow_type, values_of, key, strict = _CASES[name]
    values = data.draw(st.lists(values_of | st.none(), min_size=1, max_size=40))
    arr = pa.array(values, type=arrow_type)
    if len(values) > 3:  # slices of an array (non-zero offsets) encode the same
        arr = pa.concat_arrays([pa.array(values[:2], type=arrow_type), arr]).slice(2)
    codes, nulls = encode(arr)
    assert nulls.tolist() == [v is None for v in values]
    present = [(v, int(c)) for v, c in zip(values, codes, strict=True) if v is not None]
    k = key or (lambda v: v)
    for (a, ca), (b, cb) in itertools.product(present, repeat=2):
        if k(a) < k(b):
            assert ca <= cb, f"{a!r} < {b!r} but {ca} > {cb}"
            if strict:
                assert ca < cb
        elif k(a) == k(b):
            assert ca == cb


def test_double_codes_zeros_alike_and_nan_last() -> None:
    codes, _ = encode(pa.array([-0.0, 0.0, math.nan, math.inf, -math.inf, 1.0]))
    assert codes[0] == codes[1]
    assert codes[2] == codes.max() and codes[2] > codes[3]
    assert codes[4] == codes.min()


def test_nested_columns_are_refused() -> None:
    with pytest.raises(CompactionError, match="cannot cluster on a column of type list"):
        encode(pa.array([[1], [2]]))


@settings(max_examples=40, deadline=None)
@given(sample=st.lists(st.integers(0, 50), min_size=1, max_size=200),
       probe=st.lists(st.integers(-5, 60), min_size=1, max_size=50), bits=st.integers(2, 8))
def test_grid_cells_are_monotone_and_in_range(sample: list[int], probe: list[int],
                                              bits: int) -> None:
    codes, _ = encode(pa.array(sample, pa.int64()))
    bounds = grid_bounds(codes, bits)
    values, nulls = encode(pa.array(sorted(probe) + [None], pa.int64()))
    cells = grid_cells(values, nulls, bounds)
    assert cells[-1] == 0  # null
    live = cells[:-1]
    assert (np.diff(live.astype(np.int64)) >= 0).all()
    assert (live >= 1).all() and (live < 1 << bits).all()


@pytest.mark.parametrize(("dims", "bits"), [(2, 1), (2, 3), (2, 5), (3, 2), (3, 3), (4, 2)])
@pytest.mark.parametrize("curve", [zorder, hilbert])
def test_curves_are_bijections_of_the_grid(dims: int, bits: int, curve: Any) -> None:
    grid = np.array(list(itertools.product(range(1 << bits), repeat=dims)), dtype=np.uint64)
    keys = curve([grid[:, d] for d in range(dims)], bits)
    assert sorted(keys.tolist()) == list(range(1 << (bits * dims)))


@pytest.mark.parametrize(("dims", "bits"), [(2, 4), (3, 3), (4, 2)])
def test_hilbert_steps_to_a_neighbour(dims: int, bits: int) -> None:
    grid = np.array(list(itertools.product(range(1 << bits), repeat=dims)), dtype=np.int64)
    keys = hilbert([grid[:, d].astype(np.uint64) for d in range(dims)], bits)
    path = grid[np.argsort(keys)]
    assert (np.abs(np.diff(path, axis=0)).sum(axis=1) == 1).all()


def test_zorder_is_monotone_in_each_column() -> None:
    grid = np.array(list(itertools.product(range(8), repeat=3)), dtype=np.uint64)
    keys = zorder([grid[:, d] for d in range(3)], 3)
    lookup = {tuple(p): k for p, k in zip(grid.tolist(), keys.tolist(), strict=True)}
    for p in lookup:
        for d in range(3):
            if p[d] < 7:
                q = list(p)
                q[d] += 1
                assert lookup[tuple(q)] > lookup[p]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_keys_fit_a_signed_long(n: int) -> None:
    bits = bits_per_column(n)
    assert bits * n <= 63
    top = [np.full(3, (1 << bits) - 1, dtype=np.uint64)] * n
    for curve in (zorder, hilbert):
        assert int(curve(top, bits).max()) < 1 << 63


def test_curve_keys_over_columns() -> None:
    a = pa.array([3, 1, None, 2], pa.int64())
    b = pa.array(["x", "y", "z", None])
    bounds = [grid_of(c, bits_per_column(2)) for c in (a, b)]
    keys = curve_keys([a, b], bounds, "zorder")
    assert keys.dtype == np.int64 and (keys >= 0).all() and len(set(keys.tolist())) == 4
    with pytest.raises(CompactionError, match="unknown curve"):
        curve_keys([a, b], bounds, "peano")  # type: ignore[arg-type]
    with pytest.raises(CompactionError, match="1 to 4 columns"):
        bits_per_column(5)


@pytest.mark.parametrize("curve", ["zorder", "hilbert"])
def test_a_column_with_few_values_still_orders_the_rows(curve: str) -> None:
    """4 values against 10,000: along the curve the 4 values form few runs (unspread, the
    few cells sat in the low bits and every step of the other column changed them)."""
    rng = np.random.default_rng(3)
    few = pa.array(rng.integers(0, 4, 20_000))
    many = pa.array(rng.integers(0, 10_000, 20_000))
    bits = bits_per_column(2)
    bounds = [grid_of(c, bits) for c in (few, many)]
    keys = curve_keys([few, many], bounds, curve)  # type: ignore[arg-type]
    ordered = few.to_numpy()[np.argsort(keys, kind="stable")]
    runs = 1 + int((ordered[1:] != ordered[:-1]).sum())
    assert runs <= 16, runs


@settings(max_examples=30, deadline=None)
@given(dims=st.integers(2, 4), seed=st.integers(0, 2**32 - 1))
def test_compiled_kernels_give_the_numpy_keys(dims: int, seed: int) -> None:
    from carbonstore.segments.curves_native import hilbert_keys, zorder_keys

    bits = bits_per_column(dims)
    cells = np.random.default_rng(seed).integers(0, 1 << bits, (dims, 500)).astype(np.uint64)
    assert (zorder_keys(cells, bits) == zorder(list(cells), bits)).all()
    assert (hilbert_keys(cells, bits) == hilbert(list(cells), bits)).all()


@settings(max_examples=30, deadline=None)
@given(sample=st.lists(st.integers(-50, 50), min_size=1, max_size=300),
       probe=st.lists(st.none() | st.integers(-60, 60), min_size=1, max_size=100),
       bits=st.integers(2, 12))
def test_compiled_cells_give_the_numpy_cells(sample: list[int], probe: list[int | None],
                                             bits: int) -> None:
    from carbonstore.segments.curves_native import cells_of

    grid = grid_of(pa.array(sample, pa.int64()), bits)
    values, nulls = encode(pa.array(probe, pa.int64()))
    want = grid.codes[grid_cells(values, nulls, grid.bounds).astype(np.int64)]
    assert (cells_of(values, nulls, grid.bounds, grid.codes) == want).all()
