"""The dictionary's order check and gather without pyarrow.compute equal the kernels'."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.dictionary.column import _in_order, ascending

_VALUES = st.one_of(
    st.lists(st.text(max_size=6), max_size=40).map(lambda v: pa.array(v, pa.string())),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40).map(lambda v: pa.array(v, pa.int64())),
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40).map(lambda v: pa.array(v, pa.int32())),
    st.lists(st.floats(allow_nan=True), max_size=40).map(lambda v: pa.array(v, pa.float64())),
    st.lists(st.dates(), max_size=40).map(lambda v: pa.array(v, pa.date32())),
    st.lists(st.datetimes(timezones=st.just(dt.UTC)), max_size=40)
    .map(lambda v: pa.array(v, pa.timestamp("us", tz="UTC"))),
)


def _kernel_ascending(sv: pa.Array) -> bool:
    return len(sv) < 2 or bool(pc.all(pc.less(sv.slice(0, len(sv) - 1), sv.slice(1))).as_py())


@given(values=_VALUES, data=st.data())
@settings(max_examples=300, deadline=None)
def test_order_check_and_gather_equal_the_kernels(values: pa.Array, data: st.DataObject) -> None:
    assert ascending(values) is _kernel_ascending(values)
    # sorted and distinct: the shape of a dictionary's values in order
    distinct = pc.unique(values)
    in_order = distinct.take(pc.sort_indices(distinct))
    assert ascending(in_order) is _kernel_ascending(in_order)
    positions = np.array(data.draw(st.permutations(range(len(values)))), dtype=np.int64)
    assert _in_order(values, positions).equals(values.take(pa.array(positions)))
