"""start_spark: the session started on a background thread while the command plans."""

from __future__ import annotations

from pathlib import Path

import pytest

import carbonstore.spark.session as session
from carbonstore.errors import ConfigError
from carbonstore.spark.session import start_spark


def test_the_wait_returns_the_session_get_spark_gives(spark: object) -> None:
    wait = start_spark()
    assert wait() is spark
    assert wait() is spark  # waiting again returns it again


def test_the_start_s_failure_reaches_the_caller_at_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(**_: object) -> None:
        raise ConfigError("spark.master: no such master")

    monkeypatch.setattr(session, "get_spark", failing)
    wait = start_spark()
    with pytest.raises(ConfigError, match="no such master"):
        wait()


def test_the_session_is_active_in_the_waiting_thread(spark: object) -> None:
    """Spark's active session is per thread: the one started on the background thread is
    made active in the thread that waits (code that asks for the active session finds it)."""
    import threading

    from pyspark.sql import SparkSession

    seen: list[object] = []

    def caller() -> None:  # a thread of its own, as the command's main thread is to the start
        before = SparkSession.getActiveSession()
        wait = start_spark()
        seen.extend([before, wait(), SparkSession.getActiveSession()])

    t = threading.Thread(target=caller)
    t.start()
    t.join()
    assert seen[1] is spark
    assert seen[2] is spark


def test_prepare_scan_leaves_every_failure_to_the_scan(tmp_path: Path) -> None:
    """What the command prepares while the JVM boots never fails the command early: a filter
    that does not bind or parse, a damaged index - the scan reports them, as before."""
    import pyarrow as pa

    from carbonstore import Store
    from carbonstore.spark.api import prepare_scan
    from tests.indexfiles.segbuild import add_segments

    store = Store(str(tmp_path / "s"))
    rows = pa.table({"k": pa.array(range(100), pa.int32()), "v": pa.array(range(100), pa.int64())})
    table = store.create_table("db.t", "k int not null, v long")
    add_segments(table, [rows])
    for where in (None, "k = 3", "nope = 1", "k = = 3", "k = 3 AND v > 'x'"):
        prepare_scan(table, where)
    damaged = store.create_table("db.u", "k int not null, v long")  # never planned before
    add_segments(damaged, [rows])
    indexes = list((tmp_path / "s" / "db" / "u").rglob("*.carbonindex*"))
    assert indexes
    for index in indexes:
        index.write_bytes(b"damaged")
    prepare_scan(Store(str(tmp_path / "s")).table("db.u"), "k = 3")
