"""Random predicates on float and double columns holding NaN, -0.0, 0.0, +-Infinity and
NULL, through ``run_statement`` (metadata answers, driver-local reads and native scans)
and a reused ``carbonstore`` DataFrame, equal the same statements over plain
``spark.read.parquet`` of the same rows (Spark semantics: NaN = NaN, NaN above every number,
-0.0 = 0.0)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.spark.sql import run_statement
from carbonstore.store import load_conf
from tests.indexfiles.segbuild import add_segments

SPECIAL = [float("nan"), -0.0, 0.0, None, float("inf"), float("-inf"), 1.5, -1.5, 2.0]


def _part(k: int) -> pa.Table:
    ids = list(range(k * 60, (k + 1) * 60))
    # segment 0 holds only NaN / zeros in f: whole row groups decided by their statistics
    f = [SPECIAL[(i // 7) % 3] if k == 0 else SPECIAL[i % len(SPECIAL)] for i in ids]
    d = [SPECIAL[(i * 5) % len(SPECIAL)] if i % 4 else (i % 9) / 2 - 2 for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()), "f": pa.array(f, pa.float32()),
                     "d": pa.array(d, pa.float64())})


@pytest.fixture(scope="module")
def floats(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("floats")
    store = Store(str(root / "store"), conf=load_conf(None))
    t = store.create_table("db.fl", "id long not null, f float, d double")
    parts = [_part(k) for k in range(3)]
    add_segments(t, parts, row_group_size=20, page_rows=5)
    pq.write_table(pa.concat_tables(parts), root / "plain.parquet")
    spark.read.parquet(str(root / "plain.parquet")).createOrReplaceTempView("plain_fl")
    native = Store(store.location, conf=store.conf.with_overrides({"carbon.read.local.rows": "0"}))
    frame = spark.read.format("carbonstore").option("store", store.location).load("db.fl")
    yield {"stores": [store, native], "frame": frame}


_VALUES = st.sampled_from(["double('NaN')", "-0.0", "0.0", "0", "double('Infinity')",
                           "double('-Infinity')", "1.5", "-1.5", "2", "float('NaN')", "'NaN'"])
_LEAF = st.one_of(
    st.builds("{} {} {}".format, st.sampled_from(["f", "d"]),
              st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "<=>"]), _VALUES),
    st.builds("{} IS NULL".format, st.sampled_from(["f", "d"])),
    st.builds("{} IS NOT NULL".format, st.sampled_from(["f", "d"])),
    st.builds("isnan({})".format, st.sampled_from(["f", "d"])),
    st.builds("{} IN ({}, {})".format, st.sampled_from(["f", "d"]), _VALUES, _VALUES),
    st.builds("{} BETWEEN {} AND {}".format, st.sampled_from(["f", "d"]), _VALUES, _VALUES),
    st.builds("id < {}".format, st.integers(0, 180)),
)
_PRED = st.recursive(_LEAF, lambda inner: st.one_of(
    st.builds("({}) AND ({})".format, inner, inner),
    st.builds("({}) OR ({})".format, inner, inner),
    st.builds("NOT ({})".format, inner)), max_leaves=3)
_FORMS = [
    "SELECT count(*) FROM {t} WHERE {p}",
    "SELECT count(*), min(f), max(f), min(d), max(d), count(f), count(d) FROM {t} WHERE {p}",
    "SELECT 'a', count(*) FROM {t} WHERE {p} UNION ALL SELECT 'b', count(*) FROM {t}",
    "SELECT id FROM {t} WHERE {p}",
]


def _norm(rows: list[Any]) -> list[tuple[Any, ...]]:
    def one(v: Any) -> Any:
        if isinstance(v, float):
            return ("nan",) if math.isnan(v) else (v + 0.0,)
        return (v,)
    return sorted(tuple(one(v) for v in r) for r in rows)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(pred=_PRED, form=st.sampled_from(_FORMS))
def test_float_predicates_agree_with_plain_parquet(
    spark: Any, floats: dict[str, Any], pred: str, form: str
) -> None:
    # the oracle reads without parquet-java's row-group filter: it knows no NaN counts and
    # skips row groups holding NaN rows for `f = NaN` / `f > x` (docs/query.md)
    spark.conf.set("spark.sql.parquet.filterPushdown", "false")
    try:
        want = _norm(spark.sql(form.format(t="plain_fl", p=pred)).collect())
        want_where = spark.table("plain_fl").where(pred).count()
    finally:
        spark.conf.unset("spark.sql.parquet.filterPushdown")
    for store in floats["stores"]:
        got = _norm(run_statement(spark, store, form.format(t="db.fl", p=pred)).collect())
        assert got == want, (pred, form, store.conf.values.get("carbon.read.local.rows"))
    frame = floats["frame"]  # one DataFrame, filtered in turn by every example
    assert frame.where(pred).count() == want_where, pred
    assert frame.count() == 180
