"""ALTER TABLE without Spark: schema versions, reads by column id, refusals."""

from __future__ import annotations

import decimal

import pytest
from schema_helpers import load, read, reopen

from carbonstore import Store, Table
from carbonstore.errors import SchemaError
from carbonstore.store.alter import (
    SUB_ACTIONS,
    alter_table,
)


def alter(table: Table, action: str, *args: str) -> Table:
    change = SUB_ACTIONS[action][1](list(args))
    alter_table(table, change, operation=f"{action} {' '.join(args)}")
    return reopen(table)


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("t", "id int not null, name string, score float, d decimal(5,2)")
    load(t, [{"id": 1, "name": "a", "score": 1.5, "d": decimal.Decimal("1.25")},
             {"id": 2, "name": None, "score": None, "d": None}])
    return t


def test_add_column_reads_default_for_old_rows(table: Table) -> None:
    t = alter(table, "add-column", "flag boolean not null default true, note string")
    assert t.schema.schema_version == 2
    rows, _ = read(t)
    assert rows.column_names == ["id", "name", "score", "d", "flag", "note"]
    assert rows["flag"].to_pylist() == [True, True]
    assert rows["note"].to_pylist() == [None, None]
    load(t, [{"id": 3, "name": "c", "score": 2.0, "d": None, "flag": False, "note": "n"}])
    rows, _ = read(t)
    assert sorted(rows.to_pylist(), key=lambda r: r["id"])[2]["flag"] is False
    got, _ = read(t, "flag = true")
    assert sorted(got["id"].to_pylist()) == [1, 2]


def test_drop_then_add_same_name_does_not_see_old_data_nor_old_stats(table: Table) -> None:
    t = alter(table, "drop-column", "name")
    rows, _ = read(t)
    assert rows.column_names == ["id", "score", "d"]
    t = alter(t, "add-column", "name string")
    rows, _ = read(t)
    assert rows["name"].to_pylist() == [None, None]
    got, plan = read(t, "name = 'a'")
    assert got.num_rows == 0
    got, plan = read(t, "name is null")
    assert got.num_rows == 2  # the old column's null count (1) must not prune


def test_rename_keeps_data_and_properties(store: Store) -> None:
    t = store.create_table("r", "id int, v string",
                           properties={"sort_columns": "v", "bloom_columns": "v"})
    load(t, [{"id": 1, "v": "x"}, {"id": 2, "v": "y"}])
    t = alter(t, "rename-column", "v", "w")
    assert t.schema.sort_columns == ["w"] and t.schema.bloom_columns == ["w"]
    got, plan = read(t, "w = 'y'")
    assert got.to_pylist() == [{"id": 2, "w": "y"}]
    # swap names: a rename onto a dropped column's name reads the right data
    t = alter(t, "rename-column", "id", "tmp")
    t = alter(t, "rename-column", "w", "id")
    t = alter(t, "rename-column", "tmp", "w")
    got, _ = read(t, "id = 'x'")
    assert got.to_pylist() == [{"w": 1, "id": "x"}]


def test_widen_int_float_decimal(table: Table) -> None:
    t = alter(table, "widen", "id", "bigint")
    t = alter(t, "widen", "score", "double")
    t = alter(t, "widen", "d", "decimal(12,2)")
    rows, _ = read(t)
    assert str(rows.schema.field("id").type) == "int64"
    assert str(rows.schema.field("score").type) == "double"
    assert str(rows.schema.field("d").type) == "decimal128(12, 2)"
    load(t, [{"id": 2**40, "name": "big", "score": 0.1, "d": decimal.Decimal("1234567890.12")}])
    got, _ = read(t, f"id = {2**40}")
    assert got["name"].to_pylist() == ["big"]
    got, _ = read(t, "id < 5")
    assert sorted(got["id"].to_pylist()) == [1, 2]
    got, _ = read(t, "score = 1.5")
    assert got["id"].to_pylist() == [1]
    got, _ = read(t, "d > 1000")
    assert got["name"].to_pylist() == ["big"]


@pytest.mark.parametrize(("action", "args", "match"), [
    ("widen", ("id", "smallint"), "only widening"),
    ("widen", ("score", "int"), "only widening"),
    ("widen", ("d", "decimal(6,3)"), "only widening"),
    ("widen", ("d", "decimal(4,2)"), "only widening"),
    ("widen", ("nope", "long"), "no column"),
    ("add-column", ("name int",), "already has a column"),
    ("add-column", ("x int not null",), "DEFAULT"),
    ("add-column", ("x int default abc",), "DEFAULT"),
    ("drop-column", ("nope",), "no column"),
    ("rename-column", ("id", "name"), "already has a column"),
    ("rename-column", ("nope", "x"), "no column"),
    ("unset-property", ("sort_columns",), "not set"),
    ("set-property", ("nosuch=1",), "unknown table property"),
    ("set-property", ("dictionary_include=name",), "cannot change"),
])
def test_refusals_write_nothing(table: Table, action: str, args: tuple[str, ...], match: str) -> None:
    before = table.status.read().version
    with pytest.raises(SchemaError, match=match):
        alter(table, action, *args)
    assert reopen(table).schema.schema_version == 1
    assert table.status.read().version == before


def test_drop_sort_column_refused(store: Store) -> None:
    t = store.create_table("s", "id int, v string", properties={"sort_columns": "id"})
    with pytest.raises(SchemaError, match="sort column"):
        alter(t, "drop-column", "id")
    with pytest.raises(SchemaError, match="every column"):
        alter(store.create_table("one", "x int"), "drop-column", "x")


def test_time_travel_reads_the_schema_of_its_version(table: Table) -> None:
    v_before = table.status.read().version
    t = alter(table, "rename-column", "name", "label")
    t = alter(t, "drop-column", "score")
    old = t.as_of(v_before)
    assert old.schema.column_names == ["id", "name", "score", "d"]
    rows, _ = read(old)
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "a", "score": 1.5, "d": decimal.Decimal("1.25")},
        {"id": 2, "name": None, "score": None, "d": None}]
    history = [h.operation for h in t.history()]
    assert any(op.startswith("ALTER rename-column") for op in history)


def test_compaction_writes_the_current_schema(store: Store) -> None:
    from carbonstore.segments.compaction import compact

    t = store.create_table("c", "id int not null, v string", properties={"sort_columns": "id"})
    load(t, [{"id": 2, "v": "b"}])
    t = alter(t, "rename-column", "v", "w")
    t = alter(t, "widen", "id", "long")
    t = alter(t, "add-column", "x int default 7")
    load(t, [{"id": 1, "w": "a", "x": 1}])
    compact(t, "major")
    t = reopen(t)
    assert [e.load_name for e in t.status.read().readable] == ["0.1"]
    entry = t.status.read().readable[0]
    assert entry.extra["schemaVersion"] == t.schema.schema_version
    rows, _ = read(t)
    assert rows.to_pylist() == [{"id": 1, "w": "a", "x": 1}, {"id": 2, "w": "b", "x": 7}]


def test_index_rebuild_labels_columns_with_the_segments_schema(table: Table) -> None:
    from carbonstore.pruning.cache import clear_cache
    from carbonstore.segments.rebuild import rebuild_segment

    t = alter(table, "drop-column", "name")
    t = alter(t, "add-column", "name string default 'q'")
    rebuild_segment(t, t.status.read().readable[0])
    clear_cache()
    got, _ = read(t, "name = 'q'")
    assert got.num_rows == 2  # the old 'name' (min = max = 'a') must not prune the new one
    got, _ = read(t, "id = 2")
    assert got["id"].to_pylist() == [2]


def test_analyze_reads_old_segments_by_column_id(table: Table) -> None:
    from carbonstore.segments.analyze import compute_segment_statistics

    t = alter(table, "rename-column", "name", "label")
    t = alter(t, "widen", "id", "long")
    t = alter(t, "add-column", "extra int default 4")
    stats = compute_segment_statistics(t, "0")
    label = stats.find("label")
    assert label is not None and label.num_nulls == 1
    ident = stats.find("id")
    assert ident is not None and ident.num_nulls == 0 and ident.to_json()["highValue"] == 2
    extra = stats.find("extra")
    assert extra is not None and extra.num_nulls == 0


def test_widen_nested_children(store: Store) -> None:
    t = store.create_table("nw", "id int, s struct<a: int, f: float>, l array<int>, "
                                 "m map<string, decimal(5,2)>")
    load(t, [{"id": 1, "s": {"a": 7, "f": 0.5}, "l": [1, 2], "m": [("k", decimal.Decimal("1.5"))]},
             {"id": 2, "s": None, "l": None, "m": None}])
    t = alter(t, "widen", "s.a", "long")
    t = alter(t, "widen", "s", "struct<a: long, f: double>")
    t = alter(t, "widen", "l", "array<bigint>")
    t = alter(t, "widen", "m", "map<string,decimal(9,2)>")
    assert str(t.schema.column("s").type) == "struct<a:long,f:double>"
    rows, _ = read(t)
    assert str(rows.schema.field("m").type) == "map<string, decimal128(9, 2)>"
    assert sorted(rows.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "s": {"a": 7, "f": 0.5}, "l": [1, 2], "m": [("k", decimal.Decimal("1.50"))]},
        {"id": 2, "s": None, "l": None, "m": None}]
    load(t, [{"id": 3, "s": {"a": 2**40, "f": 0.1}, "l": [2**40], "m": None}])
    got, plan = read(t, f"s.a = {2**40}")
    assert got["id"].to_pylist() == [3]
    got, _ = read(t, "s.a = 7")
    assert got["id"].to_pylist() == [1]
    for args, match in [(("s.a", "int"), "only widening"), (("s", "struct<a: int, f: float>"),
                        "only widening"), (("s", "struct<b: long, f: double>"), "only widening"),
                        (("s.zz", "long"), "no field"), (("l", "array<int>"), "only widening")]:
        with pytest.raises(SchemaError, match=match):
            alter(t, "widen", *args)


def test_concurrent_alters_both_apply(store: Store) -> None:
    import threading

    store.create_table("cc", "id int")
    errors: list[BaseException] = []

    def add(name: str) -> None:
        try:
            t = store.table("cc")  # each writer read the same schema version
            alter_table(t, SUB_ACTIONS["add-column"][1]([f"{name} int"]), operation=name)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=add, args=(f"c{i}",)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    t = store.table("cc")
    assert sorted(t.schema.column_names) == ["c0", "c1", "c2", "c3", "id"]
    assert t.schema.schema_version == 5
    versions = t.schema_versions()
    assert [v.version for v in versions] == [1, 2, 3, 4, 5]
    applies = [v.applies_from for v in versions]
    assert applies == sorted(applies)
