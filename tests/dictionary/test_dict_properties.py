"""Property tests: the sort index and filter translation against brute force on values."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store, Table
from carbonstore.dictionary import add_values, clear_cache, encode_batch, load_dictionary, snapshot
from carbonstore.dictionary import filters as F

# Few letters (some multi-byte) so random prefixes and bounds hit real values.
ALPHABET = st.sampled_from(list("ab\x00zé日😀\uffff"))
TEXT = st.text(alphabet=ALPHABET, max_size=5)
LOADS = st.lists(st.lists(st.one_of(st.none(), TEXT), max_size=25), min_size=1, max_size=4)
SETTINGS = settings(
    max_examples=40, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_counter = iter(range(1_000_000))


def _fresh_table(store: Store) -> Table:
    clear_cache()
    return store.create_table(f"p{next(_counter)}", "s string", properties={"dictionary_include": "s"})


def _b(s: str) -> bytes:
    return s.encode("utf-8")


@SETTINGS
@given(loads=LOADS)
def test_sort_index_matches_python_sorted_on_raw_bytes(store: Store, loads: list[list[str | None]]) -> None:
    table = _fresh_table(store)
    for i, values in enumerate(loads):
        add_values(table, "s", pa.array(values, pa.string()), segment_id=str(i))
    clear_cache()
    d = load_dictionary(table, "s")  # sort index read back from its file
    expected = sorted({v for vs in loads for v in vs if v is not None}, key=_b)
    order, ranks = d.sort_index()
    assert [d.value_of(int(s)) for s in order] == expected
    for rank, s in enumerate(order):
        assert ranks[s - 2] == rank
    assert [d.value_of(int(s)) for s in d.sort_index()[0]] == d.sorted_values().to_pylist()


@SETTINGS
@given(
    loads=LOADS,
    probe=TEXT,
    other=TEXT,
    incl=st.tuples(st.booleans(), st.booleans()),
    in_list=st.lists(st.one_of(st.none(), TEXT), max_size=24),
)
def test_filter_translation_selects_the_same_rows_as_values(
    store: Store, loads: list[list[str | None]], probe: str, other: str,
    incl: tuple[bool, bool], in_list: list[str | None],
) -> None:
    table = _fresh_table(store)
    for i, values in enumerate(loads):
        add_values(table, "s", pa.array(values, pa.string()), segment_id=str(i))
    d = load_dictionary(table, "s")
    rows = [v for vs in loads for v in vs] + [probe + "x", None]  # some rows not loaded
    add_values(table, "s", rows, segment_id="last")
    d = load_dictionary(table, "s")
    surr = encode_batch(pa.record_batch({"s": pa.array(rows, pa.string())}), snapshot(table)).column(0)
    surr_list = surr.to_pylist()

    def rows_where(sset: object) -> list[int]:
        allowed = {int(x) for x in sset}  # type: ignore[attr-defined]
        return [i for i, s in enumerate(surr_list) if s in allowed]

    def expect(pred: object) -> list[int]:
        return [i for i, v in enumerate(rows) if pred(v)]  # type: ignore[operator]

    s = F.eq(d, probe)
    assert rows_where([] if s is None else [s]) == expect(lambda v: v == probe)
    assert rows_where(F.in_(d, in_list)) == expect(lambda v: v is not None and v in in_list)
    assert rows_where(F.is_null(d)) == expect(lambda v: v is None)
    assert rows_where(F.not_null(d)) == expect(lambda v: v is not None)
    lo, hi = sorted([probe, other], key=_b)
    lo_incl, hi_incl = incl

    def in_range(v: str | None) -> bool:
        if v is None:
            return False
        above = _b(v) >= _b(lo) if lo_incl else _b(v) > _b(lo)
        below = _b(v) <= _b(hi) if hi_incl else _b(v) < _b(hi)
        return above and below

    assert rows_where(F.range_(d, lo, lo_incl, hi, hi_incl)) == expect(in_range)
    assert rows_where(F.range_(d, lo, lo_incl, None)) == expect(
        lambda v: v is not None and (_b(v) >= _b(lo) if lo_incl else _b(v) > _b(lo)))
    assert rows_where(F.range_(d, None, True, hi, hi_incl)) == expect(
        lambda v: v is not None and (_b(v) <= _b(hi) if hi_incl else _b(v) < _b(hi)))
    assert rows_where(F.startswith(d, probe)) == expect(lambda v: v is not None and v.startswith(probe))


def test_prefix_upper_bound() -> None:
    assert F.prefix_upper_bound(b"ab") == b"ac"
    assert F.prefix_upper_bound(b"a\xff\xff") == b"b"
    assert F.prefix_upper_bound(b"\xff") is None
    assert F.prefix_upper_bound(b"") is None
