"""Table schema: typed columns with stable UUID column ids, plus table properties.

The schema file (``Metadata/schema``) is JSON written through orjson, signed: its first key
is ``checksum`` (store/checksums.py), and ``tableId`` names the table it belongs to. A file
whose checksum fails or that holds a key no writer writes is ``CorruptMetadataError``
naming it; files written before checksums read as before. Column ids never change once
assigned, so dictionary files and statistics survive renames of nothing else.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Literal

import orjson

from carbonstore.errors import CorruptMetadataError, SchemaError
from carbonstore.store.checksums import checked_object, with_checksum
from carbonstore.store.conf import Bool, Float, Int, IntList, KeyType, check_value
from carbonstore.store.ddl import BARE_NAME_RE, parse_column_defs
from carbonstore.store.records import Frozen, field
from carbonstore.store.types import DataType, parse_type

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "arrow_type",
    "Column",
    "DataType",
    "PROPERTY_TYPES",
    "SCHEMA_KEYS",
    "SORT_SCOPES",
    "TABLE_PROPERTIES",
    "TableSchema",
    "parse_schema_string",
    "parse_type",
]

TypeName = Literal[
    "boolean", "byte", "short", "int", "long", "float", "double",
    "decimal", "string", "binary", "date", "timestamp",
]

SORT_SCOPES = ("no_sort", "local_sort", "global_sort")

# Numeric and boolean table properties: type and range, checked whenever a schema is built
# (create, and every read of a stored schema). Each range lies within the range of the conf
# key the property overrides (conf.TABLE_PROPERTY_KEYS).
PROPERTY_TYPES: dict[str, KeyType] = {
    "bloom_fpp": Float(0, 1, low_open=True, high_open=True),
    "blocklet_size_in_mb": Int(1, 4_096),
    "page_rows": Int(1, 2**31 - 1),
    "table_blocksize": Int(1, 1 << 20),
    "compaction_level_threshold": IntList(1, 100, 2, 2),
    "major_compaction_size": Int(1, 1 << 20),
    "auto_load_merge": Bool(strict=True),
    "compaction_preserve_segments": Int(0, 1_000_000),
    "allowed_compaction_days": Int(0, 36_500),
}

# Table property -> description. Keys are case-insensitive and stored lower case.
TABLE_PROPERTIES: dict[str, str] = {
    "sort_columns": "comma-separated columns the load sorts on",
    "sort_scope": "no_sort | local_sort | global_sort",
    "dictionary_include": "comma-separated columns stored as global-dictionary surrogates",
    "bloom_columns": "comma-separated columns with a Parquet bloom filter",
    "bloom_fpp": "false positive probability of the bloom filters (0 < fpp < 1)",
    "blocklet_size_in_mb": "row group (blocklet) size in MB",
    "page_rows": "maximum rows per Parquet data page",
    "table_blocksize": "data file size in MB before the writer rolls to a new file",
    "compaction_level_threshold": "minor compaction level thresholds, e.g. 4,3",
    "major_compaction_size": "major compaction size threshold in MB",
    "auto_load_merge": "true to run minor compaction after each successful load",
    "compaction_preserve_segments": "number of newest segments minor compaction leaves alone",
    "allowed_compaction_days": "only segments loaded in the last N days are compacted (0 = all)",
    "partition_by": "partition fields of new loads, e.g. region, day(ts) (docs/partitioning.md)",
    "bucket_number": "number of bucket files per segment (with bucket_columns)",
    "bucket_columns": "comma-separated columns hashed into bucket_number buckets",
    "clustering.columns": "1-4 comma-separated columns compaction clusters on (docs/clustering.md)",
    "clustering.curve": "zorder | hilbert: the curve clustering.columns are ordered along",
}


class Column(Frozen, kw_only=True):
    """One column: its name (lower case), type, nullability and stable id."""

    name: str
    type: DataType
    nullable: bool = True
    column_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    #: SQL literal text an added column reads as in segments written before it existed
    default: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "type": str(self.type),
            "nullable": self.nullable,
            "columnId": self.column_id,
        }
        if self.default is not None:
            out["default"] = self.default
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Column:
        if not isinstance(obj, dict) or not obj.keys() <= _COLUMN_KEYS:
            # a flipped bit in "default" must not read as "no default"
            raise ValueError(f"column {obj!r} holds keys no writer writes")
        name, nullable, default = obj["name"], obj["nullable"], obj.get("default")
        if not isinstance(name, str) or name != name.lower():
            raise ValueError(f"column name {name!r} is not a stored (lower-case) name")
        if not BARE_NAME_RE.fullmatch(name):
            check_quoted_name(name)
        if not isinstance(nullable, bool):  # bool("false") is True
            raise ValueError(f"nullable of column {name!r} is {nullable!r}, not true/false")
        if default is not None and not isinstance(default, str):
            raise ValueError(f"default of column {name!r} is {default!r}, not SQL text")
        return cls(
            name=name,
            type=parse_type(obj["type"]),
            nullable=nullable,
            column_id=_hex_id(obj["columnId"], "columnId"),
            default=default,
        )


_COLUMN_KEYS = frozenset({"name", "type", "nullable", "columnId", "default"})
#: every top-level key of ``Metadata/schema``; a schema log version adds LOG_KEYS
SCHEMA_KEYS = frozenset({"database", "table", "schemaVersion", "createdMs", "tableId",
                         "columns", "properties"})


def parse_schema_string(text: str) -> list[Column]:
    """Parse ``"id long not null, name string, price decimal(10,2)"`` into columns.

    Bare names are ASCII identifiers; any other name (Unicode, spaces, dots) is written in
    backticks. Types may nest (``map<string,int>``, ``struct<a: int, b: array<string>>``);
    ``DEFAULT v`` gives the value an added column reads as in older segments.
    """
    columns: list[Column] = []
    seen: set[str] = set()
    for d in parse_column_defs(text):
        name = d.name
        if d.quoted:
            check_quoted_name(name)
        elif not BARE_NAME_RE.fullmatch(name):
            raise SchemaError(
                f"invalid column name {name!r}: use letters, digits and underscores "
                "(at most 128 characters, not starting with a digit), or quote it in backticks"
            )
        lname = name.lower()
        if lname in seen:
            raise SchemaError(f"column {name!r} is defined twice")
        seen.add(lname)
        columns.append(Column(name=lname, type=parse_type(d.type_text), nullable=d.nullable,
                              default=d.default))
    return columns


def check_quoted_name(name: str) -> str:
    """A backticked column name: 1 to 128 characters, no control characters.

    Raises:
        SchemaError: an empty, overlong or unprintable name.
    """
    import unicodedata

    if not name.strip():
        raise SchemaError("a column name cannot be empty")
    if len(name) > 128:
        raise SchemaError(f"invalid column name {name[:40]!r}...: longer than 128 characters")
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in name):
        raise SchemaError(f"invalid column name {name!r}: it holds a control character")
    return name


def _csv_list(value: str) -> list[str]:
    """Column names of a list property; a name may be quoted in backticks as in --schema."""
    out = []
    for v in (v.strip() for v in value.split(",")):
        if len(v) > 1 and v[0] == v[-1] == "`":
            v = v[1:-1].replace("``", "`").strip()
        if v:
            out.append(v.lower())
    return out


def _table_id(value: Any) -> str:
    # [0-9a-f-]{0,64}, without compiling a pattern in every process that opens a table
    if not isinstance(value, str) or len(value) > 64 or value.strip("0123456789abcdef-"):
        raise ValueError(f"invalid tableId {value!r}")
    return value


def _hex_id(value: Any, key: str) -> str:
    """A column id ([0-9a-f-]{1,64}: dictionary and statistics file names are built from
    it, so a damaged one must never name a path)."""
    if not isinstance(value, str) or not value or len(value) > 64 or value.strip(
            "0123456789abcdef-"):
        raise ValueError(f"invalid {key} {value!r}")
    return value


def _stored_int(obj: dict[str, Any], key: str, default: int) -> int:
    value = obj.get(key, default)
    if type(value) is not int or not 0 <= value < 2**63:
        raise ValueError(f"{key} is {value!r}, not a number from 0 to 2**63 - 1")
    return value


class TableSchema(Frozen, kw_only=True):
    """Columns plus validated table properties (lower-case keys, string values)."""

    database: str
    table: str
    columns: tuple[Column, ...]
    properties: dict[str, str] = field(default_factory=dict)
    created_ms: int = 0
    schema_version: int = 1
    table_id: str = ""  # a uuid; empty for tables created before ids existed

    def __post_init__(self) -> None:
        self.validate()

    # ---- lookups -------------------------------------------------------------------------
    @property
    def qualified_name(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        lname = name.lower()
        for c in self.columns:
            if c.name == lname:
                return c
        raise SchemaError(
            f"table {self.qualified_name} has no column {name!r}; "
            f"columns are {', '.join(self.column_names)}"
        )

    def column_by_id(self, column_id: str) -> Column:
        for c in self.columns:
            if c.column_id == column_id:
                return c
        raise SchemaError(f"table {self.qualified_name} has no column id {column_id}")

    def list_property(self, key: str) -> list[str]:
        return _csv_list(self.properties.get(key, ""))

    @property
    def sort_columns(self) -> list[str]:
        return self.list_property("sort_columns")

    @property
    def sort_scope(self) -> str:
        default = "local_sort" if self.sort_columns else "no_sort"
        return self.properties.get("sort_scope", default).lower()

    @property
    def dictionary_columns(self) -> list[str]:
        return self.list_property("dictionary_include")

    @property
    def bloom_columns(self) -> list[str]:
        return self.list_property("bloom_columns")

    # ---- validation ----------------------------------------------------------------------
    def validate(self) -> None:
        if not self.columns:
            raise SchemaError("a table needs at least one column")
        names = {c.name for c in self.columns}
        if len(names) != len(self.columns):
            raise SchemaError("a column name appears twice in the schema")
        if len({c.column_id for c in self.columns}) != len(self.columns):
            raise SchemaError("a column id appears twice in the schema")
        for key, value in self.properties.items():
            if key not in TABLE_PROPERTIES:
                raise SchemaError(
                    f"unknown table property {key!r}; known properties: "
                    + ", ".join(sorted(TABLE_PROPERTIES))
                )
            if not isinstance(value, str):
                raise SchemaError(f"table property {key!r} must be a string")
        for key in ("sort_columns", "dictionary_include", "bloom_columns", "clustering.columns"):
            for col in self.list_property(key):
                if col not in names:
                    raise SchemaError(f"{key} names unknown column {col!r}")
        for col in self.dictionary_columns:
            t = self.column(col).type
            if t.is_floating or t.name == "boolean":
                raise SchemaError(
                    f"dictionary_include cannot hold {t} column {col!r}; "
                    "dictionaries suit strings, integers, dates and decimals"
                )
        if len(self.list_property("clustering.columns")) > 4:
            raise SchemaError("clustering.columns takes at most 4 columns")
        if self.properties.get("clustering.curve", "zorder").lower() not in ("zorder", "hilbert"):
            raise SchemaError("clustering.curve must be zorder or hilbert")
        scope = self.properties.get("sort_scope")
        if scope is not None:
            if scope.lower() not in SORT_SCOPES:
                raise SchemaError(f"sort_scope must be one of {', '.join(SORT_SCOPES)}")
            if scope.lower() != "no_sort" and not self.sort_columns:
                raise SchemaError(f"sort_scope {scope} needs sort_columns")
        for col in self.sort_columns:
            if self.column(col).type.name == "binary":
                raise SchemaError(f"cannot sort on binary column {col!r}")
        for key in ("sort_columns", "dictionary_include", "bloom_columns", "clustering.columns"):
            for col in self.list_property(key):
                if self.column(col).type.is_nested:
                    raise SchemaError(f"{key} cannot hold nested column {col!r} "
                                      f"({self.column(col).type})")
        for key, key_type in PROPERTY_TYPES.items():
            if key in self.properties:
                check_value(key_type, f"table property {key}", self.properties[key],
                            error=SchemaError)
        if any(k in self.properties for k in ("partition_by", "bucket_number", "bucket_columns")):
            from carbonstore.store.partitioning import PartitionSpec

            PartitionSpec.from_properties(self.properties, self)  # raises SchemaError

    # ---- (de)serialisation ---------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "database": self.database,
            "table": self.table,
            "schemaVersion": self.schema_version,
            "createdMs": self.created_ms,
            **({"tableId": self.table_id} if self.table_id else {}),
            "columns": [c.to_json() for c in self.columns],
            "properties": dict(sorted(self.properties.items())),
        }

    def to_bytes(self) -> bytes:
        return with_checksum(orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2))

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TableSchema:
        properties = obj.get("properties", {})
        if not isinstance(properties, dict):
            raise ValueError(f"properties is {properties!r}, not an object")
        return cls(
            database=obj["database"],
            table=obj["table"],
            schema_version=_stored_int(obj, "schemaVersion", 1),
            created_ms=_stored_int(obj, "createdMs", 0),
            table_id=_table_id(obj.get("tableId", "")),
            columns=tuple(Column.from_json(c) for c in obj["columns"]),
            properties=dict(properties),
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, path: str) -> TableSchema:
        """Decode ``Metadata/schema``, checked (checksum, keys, every field).

        Raises:
            CorruptMetadataError: naming ``path``.
        """
        try:
            return cls.from_json(checked_object(data, SCHEMA_KEYS)[0])
        except (KeyError, TypeError, ValueError, SchemaError) as err:
            raise CorruptMetadataError(f"schema file {path} is unreadable: {err}") from err


def normalise_properties(props: dict[str, str]) -> dict[str, str]:
    """Lower-case the keys; refuse unknown ones with the list of known keys."""
    out: dict[str, str] = {}
    for key, value in props.items():
        k = key.strip().lower()
        if k not in TABLE_PROPERTIES:
            raise SchemaError(
                f"unknown table property {key!r}; known properties: "
                + ", ".join(sorted(TABLE_PROPERTIES))
            )
        out[k] = str(value).strip()
    return out


def arrow_type(t: DataType) -> pa.DataType:
    """The Arrow (and so Parquet) type a table column is stored as.

    pyarrow is imported here, not with the module: a schema read from JSON (``describe``,
    ``show-segments``) needs no Arrow type, and pyarrow with numpy is about 0.2 s of CPU.
    """
    import pyarrow as pa  # noqa: F811

    simple: dict[str, pa.DataType] = {
        "boolean": pa.bool_(),
        "byte": pa.int8(),
        "short": pa.int16(),
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "string": pa.string(),
        "binary": pa.binary(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    if t.name == "decimal":
        return pa.decimal128(t.precision, t.scale)
    if t.name == "array":
        return pa.list_(arrow_type(t.fields[0][1]))
    if t.name == "map":
        return pa.map_(arrow_type(t.fields[0][1]), arrow_type(t.fields[1][1]))
    if t.name == "struct":
        return pa.struct([pa.field(n, arrow_type(ft)) for n, ft in t.fields])
    if t.name not in simple:
        raise SchemaError(f"type {t} cannot be stored")
    return simple[t.name]
