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
