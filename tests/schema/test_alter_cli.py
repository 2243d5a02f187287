"""'carbonstore alter' and ALTER TABLE through 'carbonstore sql': results and one-line refusals."""

from __future__ import annotations

import orjson
import pytest
from schema_helpers import load, read

from carbonstore import Store
from carbonstore.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store_path(store: Store) -> str:
    t = store.create_table("t", "id int not null, name string, price decimal(6,2)",
                           properties={"sort_columns": "id"})
    load(t, [{"id": 1, "name": "a", "price": None}])
    return store.location


def test_cli_sub_actions(capsys: pytest.CaptureFixture[str], store_path: str) -> None:
    s = ["--store", store_path]
    assert run(capsys, *s, "alter", "t", "add-column", "qty int default 3")[0] == 0
    assert run(capsys, *s, "alter", "t", "rename-column", "name", "label")[0] == 0
    assert run(capsys, *s, "alter", "t", "widen", "price", "decimal(10,2)")[0] == 0
    assert run(capsys, *s, "alter", "t", "set-property", "bloom_columns=label")[0] == 0
    assert run(capsys, *s, "alter", "t", "unset-property", "bloom_columns")[0] == 0
    code, out, _ = run(capsys, *s, "alter", "t", "drop-column", "qty", "--json")
    assert code == 0 and orjson.loads(out)["schemaVersion"] == 7
    t = Store(store_path).table("t")
    assert [(c.name, str(c.type)) for c in t.schema.columns] == [
        ("id", "int"), ("label", "string"), ("price", "decimal(10,2)")]
    rows, _ = read(t)
    assert rows.to_pylist() == [{"id": 1, "label": "a", "price": None}]


@pytest.mark.parametrize(("argv", "fragment"), [
    (("alter", "t", "widen", "id", "smallint"), "only widening"),
    (("alter", "t", "widen", "price", "decimal(6,1)"), "only widening"),
    (("alter", "t", "drop-column", "id"), "sort column"),
    (("alter", "t", "drop-column", "nope"), "no column 'nope'"),
    (("alter", "t", "add-column", "name string"), "already has a column"),
    (("alter", "t", "rename-column", "id", "name"), "already has a column"),
    (("alter", "t", "rename-column", "id"), "takes 2 argument"),
    (("alter", "t", "frobnicate", "x"), "unknown alter action"),
    (("alter", "t", "add-column"), "needs arguments"),
    (("alter", "nosuch", "drop-column", "x"), "does not exist"),
    (("alter", "t", "add-column", "x map<string"), "type"),
    (("sql", "ALTER TABLE t CHANGE id id smallint"), "only widening"),
    (("sql", "ALTER TABLE t ADD COLUMNS (name int)"), "already has a column"),
    (("sql", "ALTER TABLE t DROP COLUMN nope"), "no column"),
    (("sql", "ALTER TABLE t RENAME COLUMN id name"), "a TO b"),
    (("sql", "ALTER TABLE t SET TBLPROPERTIES ('nosuch'='1')"), "unknown table property"),
    (("sql", "ALTER TABLE t UNSET TBLPROPERTIES ('bloom_columns')"), "not set"),
])
def test_refusals_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], store_path: str, argv: tuple[str, ...], fragment: str
) -> None:
    code, out, err = run(capsys, "--store", store_path, *argv)
    assert code == 2, err
    assert out == "" and "Traceback" not in err
    assert len(err.splitlines()) == 1 and fragment in err, err
    assert Store(store_path).table("t").schema.schema_version == 1


def test_sql_statements(capsys: pytest.CaptureFixture[str], store_path: str) -> None:
    s = ["--store", store_path, "sql"]
    for stmt in [
        "ALTER TABLE t ADD COLUMNS (`名前` string default 'x', flag boolean)",
        "ALTER TABLE default.t RENAME COLUMN `名前` TO `ラベル`",
        "ALTER TABLE t CHANGE price price decimal(9,2)",
        "alter table t change column id ident bigint",
        "ALTER TABLE t ALTER COLUMN price TYPE decimal(10,2)",
        "ALTER TABLE t DROP COLUMNS (flag)",
        "ALTER TABLE t SET TBLPROPERTIES ('bloom_columns'='name', 'page_rows'='100')",
        "ALTER TABLE t UNSET TBLPROPERTIES ('page_rows')",
        "ALTER TABLE t UNSET TBLPROPERTIES IF EXISTS ('page_rows')",
    ]:
        code, _, err = run(capsys, *s, stmt)
        assert code == 0, (stmt, err)
    t = Store(store_path).table("t")
    assert [(c.name, str(c.type)) for c in t.schema.columns] == [
        ("ident", "long"), ("name", "string"), ("price", "decimal(10,2)"), ("ラベル", "string")]
    assert t.schema.sort_columns == ["ident"]
    assert t.schema.properties.get("bloom_columns") == "name"
    rows, _ = read(t, "`ラベル` = 'x' and ident = 1")
    assert rows.to_pylist() == [{"ident": 1, "name": "a", "price": None, "ラベル": "x"}]
