"""Soundness: every row the oracle matches lies inside the pruning plan.

Random tables (NaN, +-0.0, +-inf, nulls, unicode, extreme ints, decimals, dates, timestamps)
are written by pyarrow with random row group / page sizes, page indexes and bloom filters,
indexed by the index-file layer, and pruned with random predicates. A second property checks
the binding (NOT push-down and literal coercion) against a naive per-row evaluator of the
unbound expression over Python values.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore.expressions.bind import bind
from carbonstore.expressions.expr import (
    And,
    Comparison,
    Eq,
    Expr,
    Gt,
    GtEq,
    In,
    IsNaN,
    IsNotNull,
    IsNull,
    Lt,
    LtEq,
    Not,
    NotEq,
    NotIn,
    Or,
    StartsWith,
)
from carbonstore.indexfiles.arrays import load_arrays
from carbonstore.indexfiles.footer import read_file_index
from carbonstore.indexfiles.packing import pack
from carbonstore.pruning.planner import prune_row_groups
from carbonstore.pruning.rows import evaluate_rows
from carbonstore.store.schema import Column, DataType, TableSchema

_FS = pafs.LocalFileSystem()

# (schema type, arrow type, value strategy)
_UTC = dt.UTC
_SMALL_INT = st.integers(-3, 3)
_SMALL_FLOAT = st.sampled_from([0.0, -0.0, 0.5, -1.5, 1.0, 2.0, math.nan, math.inf, -math.inf])
_SMALL_DEC = st.sampled_from([Decimal("0.00"), Decimal("1.00"), Decimal("1.01"), Decimal("-0.50")])


def _mix(small: st.SearchStrategy[Any], wide: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly small values (edges collide), sometimes the whole domain."""
    return st.one_of(small, small, small, wide)


_Types = dict[str, tuple[DataType, pa.DataType, st.SearchStrategy[Any]]]
_TYPES: _Types = {
    "byte": (DataType("byte"), pa.int8(), _mix(_SMALL_INT, st.integers(-(2**7), 2**7 - 1))),
    "short": (DataType("short"), pa.int16(), _mix(_SMALL_INT, st.integers(-(2**15), 2**15 - 1))),
    "int": (DataType("int"), pa.int32(), _mix(_SMALL_INT, st.integers(-(2**31), 2**31 - 1))),
    "long": (DataType("long"), pa.int64(), _mix(_SMALL_INT, st.integers(-(2**63), 2**63 - 1))),
    "double": (DataType("double"), pa.float64(), _mix(_SMALL_FLOAT, st.floats(allow_nan=True))),
    "float": (DataType("float"), pa.float32(), _mix(_SMALL_FLOAT, st.floats(width=32, allow_nan=True))),
    "dec": (DataType("decimal", 9, 2), pa.decimal128(9, 2), _mix(_SMALL_DEC, st.decimals(
        min_value=Decimal("-9999999.99"), max_value=Decimal("9999999.99"), places=2))),
    "bigdec": (DataType("decimal", 30, 3), pa.decimal128(30, 3), _mix(_SMALL_DEC, st.decimals(
        min_value=Decimal("-1e26"), max_value=Decimal("1e26"), places=3))),
    "string": (DataType("string"), pa.string(), _mix(
        st.sampled_from(["", "a", "ab", "abc", "b", "\U0010ffff", "é", "a\x00"]), st.text(max_size=6))),
    "binary": (DataType("binary"), pa.binary(), _mix(
        st.sampled_from([b"", b"a", b"ab", b"\xff", b"\xff\xff", b"a\xff"]), st.binary(max_size=5))),
    "date": (DataType("date"), pa.date32(), _mix(
        st.dates(dt.date(1969, 12, 30), dt.date(1970, 1, 3)), st.dates())),
    "ts": (DataType("timestamp"), pa.timestamp("us", tz="UTC"), _mix(
        st.datetimes(dt.datetime(1969, 12, 31, 23, 59, 59), dt.datetime(1970, 1, 1, 0, 0, 1),
                     timezones=st.just(_UTC)),
        st.datetimes(timezones=st.just(_UTC)))),
    "ts_ms": (DataType("timestamp"), pa.timestamp("ms"), _mix(
        st.datetimes(dt.datetime(1969, 12, 31, 23, 59, 59), dt.datetime(1970, 1, 1, 0, 0, 1)),
        st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 1, 1)),
    ).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))),
    "bool": (DataType("boolean"), pa.bool_(), st.booleans()),
}


def _schema(names: list[str]) -> TableSchema:
    return TableSchema(
        database="db", table="t",
        columns=tuple(Column(name=n, type=_TYPES[n][0]) for n in names),
    )


@st.composite
def _literal(draw: st.DrawFn, name: str, values: list[Any], types: _Types | None = None) -> Any:
    """A literal near the data: a value, a value nudged by half a step, or an odd type."""
    non_null = [v for v in values if v is not None]
    dtype, _, values_of = (types or _TYPES)[name]
    from_data: bool = bool(non_null) and draw(st.booleans())
    base = draw(st.sampled_from(non_null)) if from_data else draw(values_of)
    if base is None or not draw(st.booleans()):
        return base
    if dtype.is_integral or dtype.name == "decimal":
        return draw(st.sampled_from([
            base + Decimal("0.5"), base - Decimal("0.5"), float(base) + 0.5, base + 1, base - 1,
            Decimal("0.001") + base, 1e30, -1e30, math.inf, -math.inf, math.nan, 2**64, str(base),
        ]))
    if dtype.is_floating:
        f = float(base)
        return draw(st.sampled_from([
            math.nan, -0.0, 0.0, math.inf, -math.inf, 3, Decimal("1.25"),
            math.nextafter(f, math.inf), math.nextafter(f, -math.inf), f + 0.5,
        ]))
    if dtype.name == "date":
        return draw(st.sampled_from([
            dt.datetime(base.year, base.month, base.day, 12), base.isoformat(),
            dt.datetime(base.year, base.month, base.day).isoformat(sep=" "),
        ]))
    if dtype.name == "timestamp":
        return draw(st.sampled_from([
            base.date(), base.replace(tzinfo=None).isoformat(sep=" "), base + dt.timedelta(microseconds=1),
        ]))
    return base


@st.composite
def _predicate(
    draw: st.DrawFn, table: dict[str, list[Any]], depth: int = 0, types: _Types | None = None
) -> Expr:
    """A random predicate over ``table``'s columns, literals near its values; ``types``:
    the column types and value strategies by name (default ``_TYPES``)."""
    types = types or _TYPES
    if depth < 2 and draw(st.integers(0, 4)) == 0:
        kind = draw(st.sampled_from(["and", "or", "not"]))
        left = draw(_predicate(table, depth + 1, types))
        if kind == "not":
            return Not(left)
        right = draw(_predicate(table, depth + 1, types))
        return And(left, right) if kind == "and" else Or(left, right)
    name = draw(st.sampled_from(sorted(table)))
    dtype = types[name][0]
    ops: list[str] = ["cmp", "cmp", "cmp", "in", "notin", "null", "notnull"]
    if dtype.is_floating:
        ops.append("nan")
    if dtype.name in ("string", "binary"):
        ops += ["prefix", "prefix"]
    op = draw(st.sampled_from(ops))
    if op == "null":
        return IsNull(name)
    if op == "notnull":
        return IsNotNull(name)
    if op == "nan":
        return IsNaN(name)
    if op == "prefix":
        non_null = [v for v in table[name] if v]
        from_data: bool = bool(non_null) and draw(st.booleans())
        base = draw(st.sampled_from(non_null)) if from_data else draw(types[name][2])
        cut = draw(st.integers(0, len(base)))
        prefix = base[:cut]
        if isinstance(prefix, bytes) and dtype.name == "string":
            prefix = prefix.decode("utf-8", "ignore")
        return StartsWith(name, prefix)
    if op in ("in", "notin"):
        lits = tuple(draw(st.lists(_literal(name, table[name], types), min_size=1, max_size=4)))
        return In(name, lits) if op == "in" else NotIn(name, lits)
    cls = draw(st.sampled_from([Eq, NotEq, Lt, LtEq, Gt, GtEq]))
    return cls(name, draw(_literal(name, table[name], types)))


@st.composite
def _case(draw: st.DrawFn) -> tuple[dict[str, list[Any]], list[Expr], dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(sorted(_TYPES)), min_size=1, max_size=3, unique=True))
    n = draw(st.integers(0, 60))
    table = {
        name: draw(st.lists(st.none() | _TYPES[name][2], min_size=n, max_size=n)) for name in names
    }
    for name in names:  # sorted runs make min/max and page pruning bite
        if draw(st.booleans()):
            table[name] = sorted(table[name], key=lambda v: (v is None, _sort_key(v)))
    exprs = draw(st.lists(_predicate(table), min_size=1, max_size=25))
    options = {
        "row_group_size": draw(st.integers(1, 25)),
        "max_rows_per_page": draw(st.integers(1, 8)),
        "use_dictionary": draw(st.booleans()),
        "blooms": draw(st.lists(st.sampled_from([n for n in names if n != "bool"] or ["-"]), unique=True)),
        "files": draw(st.integers(1, 2)),
    }
    return table, exprs, options


def _sort_key(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return math.inf
    return v


def _write_and_index(table: pa.Table, options: dict[str, Any], folder: Path, tag: str) -> list[Any]:
    parts = []
    n = table.num_rows
    cut = n // 2 if options["files"] == 2 else n
    pieces = [table.slice(0, cut), table.slice(cut)] if options["files"] == 2 else [table]
    for i, piece in enumerate(pieces):
        path = str(folder / f"{tag}-{i}.parquet")
        blooms = {c: {"ndv": 64, "fpp": 0.05} for c in options["blooms"] if c in piece.column_names}
        pq.write_table(
            piece, path, row_group_size=max(1, options["row_group_size"]),
            max_rows_per_page=options["max_rows_per_page"], write_page_index=True,
            use_dictionary=options["use_dictionary"], bloom_filter_options=blooms or None,
        )
        header, region = pack([read_file_index(_FS, path)])
        parts.append(load_arrays(header, _slicer(region)))
    return parts


def _slicer(region: bytes) -> Callable[[int, int], bytes]:
    return lambda off, ln: region[off : off + ln]


def _to_arrow(table: dict[str, list[Any]]) -> pa.Table:
    return pa.table({name: pa.array(values, type=_TYPES[name][1]) for name, values in table.items()})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case())
def test_every_matching_row_lies_in_the_plan(
    scratch_dir: Path, case: tuple[dict[str, list[Any]], list[Expr], dict[str, Any]]
) -> None:
    data, exprs, options = case
    table = _to_arrow(data)
    schema = _schema(list(data))
    parts = _write_and_index(table, options, scratch_dir, "sound")
    # global row number of each row group's first row, in part/file order
    rg_rows = np.concatenate([p.rg_num_rows for p in parts])
    rg_first = np.concatenate([[0], np.cumsum(rg_rows)])
    assert rg_first[-1] == table.num_rows
    for expr in exprs:
        bound = bind(expr, schema)
        truth = evaluate_rows(bound, table)
        plan = prune_row_groups(bound, parts)
        for row in np.flatnonzero(truth).tolist():
            rg = int(np.searchsorted(rg_first, row, side="right") - 1)
            assert plan.kept[rg], f"row {row} matches {bound} but row group {rg} was dropped"
            within = row - int(rg_first[rg])
            ranges = plan.row_ranges[rg]
            assert ((ranges[:, 0] <= within) & (within < ranges[:, 1])).any(), (
                f"row {row} matches {bound} but lies outside row ranges {ranges.tolist()}"
            )
        c = plan.row_groups
        assert c.total == len(rg_rows)
        assert c.kept + c.dropped_by_counts + c.dropped_by_minmax + c.dropped_by_bloom == c.total
        assert set(plan.row_ranges) == set(np.flatnonzero(plan.kept).tolist())


# ---- the converse: what the statistics exclude is dropped ----------------------------------

# types whose statistics pyarrow writes exactly (no truncation, no NaN, a total order)
_EXACT_STATS = ("byte", "short", "int", "long", "date")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case())
def test_what_the_statistics_exclude_is_pruned(
    scratch_dir: Path, case: tuple[dict[str, list[Any]], list[Expr], dict[str, Any]]
) -> None:
    """A pruner that keeps everything is sound but useless: predicates whose answer is empty
    on a row group whose statistics prove it (beyond the max, below the min, IS NULL without
    nulls, IS NOT NULL over nulls only) must drop that row group."""
    data, _exprs, options = case
    table = _to_arrow(data)
    schema = _schema(list(data))
    parts = _write_and_index(table, options, scratch_dir, "complete")
    rg_rows = np.concatenate([p.rg_num_rows for p in parts])
    rg_first = np.concatenate([[0], np.cumsum(rg_rows)])
    rg_of_row = np.searchsorted(rg_first, np.arange(table.num_rows), side="right") - 1
    for name in data:
        if name not in _EXACT_STATS:
            continue
        is_null = np.array([v is None for v in data[name]], dtype=bool)
        nulls = np.bincount(rg_of_row[is_null], minlength=len(rg_rows))
        rows = rg_rows > 0
        values = [v for v in data[name] if v is not None]
        obligations: list[tuple[Expr, np.ndarray]] = [
            (IsNull(name), rows & (nulls == 0)),
            (IsNotNull(name), rows & (nulls == rg_rows)),
        ]
        if values:
            obligations += [(Gt(name, max(values)), rows), (Lt(name, min(values)), rows)]
        for expr, must_drop in obligations:
            bound = bind(expr, schema)
            truth = evaluate_rows(bound, table)
            assert not (truth & must_drop[rg_of_row]).any()  # the oracle agrees: nothing to find there
            plan = prune_row_groups(bound, parts)
            kept = np.flatnonzero(plan.kept & must_drop).tolist()
            assert not kept, f"{bound} cannot match in row groups {kept}, but they were kept"


# ---- binding against a naive evaluator of the unbound expression ---------------------------


def _num(v: Any, floating: bool) -> Any:
    """A literal in the domain Spark compares it in (documented in docs/pruning.md)."""
    if floating:
        return float(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return v
        return Fraction(Decimal(repr(v)))
    return Fraction(v)


def _naive_cmp(op: type[Comparison], value: Any, lit: Any, dtype: DataType) -> bool | None:
    """Spark semantics on Python values: None for NULL."""
    if lit is None:
        return None
    if (dtype.is_integral and op not in (Eq, NotEq) and isinstance(lit, (int, Decimal))
            and not isinstance(lit, bool) and Decimal(lit).is_finite() and not -(2**63) <= lit <= 2**63 - 1):
        # Spark 4 folds an integral column against an integer beyond the long range to TRUE
        lit_above = lit > 0
        return lit_above == (op in (Lt, LtEq))
    if value is None:
        return None
    if dtype.is_numeric:
        x = float(value) if dtype.is_floating else Fraction(value)
        if not dtype.is_floating and isinstance(lit, float):
            x = float(x)  # Spark compares an integral or decimal column with a double as doubles
            lit = 0.0 if lit == 0 else lit
        y = _num(lit, dtype.is_floating or isinstance(x, float))
        x_nan = isinstance(x, float) and math.isnan(x)
        y_nan = isinstance(y, float) and math.isnan(y)
        if x_nan or y_nan:  # NaN = NaN and NaN is greater than everything
            key_x, key_y = (1 if x_nan else 0), (1 if y_nan else 0)
            if key_x == key_y:
                return op in (Eq, LtEq, GtEq)
            return {Eq: False, NotEq: True, Lt: key_x < key_y, LtEq: key_x < key_y,
                    Gt: key_x > key_y, GtEq: key_x > key_y}[op]
    elif dtype.name == "date":
        x = Fraction((value - dt.date(1970, 1, 1)).days)
        if isinstance(lit, str):  # Spark casts the string to a date: a time of day is cut off
            lit = dt.date.fromisoformat(lit[:10])
        if isinstance(lit, dt.datetime):
            y = Fraction(_micros(lit), 86_400_000_000)
        else:
            y = Fraction((lit - dt.date(1970, 1, 1)).days)
    elif dtype.name == "timestamp":
        if isinstance(lit, str):
            lit = dt.datetime.fromisoformat(lit)
        x, y = _micros(value), _micros(lit)
    elif dtype.name == "string":
        x, y = value.encode(), lit.encode()
    else:
        x, y = value, lit
    return {Eq: x == y, NotEq: x != y, Lt: x < y, LtEq: x <= y, Gt: x > y, GtEq: x >= y}[op]  # type: ignore[no-any-return]


def _micros(v: dt.date | dt.datetime) -> int:
    if not isinstance(v, dt.datetime):
        v = dt.datetime(v.year, v.month, v.day)
    if v.tzinfo is None:
        v = v.replace(tzinfo=_UTC)
    d = v - dt.datetime(1970, 1, 1, tzinfo=_UTC)
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def _naive(expr: Expr, row: dict[str, Any]) -> bool | None:
    if isinstance(expr, And):
        a, b = _naive(expr.left, row), _naive(expr.right, row)
        return False if a is False or b is False else (None if a is None or b is None else True)
    if isinstance(expr, Or):
        a, b = _naive(expr.left, row), _naive(expr.right, row)
        return True if a is True or b is True else (None if a is None or b is None else False)
    if isinstance(expr, Not):
        a = _naive(expr.child, row)
        return None if a is None else not a
    name = expr.term  # type: ignore[attr-defined]
    dtype = _TYPES[name][0]
    value = row[name]
    if isinstance(expr, IsNull):
        return value is None
    if isinstance(expr, IsNotNull):
        return value is not None
    if isinstance(expr, IsNaN):
        return isinstance(value, float) and math.isnan(value)
    if isinstance(expr, StartsWith):
        if value is None:
            return None
        p = expr.prefix.encode() if isinstance(expr.prefix, str) else expr.prefix
        v = value.encode() if isinstance(value, str) else value
        return bool(v.startswith(p))
    if isinstance(expr, (In, NotIn)):
        literals = list(expr.literals)
        if (dtype.is_integral or dtype.name == "decimal") and any(isinstance(v, float) for v in literals):
            # Spark compares the column and every item in their common type, double
            literals = [float(v) if isinstance(v, (int, Decimal)) and not isinstance(v, bool) else v
                        for v in literals]
        hits = [_naive_cmp(Eq, value, lit, dtype) for lit in literals]
        res = True if True in hits else (None if None in hits else False)
        if isinstance(expr, NotIn):
            return None if res is None else not res
        return res
    if not isinstance(expr, Comparison):
        raise TypeError(f"unexpected expression {expr}")
    return _naive_cmp(type(expr), value, expr.literal, dtype)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case())
def test_binding_agrees_with_naive_evaluation(case: tuple[dict[str, list[Any]], list[Expr], dict[str, Any]]) -> None:
    data, exprs, _ = case
    table = _to_arrow(data)
    # round-trip through arrow so values are what the file holds (float32, ms timestamps)
    rows = table.to_pylist()
    schema = _schema(list(data))
    for expr in exprs:
        bound = bind(expr, schema)
        got = evaluate_rows(bound, table)
        want = np.array([_naive(expr, r) is True for r in rows], dtype=bool)
        assert got.tolist() == want.tolist(), f"{expr} bound as {bound}"
