"""Fixtures of the index-file tests: a local filesystem (the corpus is tests/conftest.py's)."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest


@pytest.fixture(scope="session")
def local_fs() -> pafs.LocalFileSystem:
    return pafs.LocalFileSystem()
