"""The store's checks of a statement before Spark (carbonstore/sql/checks.py) never refuse a
statement Spark runs: the router's whole statement list, a list of valid queries that use
what a naive column check gets wrong (each also run by Spark, to show it is valid), and
generated queries; and they do refuse a name no column, alias or variable has."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.errors import UserError
from carbonstore.spark.statements import parse_statement
from carbonstore.sql import Insert, Query, parse
from carbonstore.sql.checks import check_query
from tests.spark.test_sql_router import STATEMENTS

COLUMNS = ["id", "name", "s", "arr"]

# valid Spark SQL over db.t (id, name, s struct<a, b>, arr array<int>) and db.u (id, k)
VALID = [
    "SELECT ID, Name FROM db.t WHERE Id > 0",
    "SELECT `id` FROM DB.T",
    "SELECT t.id, db.t.name FROM db.t",
    "SELECT x.id FROM db.t AS x",
    "SELECT s.a, t.s.b FROM db.t",
    "SELECT id + 1 AS b, b * 2 AS c FROM db.t",  # a lateral column alias
    "SELECT id AS k FROM db.t ORDER BY k",
    "SELECT name, count(*) AS n FROM db.t GROUP BY name HAVING n > 0",
    "SELECT name FROM db.t GROUP BY ALL ORDER BY ALL",
    "SELECT transform(arr, x -> x + 1) AS a2 FROM db.t",
    "SELECT filter(arr, (v, i) -> v > i) FROM db.t",
    "SELECT posexplode(arr) AS (p, v) FROM db.t",
    "SELECT explode(arr) AS e FROM db.t",
    "SELECT e FROM db.t LATERAL VIEW explode(arr) tv AS e",
    "SELECT a, b FROM db.t AS x(a, b, c, d)",
    "SELECT current_date, current_timestamp, current_user, user FROM db.t",
    "SELECT sum(id) OVER w FROM db.t WINDOW w AS (ORDER BY id)",
    "SELECT id FROM db.t WHERE id IN (SELECT id FROM db.u WHERE u.k = t.id)",
    "SELECT id FROM db.t t1 WHERE EXISTS (SELECT 1 FROM db.u WHERE k = t1.id)",
    "SELECT t.id, u.k FROM db.t JOIN db.u ON t.id = u.id",
    "SELECT id, k FROM db.t JOIN db.u USING (id)",
    "WITH c AS (SELECT id AS z FROM db.t) SELECT z FROM c",
    "SELECT z FROM (SELECT id AS z FROM db.t) q WHERE z > 0",
    "SELECT * FROM db.t UNION ALL SELECT * FROM db.t",
    "SELECT col1 FROM VALUES (1), (2)",
    "SELECT id FROM range(3)",
    "SELECT /*+ REPARTITION(2) */ id FROM db.t",
    "SELECT id FROM db.t DISTRIBUTE BY id SORT BY id",
    "SELECT 'nosuch' AS lit, id FROM db.t",
    "SELECT id FROM db.t TABLESAMPLE (50 PERCENT)",
    "SELECT old FROM db.r VERSION AS OF 1",  # renamed to new since
    "SELECT json_tuple('{\"a\": 1}', 'a') FROM db.t ORDER BY c0",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(str(tmp_path_factory.mktemp("checks") / "store"))
    t = store.create_table("db.t", "id long not null, name string, s struct<a:int,b:string>, "
                                   "arr array<int>")
    t.append(pa.table({
        "id": pa.array([1, 2], pa.int64()), "name": ["a", "b"],
        "s": pa.array([{"a": 1, "b": "x"}, None], pa.struct([("a", pa.int32()),
                                                              ("b", pa.string())])),
        "arr": pa.array([[1, 2], [3]], pa.list_(pa.int32())),
    }))
    u = store.create_table("db.u", "id long, k long")
    u.append(pa.table({"id": pa.array([1], pa.int64()), "k": pa.array([1], pa.int64())}))
    r = store.create_table("db.r", "id long, old string")
    r.append(pa.table({"id": pa.array([1], pa.int64()), "old": ["x"]}))
    main(["--store", store.location, "sql", "ALTER TABLE db.r RENAME COLUMN old TO new"])
    sales = store.create_table("db.sales", "id long not null, cat string, v double")
    sales.append(pa.table({"id": pa.array([1], pa.int64()), "cat": ["c"], "v": [1.0]}))
    return store


def _check(store: Store, text: str) -> None:
    statement = parse(text)
    if isinstance(statement, Query):
        check_query(store, statement.tree, closed=True)
    elif isinstance(statement, Insert):
        check_query(store, parse_statement(statement.source), closed=True)


@pytest.mark.parametrize("text", STATEMENTS + VALID)
def test_valid_statements_are_not_refused(store: Store, text: str) -> None:
    _check(store, text)


@pytest.mark.parametrize(("text", "name"), [
    ("SELECT nosuch FROM db.t", "nosuch"),
    ("SELECT id AS k FROM db.t ORDER BY kk", "kk"),
    ("SELECT transform(arr, x -> y) FROM db.t", "y"),
    ("SELECT t.nosuch FROM db.t", "nosuch"),
    ("SELECT db.t.nosuch FROM db.t", "nosuch"),
    ("SELECT NaN FROM db.t", "NaN"),  # Spark reads 'NaN' only as a string
])
def test_an_unknown_column_of_the_one_table_is_refused(store: Store, text: str,
                                                       name: str) -> None:
    with pytest.raises(UserError, match=f"unknown column '{name}' of db.t"):
        _check(store, text)


def test_a_version_of_the_past_is_read_with_its_own_columns(store: Store) -> None:
    """``old`` was renamed after version 1: that version still has it (schema evolution)."""
    _check(store, "SELECT old FROM db.r VERSION AS OF 1")
    with pytest.raises(UserError, match="unknown column 'old'"):
        _check(store, "SELECT old FROM db.r")


def test_a_pinned_query_is_read_with_the_columns_of_its_version(store: Store) -> None:
    check_query(store, parse_statement("SELECT old FROM db.r"), closed=True, as_of=1)


def test_a_registered_view_or_a_cte_is_no_missing_table(store: Store) -> None:
    """``register``'s views stand for tables by their names; a CTE named like a store table
    shadows it; Spark's global temp views and catalogs are Spark's to resolve."""
    views = {"shop.orders": store.table("db.t"), "orders": store.table("db.t")}
    check_query(store, parse_statement("SELECT id FROM shop.orders JOIN orders USING (id)"),
                aliases=views, closed=True)
    check_query(store, parse_statement("WITH t AS (SELECT 1 AS z) SELECT z FROM t"), closed=True)
    for text in ("SELECT * FROM global_temp.v", "SELECT * FROM spark_catalog.db.nosuch",
                 "SELECT * FROM nosuch"):
        check_query(store, parse_statement(text), closed=True)
    with pytest.raises(UserError, match="table db.nosuch does not exist"):
        check_query(store, parse_statement("SELECT * FROM db.nosuch"), aliases=views)


def test_a_session_of_the_users_may_hold_variables(store: Store) -> None:
    """``SELECT v FROM t`` is a SQL variable in a session with ``DECLARE VARIABLE v``."""
    check_query(store, parse_statement("SELECT v FROM db.t"), closed=False)


_NAME = st.sampled_from(COLUMNS).flatmap(
    lambda c: st.builds(lambda flips: "".join(ch.upper() if f else ch for ch, f in
                                              zip(c, flips, strict=False)),
                        st.lists(st.booleans(), min_size=len(c), max_size=len(c))))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_queries_are_refused_exactly_for_an_unknown_name(store: Store,
                                                                  data: Any) -> None:
    """A query over db.t built of its columns (any case, any qualifier the table has), the
    aliases it gives and references to them is never refused; the same with one name that
    is none of these is refused naming it."""
    qualifier = data.draw(st.sampled_from(["", "t.", "x."]))
    source = "db.t x" if qualifier == "x." else "db.t"
    picks = data.draw(st.lists(_NAME, min_size=1, max_size=4))
    items = [f"{qualifier}{c}" if c.lower() in ("id", "name") else c for c in picks]
    aliases = [f"a{i}" for i in range(len(items))]
    select = ", ".join(f"{e} AS {a}" for e, a in zip(items, aliases, strict=True))
    refer = data.draw(st.sampled_from(aliases))
    where = data.draw(st.sampled_from(["", " WHERE id > 0", f" WHERE {qualifier}NAME IS NULL"]))
    tail = data.draw(st.sampled_from(["", f" ORDER BY {refer}", " ORDER BY 1"]))
    text = f"SELECT {select}, {refer} AS again FROM {source}{where}{tail}"
    check_query(store, parse_statement(text), closed=True)
    unknown = data.draw(st.sampled_from(["nosuch", "ID2", "a99", "names"]))
    spot = data.draw(st.sampled_from(["select", "where", "order"]))
    bad = {"select": f"SELECT {select}, {qualifier}{unknown} FROM {source}{where}",
           "where": f"SELECT {select} FROM {source} WHERE {unknown} = 1",
           "order": f"SELECT {select} FROM {source} ORDER BY {unknown}"}[spot]
    with pytest.raises(UserError, match=f"unknown column '{unknown}'"):
        check_query(store, parse_statement(bad), closed=True)


@pytest.mark.spark
def test_the_valid_list_is_valid_spark_sql(spark: Any, store: Store) -> None:
    """Spark runs every query of VALID: the list shows what must not be refused."""
    from carbonstore.spark.queries import run_statement

    failed = []
    for text in VALID:
        try:
            run_statement(spark, store, text).collect()
        except Exception as err:  # noqa: BLE001 - every failure is listed
            failed.append(f"{text}: {str(err).splitlines()[0][:200]}")
    assert failed == []

