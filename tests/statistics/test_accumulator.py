"""Column statistics: exact numbers against pyarrow.compute, HLL accuracy, merging, round trips."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datasketches import hll_sketch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore.errors import CorruptMetadataError, UserError
from carbonstore.statistics import hll, hll_native
from carbonstore.statistics.accumulator import StatsAccumulator
from carbonstore.statistics.model import (
    DEFAULT_LG_K,
    SKETCH_TYPE,
    BinaryColumnStatistics,
    BooleanColumnStatistics,
    DateColumnStatistics,
    DecimalColumnStatistics,
    DoubleColumnStatistics,
    LongColumnStatistics,
    SegmentStatistics,
    StatisticsScope,
    StringColumnStatistics,
    TableStatistics,
    TimestampColumnStatistics,
    kind_of,
    merge_segments,
)

SCOPE = StatisticsScope(table="default.t", segment_id="0")
RNG_SEED = 20240611


def mixed_table(n: int, seed: int = RNG_SEED) -> pa.Table:
    """Every type family, with nulls, NaNs, infinities, empty strings, multi-byte chars."""
    rng = np.random.default_rng(seed)
    mask = rng.random(n) < 0.1
    d = rng.normal(size=n) * 1000
    d[rng.random(n) < 0.05] = np.nan
    d[: min(n, 2)] = [np.inf, -np.inf][: min(n, 2)]
    words = np.array(["", "a", "bé", "ça va", "日本語", "zz" * 20])
    strings = words[rng.integers(0, len(words), n)].astype(object) + rng.integers(0, 50, n).astype(str)
    return pa.table({
        "b": pa.array(rng.random(n) < 0.3, mask=mask),
        "by": pa.array(rng.integers(-128, 128, n).astype(np.int8), mask=mask),
        "i": pa.array(rng.integers(-(2**31), 2**31 - 1, n).astype(np.int32), mask=mask),
        "l": pa.array(rng.integers(-(2**62), 2**62, n), mask=mask),
        "f": pa.array(d.astype(np.float32), mask=mask),
        "d": pa.array(d, mask=mask),
        "s": pa.array(strings.tolist(), pa.string(), mask=mask),
        "bin": pa.array([s.encode() for s in strings.tolist()], pa.binary(), mask=mask),
        "dt": pa.array(rng.integers(-1000, 20000, n).astype(np.int32), pa.int32(), mask=mask)
        .cast(pa.date32()),
        "ts": pa.array(rng.integers(0, 2**50, n), pa.int64(), mask=mask)
        .cast(pa.timestamp("us", tz="UTC")),
        "dec": pa.array(
            [Decimal(int(v)).scaleb(-2) for v in rng.integers(-(10**12), 10**12, n)],
            pa.decimal128(18, 2), mask=mask,
        ),
    })


def accumulate(table: pa.Table, chunk: int = 1000) -> SegmentStatistics:
    acc = StatsAccumulator(table.schema)
    for batch in table.to_batches(max_chunksize=chunk):
        acc.update(batch)
    return acc.finish(SCOPE)


def check_exact(stats: SegmentStatistics, table: pa.Table) -> None:
    """Every exact statistic equals what pyarrow.compute says about the same data."""
    assert stats.row_count == table.num_rows
    for c in stats.columns:
        col = table.column(c.column)
        assert c.num_nulls == col.null_count, c.column
        if isinstance(c, BooleanColumnStatistics):
            assert c.num_trues == (pc.sum(col).as_py() or 0)
            assert c.num_falses == pc.sum(pc.invert(col)).as_py() or 0
        if isinstance(c, DoubleColumnStatistics):
            nan = pc.is_nan(col)
            assert c.num_nans == (pc.sum(nan).as_py() or 0)
            finite = pc.filter(col, pc.invert(pc.fill_null(nan, True)))
            if len(finite):
                assert c.low_value == pc.min(finite).as_py()
                assert c.high_value == pc.max(finite).as_py()
            else:
                assert c.low_value is None and c.high_value is None
        elif isinstance(c, LongColumnStatistics | DateColumnStatistics | DecimalColumnStatistics
                        | TimestampColumnStatistics):
            assert c.low_value == pc.min(col).as_py()
            assert c.high_value == pc.max(col).as_py()
        if isinstance(c, StringColumnStatistics | BinaryColumnStatistics):
            lengths = pc.utf8_length(col) if c.kind == "string" else pc.binary_length(col)
            non_null = len(col) - col.null_count
            assert c.max_col_len == (pc.max(lengths).as_py() or 0)
            expect_avg = (pc.sum(lengths).as_py() or 0) / non_null if non_null else 0.0
            assert c.avg_col_len == pytest.approx(expect_avg, rel=1e-12)
        if hasattr(c, "num_dvs"):
            exact = pc.count_distinct(col).as_py()
            assert abs(c.num_dvs - exact) <= max(1, 0.02 * exact), (c.column, c.num_dvs, exact)


@pytest.mark.parametrize("n", [1, 7, 1000, 20000])
def test_exact_statistics_match_pyarrow_compute(n: int) -> None:
    table = mixed_table(n)
    stats = accumulate(table, chunk=333)
    check_exact(stats, table)
    kinds = {c.column: c.kind for c in stats.columns}
    assert kinds == {
        "b": "boolean", "by": "long", "i": "long", "l": "long", "f": "double", "d": "double",
        "s": "string", "bin": "binary", "dt": "date", "ts": "timestamp", "dec": "decimal",
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
                    max_size=60),
    chunk=st.integers(1, 20),
)
def test_double_statistics_property(values: list[float | None], chunk: int) -> None:
    table = pa.table({"d": pa.array(values, pa.float64())})
    stats = accumulate(table, chunk=chunk)
    check_exact(stats, table)
    c = stats.column("d")
    assert c.low_value is None or not math.isnan(c.low_value)
    assert c.high_value is None or not math.isnan(c.high_value)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=60),
       chunk=st.integers(1, 20))
def test_string_statistics_property(values: list[str | None], chunk: int) -> None:
    table = pa.table({"s": pa.array(values, pa.string())})
    stats = accumulate(table, chunk=chunk)
    check_exact(stats, table)


def test_all_null_and_empty_columns() -> None:
    table = pa.table({"l": pa.nulls(5, pa.int64()), "s": pa.nulls(5, pa.string()),
                      "b": pa.nulls(5, pa.bool_())})
    stats = accumulate(table)
    assert stats.column("l") == LongColumnStatistics(
        column="l", type="long", scope=SCOPE, last_analyzed=stats.column("l").last_analyzed,
        num_nulls=5, low_value=None, high_value=None, num_dvs=0)
    assert stats.column("s").max_col_len == 0  # type: ignore[attr-defined]
    assert stats.column("b").num_trues == 0  # type: ignore[attr-defined]
    empty = StatsAccumulator(table.schema).finish(SCOPE)
    assert empty.row_count == 0 and all(c.num_nulls == 0 for c in empty.columns)


def test_only_nan_has_no_bounds() -> None:
    stats = accumulate(pa.table({"d": [math.nan, math.nan, None]}))
    c = stats.column("d")
    assert (c.low_value, c.high_value, c.num_nans, c.num_nulls, c.num_dvs) == (  # type: ignore[attr-defined]
        None, None, 2, 1, 1)


@pytest.mark.parametrize("ndv", [10, 10_000, 1_000_000])
@pytest.mark.parametrize("kind", ["long", "double", "string"])
def test_num_dvs_within_two_percent(ndv: int, kind: str) -> None:
    rng = np.random.default_rng(ndv)
    n = max(ndv, 100_000)
    values = rng.permutation(np.arange(ndv) * 7919 - 10**9)
    values = np.concatenate([values, values[rng.integers(0, ndv, n - ndv)]]) if n > ndv else values
    arr: pa.Array
    if kind == "long":
        arr = pa.array(values)
    elif kind == "double":
        arr = pa.array(values / 3.0)
    else:
        if ndv == 1_000_000:
            values = values[:300_000]  # strings cost more to build: a 3 x 10^5 slice
        arr = pa.array(values.astype(str))
    table = pa.table({"c": arr})
    exact = pc.count_distinct(arr).as_py()
    stats = accumulate(table, chunk=65536)
    got = stats.column("c").num_dvs  # type: ignore[attr-defined]
    assert abs(got - exact) <= 0.02 * exact, (got, exact)
    if exact <= 1000:
        assert got == exact  # the sketch's list/set modes are exact at small counts


def _keys(kind: str, n: int, ndv: int) -> pa.Array:
    rng = np.random.default_rng(3)
    values = rng.integers(0, ndv, n)
    if kind == "long":
        return pa.array(values * 104729 - 10**12)
    if kind == "double":
        d = values / 7.0
        d[values % 1000 == 0] = -0.0
        d[values % 997 == 0] = np.nan
        return pa.array(d)
    words = np.array(["", "a", "é", "日本語", "x" * 15, "y" * 16, "z" * 17, "w" * 40])
    return pa.array(np.char.add(words[values % len(words)], values.astype(str)))


@pytest.mark.parametrize("kind", ["long", "double", "string"])
@pytest.mark.parametrize("ndv", [3, 2000, 60_000])
@pytest.mark.parametrize("batch_rows", [16384, 150_000])
@pytest.mark.parametrize("native", [True, False], ids=["compiled", "numpy"])
def test_sketch_matches_plain_value_by_value_updates(
    kind: str, ndv: int, batch_rows: int, native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dedup per batch and the hashed pre-filter (compiled or numpy) give the sketch a plain
    loop gives (small batches, and batches long enough to warm the sketch up on a prefix)."""
    monkeypatch.setattr(hll, "_native_module", hll_native if native else None)
    keys = _keys(kind, 200_000, ndv)
    acc = StatsAccumulator(pa.schema([("c", keys.type)]))
    for batch in pa.table({"c": keys}).to_batches(max_chunksize=batch_rows):
        acc.update(batch)
    plain = hll_sketch(DEFAULT_LG_K, SKETCH_TYPE)
    for v in keys.to_pylist():
        plain.update(v if v != "" else -1)  # "" counts as the int64 -1 (DataSketches skips "")
    stats = acc.finish(SCOPE)
    assert hll_sketch.deserialize(stats.sketches["c"]).get_estimate() == pytest.approx(
        plain.get_estimate(), rel=1e-9)


def test_empty_string_is_a_distinct_value() -> None:
    stats = accumulate(pa.table({"s": ["", "", "a", None]}))
    assert stats.column("s").num_dvs == 2  # type: ignore[attr-defined]


def test_tasks_merge_equals_one_pass() -> None:
    table = mixed_table(9000, seed=5)
    whole = accumulate(table)
    parts = [table.slice(0, 2000), table.slice(2000, 4000), table.slice(6000)]
    states = []
    for part in parts:
        acc = StatsAccumulator(table.schema)
        for b in part.to_batches(max_chunksize=700):
            acc.update(b)
        states.append(acc.to_bytes())
    merged = StatsAccumulator.merge_all([*states, None], table.schema).finish(
        SCOPE, last_analyzed=whole.last_analyzed)
    check_exact(merged, table)
    for a, b in zip(whole.columns, merged.columns, strict=True):
        if hasattr(a, "num_dvs"):
            assert abs(a.num_dvs - b.num_dvs) <= 0.02 * a.num_dvs
            a = dataclasses.replace(a, num_dvs=0)  # type: ignore[call-arg]
            b = dataclasses.replace(b, num_dvs=0)  # type: ignore[call-arg]
        if isinstance(a, StringColumnStatistics | BinaryColumnStatistics):
            assert a.avg_col_len == pytest.approx(b.avg_col_len, rel=1e-12)
            b = dataclasses.replace(b, avg_col_len=a.avg_col_len)
        assert a == b


def test_table_level_num_dvs_is_a_union_of_overlapping_segments() -> None:
    rng = np.random.default_rng(11)
    # three segments of 300k rows whose value ranges overlap by half
    segs = [pa.table({"k": rng.integers(s * 200_000, s * 200_000 + 400_000, 300_000),
                      "s": pa.array(rng.integers(s * 20_000, s * 20_000 + 40_000, 300_000)
                                    .astype(str))})
            for s in range(3)]
    stats = []
    for i, t in enumerate(segs):
        acc = StatsAccumulator(t.schema)
        for b in t.to_batches(max_chunksize=65536):
            acc.update(b)
        stats.append(acc.finish(StatisticsScope(table="default.t", segment_id=str(i))))
    table = merge_segments(stats, table="default.t", snapshot_version="v1")
    whole = pa.concat_tables(segs)
    for name in ("k", "s"):
        exact = pc.count_distinct(whole.column(name)).as_py()
        summed = sum(s.column(name).num_dvs for s in stats)  # type: ignore[attr-defined]
        got = table.column(name).num_dvs  # type: ignore[attr-defined]
        assert abs(got - exact) <= 0.02 * exact, (name, got, exact)
        assert summed > 1.1 * exact  # a sum would be far off: the union matters
    assert table.row_count == 900_000
    assert table.column("k").num_nulls == 0
    assert table.column("k").low_value == pc.min(whole.column("k")).as_py()  # type: ignore[attr-defined]
    assert table.column("k").high_value == pc.max(whole.column("k")).as_py()  # type: ignore[attr-defined]
    assert table.column("s").scope.is_table_level


def test_table_merge_exact_fields() -> None:
    t = mixed_table(3000, seed=9)
    stats = [
        StatsAccumulator(t.schema).finish(StatisticsScope(table="default.t", segment_id="9"))
    ]  # an empty segment takes part without changing anything
    for i, (start, length) in enumerate([(0, 1000), (1000, 1500), (2500, 500)]):
        acc = StatsAccumulator(t.schema)
        acc.update(t.slice(start, length))
        stats.append(acc.finish(StatisticsScope(table="default.t", segment_id=str(i))))
    merged = merge_segments(stats, table="default.t", snapshot_version="v")
    as_segment = SegmentStatistics(table="default.t", segment_id="all", row_count=merged.row_count,
                                   columns=merged.columns)
    check_exact(as_segment, t)


def test_segment_statistics_round_trip() -> None:
    stats = accumulate(mixed_table(500))
    data = stats.to_bytes()
    back = SegmentStatistics.from_bytes(data)
    assert back == stats
    assert back.sketches == stats.sketches
    assert isinstance(back.column("ts").low_value, dt.datetime)  # type: ignore[attr-defined]
    assert isinstance(back.column("dec").low_value, Decimal)  # type: ignore[attr-defined]
    assert isinstance(back.column("dt").low_value, dt.date)  # type: ignore[attr-defined]
    assert back.column("d").low_value == -math.inf  # type: ignore[attr-defined]
    assert back.column("d").high_value == math.inf  # type: ignore[attr-defined]
    merged = merge_segments([stats, back], table="default.t", snapshot_version="v")
    assert TableStatistics.from_json(merged.to_json()) == merged


def test_accumulator_round_trip_keeps_state() -> None:
    t = mixed_table(800)
    acc = StatsAccumulator(t.schema)
    acc.update(t)
    again = StatsAccumulator.from_bytes(acc.to_bytes()).finish(SCOPE, last_analyzed=1)
    first = acc.finish(SCOPE, last_analyzed=1)
    assert again.columns == first.columns and again.row_count == first.row_count
    assert again.sketches.keys() == first.sketches.keys()
    for name, data in first.sketches.items():  # same registers (the byte layout may differ)
        assert hll_sketch.deserialize(again.sketches[name]).get_estimate() == \
            hll_sketch.deserialize(data).get_estimate()


@pytest.mark.parametrize("data", [b"", b"{", b'{"table": 1}', b"[]"])
def test_corrupt_statistics_are_reported(data: bytes) -> None:
    with pytest.raises(CorruptMetadataError, match="statistics"):
        SegmentStatistics.from_bytes(data, path="x.stats")
    with pytest.raises(CorruptMetadataError, match="accumulator"):
        StatsAccumulator.from_bytes(data)


def test_columns_subset_and_errors() -> None:
    t = mixed_table(10)
    acc = StatsAccumulator(t.schema, columns=["S", "l"])
    acc.update(t)
    assert [c.column for c in acc.finish(SCOPE).columns] == ["l", "s"]
    with pytest.raises(UserError, match="unknown column"):
        StatsAccumulator(t.schema, columns=["nope"])
    with pytest.raises(UserError, match="one segment"):
        acc.finish(StatisticsScope(table="default.t"))
    with pytest.raises(UserError, match="no column statistics"):
        kind_of("map<string,int>")
    other = StatsAccumulator(t.schema, columns=["l"])
    with pytest.raises(UserError, match="different column sets"):
        acc.merge(other)


def test_missing_batch_column_counts_as_null() -> None:
    acc = StatsAccumulator(pa.schema([("a", pa.int64()), ("b", pa.string())]))
    acc.update(pa.record_batch({"A": [1, 2, 3]}))
    stats = acc.finish(SCOPE)
    assert stats.column("a").num_nulls == 0 and stats.column("b").num_nulls == 3


def test_dictionary_surrogates_for_a_string_column() -> None:
    """A global-dictionary column arrives as INT32 surrogates; 1 stands for null."""
    from carbonstore.store.schema import parse_schema_string

    acc = StatsAccumulator(parse_schema_string("name string"))
    acc.update(pa.record_batch({"name": pa.array([1, 2, 3, 3, None, 2], pa.int32())}))
    c = acc.finish(SCOPE).column("name")
    assert isinstance(c, StringColumnStatistics)
    assert (c.num_nulls, c.num_dvs, c.max_col_len, c.avg_col_len) == (2, 2, None, None)


@pytest.mark.parametrize("seg_us", [-62135596800 * 1_000_000 - 1, 253402300800 * 1_000_000,
                                    9223372036854775807, -9223372036854775807])
def test_timestamps_and_dates_beyond_years_1_to_9999_give_unknown_bounds(seg_us: int) -> None:
    """pyarrow holds timestamps to year 294247 and dates far beyond; a load of such values
    crashed here (datetime cannot hold them). Their bounds are unknown for the segment -
    never the narrower range of the values datetime can hold, which would prune rows."""
    from carbonstore.statistics.model import merge_column

    acc = StatsAccumulator([("ts", "timestamp"), ("day", "date")])
    acc.update(pa.table({"ts": pa.array([0, 10], pa.timestamp("us", tz="UTC")),
                         "day": pa.array([1, 2], pa.date32())}))
    other = StatsAccumulator([("ts", "timestamp"), ("day", "date")])
    other.update(pa.table({"ts": pa.array([seg_us], pa.timestamp("us", tz="UTC")),
                           "day": pa.array([3_000_000], pa.date32())}))
    merged = StatsAccumulator.from_bytes(acc.to_bytes()).merge(
        StatsAccumulator.from_bytes(other.to_bytes()))
    stats = merged.finish(StatisticsScope(table="db.t", segment_id="0"))
    assert [(c.low_value, c.high_value) for c in stats.columns] == [(None, None), (None, None)]
    alone = acc.finish(StatisticsScope(table="db.t", segment_id="0"))
    assert alone.columns[0].low_value == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert alone.columns[1].high_value == dt.date(1970, 1, 3)
    # Segments merged into table statistics: one without bounds makes them unknown.
    for i in (0, 1):
        col, _ = merge_column([(alone.columns[i], 2, None), (stats.columns[i], 3, None)],
                              StatisticsScope(table="db.t"))
        assert (col.low_value, col.high_value) == (None, None), col
