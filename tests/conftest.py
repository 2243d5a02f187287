"""Shared fixtures: a temporary store, the parquet-testing corpus, one SparkSession."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.store import load_conf

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "parquet-testing"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An empty store in a temporary folder, with short lock timeouts."""
    conf = load_conf(None).with_overrides(
        {"carbon.lock.retry.timeout.sec": "5", "carbon.lock.retries": "2"}
    )
    return Store(str(tmp_path / "store"), conf=conf)


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"parquet-testing corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for the whole run (UI off, 2 shuffle partitions)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from carbonstore.spark.session import get_spark

    session = get_spark(master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()
