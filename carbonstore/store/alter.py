"""ALTER TABLE: each change is a new schema version, committed with a tablestatus version.

The changes are pure functions ``TableSchema -> TableSchema`` that validate and raise
:class:`SchemaError` (one line, exit 2 in the CLI). :data:`SUB_ACTIONS` maps each CLI
sub-action name to a builder of such a change, so a new sub-action is one entry.
:func:`alter_table` commits one change (store/schema_log.py has the protocol); no data file
is rewritten: readers map old segments by column id (store/evolution.py).

Rules (docs/schema-evolution.md):

- add: a new name; ``NOT NULL`` needs a ``DEFAULT`` (the rows already stored get it);
- drop: a known column that is not the last one, not a SORT_COLUMN and not a dictionary
  column (their stored order / encoding depends on it: change the property first);
  a bloom column leaves ``bloom_columns``;
- rename: a known column to a free name; property lists follow the rename;
- widen: byte->short->int->long, float->double, decimal(p,s)->decimal(p',s) with p' >= p;
  not on dictionary columns;
- set / unset property: validated as at create; ``dictionary_include`` cannot change (the
  stored files' encoding depends on it).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence

from carbonstore.errors import CommitConflictError, SchemaError
from carbonstore.store.ddl import ColumnDef, parse_column_defs, quote_name
from carbonstore.store.evolution import parse_default
from carbonstore.store.faults import crash_point
from carbonstore.store.records import replace
from carbonstore.store.schema import (
    Column,
    DataType,
    TableSchema,
    arrow_type,
    normalise_properties,
    parse_schema_string,
    parse_type,
)
from carbonstore.store.schema_log import write_schema_version
from carbonstore.store.table import ALTER_PREFIX, Table
from carbonstore.store.types import check_column_count

__all__ = [
    "SUB_ACTIONS",
    "Change",
    "add_columns",
    "alter_table",
    "check_column_name",
    "columns_from_defs",
    "drop_columns",
    "rename_column",
    "set_properties",
    "unset_properties",
    "widen_column",
    "widening_allowed",
]

Change = Callable[[TableSchema], TableSchema]

_LIST_PROPERTIES = ("sort_columns", "dictionary_include", "bloom_columns", "clustering.columns")
_INT_ORDER = ("byte", "short", "int", "long")


def check_column_name(name: str) -> str:
    """A column name: 1 to 128 characters, no control characters; returned lower case.

    Raises:
        SchemaError: an empty, overlong or unprintable name.
    """
    if not name or not name.strip():
        raise SchemaError("a column name cannot be empty")
    if len(name) > 128:
        raise SchemaError(f"column name {name[:40]!r}... is longer than 128 characters")
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in name):
        raise SchemaError(f"column name {name!r} holds a control character")
    return name.lower()


def columns_from_defs(defs: Sequence[ColumnDef]) -> list[Column]:
    """Columns of parsed definitions (names checked, types parsed, defaults validated)."""
    out: list[Column] = []
    for d in defs:
        name = parse_schema_string(f"{quote_name(d.name)} int")[0].name if d.quoted else \
            parse_schema_string(f"{d.name} int")[0].name
        t = parse_type(d.type_text)
        if d.default is not None:
            try:
                parse_default(d.default, arrow_type(t))
            except ValueError as err:
                raise SchemaError(f"DEFAULT of column {d.name!r}: {err}") from err
        out.append(Column(name=name, type=t, nullable=d.nullable, default=d.default))
    return out


def _names(schema: TableSchema) -> set[str]:
    return {c.name for c in schema.columns}


def add_columns(columns: Sequence[Column]) -> Change:
    def change(schema: TableSchema) -> TableSchema:
        have = _names(schema)
        for c in columns:
            if c.name in have:
                raise SchemaError(f"table {schema.qualified_name} already has a column {c.name!r}")
            if not c.nullable and c.default is None:
                raise SchemaError(
                    f"column {c.name!r} is NOT NULL: give it a DEFAULT, the value the rows "
                    "already stored read as"
                )
            have.add(c.name)
        check_column_count((*schema.columns, *columns), f"table {schema.qualified_name}")
        return replace(schema, columns=(*schema.columns, *columns))

    return change


def _without(value: str, name: str) -> str:
    return ",".join(v for v in (x.strip() for x in value.split(",")) if v and v.lower() != name)


def _check_not_layout(schema: TableSchema, name: str, action: str) -> None:
    """Refuse changing a partition or bucket source column: folder names and bucket ids of
    stored files were computed from its values under its name and type."""
    from carbonstore.store.partitioning import PartitionSpec

    spec = PartitionSpec.from_properties(dict(schema.properties), schema)
    if name in {f.source for f in spec.fields} | set(spec.bucket_columns):
        raise SchemaError(
            f"cannot {action} {name!r}: it is a partition or bucket column (change the spec "
            "first with 'carbonstore partition TABLE --set-spec ...'; old segments keep theirs)"
        )


def drop_columns(names: Sequence[str]) -> Change:
    def change(schema: TableSchema) -> TableSchema:
        gone = set()
        props = dict(schema.properties)
        for raw in names:
            col = schema.column(raw)  # raises for an unknown column
            _check_not_layout(schema, col.name, "drop column")
            if col.name in schema.sort_columns:
                raise SchemaError(
                    f"cannot drop sort column {col.name!r}: remove it from sort_columns first "
                    "('carbonstore alter TABLE set-property sort_columns=...')"
                )
            if col.name in schema.dictionary_columns:
                raise SchemaError(
                    f"cannot drop dictionary column {col.name!r}: its stored values are "
                    "dictionary surrogates"
                )
            if col.name in schema.bloom_columns:
                props["bloom_columns"] = _without(props["bloom_columns"], col.name)
                if not props["bloom_columns"]:
                    del props["bloom_columns"]
            gone.add(col.name)
        kept = tuple(c for c in schema.columns if c.name not in gone)
        if not kept:
            raise SchemaError(f"cannot drop every column of {schema.qualified_name}")
        return replace(schema, columns=kept, properties=props)

    return change


def rename_column(old: str, new: str) -> Change:
    def change(schema: TableSchema) -> TableSchema:
        col = schema.column(old)
        _check_not_layout(schema, col.name, "rename column")
        name = check_column_name(new)
        if name != col.name and name in _names(schema):
            raise SchemaError(f"table {schema.qualified_name} already has a column {new!r}")
        props = dict(schema.properties)
        for key in _LIST_PROPERTIES:
            if key in props:
                props[key] = ",".join(
                    name if v.strip().lower() == col.name else v.strip()
                    for v in props[key].split(",") if v.strip()
                )
        cols = tuple(replace(c, name=name) if c.column_id == col.column_id else c
                     for c in schema.columns)
        return replace(schema, columns=cols, properties=props)

    return change


def widening_allowed(old: DataType, new: DataType) -> bool:
    """True for int->long (and every smaller integer to a larger one), float->double,
    decimal(p,s)->decimal(p',s) with p' >= p; for nested types, the same shape (struct
    fields by name, in order) with each child widened or kept."""
    if old.is_nested or new.is_nested:
        return old.name == new.name and len(old.fields) == len(new.fields) and all(
            on == nn and widening_allowed(ot, nt)
            for (on, ot), (nn, nt) in zip(old.fields, new.fields, strict=True)
        )
    if old.name in _INT_ORDER and new.name in _INT_ORDER:
        return _INT_ORDER.index(new.name) >= _INT_ORDER.index(old.name)
    if old.name == "float" and new.name == "double":
        return True
    if old.name == "decimal" and new.name == "decimal":
        return new.scale == old.scale and new.precision >= old.precision
    return old == new


def _with_field(t: DataType, path: Sequence[str], new: DataType, full: str) -> DataType:
    """``t`` with the struct field at ``path`` replaced by ``new``."""
    if t.name != "struct":
        raise SchemaError(f"{full!r}: only struct fields can be widened by path")
    head, rest = path[0].lower(), path[1:]
    if head not in [n for n, _ in t.fields]:
        raise SchemaError(f"{full!r}: struct {t} has no field {head!r}")
    fields = tuple(
        (n, (_with_field(ft, rest, new, full) if rest else new) if n == head else ft)
        for n, ft in t.fields
    )
    return replace(t, fields=fields)


def _field_type(t: DataType, path: Sequence[str]) -> DataType | None:
    for part in path:
        found = [ft for n, ft in t.fields if n == part.lower()] if t.name == "struct" else []
        if not found:
            return None
        t = found[0]
    return t


def widen_column(name: str, type_text: str) -> Change:
    """Widen a column, or a struct field given as ``s.a`` (or ``s.t.x``)."""
    field_type = parse_type(type_text)

    def change(schema: TableSchema) -> TableSchema:
        try:
            col = schema.column(name)
            path: list[str] = []
        except SchemaError:
            head, _, rest = name.partition(".")
            if not rest:
                raise
            col = schema.column(head)
            path = rest.split(".")
        new_type = field_type
        if path:
            old_field = _field_type(col.type, path)
            if old_field is None:
                raise SchemaError(f"column {col.name!r} ({col.type}) has no field {rest!r}")
            if not widening_allowed(old_field, field_type) or old_field == field_type:
                raise SchemaError(
                    f"cannot change field {name!r} from {old_field} to {field_type}: only "
                    "widening is allowed (byte->short->int->long, float->double, "
                    "decimal(p,s)->decimal(p',s) with p' >= p)"
                )
            new_type = _with_field(col.type, path, field_type, name)
        else:
            _check_not_layout(schema, col.name, "widen column")
        if col.type == new_type:
            raise SchemaError(f"column {col.name!r} is {col.type} already")
        if not widening_allowed(col.type, new_type):
            raise SchemaError(
                f"cannot change column {col.name!r} from {col.type} to {new_type}: only "
                "widening is allowed (byte->short->int->long, float->double, "
                "decimal(p,s)->decimal(p',s) with p' >= p)"
            )
        if col.name in schema.dictionary_columns:
            raise SchemaError(f"cannot widen dictionary column {col.name!r}")
        cols = tuple(replace(c, type=new_type) if c.column_id == col.column_id else c
                     for c in schema.columns)
        return replace(schema, columns=cols)

    return change


def set_properties(props: dict[str, str]) -> Change:
    wanted = normalise_properties(props)

    def change(schema: TableSchema) -> TableSchema:
        if "dictionary_include" in wanted and (
            wanted["dictionary_include"].lower() != schema.properties.get("dictionary_include", "")
        ):
            raise SchemaError("dictionary_include cannot change after create: the stored "
                              "files' encoding depends on it")
        return replace(schema, properties={**schema.properties, **wanted})

    return change


def unset_properties(keys: Sequence[str]) -> Change:
    def change(schema: TableSchema) -> TableSchema:
        props = dict(schema.properties)
        for raw in keys:
            key = raw.strip().lower()
            if key not in props:
                raise SchemaError(f"table property {raw!r} is not set on {schema.qualified_name}")
            if key == "dictionary_include":
                raise SchemaError("dictionary_include cannot change after create: the stored "
                                  "files' encoding depends on it")
            del props[key]
        return replace(schema, properties=props)

    return change


def _parse_kv(text: str) -> dict[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise SchemaError(f"expected KEY=VALUE, got {text!r}")
    return {key.strip(): value.strip()}


def _two(action: str, args: Sequence[str]) -> tuple[str, str]:
    if len(args) != 2:
        raise SchemaError(f"alter {action} takes 2 arguments, got {len(args)}")
    return args[0], args[1]


#: CLI sub-action -> (usage, builder of the change from the sub-action's arguments)
SUB_ACTIONS: dict[str, tuple[str, Callable[[Sequence[str]], Change]]] = {
    "add-column": ('"c type [not null] [default v][, ...]"',
                   lambda a: add_columns([c for x in a for c in columns_from_defs(
                       parse_column_defs(x))])),
    "drop-column": ("c [c ...]", lambda a: drop_columns(list(a))),
    "rename-column": ("old new", lambda a: rename_column(*_two("rename-column", a))),
    "widen": ("c type", lambda a: widen_column(*_two("widen", a))),
    "set-property": ("k=v [k=v ...]",
                     lambda a: set_properties({k: v for x in a for k, v in _parse_kv(x).items()})),
    "unset-property": ("k [k ...]", lambda a: unset_properties(list(a))),
}


def alter_table(table: Table, change: Change, *, operation: str) -> TableSchema:
    """Commit ``change`` as the next schema version; returns the new schema.

    The tablestatus version (operation ``ALTER``) is committed first and the schema file,
    naming it, second (store/schema_log.py): the schema file is the commit point. Losing the
    race for the schema file number to another ALTER re-applies ``change`` to the winner's
    schema. An ALTER version no schema file names (this process died, or lost that race,
    between the two) changed nothing, and ``Table.history`` says so.

    Raises:
        SchemaError: the change is refused (nothing is written).
        CommitConflictError: still losing races after the configured retries.
    """
    retries = max(1, table.store.conf.get_int("carbon.tablestatus.commit.retries"))
    sfs = table.store.sfs
    for _ in range(retries):
        versions = table.schema_versions()
        current = versions[-1]
        new = change(current.schema)
        new = replace(new, schema_version=current.version + 1)
        new.validate()
        snap = table.status.update(lambda s: list(s.entries), operation=f"{ALTER_PREFIX}{operation}"[:200],
                                   force=True)
        crash_point("alter.after_status")
        if write_schema_version(sfs, table.paths, new, applies_from=snap.version,
                                operation=operation[:200]):
            crash_point("alter.after_schema")
            return new
    raise CommitConflictError(
        f"could not alter {table.name}: {retries} attempts lost the race to other ALTERs; retry"
    )
