"""Fixtures of the snapshot tests: the small generated table (tests/pruning/small_scale.py),
one per test module, and snapshot chunks of its size."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from carbonstore.indexfiles import snapshot_write
from carbonstore.pruning import snapshot_chunks
from carbonstore.pruning.cache import clear_cache
from tests.pruning.small_scale import CHUNK, generate


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(snapshot_write, "CHUNK_SEGMENTS", CHUNK)
    monkeypatch.setattr(snapshot_chunks, "CHUNK_SEGMENTS", CHUNK)
    yield
    clear_cache()


@pytest.fixture(scope="module")
def generated(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    out = str(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]) / "store")
    return out, generate(out)
