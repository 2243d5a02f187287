"""carbonstore over Spark Connect: a local Connect server (pyspark's own jars, started by
spark-submit here, bounded in time and memory) and a client session over sc://."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import carbonstore.spark
from carbonstore import Store
from carbonstore.errors import UserError
from tests.indexfiles.segbuild import add_segments
from tests.spark.test_tables_by_name import duckdb_answers, same_answers, user_script

# each test well under a minute on a quiet machine; 420 s bounds a loaded one
pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_SECONDS = 120


def _client_ready() -> str | None:
    """Why the Connect client cannot run here (None: it can)."""
    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except Exception as err:  # noqa: BLE001 - pyspark's own dependency errors
        return f"Spark Connect client dependencies missing ({err}): pip install 'pyspark[connect]'"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark Connect session on a local server started for this module (local[2], 768 MB
    driver, UI off), stopped after it."""
    reason = _client_ready()
    if reason:
        pytest.skip(reason)
    import pyspark
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    spark_home = Path(pyspark.__file__).parent
    if not list((spark_home / "jars").glob("spark-connect_*.jar")):
        pytest.skip("this pyspark has no Spark Connect server jar")
    port = _free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_HOME=str(spark_home),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYSPARK_GATEWAY_PORT", None)
    cmd = [str(spark_home / "bin" / "spark-submit"), "--master", "local[2]",
           "--driver-memory", "768m", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.sql.shuffle.partitions=2",
           "--conf", "spark.sql.session.timeZone=UTC",
           "--conf", f"spark.connect.grpc.binding.port={port}",
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", "spark.driver.extraJavaOptions=-Dderby.system.home=/tmp",
           "--class", SERVER_CLASS, "spark-internal"]
    with open(log, "wb") as out:
        server = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                  cwd=str(log.parent), start_new_session=True)
    try:
        deadline = time.monotonic() + START_SECONDS
        while "Spark Connect server started" not in log.read_text(errors="replace"):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the Connect server did not start:\n"
                            + log.read_text(errors="replace")[-3000:])
            time.sleep(0.5)
        # the Connect client's own builder: the classic one refuses a remote session while
        # the suite's local session runs (SESSION_ALREADY_EXIST)
        session = RemoteSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
        yield session
        session.stop()
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)


def _orders(root: Path) -> Store:
    store = Store(str(root / "store"))
    orders = store.create_table("shop.orders", "order_id long not null, city string, v double")
    add_segments(orders, [pa.table({"order_id": np.arange(k * 100, (k + 1) * 100),
                                    "city": [f"c{i % 4}" for i in range(100)],
                                    "v": np.arange(100) / 4}) for k in range(3)])
    return store


def _one_line(err: BaseException) -> str:
    return str(err).split("\n\nJVM stacktrace")[0]


def test_read_append_and_queries_by_name_over_connect(connect: Any, tmp_path: Path) -> None:
    store = _orders(tmp_path)
    # no registration: the server finds the data source by itself
    df = connect.read.format("carbonstore").option("store", store.location).load("shop.orders")
    assert df.where("city = 'c1'").count() == 75
    connect.createDataFrame([(900, "w", 1.0), (901, "w", 2.0)],
                            "order_id long, city string, v double") \
        .write.format("carbonstore").mode("append").option("store", store.location) \
        .save("shop.orders")
    assert len(store.table("shop.orders").status.read().entries) == 4
    assert carbonstore.spark.register(connect, store=store) == ["shop.orders"]
    assert connect.sql("SELECT count(*) FROM shop.orders").collect()[0][0] == 302
    connect.sql("INSERT INTO shop.orders VALUES (902, 'w', 3.0)")
    rows = connect.sql("SELECT city, sum(v) AS s FROM shop.orders WHERE city = 'w' "
                       "GROUP BY city").collect()
    assert [(r.city, r.s) for r in rows] == [("w", 6.0)]
    # errors are one line over Connect too
    with pytest.raises(Exception) as err:  # noqa: B017 - pyspark's error types
        connect.read.format("carbonstore").option("store", store.location) \
            .load("shop.nosuch").count()
    text = _one_line(err.value)
    assert "shop.nosuch" in text and len(text.splitlines()) <= 2, text
    with pytest.raises(UserError, match="unknown table property"):
        connect.sql("CREATE TABLE shop.bad (id INT) USING carbonstore "
                    "TBLPROPERTIES ('nosuch'='1')")


def test_a_query_by_name_over_connect_reads_only_the_kept_files(
        connect: Any, tmp_path: Path) -> None:
    from carbonstore.store import load_conf

    store = Store(_orders(tmp_path).location,
                  conf=load_conf().with_overrides({"carbon.read.local.rows": "0"}))
    carbonstore.spark.register(connect, store=store)
    df = connect.sql("SELECT order_id, city FROM shop.orders WHERE order_id = 150")
    assert [tuple(r) for r in df.collect()] == [(150, "c2")]
    assert len(df.inputFiles()) == 1  # of 3
    got = {r.k: r.n for r in connect.sql(
        "SELECT 'one' AS k, count(*) AS n FROM shop.orders WHERE order_id = 5 UNION ALL "
        "SELECT 'all', count(*) FROM shop.orders").collect()}
    assert got == {"one": 1, "all": 300}


def test_user_script_over_connect_equals_duckdb(connect: Any, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    same_answers(user_script(connect, store, "shopc"), duckdb_answers("shopc"))
    assert Store(store).table("shopc.orders").schema.properties["sort_columns"] == "order_id"


def test_dml_through_carbonstore_sql_over_connect(connect: Any, tmp_path: Path) -> None:
    from carbonstore.spark.sql import sql as carbon_sql

    store = _orders(tmp_path)
    carbonstore.spark.register(connect, store=store)
    carbon_sql(connect, "DELETE FROM shop.orders WHERE order_id < 10", store=store)
    assert connect.sql("SELECT count(*) FROM shop.orders").collect()[0][0] == 290
    assert carbon_sql(connect, "SELECT count(*) FROM shop.orders WHERE order_id < 20",
                      store=store).collect()[0][0] == 10
