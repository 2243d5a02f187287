"""Fixtures of the index-file tests: the parquet-testing corpus and a local filesystem."""

from __future__ import annotations

from pathlib import Path

import pyarrow.fs as pafs
import pytest

CORPUS_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "parquet-testing"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS_DIR.is_dir():
        pytest.skip(f"parquet-testing corpus not found at {CORPUS_DIR}")
    return CORPUS_DIR


@pytest.fixture(scope="session")
def local_fs() -> pafs.LocalFileSystem:
    return pafs.LocalFileSystem()
