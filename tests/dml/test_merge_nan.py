"""MERGE conditions over NaN and -0.0 with Spark's semantics (NaN is the greatest double and
equals NaN; -0.0 = 0.0): DuckDB evaluates them over copies of the rows, never over Arrow
tables it would push the filters into (Arrow: NaN >= 0 is false, NaN = NaN is not true)."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.errors import UserError
from carbonstore.expressions.expr import AlwaysTrue
from carbonstore.segments.dml import scan_rows
from tests.indexfiles.segbuild import add_segments


def _rows(store: Store, name: str) -> list[tuple[Any, ...]]:
    got = scan_rows(store.table(name), AlwaysTrue(), with_rows=True, columns=["id", "w"]).rows
    return sorted((r["id"], r["w"]) for r in got.select(["id", "w"]).to_pylist())


@pytest.fixture
def nan_store(store: Any) -> Store:
    s = Store(store.location, conf=store.conf)
    t = s.create_table("db.t", "id long not null, v double, w string")
    add_segments(t, [pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()),
                               "v": [math.nan, 1.0, -0.0, math.nan], "w": ["a", "b", "c", "d"]})])
    return s


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_merge_condition_on_nan_is_sparks(nan_store: Store) -> None:
    src = pa.table({"id": pa.array([1, 2, 3, 5], pa.int64()),
                    "v": [math.nan, -1.0, math.nan, math.nan]})
    nan_store.table("db.t").merge(
        src, on="t.id = s.id AND s.v >= 0", when_matched_update={"w": "'upd'"},
        when_not_matched_insert={"id": "s.id", "w": "'ins'"})
    # NaN >= 0 is true: ids 1 and 3 match; 2 (-1.0 >= 0 false) and 5 are inserted
    assert _rows(nan_store, "db.t") == [(1, "upd"), (2, "b"), (2, "ins"), (3, "upd"), (4, "d"),
                                        (5, "ins")]


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_merge_matched_condition_and_keys_on_nan(nan_store: Store) -> None:
    src = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": [math.nan, 5.0, 0.0]})
    nan_store.table("db.t").merge(src, on="t.id = s.id",
                                  when_matched_update={"w": "'upd'"},
                                  when_matched_delete="t.v > 1e300")
    # NaN > 1e300: row 1 is deleted; 2 and 3 are updated
    assert _rows(nan_store, "db.t") == [(2, "upd"), (3, "upd"), (4, "d")]
    t = nan_store.table("db.t")
    # -0.0 = 0.0 joins; NaN = NaN joins (so target NaN row 4 matches two NaN source rows)
    t.merge(pa.table({"v": [0.0]}), on="t.v = s.v", when_matched_update={"w": "'zero'"})
    assert _rows(nan_store, "db.t") == [(2, "upd"), (3, "zero"), (4, "d")]
    before = t.status.read().version
    with pytest.raises(UserError, match="more than one source row"):
        t.merge(pa.table({"v": [math.nan, -math.nan]}), on="t.v = s.v",
                when_matched_update={"w": "'nan'"})
    assert t.status.read().version == before
