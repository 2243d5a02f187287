"""Doubles stored into decimal columns by UPDATE, against Spark: the store assignment of a
double (``SET q = d``) and ``cast(d AS decimal(p, s))`` take the double's Java text and round
it half up (Scala's ``BigDecimal(double)``), where rounding the binary double differs on
halves (0.145 is 0.14499999999999999 in binary; Spark stores 0.15). A division with a
decimal operand is Spark's exact quotient at Spark's result scale (DuckDB would divide
doubles); with a double operand Spark divides doubles and both agree."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
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


# ---- decimal arithmetic past 38 digits: Spark's result type and value ------------------------
# Spark types decimal(p1,s1) + decimal(p2,s2) as decimal(max(p1-s1, p2-s2) + max(s1,s2) + 1,
# max(s1,s2)) and, past 38 digits, keeps the integer digits and lowers the scale (to no less
# than min(scale, 6)), rounding half up; a value the type cannot hold fails (ANSI). DuckDB
# keeps its own scale (decimal(38,10) + decimal(38,10) is DECIMAL(38,10) there): every such
# expression must store Spark's text, or fail where Spark fails.

def _decimal_type() -> st.SearchStrategy[tuple[int, int]]:
    return st.integers(1, 38).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p)))


def _decimal_value(p: int, s: int) -> st.SearchStrategy[Decimal | None]:
    def exact(n: int) -> Decimal:  # n units of the scale, exactly (no context rounding)
        return Decimal(f"{n}E-{s}")

    top = exact(10 ** p - 1)  # the extremes: every digit a 9
    return st.one_of(st.none(), st.sampled_from([top, exact(1 - 10 ** p), exact(1), exact(-1), exact(0),
                                                 exact((10 ** p - 1) // 2)]),
                     st.integers(-(10 ** p - 1), 10 ** p - 1).map(exact))


_OPERAND = st.sampled_from(["x", "y", "x", "y", "n", "l", "7", "-3", "123456789012", "0.5",
                            "12.345", "(x * y)", "(x + n)", "(y - 1)"])
_OP = st.sampled_from(["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} % {b}", "pmod({a}, {b})",
                       "{a} / {b}", "{a} div {b}"])


@st.composite
def _arithmetic(draw: Any) -> str:
    a, b = draw(_OPERAND), draw(_OPERAND)
    if not ({"x", "y"} & set(a + b)):
        a = "x"
    return str(draw(_OP)).format(a=a, b=b)


@st.composite
def _case(draw: Any) -> tuple[tuple[int, int], tuple[int, int], list[tuple[Any, ...]], list[str]]:
    tx, ty = draw(_decimal_type()), draw(_decimal_type())
    rows = draw(st.lists(st.tuples(
        _decimal_value(*tx), _decimal_value(*ty),
        st.none() | st.sampled_from([0, 1, -1, 2**31 - 1, -2**31]) | st.integers(-1000, 1000),
        st.none() | st.sampled_from([0, -1, 2**63 - 1, -2**63]) | st.integers(-10**12, 10**12)),
        min_size=1, max_size=5))
    return tx, ty, rows, draw(st.lists(_arithmetic(), min_size=2, max_size=4))


def _arithmetic_test(n: int) -> Any:
    @settings(max_examples=n, deadline=None, derandomize=n < 100,
              database=None if n < 100 else settings.default.database,
              phases=[Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if n >= 100 else []),
              suppress_health_check=list(HealthCheck))
    @given(case=_case())
    def run(spark: Any, tmp_path_factory: Any, case: Any) -> None:
        from carbonstore.errors import UserError

        (p1, s1), (p2, s2), rows, exprs = case
        schema = f"id long, x decimal({p1},{s1}), y decimal({p2},{s2}), n int, l long"
        data = [(k, *r) for k, r in enumerate(rows)]
        spark.createDataFrame(data, schema).createOrReplaceTempView("dec_arith")
        root: Path = tmp_path_factory.mktemp("arith")
        t = Store(str(root / "store")).create_table("db.a", schema.replace("id long", "id long not null")
                                                    + ", v string")
        add_segments(t, [pa.table({
            "id": pa.array(range(len(rows)), pa.int64()),
            "x": pa.array([r[0] for r in rows], pa.decimal128(p1, s1)),
            "y": pa.array([r[1] for r in rows], pa.decimal128(p2, s2)),
            "n": pa.array([r[2] for r in rows], pa.int32()),
            "l": pa.array([r[3] for r in rows], pa.int64()),
            "v": pa.array([None] * len(rows), pa.string())})])
        for expr in exprs:
            what = f"{expr} over x decimal({p1},{s1}), y decimal({p2},{s2}): {rows}"
            try:
                want = [r[0] for r in spark.sql(f"SELECT cast({expr} AS string) FROM dec_arith "
                                                "ORDER BY id").collect()]
            except Exception:  # noqa: BLE001 - Spark fails the statement (overflow, ANSI)
                want = None
            before = t.status.read().version
            try:
                t.update({"v": f"cast({expr} AS string)"}, where="id >= 0")
            except UserError as err:
                assert "\n" not in str(err)
                assert t.status.read().version == before
                assert want is None, f"refused ({err}) where Spark stores {want}: {what}"
                continue
            assert want is not None, f"Spark fails, we stored: {what}"
            got = scan_rows(Store(t.store.location).table("db.a"), AlwaysTrue(),
                            with_rows=True).rows.sort_by("id").column("v").to_pylist()
            assert got == want, what
    return run


test_decimal_arithmetic_is_sparks = _arithmetic_test(4)
test_decimal_arithmetic_is_sparks_long = pytest.mark.long(_arithmetic_test(200))


# ---- differences found against Spark: each gives Spark's value (or fails where Spark fails) --
_FOUND_SCHEMA = "id long, t tinyint, s smallint, n int, p decimal(10,2), q decimal(38,10), c string"
_FOUND_ROWS = [
    (0, 127, 32767, 2147483647, Decimal("1.25"), Decimal("1234567890123456789012345678.0123456785"), "ß"),
    (1, -128, -32768, -2147483648, Decimal("-0.50"), Decimal("-1.0000000005"), "straße ﬁx"),
    (2, 5, 3, 7, Decimal("99999999.99"), Decimal("1234567890123456789012345678.0123425"), "İstanbul ΣΑΣ"),
    (3, None, None, None, None, None, None),
]
FOUND = [
    "t + 1", "s + 1", "t * 2", "t - 1", "t + -1", "n + 1", "1 + 2147483647",  # int literals are int
    "cast(1.5 AS decimal)", "cast(p AS decimal)",  # Spark's DECIMAL is decimal(10,0)
    "upper(c)", "lower(c)", "initcap(c)",  # Unicode's full case mappings: ß -> SS
    "-q", "abs(-q)", "cast(-q AS string)",  # Scala's BigDecimal: 34 significant digits
    "cast(cast(p AS decimal(4,4)) AS string)", "cast(p % 0.5 AS string)",  # 0.50, not .50
    "q + q", "q * p", "q - 1", "q % p", "pmod(q, 7)", "p * p", "cast(q * 0.5 AS string)",
    # a bigint (or an int literal) beside a decimal widens as Spark's decimal(20,0) / int
    "cast(coalesce(p, cast(n AS bigint)) * p + q AS string)", "cast(if(n > 0, p, 1) * p + q AS string)",
    "cast(greatest(p, 3000000000) * p - q AS string)",
    # Spark 4 casts text to an integer only when it is one (DuckDB reads 1.5, 1e3, 1_000)
    "cast('1.5' AS int)", "cast('1e3' AS int)", "cast('1_000' AS bigint)", "cast('-.5' AS int)",
    "cast('5.' AS smallint)", "cast(' 12 ' AS int)", "cast('\t-7\n' AS tinyint)", "cast('+5' AS bigint)",
    "cast('1_000' AS decimal(10,2))", "cast('1_000' AS double)", "cast(' 1.5 ' AS decimal(10,2))",
    "cast('1.5e1' AS double)",
]


@pytest.mark.parametrize("expr", FOUND)
def test_found_differences_are_sparks(spark: Any, expr: str) -> None:
    import duckdb

    from carbonstore.errors import UserError
    from carbonstore.segments.merge import Types, duckdb_connection, to_duckdb

    frame = spark.createDataFrame(_FOUND_ROWS, _FOUND_SCHEMA)
    try:
        want = [r[0] for r in frame.selectExpr(expr, "id").orderBy("id").collect()]
    except Exception:  # noqa: BLE001 - Spark fails the statement (ANSI)
        want = None
    con = duckdb_connection()
    con.register("__rows", frame.toArrow())
    try:
        sql = to_duckdb(expr, "UPDATE SET v", Types(con, "FROM __rows AS t"))
        got = [r[0] for r in con.execute(f"SELECT ({sql}) FROM __rows AS t ORDER BY id").fetchall()]
    except (duckdb.Error, UserError):
        got = None
    finally:
        con.close()
    assert got == want, expr
