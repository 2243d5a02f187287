"""Doubles stored into decimal columns by UPDATE, against Spark: the store assignment of a
double (``SET q = d``) and ``cast(d AS decimal(p, s))`` take the double's Java text and round
it half up (Scala's ``BigDecimal(double)``), where rounding the binary double differs on
halves (0.145 is 0.14499999999999999 in binary; Spark stores 0.15). A division with a
decimal operand is refused (Spark divides decimals exactly; DuckDB divides them as doubles);
with a double operand Spark divides doubles and both agree."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.expressions.expr import AlwaysTrue
from carbonstore.segments.dml import scan_rows
from tests.indexfiles.segbuild import add_segments

EXPRS = {"q2": "d", "q3": "cast(d AS decimal(12,3))", "q4": "cast(d AS double) / 4",
         "q5": "d * 3 + 0.005D"}
SCHEMA = "id long not null, d double, q2 decimal(12,2), q3 decimal(12,3), q4 decimal(12,2), q5 decimal(12,2)"

# halves at the columns' scales (x.xx5, x.xxx5), plain values, negatives and zeros
_halves = st.integers(-10**7, 10**7).map(lambda n: float(f"{n / 1000:.3f}5"))
_plain = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).map(lambda v: round(v, 4))
_values = st.lists(st.one_of(_halves, _plain, st.sampled_from([0.0, -0.0, 0.005, -0.005, 2.675])),
                   min_size=1, max_size=12)


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(values=_values)
def test_doubles_into_decimals_are_stored_as_spark_stores_them(
    spark: Any, tmp_path_factory: Any, values: list[float]
) -> None:
    root: Path = tmp_path_factory.mktemp("dec")
    t = Store(str(root / "store")).create_table("db.d", SCHEMA)
    ids = pa.array(range(len(values)), pa.int64())
    nulls = {c: pa.array([None] * len(values), pa.decimal128(12, 3 if c == "q3" else 2)) for c in EXPRS}
    add_segments(t, [pa.table({"id": ids, "d": pa.array(values, pa.float64()), **nulls})])
    t.update(EXPRS, where="id >= 0")
    got = scan_rows(Store(t.store.location).table("db.d"), AlwaysTrue(), with_rows=True).rows.sort_by("id")

    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "id long, d double")
    want = frame.selectExpr("id", *(f"cast({e} AS decimal({12},{3 if c == 'q3' else 2})) AS {c}"
                                    for c, e in EXPRS.items())).orderBy("id").collect()
    for c in EXPRS:
        assert got.column(c).to_pylist() == [r[c] for r in want], (c, values)
    assert all(isinstance(v, Decimal) for v in got.column("q2").to_pylist())
