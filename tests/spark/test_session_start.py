"""start_spark: the session started on a background thread while the command plans."""

from __future__ import annotations

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
