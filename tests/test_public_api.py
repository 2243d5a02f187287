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
from carbonstore.store import StoreRoot as StoreLayerStore

ROOT = Path(__file__).resolve().parent.parent


def test_all_names_resolve() -> None:
    assert sorted(carbonstore.__all__) == [
        "Store", "Table", "TablePlan", "clean_files", "compact", "errors", "prune"]
    for name in carbonstore.__all__:
        assert getattr(carbonstore, name) is not None
    assert carbonstore.errors is errors
    assert carbonstore.Store is ApiStore and carbonstore.Table is ApiTable
    assert set(carbonstore.__all__) <= set(dir(carbonstore))


def test_one_public_store_class() -> None:
    """``carbonstore.Store`` is the only class named Store: the store layer's base is
    ``StoreRoot`` (not importable as ``carbonstore.store.Store``)."""
    import carbonstore.store
    import carbonstore.store.table

    assert not hasattr(carbonstore.store, "Store")
    assert not hasattr(carbonstore.store.table, "Store")
    assert issubclass(ApiStore, StoreLayerStore) and StoreLayerStore.__name__ == "StoreRoot"
    defined = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "carbonstore").rglob("*.py")
                     if "\nclass Store(" in p.read_text() or "\nclass Store:" in p.read_text())
    assert defined == ["carbonstore/api.py"]


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


def test_the_package_is_typed_and_results_are_typed() -> None:
    import typing

    from carbonstore.segments.dml_commit import DmlResult
    from carbonstore.table.append import AppendResult
    from carbonstore.table.scan import TableScan

    assert (ROOT / "carbonstore" / "py.typed").is_file()
    from carbonstore.segments.partitions import PartitionInfo

    # the names api.py imports for type checkers only
    names = {"DmlResult": DmlResult, "AppendResult": AppendResult, "TableScan": TableScan,
             "PartitionInfo": PartitionInfo}
    hints = {name: typing.get_type_hints(getattr(ApiTable, name), localns=names)["return"]
             for name in ("delete", "update", "merge", "scan", "append", "alter")}
    assert hints == {"delete": DmlResult, "update": DmlResult, "merge": DmlResult,
                     "scan": TableScan, "append": AppendResult, "alter": ApiTable}


def test_options_are_keyword_only(tmp_path: Path) -> None:
    import inspect

    for cls, name in ((ApiStore, "create_table"), (ApiTable, "scan"), (ApiTable, "append"),
                      (ApiTable, "alter"), (ApiTable, "merge"), (ApiTable, "delete")):
        params = list(inspect.signature(getattr(cls, name)).parameters.values())[1:]
        positional = [p.name for p in params if p.kind is not p.KEYWORD_ONLY]
        assert positional == {"create_table": ["name", "schema"], "append": ["data"],
                              "merge": ["source"], "delete": ["where"]}.get(name, []), name


def test_create_table_takes_the_layout_as_keywords(tmp_path: Path) -> None:
    store = carbonstore.Store(str(tmp_path / "s"))
    t = store.create_table("db.t", "id long not null, city string, day date",
                           sort_columns=["id"], dictionary_columns="city", partition_by="day",
                           bloom_columns="id", properties={"page_rows": "100"})
    assert list(t.schema.sort_columns) == ["id"] and t.schema.sort_scope == "local_sort"
    assert list(t.schema.dictionary_columns) == ["city"]
    assert list(t.schema.bloom_columns) == ["id"]
    assert t.schema.properties["partition_by"] == "day"
    with pytest.raises(errors.UserError, match="sort_columns is given twice"):
        store.create_table("db.u", "id long", sort_columns="id",
                           properties={"SORT_COLUMNS": "id"})
    with pytest.raises(TypeError):
        store.create_table("db.v", "id long", None)  # type: ignore[misc]


def test_alter_is_one_schema_version(tmp_path: Path) -> None:
    store = carbonstore.Store(str(tmp_path / "s"))
    t = store.create_table("db.t", "id long not null, a int, b string")
    before = len(t.schema_versions())
    t2 = t.alter(add_columns="c double", drop_columns="b", rename_column=("a", "aa"),
                 widen=("aa", "long"), set_properties={"page_rows": "500"})
    assert type(t2) is ApiTable
    assert [(c.name, str(c.type)) for c in t2.schema.columns] == [
        ("id", "long"), ("aa", "long"), ("c", "double")]
    assert t2.schema.properties["page_rows"] == "500"
    assert len(t2.schema_versions()) == before + 1
    with pytest.raises(errors.UserError, match="give at least one change"):
        t2.alter()


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_merge_on_is_checked_in_one_line(tmp_path: Path) -> None:
    import pyarrow as pa

    store = carbonstore.Store(str(tmp_path / "s"))
    t = store.create_table("db.t", "id long not null, v string")
    t.append(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    src = pa.table({"id": [2, 3], "v": ["B", "C"]})
    for on, message in (("nope", "'nope' is not a column of table db.t"),
                        (["id", "w"], "'w' is not a column of table db.t"),
                        ("id = id", "column 'id' is unqualified: name it as t.id"),
                        ("t.id = x.id", "column 'id' is qualified by 'x'")):
        with pytest.raises(errors.UserError, match=message) as err:
            t.merge(src, on=on, when_matched_update="*")
        assert "Binder Error" not in str(err.value) and "\n" not in str(err.value)
    t.merge(src, on="id", when_matched_update="*", when_not_matched_insert="*")
    got = sorted(t.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": 1, "v": "a"}, {"id": 2, "v": "B"}, {"id": 3, "v": "C"}]


def test_the_command_line_opens_the_users_store(tmp_path: Path) -> None:
    import argparse

    from carbonstore.cli._common import open_store

    store = open_store(argparse.Namespace(store=str(tmp_path / "s"), conf=None))
    assert type(store) is ApiStore
