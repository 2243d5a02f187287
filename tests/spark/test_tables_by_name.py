"""Store tables by name in Spark SQL: carbonstore.spark.register, CREATE TABLE ... USING
carbonstore, INSERT INTO, DROP TABLE, and the data source without registration."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carbonstore.spark
from carbonstore import Store
from carbonstore.errors import UserError
from tests.indexfiles.segbuild import add_segments

# ---- the user script: register, then spark.sql alone -----------------------------------------

_ORDERS = "order_id BIGINT NOT NULL, city_id INT, note STRING, amount DOUBLE"
_CITIES = "id INT, name STRING, region STRING"
_ORDER_ROWS = [(i, i % 6, f"n{i % 4}", None if i % 9 == 0 else round(i * 1.25, 2))
               for i in range(80)]
_CITY_ROWS = [(k, f"city{k}", "north" if k < 3 else "south") for k in range(5)]  # 5: no orders
QUERIES = {
    "join": "SELECT c.name, c.region, count(*) AS n, sum(o.amount) AS total "
            "FROM {db}.orders o JOIN {db}.cities c ON o.city_id = c.id "
            "WHERE o.note <> 'n1' GROUP BY c.name, c.region ORDER BY c.name",
    "left": "SELECT c.region, count(o.order_id) AS n FROM {db}.cities c "
            "LEFT JOIN {db}.orders o ON o.city_id = c.id AND o.amount > 50 "
            "GROUP BY c.region ORDER BY c.region",
    "point": "SELECT order_id, note, amount FROM {db}.orders WHERE order_id = 37",
    "count": "SELECT count(*), count(amount), min(order_id), max(order_id) FROM {db}.orders",
}


def _values(rows: list[tuple[Any, ...]]) -> str:
    def lit(v: Any) -> str:
        return "NULL" if v is None else f"'{v}'" if isinstance(v, str) else repr(v)

    return ", ".join("(" + ", ".join(lit(v) for v in row) + ")" for row in rows)


def user_script(spark: Any, store: str, db: str) -> dict[str, list[tuple[Any, ...]]]:
    """What a user writes: register, then CREATE / INSERT / SELECT through spark.sql only."""
    carbonstore.spark.register(spark, store=store)
    spark.sql(f"CREATE TABLE {db}.orders ({_ORDERS}) USING carbonstore "
              "TBLPROPERTIES ('sort_columns'='order_id', 'bloom_columns'='note', "
              "'dictionary_include'='note')")
    spark.sql(f"CREATE TABLE {db}.cities ({_CITIES}) USING carbonstore "
              "PARTITIONED BY (region)")
    spark.sql(f"INSERT INTO {db}.orders VALUES {_values(_ORDER_ROWS[:50])}")
    spark.sql(f"INSERT INTO {db}.orders VALUES {_values(_ORDER_ROWS[50:])}")
    spark.sql(f"INSERT INTO {db}.cities VALUES {_values(_CITY_ROWS)}")
    return {k: [tuple(r) for r in spark.sql(q.format(db=db)).collect()]
            for k, q in QUERIES.items()}


def duckdb_answers(db: str) -> dict[str, list[tuple[Any, ...]]]:
    con = duckdb.connect()
    con.execute(f"CREATE SCHEMA {db}")
    con.execute(f"CREATE TABLE {db}.orders ({_ORDERS.replace('STRING', 'VARCHAR')})")
    con.execute(f"CREATE TABLE {db}.cities ({_CITIES.replace('STRING', 'VARCHAR')})")
    con.execute(f"INSERT INTO {db}.orders VALUES {_values(_ORDER_ROWS)}")
    con.execute(f"INSERT INTO {db}.cities VALUES {_values(_CITY_ROWS)}")
    return {k: [tuple(r) for r in con.execute(q.format(db=db)).fetchall()]
            for k, q in QUERIES.items()}


def same_answers(got: dict[str, list[tuple[Any, ...]]],
                 want: dict[str, list[tuple[Any, ...]]]) -> None:
    assert got.keys() == want.keys()
    for key in want:
        assert len(got[key]) == len(want[key]), key
        for g, w in zip(got[key], want[key], strict=True):
            assert len(g) == len(w), key
            for a, b in zip(g, w, strict=True):
                if isinstance(b, float):
                    assert a is not None and math.isclose(a, b, rel_tol=1e-9), (key, g, w)
                else:
                    assert a == b, (key, g, w)


def test_user_script_through_spark_sql_alone_equals_duckdb(spark: Any, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    got = user_script(spark, store, "shopx")
    same_answers(got, duckdb_answers("shopx"))
    # the statements made store tables with the properties, two segments from two INSERTs
    orders = Store(store).table("shopx.orders")
    props = orders.schema.properties
    assert props["sort_columns"] == "order_id" and props["bloom_columns"] == "note"
    assert props["dictionary_include"] == "note"
    assert Store(store).table("shopx.cities").schema.properties["partition_by"] == "region"
    assert len([e for e in orders.status.read().entries if e.status == "Success"]) == 2
    assert not orders.schema.columns[0].nullable  # order_id NOT NULL
    # nothing landed in the current directory's warehouse
    assert not (Path.cwd() / "spark-warehouse" / "shopx.db").exists()


# ---- register: every store table by name -----------------------------------------------------


def _shop(root: Path) -> Store:
    store = Store(str(root / "store"))
    orders = store.create_table("shop.orders", "order_id long not null, city string, v double")
    add_segments(orders, [pa.table({"order_id": np.arange(k * 100, (k + 1) * 100),
                                    "city": [f"c{i % 4}" for i in range(100)],
                                    "v": np.arange(100) / 4}) for k in range(3)])
    cities = store.create_table("shop.cities", "city string, country string")
    add_segments(cities, [pa.table({"city": ["c0", "c1", "c2"], "country": ["a", "b", "b"]})])
    return store


def test_register_makes_every_store_table_a_table_by_name(spark: Any, tmp_path: Path) -> None:
    store = _shop(tmp_path)
    assert sorted(carbonstore.spark.register(spark, store=store)) == ["shop.cities", "shop.orders"]
    assert spark.sql("SELECT count(*) FROM shop.orders").collect()[0][0] == 300
    assert spark.table("shop.cities").count() == 3
    rows = spark.sql("SELECT c.country, count(*) AS n FROM shop.orders o JOIN shop.cities c "
                     "ON o.city = c.city WHERE o.order_id >= 150 GROUP BY c.country "
                     "ORDER BY c.country").collect()
    assert [(r.country, r.n) for r in rows] == [("a", 37), ("b", 75)]
    # each statement plans the table's readable segments when it runs: a load after
    # register is seen by the next statement
    loaded = store.table("shop.orders").status.read().version
    add_segments(store.table("shop.orders"), [pa.table(
        {"order_id": np.arange(300, 310), "city": ["z"] * 10, "v": np.zeros(10)})])
    assert spark.sql("SELECT count(*) FROM shop.orders WHERE city = 'z'").collect()[0][0] == 10
    # a version: Spark refuses time travel on a Python data source's table; the data
    # source's own option and carbonstore.spark.sql read it
    assert spark.read.format("carbonstore").option("store", store.location) \
        .option("versionAsOf", str(loaded)).load("shop.orders").count() == 300
    # register again is a no-op for the names (idempotent), and only the named tables
    assert carbonstore.spark.register(spark, store=store, tables=["shop.cities"]) == ["shop.cities"]
    assert spark.sql("SELECT count(*) FROM shop.orders").collect()[0][0] == 310


def test_insert_into_appends_one_segment_in_one_commit(spark: Any, tmp_path: Path) -> None:
    store = _shop(tmp_path)
    carbonstore.spark.register(spark, store=store)
    orders = store.table("shop.orders")
    # the transaction of a df.write append: its in-progress entry, then its commit
    before = orders.status.read()
    spark.createDataFrame([(999, "c0", 0.5)], "order_id long, city string, v double") \
        .write.format("carbonstore").mode("append").option("store", store.location) \
        .save("shop.orders")
    df_write = orders.status.read().version - before.version
    before = orders.status.read()
    spark.sql("INSERT INTO shop.orders VALUES (1000, 'c9', 1.5), (1001, NULL, NULL)")
    after = orders.status.read()
    assert after.version - before.version == df_write
    new = [e for e in after.entries if e.load_name not in {b.load_name for b in before.entries}]
    assert len(new) == 1 and new[0].status == "Success"  # one segment, committed once
    assert spark.sql("SELECT count(*) FROM shop.orders").collect()[0][0] == 303
    # INSERT ... SELECT by name, from another store table
    spark.sql("INSERT INTO shop.cities SELECT DISTINCT city, 'x' FROM shop.orders "
              "WHERE city = 'c3'")
    assert spark.sql("SELECT country FROM shop.cities WHERE city = 'c3'").collect()[0][0] == "x"
    # INSERT OVERWRITE replaces the readable segments in one commit
    spark.sql("INSERT OVERWRITE shop.cities VALUES ('q', 'r')")
    assert [tuple(r) for r in spark.table("shop.cities").collect()] == [("q", "r")]
    # a row the table refuses (NULL into NOT NULL) fails, and no row is added
    with pytest.raises(Exception):  # noqa: B017 - Spark's or the store's, checked below
        spark.sql("INSERT INTO shop.orders VALUES (NULL, 'c1', 1.0)").collect()
    assert spark.sql("SELECT count(*) FROM shop.orders").collect()[0][0] == 303


def test_create_table_using_carbonstore_creates_the_store_table(spark: Any, tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    other = str(tmp_path / "other")
    carbonstore.spark.register(spark, store=store)
    spark.sql("CREATE TABLE IF NOT EXISTS mk.t1 (id BIGINT, s STRING COMMENT 'a note', "
              "d DECIMAL(10, 2), tags ARRAY<STRING>, ts TIMESTAMP) USING carbonstore "
              "CLUSTERED BY (id) INTO 2 BUCKETS TBLPROPERTIES ('sort_columns'='s')")
    t1 = store.table("mk.t1")
    assert [(c.name, str(c.type)) for c in t1.schema.columns] == [
        ("id", "long"), ("s", "string"), ("d", "decimal(10,2)"), ("tags", "array<string>"),
        ("ts", "timestamp")]
    assert t1.schema.properties["bucket_number"] == "2"
    assert t1.schema.properties["bucket_columns"] == "id"
    # IF NOT EXISTS over an existing table: nothing changes
    spark.sql("CREATE TABLE IF NOT EXISTS mk.t1 (id BIGINT) USING carbonstore")
    assert len(store.table("mk.t1").schema.columns) == 5
    # OPTIONS (store ...) creates in that store; the default database is the current one
    spark.sql(f"CREATE TABLE t2 (k INT) USING carbonstore OPTIONS (store '{other}')")
    assert [c.name for c in Store(other).table("default.t2").schema.columns] == ["k"]
    spark.sql("INSERT INTO t2 VALUES (7)")
    assert spark.sql("SELECT k FROM default.t2").collect()[0][0] == 7
    # CREATE ... AS SELECT: the query's columns, its rows in one segment
    spark.sql("CREATE TABLE mk.t3 USING carbonstore AS SELECT id * 2 AS id2 FROM range(5)")
    assert sorted(r[0] for r in spark.table("mk.t3").collect()) == [0, 2, 4, 6, 8]
    assert [c.name for c in store.table("mk.t3").schema.columns] == ["id2"]
    # OPTIONS (table ...) names the store table: the catalog name is the statement's
    spark.sql("CREATE TABLE default.ctest (id long, s string) USING carbonstore "
              "OPTIONS (table 'mk.cities')")
    spark.sql("INSERT INTO default.ctest VALUES (1, 'a')")
    assert len(store.table("mk.cities").status.read().entries) == 1
    assert spark.sql("SELECT s FROM default.ctest").collect()[0][0] == "a"
    # DROP TABLE of a table CREATE made drops the store table too (a managed table) ...
    spark.sql("DROP TABLE mk.t3")
    assert "mk.t3" not in {str(t) for t in store.tables()}
    assert not spark.catalog.tableExists("mk.t3")
    spark.sql("DROP TABLE default.ctest")
    assert "mk.cities" not in {str(t) for t in store.tables()}
    spark.sql("DROP TABLE default.t2")
    assert list(Store(other).tables()) == []
    # ... of a table register attached, only the name (an external table)
    third = Store(str(tmp_path / "third"))
    third.create_table("mk.ext", "x int")
    carbonstore.spark.register(spark, store=third)
    spark.sql("DROP TABLE mk.ext")
    assert not spark.catalog.tableExists("mk.ext")
    assert [str(t) for t in third.tables()] == ["mk.ext"]


@pytest.mark.parametrize("statement, words", [
    ("CREATE TABLE mk.bad (id BIGINT) USING carbonstore TBLPROPERTIES ('sortcolumns'='id')",
     "unknown table property"),
    ("CREATE TABLE mk.bad (id BIGINT) USING carbonstore TBLPROPERTIES ('sort_columns'='nope')",
     "nope"),
    ("CREATE TABLE mk.bad (id BIGINT, t TIMESTAMP_NTZ) USING carbonstore", "timestamp_ntz"),
    ("CREATE TABLE mk.bad (id BIGINT) USING carbonstore LOCATION '/tmp/x'", "not supported"),
    ("CREATE OR REPLACE TABLE mk.bad (id BIGINT) USING carbonstore", "OR REPLACE"),
    ("CREATE TABLE mk.bad (id BIGINT) USING carbonstore OPTIONS (sort_columns 'id')",
     "unknown option"),
    ("CREATE TABLE mk.bad USING carbonstore", "mk.bad"),  # no columns, no store table
    ("-- a comment first\n/* and another */ CREATE TABLE mk.bad (id BIGINT) USING carbonstore "
     "TBLPROPERTIES ('nosuch'='1')", "unknown table property"),
    ("CREATE TABLE mk.bad (id BIGINT GENERATED ALWAYS AS (1 +)) USING carbonstore",
     "cannot read"),
])
def test_a_create_that_cannot_be_done_fails_in_one_line_and_creates_nothing(
    spark: Any, tmp_path: Path, statement: str, words: str,
) -> None:
    store = Store(str(tmp_path / "store"))
    carbonstore.spark.register(spark, store=store)
    with pytest.raises(Exception) as err:  # noqa: B017 - the store's own error types
        spark.sql(statement)
    assert isinstance(err.value, UserError), repr(err.value)
    text = str(err.value)
    assert "\n" not in text and words.lower() in text.lower(), text
    assert list(store.tables()) == [] and not spark.catalog.tableExists("mk.bad")


def test_an_existing_spark_table_of_another_provider_is_left_alone(
    spark: Any, tmp_path: Path,
) -> None:
    store = _shop(tmp_path)
    spark.sql("CREATE DATABASE IF NOT EXISTS shop")
    spark.sql("DROP TABLE IF EXISTS shop.cities")
    spark.sql(f"CREATE TABLE shop.cities (x INT) USING parquet LOCATION '{tmp_path / 'pq'}'")
    try:
        with pytest.raises(UserError, match="provider parquet"):
            carbonstore.spark.register(spark, store=store)
        assert spark.sql("DESCRIBE TABLE shop.cities").collect()[0][0] == "x"
    finally:
        spark.sql("DROP TABLE shop.cities")


# ---- without register -------------------------------------------------------------------------


def _one_line(err: BaseException) -> str:
    """The user-facing first part of a Spark error: its message before any trace."""
    return str(err).split("\n\nJVM stacktrace")[0]


def test_a_catalog_only_table_fails_in_one_line_at_first_use(spark: Any, tmp_path: Path) -> None:
    # a session register did not route: Spark creates a catalog-only table (it calls no
    # Python for CREATE with columns); its first read or write names what to do
    other = spark.newSession()
    store = str(tmp_path / "store")
    other.sql(f"CREATE TABLE default.ctest (id long, s string) USING carbonstore "
              f"OPTIONS (store '{store}', table 'shop.cities')")
    try:
        for statement in ("INSERT INTO default.ctest VALUES (1, 'a')",
                          "SELECT * FROM default.ctest"):
            with pytest.raises(Exception) as err:  # noqa: B017 - pyspark's error types
                other.sql(statement).collect()
            text = _one_line(err.value)
            assert "no table named" in text and "carbonstore.spark.register" in text, text
            assert len(text.splitlines()) <= 2 and "Traceback" not in text, text
    finally:
        other.sql("DROP TABLE default.ctest")


def test_the_data_source_needs_no_registration(spark: Any, tmp_path: Path) -> None:
    # a new session has none of get_spark's registrations: Spark finds the data source by
    # itself (the pyspark_carbonstore module)
    store = _shop(tmp_path)
    other = spark.newSession()
    df = other.read.format("carbonstore").option("store", store.location).load("shop.orders")
    assert df.count() == 300
    other.range(3).selectExpr("id + 500 AS order_id", "'w' AS city", "0.0 AS v") \
        .write.format("carbonstore").mode("append").option("store", store.location) \
        .save("shop.orders")
    assert other.read.format("carbonstore").option("store", store.location) \
        .load("shop.orders").count() == 303
    for bad in (lambda: other.read.format("carbonstore").load().count(),
                lambda: other.read.format("carbonstore").option("store", store.location)
                .load("shop.nosuch").count()):
        with pytest.raises(Exception) as err:  # noqa: B017 - pyspark's error types
            bad()
        text = _one_line(err.value)
        assert len(text.splitlines()) <= 2 and "Traceback" not in text, text


# ---- reads by name are pruned per occurrence -------------------------------------------------

_PRUNE_SEGMENTS = 8


def _pruned_store(root: Path) -> tuple[Store, pa.Table]:
    """shop.lines: 8 segments of 100 rows (one file each), order_id ascending across them,
    nulls in city and v; the store reads through Spark's files, never the driver-local
    read (so the files a statement reads are its DataFrame's inputFiles)."""
    from carbonstore.store import load_conf

    store = Store(str(root / "store"),
                  conf=load_conf().with_overrides({"carbon.read.local.rows": "0"}))
    t = store.create_table("shop.lines", "order_id long not null, city string, v double")
    parts = []
    for k in range(_PRUNE_SEGMENTS):
        ids = np.arange(k * 100, (k + 1) * 100)
        parts.append(pa.table({
            "order_id": ids,
            "city": [None if i % 7 == 0 else f"c{i % 5}" for i in ids],
            "v": [None if i % 11 == 0 else float(i % 50) / 4 for i in ids]}))
    add_segments(t, parts, row_group_size=50, page_rows=10)
    return store, pa.concat_tables(parts)


def _files(store: Store) -> int:
    return sum(len(list(Path(store.location).rglob(f"*.{ext}")))
               for ext in ("parquet", "carbondata"))


def test_a_filtered_read_by_name_reads_only_the_kept_files(spark: Any, tmp_path: Path) -> None:
    store, _ = _pruned_store(tmp_path)
    assert _files(store) == _PRUNE_SEGMENTS
    carbonstore.spark.register(spark, store=store, tables=["shop.lines"])
    df = spark.sql("SELECT order_id, city FROM shop.lines WHERE order_id = 123")
    assert [tuple(r) for r in df.collect()] == [(123, "c3")]
    read = df.inputFiles()
    assert len(read) == 1 and "/shop/lines/" in read[0].replace("\\", "/")  # 1 file of 8
    # a range keeps the segments it overlaps, a join prunes each side by its own filter
    assert len(spark.sql("SELECT * FROM shop.lines WHERE order_id BETWEEN 250 AND 420")
               .inputFiles()) == 3
    joined = spark.sql("SELECT b.order_id FROM shop.lines a JOIN shop.lines b "
                       "ON a.order_id + 700 = b.order_id WHERE a.order_id < 50 "
                       "AND b.order_id >= 700")
    assert sorted(r[0] for r in joined.collect()) == list(range(700, 750))
    assert len(joined.inputFiles()) == 2  # a: segment 0, b: segment 7


def test_reads_by_name_answer_every_scan_of_a_statement_and_a_reused_frame(
        spark: Any, tmp_path: Path) -> None:
    """What a pruning pushFilters would get wrong on PySpark 4.3 (docs/semantics.md,
    "Spark's reader reuse"): two scans of one table in one statement, a frame reused with
    and without a filter."""
    store, _ = _pruned_store(tmp_path)
    carbonstore.spark.register(spark, store=store, tables=["shop.lines"])
    got = {r.k: r.n for r in spark.sql(
        "SELECT 'a' AS k, count(*) AS n FROM shop.lines WHERE order_id = 5 UNION ALL "
        "SELECT 'b', count(*) FROM shop.lines WHERE order_id = 705 UNION ALL "
        "SELECT 'all', count(*) FROM shop.lines").collect()}
    assert got == {"a": 1, "b": 1, "all": 800}
    df = spark.sql("SELECT * FROM shop.lines")
    assert df.where("order_id = 123").count() == 1
    assert df.count() == 800
    # time travel by name (Spark refuses it for a Python data source's table)
    version = store.table("shop.lines").status.read().version
    add_segments(store.table("shop.lines"), [pa.table(
        {"order_id": np.arange(800, 810), "city": ["z"] * 10, "v": np.zeros(10)})])
    assert spark.sql("SELECT count(*) FROM shop.lines").collect()[0][0] == 810
    assert spark.sql(f"SELECT count(*) FROM shop.lines VERSION AS OF {version} "
                     "WHERE city IS NULL").collect()[0][0] == 115


def test_a_name_another_session_replaced_is_read_from_spark(spark: Any, tmp_path: Path) -> None:
    """Spark's catalog is shared by the JVM's sessions: a registered name another session
    dropped and re-created as a Parquet table is that table, not the store's."""
    store, _ = _pruned_store(tmp_path)
    carbonstore.spark.register(spark, store=store, tables=["shop.lines"])
    assert spark.sql("SELECT count(*) FROM shop.lines WHERE order_id < 10").collect()[0][0] == 10
    from carbonstore.spark import catalog

    # Spark's own spark.sql, past register's routing: as another session's statements
    other = getattr(spark, catalog._STATE_ATTR).original_sql
    other("DROP TABLE shop.lines")
    other(f"CREATE TABLE shop.lines USING parquet LOCATION '{tmp_path / 'pq'}' "
          "AS SELECT 7L AS order_id")
    try:
        assert [tuple(r) for r in spark.sql(
            "SELECT order_id FROM shop.lines WHERE order_id < 10").collect()] == [(7,)]
    finally:
        other("DROP TABLE shop.lines")


_BY_NAME_LEAVES = st.one_of(
    st.builds("order_id {} {}".format, st.sampled_from(["=", "<", "<=", ">", ">=", "<>"]),
              st.integers(-5, 805)),
    st.builds("v {} {}".format, st.sampled_from(["<", ">=", "=", "<>"]),
              st.sampled_from(["-1", "0", "2.5", "12.25", "100"])),
    st.builds("city = 'c{}'".format, st.integers(0, 5)),
    st.builds("city IN ('c{}', 'c{}')".format, st.integers(0, 5), st.integers(0, 5)),
    st.sampled_from(["city IS NULL", "v IS NULL", "v IS NOT NULL", "city LIKE 'c1%'",
                     "order_id % 3 = 0", "length(city) = 2"]),
)
_BY_NAME_WHERE = st.recursive(
    _BY_NAME_LEAVES,
    lambda inner: st.one_of(st.builds("({}) AND ({})".format, inner, inner),
                            st.builds("({}) OR ({})".format, inner, inner),
                            st.builds("NOT ({})".format, inner)),
    max_leaves=4)


@pytest.fixture(scope="module")
def by_name(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> tuple[Store, pa.Table]:
    store, rows = _pruned_store(tmp_path_factory.mktemp("by_name"))
    carbonstore.spark.register(spark, store=store, tables=["shop.lines"])
    return store, rows


@settings(max_examples=int(os.environ.get("CARBONSTORE_SCAN_EXAMPLES", "8")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(where=_BY_NAME_WHERE)
def test_random_filters_by_name_equal_duckdb(spark: Any, by_name: Any, where: str) -> None:
    _, rows = by_name
    query = ("SELECT order_id, city, v FROM {t} WHERE {w} ORDER BY order_id")
    got = [tuple(r) for r in spark.sql(query.format(t="shop.lines", w=where)).collect()]
    con = duckdb.connect()
    con.register("lines", rows)
    want = con.execute(query.format(t="lines", w=where)).fetchall()
    assert got == [tuple(r) for r in want], where
