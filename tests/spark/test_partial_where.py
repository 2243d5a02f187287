"""``to_spark(where=)`` and ``carbonstore query --where`` take any Spark SQL condition: the
scan is pruned by the top-level AND terms the index binds, and Spark evaluates the whole
condition, so the rows equal ``spark.read.parquet(...).where(same)`` over the same rows
(the oracle). Terms the index cannot bind (``id % 2 = 0``, ``LIKE '%x'``, functions, casts
of columns, IN with expressions, an OR with such a side) prune nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.errors import ExpressionError
from carbonstore.expressions.expr import AlwaysTrue
from carbonstore.spark.statements import index_where
from tests.cli.conftest import RunCli

ROWS = 800
SCHEMA = "id long not null, n int, city string, tag string, v double, d date"


def _rows(k: int) -> pa.Table:
    rng = np.random.default_rng(k)
    ids = np.arange(k * ROWS // 4, (k + 1) * ROWS // 4)
    v = rng.random(len(ids))
    v[rng.random(len(ids)) < 0.05] = np.nan
    v[ids % 19 == 0] = -0.0
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "n": pa.array([None if i % 13 == 0 else int(i % 10) for i in ids], pa.int32()),
        "city": pa.array([None if i % 11 == 0 else f"c{i % 6}" for i in ids]),
        "tag": pa.array([f"t{i % 4}_{i % 3}" for i in ids]),
        "v": pa.array([None if i % 17 == 0 else x for i, x in zip(ids, v, strict=True)],
                      pa.float64()),
        "d": pa.array((ids % 40 + 19723).astype(np.int32), pa.int32()).cast(pa.date32()),
    })


def _table(root: object, name: str) -> Store:
    """A 4-segment table (city dictionary-encoded) with 50-row row groups."""
    from carbonstore.dictionary import prepare_dictionaries
    from carbonstore.segments.commit import begin_segment, commit_segment
    from carbonstore.segments.load import parse_load_options, write_settings
    from carbonstore.segments.writer import write_task
    from carbonstore.store import load_conf

    store = Store(str(root), conf=load_conf(None))
    t = store.create_table(name, SCHEMA, properties={"dictionary_include": "city",
                                                     "page_rows": "25"})
    for k in range(4):
        data = _rows(k)
        entry, _ = begin_segment(t, overwrite=False, hold_lock=False)
        prepare_dictionaries(t, {"city": data.column("city")}, entry.load_name)
        res = write_task(data.to_batches(max_chunksize=50), write_settings(
            t, entry.load_name, parse_load_options(t, {})), task_id="00000-0")
        commit_segment(t, entry.load_name, [res])
    return store


@pytest.fixture(scope="module")
def world(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    root = tmp_path_factory.mktemp("partial_where")
    store = _table(root / "store", "db.t")
    plain = root / "plain.parquet"
    pq.write_table(pa.concat_tables([_rows(k) for k in range(4)]), plain)
    native = Store(store.location, conf=store.conf.with_overrides({"carbon.read.local.rows": "0"}))
    yield {"store": store, "native": native,
           "plain": spark.read.parquet(str(plain))}  # type: ignore[attr-defined]


def _key(row: object) -> str:
    return repr(tuple(row))  # type: ignore[arg-type]  # NaN, -0.0 and NULL kept apart


def _same(got: object, want: object, where: str) -> None:
    a = sorted(_key(r) for r in got.collect())  # type: ignore[attr-defined]
    b = sorted(_key(r) for r in want.collect())  # type: ignore[attr-defined]
    assert a == b, (where, len(a), len(b))


# ---- the bound part, without Spark ----------------------------------------------------------


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> object:
    store = Store(str(tmp_path_factory.mktemp("bare") / "store"))
    return store.create_table("db.b", "id long, s string, v double, r struct<a:int>, "
                                      "m map<string,int>")


@pytest.mark.parametrize(("where", "kept", "exact"), [
    ("id < 10", "id < 10", True),
    ("id < 10 AND id % 2 = 0", "(id < 10)", False),
    ("id % 2 = 0 AND (s = 'a' OR s = 'b') AND abs(v) > 1", "(s = 'a' OR s = 'b')", False),
    ("id < 10 OR id % 2 = 0", None, False),  # an OR with an unbindable side prunes nothing
    ("s LIKE '%x' AND s LIKE 'x%'", "(s LIKE 'x%')", False),
    ("CAST(id AS STRING) = '1' AND id IN (1, 2 + 1)", None, False),
    ("r.a = 1 AND m.k = 2", "(r.a = 1)", False),  # m.k: a map key, left to Spark
    ("NOT (id = 1 AND lower(s) = 'a')", None, False),
])
def test_index_where_keeps_the_terms_that_bind(bare: object, where: str, kept: str | None,
                                                exact: bool) -> None:
    got = index_where(bare, where)  # type: ignore[arg-type]
    assert (got.where, got.exact) == (kept, exact)
    assert isinstance(got.expr, AlwaysTrue) == (kept is None)


@pytest.mark.parametrize(("where", "message"), [
    ("nope = 1 AND id % 2 = 0", "unknown column 'nope'"),
    ("id % 2 = 0 AND r.a = 1 AND zz.a > 3", "unknown column 'zz.a'"),
    ("id = = 3", "cannot parse filter"),
    ("id > ", "cannot parse filter"),
    ("(" * 80 + "id % 2 = 0" + ")" * 80, "nests too deeply"),
    ("s = '\udcff' AND id % 2 = 0", "not valid UTF-8"),
])
def test_index_where_still_refuses_what_no_reader_takes(bare: object, where: str,
                                                        message: str) -> None:
    with pytest.raises(ExpressionError, match=message.replace("(", r"\(")):
        index_where(bare, where)  # type: ignore[arg-type]
    assert index_where(bare, where, strict=False).exact is False  # type: ignore[arg-type]


# ---- to_spark: the rows of spark.read.parquet -----------------------------------------------

_BOUND = st.one_of(
    st.builds("id < {}".format, st.integers(0, ROWS)),
    st.builds("id BETWEEN {} AND {}".format, st.integers(0, ROWS), st.integers(0, ROWS)),
    st.builds("n = {}".format, st.integers(0, 10)),
    st.builds("city = 'c{}'".format, st.integers(0, 6)),
    st.builds("tag LIKE 't{}%'".format, st.integers(0, 4)),
    st.builds("v > {}".format, st.sampled_from(["0.5", "0.999", "-1.0", "0.0", "-0.0"])),
    st.builds("d >= DATE '2024-01-{:02d}'".format, st.integers(1, 28)),
    st.sampled_from(["city IS NULL", "v IS NULL", "isnan(v)", "n IS NOT NULL"]),
)
_UNBOUND = st.one_of(
    st.builds("id % {} = 0".format, st.integers(2, 7)),
    st.builds("tag LIKE '%_{}'".format, st.integers(0, 3)),
    st.builds("upper(city) = 'C{}'".format, st.integers(0, 6)),
    st.builds("CAST(id AS STRING) LIKE '{}%'".format, st.integers(1, 9)),
    st.builds("n IN ({}, 1 + {})".format, st.integers(0, 9), st.integers(0, 9)),
    st.builds("coalesce(n, -1) < {}".format, st.integers(-1, 10)),
    st.sampled_from(["v = v", "v <> v", "n > id % 10", "nanvl(v, 2.0) > 1.0", "v * -1 = 0.0",
                     "day(d) = 3", "length(city) = 2", "city <=> NULL"]),
)
_TERM = st.one_of(_BOUND, _UNBOUND, st.builds("({}) OR ({})".format, _BOUND, _UNBOUND),
                  st.builds("NOT ({})".format, _UNBOUND))
_WHERE = st.lists(_TERM, min_size=1, max_size=4).map(" AND ".join)


@given(where=_WHERE, native=st.booleans())
@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_to_spark_any_filter_gives_spark_rows(spark: object, world: dict[str, object],
                                              where: str, native: bool) -> None:
    from carbonstore.spark.api import to_spark

    store = world["native" if native else "store"]
    table = store.table("db.t")  # type: ignore[attr-defined]
    _same(to_spark(table, spark, where=where), world["plain"].where(where), where)  # type: ignore[attr-defined]


def test_mixed_filter_prunes_by_its_bound_terms(spark: object, world: dict[str, object]) -> None:
    from carbonstore.spark.api import to_spark

    table = world["native"].table("db.t")  # type: ignore[attr-defined]
    everything = to_spark(table, spark).inputFiles()
    pruned = to_spark(table, spark, where="id < 100 AND id % 3 = 0")
    assert len(pruned.inputFiles()) == 1 < len(everything)
    assert sorted(r.id for r in pruned.select("id").collect()) == list(range(0, 100, 3))
    unpruned = to_spark(table, spark, where="id < 100 OR id % 3 = 0")
    assert len(unpruned.inputFiles()) == len(everything)


@pytest.mark.parametrize("where", ["nosuch_function(id) = 1", "id % 2 = 0 AND tag + ",
                                   "id % 2 = 0 AND abs(nope) > 1", "sum(id) > 1"])
def test_to_spark_filter_spark_rejects_is_one_line(spark: object, world: dict[str, object],
                                                   where: str) -> None:
    from carbonstore.spark.api import to_spark

    table = world["store"].table("db.t")  # type: ignore[attr-defined]
    with pytest.raises(ExpressionError) as got:
        to_spark(table, spark, where=where)
    assert "\n" not in str(got.value) and "JVM stacktrace" not in str(got.value)


def test_to_spark_filter_with_a_subquery(spark: object, world: dict[str, object]) -> None:
    from carbonstore.spark.api import to_spark

    where = "id IN (SELECT 1 UNION ALL SELECT 4) AND id % 2 = 0"
    table = world["store"].table("db.t")  # type: ignore[attr-defined]
    assert [r.id for r in to_spark(table, spark, where=where).collect()] == [4]


# ---- carbonstore query --where ------------------------------------------------------------


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> RunCli:
    """As tests/cli's: the exit status, stdout and stderr of the CLI run in this process."""
    from carbonstore.cli import main

    def run(store: Store, *argv: str) -> tuple[int, str, str]:
        code = main(["--store", store.location, *argv])
        out, err = capsys.readouterr()
        return code, out, err
    return run


def _query(run_cli: RunCli, store: Store, *argv: str) -> tuple[int, object, str]:
    code, out, err = run_cli(store, "query", "db.t", *argv, "--json")
    return code, (json.loads(out) if code == 0 else out), err


def test_query_with_unbindable_terms(spark: object, world: dict[str, object],
                                     run_cli: RunCli) -> None:
    store = world["store"]
    plain = world["plain"]
    where = "id < 300 AND id % 7 = 0 AND tag LIKE '%_1'"
    code, rows, err = _query(run_cli, store, "--select", "id", "--where", where)  # type: ignore[arg-type]
    assert code == 0, err
    want = sorted(r.id for r in plain.where(where).select("id").collect())  # type: ignore[attr-defined]
    assert sorted(r["id"] for r in rows) == want and want  # type: ignore[union-attr]
    # --count: the index decides only exact filters; the others are counted by Spark
    for w in (where, "id % 2 = 0", "id < 300 OR upper(tag) = 'T1_1'"):
        code, rows, err = _query(run_cli, store, "--count", "--where", w)  # type: ignore[arg-type]
        assert code == 0, err
        assert rows == [{"count": plain.where(w).count()}], w  # type: ignore[attr-defined]


@pytest.mark.parametrize(("where", "message"), [
    ("nope % 2 = 0", "UNRESOLVED_COLUMN"),
    ("nope = 1 AND id % 2 = 0", "unknown column 'nope'"),
    ("id % 2 = 0 AND no_such_fn(id)", "UNRESOLVED_ROUTINE"),
    ("id = 'abc' AND id % 2 = 0", "CAST_INVALID_INPUT"),
])
def test_query_bad_filters_exit_2_one_line(spark: object, world: dict[str, object],
                                           run_cli: RunCli, where: str, message: str) -> None:
    code, out, err = _query(run_cli, world["store"], "--where", where)  # type: ignore[arg-type]
    assert code == 2 and out == "", (where, err)
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert "Traceback" not in err
