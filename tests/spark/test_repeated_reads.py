"""Statements that read one table 1-3 times with random filters (and none) give, through
``carbonstore sql`` and through reused DataFrames, what the same statements give over plain
``spark.read.parquet`` of the same rows (Spark's own answer is the oracle)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
ROWS = 600


def _rows(k: int) -> pa.Table:
    rng = np.random.default_rng(k)
    ids = np.arange(k * ROWS // 4, (k + 1) * ROWS // 4)
    v = rng.random(len(ids))
    v[rng.random(len(ids)) < 0.05] = np.nan
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "n": pa.array([None if i % 13 == 0 else int(i % 10) for i in ids], pa.int32()),
        "city": pa.array([None if i % 11 == 0 else f"c{i % 6}" for i in ids]),
        "tag": pa.array([f"t{i % 4}" for i in ids]),
        "v": pa.array([None if i % 17 == 0 else x for i, x in zip(ids, v, strict=True)], pa.float64()),
    })


@pytest.fixture(scope="module")
def world(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """A 4-segment table with a dictionary column, its rows as one plain Parquet file, and
    the frames the statements run over (created once: reused across examples)."""
    from carbonstore.dictionary import prepare_dictionaries
    from carbonstore.segments.commit import begin_segment, commit_segment
    from carbonstore.segments.load import parse_load_options, write_settings
    from carbonstore.segments.writer import write_task
    from carbonstore.spark.api import to_spark
    from carbonstore.store import load_conf

    root = tmp_path_factory.mktemp("repeated")
    store = Store(str(root / "store"), conf=load_conf(None))
    t = store.create_table("db.t", "id long not null, n int, city string, tag string, v double",
                           properties={"dictionary_include": "city", "page_rows": "25"})
    parts = [_rows(k) for k in range(4)]
    for data in parts:
        entry, _ = begin_segment(t, overwrite=False, hold_lock=False)
        prepare_dictionaries(t, {"city": data.column("city")}, entry.load_name)
        res = write_task(data.to_batches(), write_settings(
            t, entry.load_name, parse_load_options(t, {})), task_id="00000-0")
        commit_segment(t, entry.load_name, [res])
    plain = root / "plain.parquet"
    pq.write_table(pa.concat_tables(parts), plain)
    spark.read.parquet(str(plain)).createOrReplaceTempView("plain_t")  # type: ignore[attr-defined]
    before = spark.conf.get(PUSHDOWN)  # type: ignore[attr-defined]
    spark.conf.set(PUSHDOWN, "true")  # type: ignore[attr-defined]
    spark.read.format("carbonstore").option("store", store.location).load(  # type: ignore[attr-defined]
        "db.t").createOrReplaceTempView("source_t")
    native = Store(store.location, conf=store.conf.with_overrides({"carbon.read.local.rows": "0"}))
    to_spark(native.table("db.t"), spark).createOrReplaceTempView("frame_t")
    yield {"store": store, "native": native}
    spark.conf.set(PUSHDOWN, before)  # type: ignore[attr-defined]


_LEAVES = st.one_of(
    st.builds("id = {}".format, st.integers(0, ROWS)),
    st.builds("id BETWEEN {} AND {}".format, st.integers(0, ROWS), st.integers(0, ROWS)),
    st.builds("n = {}".format, st.integers(0, 10)),
    st.builds("n > {}".format, st.integers(0, 10)),
    st.builds("city = 'c{}'".format, st.integers(0, 6)),
    st.builds("city IN ('c{}', 'c{}')".format, st.integers(0, 6), st.integers(0, 6)),
    st.builds("tag = 't{}'".format, st.integers(0, 4)),
    st.builds("v > {}".format, st.sampled_from(["0.5", "0.999", "2.0", "-1.0"])),
    st.builds("v < {}".format, st.sampled_from(["0.1", "0.5"])),
    st.sampled_from(["city IS NULL", "v IS NULL", "n IS NULL", "isnan(v)", "v = CAST('NaN' AS DOUBLE)"]),
)
_FILTERS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.builds("({}) AND ({})".format, inner, inner),
        st.builds("({}) OR ({})".format, inner, inner),
        st.builds("NOT ({})".format, inner),
    ),
    max_leaves=3,
)
_READS = st.lists(st.one_of(st.none(), _FILTERS), min_size=1, max_size=3)


def _statement(reads: list[str | None], joined: bool, name: str) -> str:
    if joined and len(reads) >= 2:
        conds = [f"({_qualify(w, a)})" for w, a in zip(reads, "ab", strict=False) if w]
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        return (f"SELECT count(*) AS n, count(b.v) AS nv, sum(a.id) AS s FROM {name} a "
                f"JOIN {name} b ON a.id = b.id{where}")
    selects = [
        f"SELECT {i} AS q, count(*) AS n, count(v) AS nv, count(city) AS nc, sum(id) AS s "
        f"FROM {name}" + (f" WHERE {w}" if w else "")
        for i, w in enumerate(reads)
    ]
    return " UNION ALL ".join(selects)


def _qualify(where: str, alias: str) -> str:
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(where, read="spark")
    for col in tree.find_all(exp.Column):
        col.set("table", exp.to_identifier(alias))
    return tree.sql(dialect="spark")


def _answer(df: object) -> list[tuple[object, ...]]:
    return sorted(tuple(r) for r in df.collect())  # type: ignore[attr-defined]


def _oracle(spark: object, statement: str) -> list[tuple[object, ...]]:
    """Spark's answer over the plain file, without parquet-java's row-group filter (which
    skips row groups holding NaN rows for ``v > x``: it knows no NaN counts)."""
    key = "spark.sql.parquet.filterPushdown"
    spark.conf.set(key, "false")  # type: ignore[attr-defined]
    try:
        return _answer(spark.sql(statement))  # type: ignore[attr-defined]
    finally:
        spark.conf.set(key, "true")  # type: ignore[attr-defined]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(reads=_READS, joined=st.booleans(), native=st.booleans())
def test_repeated_reads_agree_with_plain_parquet(
    spark: object, world: dict[str, object], reads: list[str | None], joined: bool, native: bool
) -> None:
    from carbonstore.spark.sql import run_statement

    want = _oracle(spark, _statement(reads, joined, "plain_t"))
    store = world["native" if native else "store"]
    got = _answer(run_statement(spark, store, _statement(reads, joined, "db.t")))  # type: ignore[arg-type]
    assert got == want, ("sql", reads, joined)
    for view in ("source_t", "frame_t"):  # one relation each, reused by every example
        again = _answer(spark.sql(_statement(reads, joined, view)))  # type: ignore[attr-defined]
        assert again == want, (view, reads, joined)


def test_nan_rows_count_for_greater_than(spark: object, world: dict[str, object]) -> None:
    """``v > 0.999`` keeps every NaN row on every path (parquet-java's row-group filter
    would skip row groups whose max is below 0.999)."""
    from carbonstore.spark.sql import run_statement

    q = "SELECT count(*) AS n FROM {} WHERE v > 2.0"  # only the NaN rows
    want = _oracle(spark, q.format("plain_t"))[0][0]
    assert want == _answer(spark.sql("SELECT count(*) FROM plain_t WHERE isnan(v)"))[0][0] > 0  # type: ignore[attr-defined]
    assert _answer(spark.sql(q.format("plain_t")))[0][0] == 0  # type: ignore[attr-defined]  # parquet-java
    for store in (world["store"], world["native"]):
        assert _answer(run_statement(spark, store, q.format("db.t")))[0][0] == want  # type: ignore[arg-type]
    assert _answer(spark.sql(q.format("frame_t")))[0][0] == want  # type: ignore[attr-defined]
    assert _answer(spark.sql(q.format("source_t")))[0][0] == want  # type: ignore[attr-defined]
