"""Wrong answers around versions: ``VERSION AS OF`` / ``TIMESTAMP AS OF`` written in the
statement (each occurrence reads the version it names, never silently the latest), and
views of ``register`` seeing versions committed after they were made."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.dml import delete_rows
from carbonstore.errors import UserError
from carbonstore.segments.clean import clean_files
from carbonstore.segments.compaction import compact
from carbonstore.spark.sql import register, run_statement
from carbonstore.store import load_conf
from carbonstore.store.alter import alter_table, rename_column
from carbonstore.store.tablestatus import now_ms
from tests.indexfiles.segbuild import add_segments


def _part(k: int) -> pa.Table:
    ids = np.arange(k * 100, (k + 1) * 100)
    return pa.table({"id": ids, "city": [f"c{i % 4}" for i in ids], "v": ids / 3})


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """db.t: 2 loads (200 rows) at version ``two``, then a third (300 rows)."""
    root = tmp_path_factory.mktemp("versions")
    store = Store(str(root / "store"), conf=load_conf(None))
    t = store.create_table("db.t", "id long not null, city string, v double")
    add_segments(t, [_part(0), _part(1)], row_group_size=50, page_rows=10)
    two = t.status.read().version
    time.sleep(0.05)
    between = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() + 1))
    time.sleep(1.2)  # the timestamp above lies between the two versions
    add_segments(t, [_part(2)], row_group_size=50, page_rows=10)
    return {"store": store, "two": two, "between": between}


def _values(df: Any) -> list[Any]:
    return [tuple(r) for r in df.collect()]


@pytest.mark.parametrize("local_rows", ["100000", "0"])
def test_version_as_of_in_the_statement_is_honoured(
    spark: Any, versions: dict[str, Any], local_rows: str
) -> None:
    store = Store(versions["store"].location,
                  conf=versions["store"].conf.with_overrides({"carbon.read.local.rows": local_rows}))
    two = versions["two"]
    # answered from the index (count, max) and read by Spark (group by): both pinned
    assert _values(run_statement(spark, store, f"SELECT count(*) FROM db.t VERSION AS OF {two}")) == [(200,)]
    assert _values(run_statement(spark, store, f"SELECT max(id) FROM db.t FOR VERSION AS OF {two}")) == [(199,)]
    assert sorted(_values(run_statement(
        spark, store, f"SELECT city, count(*) FROM db.t VERSION AS OF {two} WHERE v >= 0 GROUP BY city"
    ))) == [("c0", 50), ("c1", 50), ("c2", 50), ("c3", 50)]
    # one statement, two versions of the same table
    assert _values(run_statement(
        spark, store,
        f"SELECT 'old', count(*) FROM db.t VERSION AS OF {two} WHERE id >= 150 "
        "UNION ALL SELECT 'new', count(*) FROM db.t WHERE id >= 150")) == [("old", 50), ("new", 150)]
    between = versions["between"]
    assert _values(run_statement(
        spark, store, f"SELECT count(*) FROM db.t TIMESTAMP AS OF '{between}'")) == [(200,)]
    assert _values(run_statement(spark, store, "SELECT count(*) FROM db.t")) == [(300,)]


def test_a_version_that_does_not_exist_is_an_error(spark: Any, versions: dict[str, Any]) -> None:
    store = versions["store"]
    with pytest.raises(UserError):
        run_statement(spark, store, "SELECT count(*) FROM db.t VERSION AS OF 999").collect()
    with pytest.raises(UserError):
        run_statement(spark, store, "SELECT count(*) FROM db.t TIMESTAMP AS OF '2001-01-01 00:00:00'").collect()


def _count(spark: Any, statement: str) -> Any:
    return spark.sql(statement).collect()[0][0]


def test_registered_views_see_new_versions_through_spark_sql(spark: Any, tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"), conf=load_conf(None))
    t = store.create_table("db.r", "id long not null, city string, v double")
    add_segments(t, [_part(0)])
    register(spark, store=store, tables=["db.r"])
    try:
        assert spark.sql("SELECT count(*) FROM db_r").collect()[0][0] == 100
        add_segments(t, [_part(1)])
        assert spark.sql("SELECT count(*) FROM db_r").collect()[0][0] == 200
        # DELETE: a delete delta, a new version
        delete_rows(t, "id < 30")
        assert _count(spark, "SELECT count(*) FROM db_r") == 170
        assert _count(spark, "SELECT min(id) FROM db_r") == 30
        # compaction, then clean files removes the compacted segments' files: a view that
        # kept its old plan would read files that are gone
        compact(t, "major")
        report = clean_files(t, dry_run=False, now=now_ms() + 2 * 3600 * 1000)
        assert report.removed_entries
        assert _count(spark, "SELECT count(*) FROM db_r") == 170
        assert _count(spark, "SELECT sum(id) FROM db_r") == sum(range(30, 200))
    finally:
        spark.catalog.dropTempView("db_r")


def test_registered_view_of_a_dropped_and_recreated_table(spark: Any, tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"), conf=load_conf(None))
    t = store.create_table("db.r", "id long not null, city string, v double")
    add_segments(t, [_part(0), _part(1)])
    register(spark, store=store, tables=["db.r"])
    try:
        assert _count(spark, "SELECT count(*) FROM db_r") == 200
        store.drop_table("db.r")
        with pytest.raises(Exception, match="db.r"):
            spark.sql("SELECT count(*) FROM db_r").collect()
        t = store.create_table("db.r", "id long not null, city string, v double")
        add_segments(t, [_part(5)])
        assert _values(spark.sql("SELECT count(*), min(id), max(id) FROM db_r")) == [(100, 500, 599)]
    finally:
        spark.catalog.dropTempView("db_r")


def test_a_registered_view_of_an_altered_table_fails_clearly_until_registered_again(
    spark: Any, tmp_path: Path
) -> None:
    store = Store(str(tmp_path / "store"), conf=load_conf(None))
    t = store.create_table("db.r", "id long not null, city string, v double")
    add_segments(t, [_part(0)])
    register(spark, store=store, tables=["db.r"])
    try:
        assert _values(spark.sql("SELECT city FROM db_r WHERE id = 5")) == [("c1",)]
        alter_table(t, rename_column("city", "town"), operation="rename")
        with pytest.raises(Exception, match="now has the columns id, town, v"):
            spark.sql("SELECT city FROM db_r WHERE id = 5").collect()
        register(spark, store=store, tables=["db.r"])
        assert _values(spark.sql("SELECT town FROM db_r WHERE id = 5")) == [("c1",)]
    finally:
        spark.catalog.dropTempView("db_r")


def test_two_registered_views_in_one_statement(spark: Any, tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"), conf=load_conf(None))
    r = store.create_table("db.r", "id long not null, city string, v double")
    s = store.create_table("db.s", "id long not null, city string, v double")
    add_segments(r, [_part(0)])
    add_segments(s, [_part(0), _part(1)])
    register(spark, store=store, tables=["db.r", "db.s"])
    join = "SELECT count(*) FROM db_r JOIN db_s ON db_r.id = db_s.id"
    try:
        assert _count(spark, join) == 100
        add_segments(r, [_part(1), _part(2)])
        assert _count(spark, join) == 200
        delete_rows(s, "id >= 150")
        assert _count(spark, join) == 150
    finally:
        spark.catalog.dropTempView("db_r")
        spark.catalog.dropTempView("db_s")


def test_a_registered_view_twice_in_one_statement_with_different_filters(
    spark: Any, tmp_path: Path
) -> None:
    store = Store(str(tmp_path / "store"), conf=load_conf(None))
    t = store.create_table("db.r", "id long not null, city string, v double")
    add_segments(t, [_part(0), _part(1)], row_group_size=50, page_rows=10)
    register(spark, store=store, tables=["db.r"])
    two = ("SELECT (SELECT count(*) FROM db_r WHERE id < 50), "
           "(SELECT count(*) FROM db_r WHERE city = 'c1' AND id >= 150)")
    self_join = ("SELECT count(*) FROM db_r a JOIN db_r b ON a.id = b.id + 100 "
                 "WHERE a.id >= 120 AND b.id < 60")
    union = ("SELECT 'lo', count(*) FROM db_r WHERE id < 10 "
             "UNION ALL SELECT 'hi', count(*) FROM db_r WHERE id >= 190")
    try:
        for _ in range(2):  # the second round: the statements again, same answers
            assert _values(spark.sql(two)) == [(50, sum(i % 4 == 1 for i in range(150, 200)))]
            assert _count(spark, self_join) == 40
            assert sorted(_values(spark.sql(union))) == [("hi", 10), ("lo", 10)]
        add_segments(t, [_part(2)], row_group_size=50, page_rows=10)
        assert _values(spark.sql(two)) == [(50, sum(i % 4 == 1 for i in range(150, 300)))]
        assert _count(spark, self_join) == 40
        assert sorted(_values(spark.sql(union))) == [("hi", 110), ("lo", 10)]
    finally:
        spark.catalog.dropTempView("db_r")
