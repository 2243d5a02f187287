"""Shared fixtures: a temporary store, the parquet-testing corpus, one SparkSession."""

from __future__ import annotations

import os
import sys
import tempfile
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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``spark`` every test that uses the ``spark`` fixture, directly or through other
    fixtures (before ``-m`` selects), so ``-m "not spark"`` starts no JVM. A test that starts
    Spark another way (a child process running a Spark command) carries the mark itself."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


def pytest_configure(config: pytest.Config) -> None:
    """In a run that leaves out ``spark`` tests (the README's run of the tests that need no
    JVM), launching a JVM fails, so a test that needs Spark without the ``spark`` fixture or
    mark fails with this message instead of starting one unseen: in this process through
    PySpark's gateway launcher, in a child process (a CLI command the test runs) through a
    SPARK_HOME whose ``spark-submit`` refuses."""
    if "not spark" not in (config.option.markexpr or ""):
        return
    import pyspark.core.context as context

    message = ("this run leaves out spark tests, and a test started Spark: "
               "give it the spark fixture or the spark mark")

    def refuse(*_: object, **__: object) -> None:
        raise RuntimeError(message)

    context.launch_gateway = refuse  # what SparkContext._ensure_initialized calls
    home = Path(tempfile.mkdtemp(prefix="no-spark-home-"))
    submit = home / "bin" / "spark-submit"
    submit.parent.mkdir()
    submit.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    submit.chmod(0o755)
    os.environ["SPARK_HOME"] = str(home)  # children inherit it; PySpark launches from it


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for the whole run (UI off, 2 shuffle partitions)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from carbonstore.spark.session import get_spark

    session = get_spark(master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()
