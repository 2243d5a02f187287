"""``carbonstore``'s public API: the curated names, imported lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import carbonstore
from carbonstore import errors
from carbonstore.api import Store as ApiStore
from carbonstore.api import Table as ApiTable
from carbonstore.store import Store as StoreLayerStore

ROOT = Path(__file__).resolve().parent.parent


def test_all_names_resolve() -> None:
    assert sorted(carbonstore.__all__) == [
        "Store", "Table", "TablePlan", "clean_files", "compact", "errors", "prune"]
    for name in carbonstore.__all__:
        assert getattr(carbonstore, name) is not None
    assert carbonstore.errors is errors
    assert carbonstore.Store is ApiStore and carbonstore.Table is ApiTable
    assert set(carbonstore.__all__) <= set(dir(carbonstore))


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        carbonstore.nothing_here  # noqa: B018


def test_import_carbonstore_loads_no_other_module() -> None:
    code = ("import sys, carbonstore; "
            "print(sorted(m for m in sys.modules if m.startswith('carbonstore')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == "['carbonstore']"


def test_store_opens_tables_of_its_table_class(tmp_path: Path) -> None:
    store = carbonstore.Store(str(tmp_path / "s"))
    created = store.create_table("db.t", "id long not null")
    opened = store.table("db.t")
    assert type(created) is ApiTable and type(opened) is ApiTable
    assert type(opened.as_of(None)) is ApiTable
    assert callable(opened.delete) and callable(opened.merge)
    # the store layer's own Store opens the store layer's Table: no DML there
    plain = StoreLayerStore(str(tmp_path / "s")).table("db.t")
    assert not hasattr(plain, "delete")
    assert plain.schema == opened.schema
