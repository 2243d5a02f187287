"""indexfiles/held.py: a snapshot's held bytes follow its sections and arrays as they come
and go (kept, not summed again on every read)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from carbonstore.indexfiles.held import HeldBytes, held_bytes


def _recount(d: HeldBytes) -> int:
    return sum(held_bytes(v) for v in d.values())


def test_held_follows_every_change() -> None:
    d = HeldBytes()
    d["a"] = np.zeros(10, np.int64)
    d["b"] = np.array([1, 2**70], dtype=object)  # big integers: 32 bytes a value
    d["t"] = pa.table({"x": pa.array(np.arange(100))})
    assert d.held == _recount(d) == 80 + 64 + 800
    d["a"] = np.zeros(3, np.int32)  # replaced
    assert d.held == _recount(d)
    del d["b"]
    assert d.pop("t").num_rows == 100 and d.pop("gone", None) is None
    assert d.held == _recount(d) == 12
    d.clear()
    assert d.held == 0
    with pytest.raises(NotImplementedError):
        d.update(a=np.zeros(1))
    with pytest.raises(KeyError):
        d.pop("gone")
