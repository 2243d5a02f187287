"""String bounds as numpy fixed-width bytes (``S``): the same answers as Python bytes.

The segment bounds of a string column are read from the index snapshot as fixed-width bytes
(arrow_numpy.fixed_bytes: compared in C, no Python object per segment) when no bound holds a
NUL byte. numpy pads ``S`` values with NULs and drops a literal's trailing NULs, so such
literals compare as Python bytes. These tests compare every answer with the Python-bytes
one: the evaluators on random bounds and literals (NUL bytes, empty strings, prefixes,
long values), and whole plans of a table with its index snapshot against a copy planned from
its merge indexes (whose bounds are Python bytes).
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store, Table
from carbonstore.expressions.bind import bind
from carbonstore.expressions.expr import (
    Eq,
    Expr,
    Gt,
    GtEq,
    In,
    Lt,
    LtEq,
    NotEq,
    NotIn,
    NotStartsWith,
    Or,
    StartsWith,
)
from carbonstore.pruning.all_rows import AllRowsEvaluator
from carbonstore.pruning.cache import clear_cache
from carbonstore.pruning.evaluator import LEVEL_COUNTS, LEVEL_MINMAX, StatsEvaluator, UnitStats
from carbonstore.pruning.plan import prune
from carbonstore.pruning.table_index import (
    read_snapshot,
    readable_segments,
    refresh_index_snapshot,
    table_index,
)
from carbonstore.store.arrow_numpy import fixed_bytes
from carbonstore.store.records import replace
from carbonstore.store.schema import Column, DataType, TableSchema
from tests.indexfiles.segbuild import add_segments

_WORDS = [b"", b"a", b"a\x00", b"a\x00b", b"\x00", b"ab", b"abc", b"abd", b"b", b"\xc3\xa9", b"\xff", b"zz" * 30]


# ---- fixed_bytes --------------------------------------------------------------------------
def test_equal_lengths_are_a_view_of_the_arrow_buffer() -> None:
    arr = pa.array([b"q", b"abcd", b"efgh", b"ijkl"], pa.binary()).slice(1)
    got = fixed_bytes(arr)
    assert got is not None and got.dtype == np.dtype("S4") and got.tolist() == [b"abcd", b"efgh", b"ijkl"]
    assert not got.flags.owndata  # no copy


def test_varied_lengths_and_nulls_are_padded() -> None:
    got = fixed_bytes(pa.chunked_array([pa.array([b"ab", None, b"", b"abc"], pa.binary()).slice(1)]))
    assert got is not None and got.dtype == np.dtype("S3") and got.tolist() == [b"", b"", b"abc"]


@pytest.mark.parametrize("values", [[b"a\x00"], [b"ok", b"\x00b"], [b"x" * 300] + [b"y"] * 10])
def test_not_exact_or_too_wide_gives_none(values: list[bytes]) -> None:
    assert fixed_bytes(pa.array(values, pa.binary())) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=6).map(lambda b: b.replace(b"\x00", b"\x01")), min_size=1, max_size=30))
def test_fixed_bytes_keep_the_values_and_their_order(values: list[bytes]) -> None:
    got = fixed_bytes(pa.array(values, pa.binary()))
    assert got is not None
    assert got.astype(object).tolist() == values
    assert np.argsort(got, kind="stable").tolist() == sorted(range(len(values)), key=lambda i: values[i])


# ---- the evaluators: fixed-width bounds against Python-bytes bounds --------------------------
_REF_SCHEMA = TableSchema(database="db", table="t", columns=(Column(name="x", type=DataType("string")),))
_NUL_FREE = st.sampled_from([w for w in _WORDS if b"\x00" not in w])


@st.composite
def _bounds(draw: st.DrawFn) -> UnitStats:
    n = draw(st.integers(1, 8))
    lo, hi = np.empty(n, dtype=object), np.empty(n, dtype=object)
    lo_ok, hi_ok = np.zeros(n, bool), np.zeros(n, bool)
    for i in range(n):
        a, b = sorted([draw(_NUL_FREE), draw(_NUL_FREE)])
        lo_ok[i], hi_ok[i] = draw(st.integers(0, 4)) > 0, draw(st.integers(0, 4)) > 0
        lo[i], hi[i] = (a if lo_ok[i] else None), (b if hi_ok[i] else None)
    rows = np.full(n, 5, np.int64)
    nulls = np.array(draw(st.lists(st.integers(-1, 5), min_size=n, max_size=n)), np.int64)
    return UnitStats(floating=False, lo=lo, hi=hi, lo_ok=lo_ok, hi_ok=hi_ok, hi_strict=np.zeros(n, bool),
                     null_count=nulls, nan_count=np.zeros(n, np.int64), num_rows=rows,
                     null_unit=np.zeros(n, bool))


_LITERAL = st.sampled_from([w.decode("latin-1") for w in _WORDS] + ["a\x00\x00", "abc\x00"])


@st.composite
def _filter(draw: st.DrawFn) -> Expr:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.sampled_from([In, NotIn]))("x", tuple(draw(st.lists(_LITERAL, min_size=1, max_size=4))))
    if kind == 1:
        return draw(st.sampled_from([StartsWith, NotStartsWith]))("x", draw(_LITERAL))
    leaf = draw(st.sampled_from([Eq, NotEq, Lt, LtEq, Gt, GtEq]))("x", draw(_LITERAL))
    return Or(leaf, draw(_filter())) if kind == 2 else leaf


@settings(max_examples=300, deadline=None)
@given(_bounds(), st.lists(_filter(), min_size=1, max_size=6))
def test_fixed_width_bounds_give_the_python_bytes_answers(stats: UnitStats, filters: list[Expr]) -> None:
    lo = fixed_bytes(pa.array(stats.lo.tolist(), pa.binary()))
    hi = fixed_bytes(pa.array(stats.hi.tolist(), pa.binary()))
    assert lo is not None and hi is not None
    fixed = replace(stats, lo=lo, hi=hi)
    n = stats.size
    for f in filters:
        bound = bind(f, _REF_SCHEMA)
        for level in (LEVEL_COUNTS, LEVEL_MINMAX):
            want = StatsEvaluator(n, lambda ref: replace(stats), level=level).evaluate(bound)
            got = StatsEvaluator(n, lambda ref: fixed, level=level).evaluate(bound)
            assert got.tolist() == want.tolist(), (bound, level)
        want = AllRowsEvaluator(n, lambda ref: replace(stats)).evaluate(bound)
        got = AllRowsEvaluator(n, lambda ref: replace(fixed)).evaluate(bound)
        assert got.tolist() == want.tolist(), bound


# ---- whole plans: snapshot bounds (fixed width where exact) against merge indexes ----------
_SCHEMA = "id long not null, name string, tag string"
_NAMES: list[list[Any]] = [
    ["a", "abc", "zz"], [None, None], ["b" * 60, "b"], ["", "ab"], ["0f3a", "9c2e"], ["\u00e9t\u00e9", "abd"],
]


def _segment(k: int) -> pa.Table:
    names = _NAMES[k]
    tags = ["a\x00b", "a"] if k == 2 else [f"t{k}", f"t{k + 1}"]  # one bound with a NUL byte
    n = len(names)
    return pa.table({"id": pa.array(range(10 * k, 10 * k + n), pa.int64()),
                     "name": pa.array(names, pa.string()), "tag": pa.array(tags[:n] + tags[:1] * (n - 2), pa.string())})


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[Table, Table]:
    root = tmp_path_factory.mktemp("stores")
    t = Store(str(root / "s")).create_table("db.t", _SCHEMA)
    add_segments(t, [_segment(k) for k in range(len(_NAMES))], row_group_size=1, page_rows=1)
    shutil.copytree(t.store.location, root / "copy")
    assert refresh_index_snapshot(t) is not None
    return t, Store(str(root / "copy")).table("db.t")


def test_snapshot_bounds_are_fixed_width_where_exact(tables: tuple[Table, Table]) -> None:
    table, _ = tables
    clear_cache()
    handle = Store(table.store.location).table("db.t")
    view = table_index(handle, readable_segments(handle.status.read()))
    cols = {c.name: c.column_id for c in handle.schema.columns}
    name, tag = view.bounds.columns[cols["name"]], view.bounds.columns[cols["tag"]]
    assert name.lo.dtype.kind == "S" and name.hi.dtype.kind == "S"
    assert name.lo.tolist()[3] == b"" and not name.lo_ok[1]  # an empty min; a segment of nulls
    assert tag.lo.dtype == object  # a bound with a NUL byte: Python bytes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["name", "tag"]), _filter()), min_size=1, max_size=6))
def test_plans_from_fixed_width_bounds_equal_plans_from_merge_indexes(
    tables: tuple[Table, Table], filters: list[tuple[str, Expr]],
) -> None:
    table, copy = tables
    for column, f in filters:
        expr = _renamed(f, column)
        a, b = prune(table, expr).to_json(), prune(copy, expr).to_json()
        del a["planning_ms"], b["planning_ms"]
        assert a == b, expr


def _renamed(f: Expr, column: str) -> Expr:
    if isinstance(f, Or):
        return Or(_renamed(f.left, column), _renamed(f.right, column))
    if isinstance(f, (In, NotIn)):
        return type(f)(column, f.literals)
    if isinstance(f, (StartsWith, NotStartsWith)):
        return type(f)(column, f.prefix)
    return type(f)(column, f.literal)  # type: ignore[call-arg]


def test_a_rewritten_snapshot_keeps_missing_string_bounds_null(tmp_path: Any) -> None:
    """Bounds read as fixed-width bytes hold b"" where a segment has none (only nulls); a
    snapshot written from them (chunks taken from the current one) writes null there, as
    one written from the merge indexes does."""
    t = Store(str(tmp_path / "s")).create_table("db.t", _SCHEMA)
    add_segments(t, [_segment(k) for k in (0, 1, 3)], row_group_size=1, page_rows=1)
    assert refresh_index_snapshot(t) is not None
    add_segments(t, [_segment(4)], row_group_size=1, page_rows=1)
    clear_cache()
    handle = Store(t.store.location).table("db.t")
    view = table_index(handle, readable_segments(handle.status.read()))
    cid = next(c.column_id for c in handle.schema.columns if c.name == "name")
    assert view.snapshot is not None and view.snapshot.bounds.columns[cid].lo.dtype.kind == "S"
    assert refresh_index_snapshot(handle) is not None
    core = read_snapshot(handle)[0].core
    assert core.column(f"bounds.lo:{cid}").to_pylist() == [b"a", None, b"", b"0f3a"]
    assert core.column(f"bounds.hi:{cid}").to_pylist() == [b"zz", None, b"ab", b"9c2e"]
