"""Table names and segment ids: validation, traversal attempts, case-insensitivity."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.errors import InvalidNameError, TableExistsError, TableNotFoundError
from carbonstore.store import TableName, parse_table_name
from carbonstore.store.paths import TablePaths, check_segment_id, segment_dir_name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sales", TableName("default", "sales")),
        ("mydb.sales", TableName("mydb", "sales")),
        ("MyDb.Sales", TableName("mydb", "sales")),
        ("SALES_2024", TableName("default", "sales_2024")),
        ("_x.1", TableName("_x", "1")),
        ("a" * 128, TableName("default", "a" * 128)),
        ("d" * 128 + "." + "t" * 128, TableName("d" * 128, "t" * 128)),
    ],
)
def test_valid_names(text: str, expected: TableName) -> None:
    assert parse_table_name(text) == expected


BAD_NAMES = [
    "",
    ".",
    "..",
    "../x",
    "../../etc/passwd",
    "x/..",
    "a/b",
    "db/t.x",
    "/abs",
    "/tmp/x",
    "a\\b",
    "..\\x",
    "a..b",
    "db.t.x",
    ".t",
    "t.",
    "db..t",
    "~",
    "~/x",
    "a b",
    " sales",
    "sales ",
    "sales\n",
    "sales\x00",
    "a%2fb",
    "a-b",
    "a:b",
    "file://x",
    "café",
    "таблица",
    "表",
    "\u0661\u0662",  # Arabic-Indic digits: \d would accept them
    "ｓａｌｅｓ",  # full-width letters
    "a" * 129,
    "db." + "t" * 129,
]


@pytest.mark.parametrize("text", BAD_NAMES)
def test_invalid_names_are_refused(text: str) -> None:
    with pytest.raises(InvalidNameError, match="table name"):
        parse_table_name(text)


def test_non_string_name_is_refused() -> None:
    with pytest.raises(InvalidNameError):
        parse_table_name(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["../x", "a/b", "/abs", "a..b", "db.t.x", "..", "x\n"])
def test_store_refuses_traversal_and_writes_nothing(tmp_path: Path, text: str) -> None:
    root = tmp_path / "store"
    store = Store(str(root))
    with pytest.raises(InvalidNameError):
        store.create_table(text, "id long")
    with pytest.raises(InvalidNameError):
        store.table(text)
    with pytest.raises(InvalidNameError):
        store.drop_table(text)
    # Nothing was created anywhere under tmp_path (not in the store, not beside it).
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_names_are_case_insensitive(store: Store) -> None:
    store.create_table("MyDb.Sales", "id long")
    assert store.exists("mydb.sales")
    assert store.exists("MYDB.SALES")
    assert store.table("mYdB.sAlEs").name == TableName("mydb", "sales")
    assert [str(n) for n in store.tables()] == ["mydb.sales"]
    # The folders on disk are lower case, so two spellings can never be two tables.
    assert os.path.isdir(os.path.join(store.sfs.base, "mydb", "sales", "Metadata"))
    with pytest.raises(TableExistsError, match="mydb.sales already exists"):
        store.create_table("MYDB.sales", "id long")
    store.drop_table("MYDB.SALES")
    assert not store.exists("mydb.sales")
    with pytest.raises(TableNotFoundError):
        store.table("mydb.sales")


def test_default_database(store: Store) -> None:
    t = store.create_table("Orders", "id long")
    assert str(t.name) == "default.orders"
    assert store.table("default.orders").schema.columns == t.schema.columns


@pytest.mark.parametrize("seg", ["0", "3", "12", "3.1", "10.22"])
def test_valid_segment_ids(seg: str) -> None:
    assert check_segment_id(seg) == seg
    assert segment_dir_name(seg) == f"Segment_{seg}"


@pytest.mark.parametrize(
    "seg", ["", ".", "..", "../3", "3/..", "3.", ".3", "3.1.2", "-1", "a", "3\n", "\u0663", "3 ", "1e3"]
)
def test_invalid_segment_ids(store: Store, seg: str) -> None:
    with pytest.raises(InvalidNameError, match="segment id"):
        check_segment_id(seg)
    t = store.create_table("t", "id long")
    with pytest.raises(InvalidNameError):
        t.paths.segment_dir(seg)
    with pytest.raises(InvalidNameError):
        t.locks.segment(seg)


def test_paths_follow_the_layout(store: Store) -> None:
    t = store.create_table("db.t", "id long")
    p: TablePaths = t.paths
    root = os.path.join(store.sfs.base, "db", "t")
    assert p.root == root
    assert p.schema == f"{root}/Metadata/schema"
    assert p.tablestatus == f"{root}/Metadata/tablestatus"
    assert p.tablestatus_backup == f"{root}/Metadata/tablestatus.backup"
    assert p.tablestatus_history == f"{root}/Metadata/tablestatus.history"
    assert p.dictionary_dir == f"{root}/Metadata/dictionary"
    assert p.stats_dir == f"{root}/Metadata/stats"
    assert p.fact_dir == f"{root}/Fact/Part0"
    assert p.segment_dir("2.1") == f"{root}/Fact/Part0/Segment_2.1"
    assert p.lock_dir == f"{root}/LockFiles"
    assert p.relative(p.segment_dir("0")) == "Fact/Part0/Segment_0"
    assert os.path.isfile(p.schema)
    assert os.path.isdir(p.fact_dir)
