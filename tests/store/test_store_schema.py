"""Schema strings, types, properties and the schema file round trip."""

from __future__ import annotations

import uuid

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.errors import CorruptMetadataError, SchemaError
from carbonstore.store import DataType, TableSchema, parse_schema_string
from carbonstore.store.schema import TABLE_PROPERTIES, normalise_properties, parse_type

TYPES = {
    "boolean": "boolean", "bool": "boolean",
    "byte": "byte", "tinyint": "byte",
    "short": "short", "smallint": "short",
    "int": "int", "integer": "int",
    "long": "long", "bigint": "long",
    "float": "float", "real": "float",
    "double": "double",
    "string": "string", "varchar": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
}


@pytest.mark.parametrize(("text", "name"), sorted(TYPES.items()))
def test_every_simple_type(text: str, name: str) -> None:
    t = parse_type(text)
    assert t == DataType(name)
    assert str(t) == name
    assert parse_type(text.upper()) == t
    assert parse_type(str(t)) == t


@pytest.mark.parametrize(
    ("text", "precision", "scale"),
    [
        ("decimal", 10, 0),
        ("decimal(5)", 5, 0),
        ("decimal(10,2)", 10, 2),
        ("DECIMAL( 38 , 38 )", 38, 38),
        ("decimal(1,0)", 1, 0),
    ],
)
def test_decimal(text: str, precision: int, scale: int) -> None:
    t = parse_type(text)
    assert (t.name, t.precision, t.scale) == ("decimal", precision, scale)
    assert str(t) == f"decimal({precision},{scale})"
    assert parse_type(str(t)) == t
    assert t.is_numeric and not t.is_integral and not t.is_floating


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("decimal(0,0)", "precision"),
        ("decimal(39,2)", "precision"),
        ("decimal(5,6)", "scale"),
        ("decimal(a,b)", "unknown type"),
        ("decimal(10,2", "unknown type"),
        ("int64", "unknown type"),
        ("varchar2", "unknown type"),
        ("array<>", "unknown type"),
        ("array<int", "unbalanced"),
        ("list<int>", "unknown type"),
        ("struct", "unknown type"),
        ("", "unknown type"),
    ],
)
def test_bad_types(text: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        parse_type(text)


def test_schema_string_with_every_type() -> None:
    text = (
        "b boolean not null, y byte, s short, i int NOT NULL, l long, f float, d double, "
        "m decimal(12,3) not null, str string null, bin binary, dt date, ts timestamp"
    )
    cols = parse_schema_string(text)
    assert [(c.name, str(c.type), c.nullable) for c in cols] == [
        ("b", "boolean", False), ("y", "byte", True), ("s", "short", True),
        ("i", "int", False), ("l", "long", True), ("f", "float", True),
        ("d", "double", True), ("m", "decimal(12,3)", False), ("str", "string", True),
        ("bin", "binary", True), ("dt", "date", True), ("ts", "timestamp", True),
    ]
    ids = [c.column_id for c in cols]
    assert len(set(ids)) == len(ids)
    assert all(str(uuid.UUID(i)) == i for i in ids)


def test_schema_string_whitespace_and_case() -> None:
    cols = parse_schema_string("  ID\tLONG   NOT\tNULL ,\n Name  String  ")
    assert [(c.name, str(c.type), c.nullable) for c in cols] == [
        ("id", "long", False), ("name", "string", True)
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a int, a long", "defined twice"),
        ("a int, A long", "defined twice"),
        ("a int, b varchar2", "unknown type"),
        ("a map<string>", "map needs a key and a value"),
        ("a int,, b int", "empty column"),
        ("a int,", "empty column"),
        ("", "empty column"),
        ("a", "has no type"),
        ("a not null", "unknown type"),
        ("1a int", "invalid column name"),
        ("a-b int", "invalid column name"),
        ("é int", "invalid column name"),
        ("a.b int", "invalid column name"),
        ("../x int", "invalid column name"),
        ("x" * 129 + " int", "invalid column name"),
    ],
)
def test_bad_schema_strings(text: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        parse_schema_string(text)


def _schema(props: dict[str, str]) -> TableSchema:
    return TableSchema(
        database="db", table="t",
        columns=tuple(parse_schema_string("id long, name string, price double, raw binary")),
        properties=normalise_properties(props),
    )


def test_unknown_property_is_refused(store: Store) -> None:
    with pytest.raises(SchemaError, match="unknown table property 'colour'"):
        normalise_properties({"colour": "red"})
    with pytest.raises(SchemaError, match="unknown table property"):
        store.create_table("t", "id long", properties={"sort_column": "id"})
    assert not store.exists("t")
    assert store.tables() == []


def test_properties_are_lower_cased_and_valid_ones_accepted() -> None:
    s = _schema({
        "SORT_COLUMNS": "Name,ID", "Sort_Scope": "GLOBAL_SORT", "dictionary_include": "name",
        "bloom_columns": "id", "bloom_fpp": "0.05", "blocklet_size_in_mb": "8",
        "page_rows": "1000", "table_blocksize": "256", "compaction_level_threshold": "2,2",
        "major_compaction_size": "10", "auto_load_merge": "TRUE",
        "compaction_preserve_segments": "0", "allowed_compaction_days": "3",
        "partition_by": "id", "bucket_number": "4", "bucket_columns": "id",
        "Clustering.Columns": "ID,name", "clustering.curve": "hilbert",
    })
    assert set(s.properties) == set(TABLE_PROPERTIES)
    assert s.sort_columns == ["name", "id"]
    assert s.sort_scope == "global_sort"
    assert s.dictionary_columns == ["name"]
    assert s.bloom_columns == ["id"]


def test_sort_scope_defaults() -> None:
    assert _schema({}).sort_scope == "no_sort"
    assert _schema({"sort_columns": "id"}).sort_scope == "local_sort"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"sort_columns": "nope"}, "unknown column 'nope'"),
        ({"dictionary_include": "nope"}, "unknown column"),
        ({"bloom_columns": "id,nope"}, "unknown column"),
        ({"dictionary_include": "price"}, "cannot hold double"),
        ({"sort_columns": "raw"}, "binary"),
        ({"sort_scope": "fast_sort", "sort_columns": "id"}, "sort_scope must be one of"),
        ({"sort_scope": "local_sort"}, "needs sort_columns"),
        ({"bloom_fpp": "0"}, "bloom_fpp"),
        ({"bloom_fpp": "1"}, "bloom_fpp"),
        ({"bloom_fpp": "nan"}, "bloom_fpp"),
        ({"bloom_fpp": "abc"}, "must be a number"),
        ({"page_rows": "0"}, "at least 1"),
        ({"page_rows": "-5"}, "at least 1"),
        ({"page_rows": "1.5"}, "must be a number"),
        ({"blocklet_size_in_mb": ""}, "must be a number"),
        ({"table_blocksize": "big"}, "must be a number"),
        ({"major_compaction_size": "0"}, "at least 1"),
        ({"compaction_preserve_segments": "-1"}, "at least 0"),
        ({"allowed_compaction_days": "x"}, "must be a number"),
        ({"compaction_level_threshold": "4"}, "4,3"),
        ({"compaction_level_threshold": "4,0"}, "4,3"),
        ({"compaction_level_threshold": "a,b"}, "4,3"),
        ({"compaction_level_threshold": "\u00b2,3"}, "4,3"),
        ({"auto_load_merge": "maybe"}, "true or false"),
    ],
)
def test_property_validation(props: dict[str, str], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        _schema(props)


def test_schema_file_round_trip(store: Store) -> None:
    text = (
        "b boolean not null, y byte, s short, i int, l long not null, f float, d double, "
        "m decimal(20,4), str string, bin binary, dt date, ts timestamp"
    )
    props = {"sort_columns": "l,str", "dictionary_include": "str", "bloom_columns": "i",
             "page_rows": "500"}
    created = store.create_table("db.all_types", text, properties=props)
    reopened = Store(store.location, conf=store.conf).table("DB.ALL_TYPES")
    assert reopened.schema.columns == created.schema.columns
    assert reopened.schema.properties == props
    assert reopened.schema == created.schema
    # The file itself: JSON with stable UUID column ids.
    on_disk = orjson.loads(open(created.paths.schema, "rb").read())
    assert on_disk["database"] == "db" and on_disk["table"] == "all_types"
    assert [c["columnId"] for c in on_disk["columns"]] == [
        c.column_id for c in created.schema.columns
    ]
    assert TableSchema.from_bytes(created.schema.to_bytes(), path="x") == created.schema
    assert reopened.schema.column("M").type == DataType("decimal", 20, 4)
    assert reopened.schema.column_by_id(created.schema.columns[0].column_id).name == "b"
    with pytest.raises(SchemaError, match="no column 'zz'"):
        reopened.schema.column("zz")


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b"[]", b'{"database": "db"}', b'{"database":"db","table":"t","columns":[]}'],
)
def test_corrupt_schema_file(store: Store, data: bytes) -> None:
    t = store.create_table("t", "id long")
    with open(t.paths.schema, "wb") as f:
        f.write(data)
    with pytest.raises(CorruptMetadataError, match=f"schema file {t.paths.schema}"):
        store.table("t")


def test_duplicate_columns_in_schema_file_are_refused(store: Store) -> None:
    t = store.create_table("t", "a long, b long")
    obj = orjson.loads(open(t.paths.schema, "rb").read())
    obj["columns"][1]["name"] = "a"
    del obj["checksum"]  # a file without one (written before checksums), or it fails first
    with open(t.paths.schema, "wb") as f:
        f.write(orjson.dumps(obj))
    with pytest.raises(CorruptMetadataError, match="appears twice"):
        store.table("t")


_TYPE_TEXTS = st.sampled_from(sorted(TYPES)) | st.builds(
    lambda p, s: f"decimal({p},{min(s, p)})", st.integers(1, 38), st.integers(0, 38)
)
_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_NAMES, _TYPE_TEXTS, st.booleans()), min_size=1, max_size=8,
                unique_by=lambda c: c[0]))
def test_schema_string_round_trip(cols: list[tuple[str, str, bool]]) -> None:
    text = ", ".join(f"{n} {t}{'' if nullable else ' not null'}" for n, t, nullable in cols)
    parsed = parse_schema_string(text)
    assert [(c.name, c.type, c.nullable) for c in parsed] == [
        (n, parse_type(t), nullable) for n, t, nullable in cols
    ]
    again = parse_schema_string(
        ", ".join(f"{c.name} {c.type}{'' if c.nullable else ' not null'}" for c in parsed)
    )
    assert [(c.name, c.type, c.nullable) for c in again] == [
        (c.name, c.type, c.nullable) for c in parsed
    ]
