"""Shared fixtures: a temporary store, the parquet-testing corpus, one SparkSession."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.store import load_conf

# The parquet-testing corpus (github.com/apache/parquet-testing), next to the repository.
# Tests take the ``corpus`` fixture; parametrized tests list files with corpus_files().
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "parquet-testing"


def corpus_files(pattern: str) -> list[Path]:
    """The corpus files matching ``pattern`` (a glob under the corpus), sorted; none when
    the corpus is missing (the tests parametrized by them then do not run)."""
    return sorted(CORPUS.glob(pattern)) if CORPUS.is_dir() else []


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An empty store in a temporary folder, with short lock timeouts."""
    conf = load_conf(None).with_overrides(
        {"carbon.lock.retry.timeout.sec": "5", "carbon.lock.retries": "2"}
    )
    return Store(str(tmp_path / "store"), conf=conf)


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The parquet-testing corpus folder (the test is skipped without it)."""
    if not CORPUS.is_dir():
        pytest.skip(f"parquet-testing corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def scratch_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One temporary folder for the whole run, for tests (property tests) that write a file
    per example; created on first use, under pytest's temporary root."""
    return tmp_path_factory.mktemp("scratch")


_SPARK_BEFORE = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``spark`` every test that uses the ``spark`` fixture, directly or through other
    fixtures (before ``-m`` selects), so ``-m "not spark"`` starts no JVM. A test that starts
    Spark another way (a child process running a Spark command) carries the mark itself."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


def _spark_running() -> bool:
    """Whether this process has a live SparkContext (without importing pyspark)."""
    context = sys.modules.get("pyspark.core.context")
    spark_context = getattr(context, "SparkContext", None)
    return getattr(spark_context, "_active_spark_context", None) is not None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_SPARK_BEFORE] = _spark_running()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """In a run that leaves out ``spark`` tests (the README's run of the tests that need no
    JVM), a test without the ``spark`` mark that starts a JVM in this process fails: use the
    ``spark`` fixture, or mark it."""
    result = yield
    if "not spark" in (item.config.option.markexpr or "") \
            and not item.get_closest_marker("spark") \
            and not item.stash.get(_SPARK_BEFORE, True) and _spark_running():
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is not None:  # the next test must not inherit it unnoticed
            session.stop()
        pytest.fail("this test started Spark without the spark fixture (or the spark mark)",
                    pytrace=False)
    return result


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for the whole run (UI off, 2 shuffle partitions)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from carbonstore.spark.session import get_spark

    session = get_spark(master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()
