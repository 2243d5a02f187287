"""Fixtures: a table with dictionary columns of several types."""

from __future__ import annotations

import pytest

from carbonstore import Store, Table
from carbonstore.dictionary import clear_cache

SCHEMA = "id long, city string, code int, day date, price decimal(10,2), ts timestamp, raw binary"
DICT_COLUMNS = "city,code,day,price,ts,raw"


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_cache()


@pytest.fixture
def table(store: Store) -> Table:
    return store.create_table("t", SCHEMA, properties={"dictionary_include": DICT_COLUMNS})


@pytest.fixture
def small_chunks(store: Store) -> Table:
    """A string-dictionary table whose chunks hold at most 3 values."""
    s = Store(store.location, conf=store.conf.with_overrides({"carbon.dictionary.chunk.size": "3"}))
    return s.create_table("small", "id long, s string", properties={"dictionary_include": "s"})
