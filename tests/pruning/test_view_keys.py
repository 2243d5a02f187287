"""A view's segments matched to an index snapshot's first rows as bytes (view_keys.snapshot_holds):
equal exactly when the ids and merge index names are (a null merge name as "")."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.pruning.view_keys import snapshot_holds
from carbonstore.store.arrow_numpy import strings_bytes

_IDS = st.sampled_from(["0", "1", "10", "2.1", "é", ""])
_MERGES = st.one_of(st.none(), st.sampled_from(["", "0_1.merge", "a", "\u00e9.m"]))


def _snapshot(ids: list[str], merges: list[str | None], offset: int, spanned_null: bool) -> Any:
    ids_arr = pa.array(["x"] * offset + ids, pa.string()).slice(offset)
    merge_arr = pa.array([None] * offset + merges, pa.string()).slice(offset)
    if spanned_null and any(m is None for m in merges):  # a null row whose offsets span bytes
        raw = ["zz" if m is None else m for m in merges]
        offs = np.concatenate([[0], np.cumsum([len(m.encode()) for m in raw])]).astype(np.int32)
        valid = np.packbits(np.array([m is not None for m in merges]), bitorder="little")
        merge_arr = pa.Array.from_buffers(pa.string(), len(raw), [
            pa.py_buffer(valid), pa.py_buffer(offs), pa.py_buffer("".join(raw).encode())])
    core = pa.table({"segment": ids_arr, "merge": merge_arr})
    return SimpleNamespace(size=len(ids), core=core)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_IDS, _MERGES), max_size=6), st.integers(0, 2), st.booleans(), st.data())
def test_a_view_is_held_exactly_when_its_keys_are_the_first_rows(
    rows: list[tuple[str, str | None]], offset: int, spanned_null: bool, data: st.DataObject,
) -> None:
    snap = _snapshot([i for i, _ in rows], [m for _, m in rows], offset, spanned_null)
    first = [(i, m or "") for i, m in rows]
    n = data.draw(st.integers(0, len(rows)))
    view = data.draw(st.one_of(st.just(first[:n]), st.lists(st.tuples(_IDS, _MERGES.map(lambda m: m or "")),
                                                            max_size=7)))
    kb = (strings_bytes([i for i, _ in view]), strings_bytes([m for _, m in view]))
    assert snapshot_holds(snap, kb) == (view == first[:len(view)])
