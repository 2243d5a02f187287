"""Doubles and decimals stored by UPDATE as Spark stores them (no Spark here: the expected
values were taken from Spark 4 itself, e.g. ``cast(0.145D AS decimal(10,2))`` is 0.15, and
``decimal(10,2) / 2`` is a decimal(14,6) quotient rounded half up).

A double reaches a decimal through its Java text (Scala's ``BigDecimal(double)``), so 0.145D
is 0.145 and rounds half up to 0.15; rounding the binary double (0.14499999...) gives 0.14.
Spark divides decimals exactly at its result scale (DuckDB divides them as doubles, which
would round 0.29 / 2 to 0.14 where Spark stores 0.15): the quotient is Spark's."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.errors import UserError
from carbonstore.expressions.expr import AlwaysTrue
from carbonstore.segments.dml import scan_rows
from tests.indexfiles.segbuild import add_segments

PRICES = ["0.29", "1.15", "2.01", "-0.29", "10.05", "4.35"]
DOUBLES = [0.145, 1.005, -0.145, 2.675, 1.115, 0.285]


def _table(tmp_path: Path):  # type: ignore[no-untyped-def]
    t = Store(str(tmp_path / "store")).create_table(
        "db.p", "id long not null, p decimal(10,2), d double, q decimal(10,2)")
    add_segments(t, [pa.table({
        "id": pa.array(range(len(PRICES)), pa.int64()),
        "p": pa.array([Decimal(v) for v in PRICES], pa.decimal128(10, 2)),
        "d": pa.array(DOUBLES, pa.float64()),
        "q": pa.array([None] * len(PRICES), pa.decimal128(10, 2)),
    })])
    return t


def _column(t, name: str) -> list[object]:  # type: ignore[no-untyped-def]
    rows = scan_rows(Store(t.store.location).table("db.p"), AlwaysTrue(), with_rows=True).rows.sort_by("id")
    return rows.column(name).to_pylist()


def _half_up(text: str) -> Decimal:
    from decimal import ROUND_HALF_UP
    return Decimal(text).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def test_a_double_into_a_decimal_column_rounds_its_java_text(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.update({"q": "d"}, where="id >= 0")
    assert _column(t, "q") == [_half_up(repr(v)) for v in DOUBLES]  # 0.15, 1.01, -0.15, 2.68, ...


def test_a_cast_of_a_double_to_decimal_rounds_its_java_text(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.update({"q": "cast(d AS decimal(10,2))"}, where="id >= 0")
    assert _column(t, "q") == [_half_up(repr(v)) for v in DOUBLES]


def test_a_double_quotient_of_a_decimal_is_stored_as_spark_stores_it(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.update({"q": "cast(p AS double) / 2"}, where="id >= 0")
    assert _column(t, "q") == [_half_up(repr(float(v) / 2)) for v in PRICES]  # 0.29 -> 0.15


def _decimals(*values: str) -> list[Decimal]:
    return [Decimal(v) for v in values]


# Spark's values (Spark 4, ANSI): the quotient at Spark's result type (p / 2 of a
# decimal(10,2) is a decimal(14,6): 0.145000), rounded half up into the decimal(10,2) column
@pytest.mark.parametrize(("expr", "want"), [
    ("p / 2", _decimals("0.15", "0.58", "1.01", "-0.15", "5.03", "2.18")),
    ("p / p", _decimals("1.00", "1.00", "1.00", "1.00", "1.00", "1.00")),
    ("id / 2.5", _decimals("0.00", "0.40", "0.80", "1.20", "1.60", "2.00")),
    ("p / 2 + 1", _decimals("1.15", "1.58", "2.01", "0.86", "6.03", "3.18")),
    ("2.5 / (id + 1)", _decimals("2.50", "1.25", "0.83", "0.63", "0.50", "0.42")),
])
def test_a_decimal_division_stores_sparks_quotient(tmp_path: Path, expr: str, want: list[Decimal]) -> None:
    t = _table(tmp_path)
    t.update({"q": expr}, where="id >= 0")
    assert _column(t, "q") == want


def test_a_decimal_division_by_zero_fails_and_changes_nothing(tmp_path: Path) -> None:
    t = _table(tmp_path)
    before = _column(t, "q")
    with pytest.raises(UserError) as err:
        t.update({"q": "p / (id - 2)"}, where="id >= 0")
    assert "\n" not in str(err.value) and "DIVIDE_BY_ZERO" in str(err.value)
    assert _column(t, "q") == before


@pytest.mark.parametrize(("expr", "want"), [
    ("id / 2", [_half_up(repr(i / 2)) for i in range(len(PRICES))]),  # int / int: a double
    ("d / 2.5", [_half_up(repr(v / 2.5)) for v in DOUBLES]),          # a double operand
    ("p * 2", [Decimal(v) * 2 for v in PRICES]),                       # exact either way
])
def test_divisions_spark_makes_doubles_and_decimal_products_still_run(
    tmp_path: Path, expr: str, want: list[Decimal]
) -> None:
    t = _table(tmp_path)
    t.update({"q": expr}, where="id >= 0")
    assert _column(t, "q") == want
