"""ALTER TABLE as SQL (``carbonstore sql``), mapped to the changes of store/alter.py.

::

    ALTER TABLE t ADD COLUMNS (c type [NOT NULL] [DEFAULT v], ...)
    ALTER TABLE t DROP COLUMN c | DROP COLUMNS (c, ...)
    ALTER TABLE t RENAME COLUMN a TO b
    ALTER TABLE t CHANGE [COLUMN] a b type      (rename and/or widen)
    ALTER TABLE t ALTER COLUMN a TYPE type      (widen)
    ALTER TABLE t SET TBLPROPERTIES ('k'='v', ...)
    ALTER TABLE t UNSET TBLPROPERTIES [IF EXISTS] ('k', ...)

Names may be backticked (any Unicode text). :func:`parse_alter` returns None for any other
statement (``ALTER TABLE t COMPACT ...`` is a verb of its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from carbonstore.errors import SchemaError
from carbonstore.store.alter import (
    Change,
    add_columns,
    columns_from_defs,
    drop_columns,
    rename_column,
    set_properties,
    unset_properties,
    widen_column,
)
from carbonstore.store.ddl import parse_column_defs, read_name, split_top_level
from carbonstore.store.schema import TableSchema, parse_type

__all__ = ["AlterStatement", "parse_alter"]


@dataclass(frozen=True, slots=True)
class AlterStatement:
    """A parsed ALTER TABLE: the table, a description for the history, the change."""

    table: str
    operation: str
    change: Change


_HEAD = re.compile(r"(?is)^\s*ALTER\s+TABLE\s+")
_ACTION = re.compile(
    r"(?is)^(ADD\s+COLUMNS?|DROP\s+COLUMNS?|RENAME\s+COLUMN|CHANGE(?:\s+COLUMN)?|"
    r"ALTER\s+COLUMN|SET\s+TBLPROPERTIES|UNSET\s+TBLPROPERTIES(?:\s+IF\s+EXISTS)?)\b\s*"
)
_PAIR = re.compile(r"""\s*(['"])(.*?)\1\s*(?:=\s*(['"])(.*?)\3)?\s*$""", re.S)


def _table_name(text: str) -> tuple[str, str]:
    name, pos = read_name(text, 0)
    parts = [name]
    if pos < len(text) and text[pos] == ".":
        second, pos = read_name(text, pos + 1)
        parts.append(second)
    return ".".join(parts), text[pos:].lstrip()


def _parenthesised(text: str, what: str) -> str:
    t = text.strip()
    if not (t.startswith("(") and t.endswith(")")):
        raise SchemaError(f"{what}: expected a list in parentheses, got {text.strip()!r}")
    return t[1:-1]


def _names(text: str) -> list[str]:
    out = []
    for item in split_top_level(text):
        name, pos = read_name(item.strip(), 0)
        if item.strip()[pos:].strip():
            raise SchemaError(f"unexpected {item.strip()[pos:].strip()!r} after column {name!r}")
        out.append(name)
    return out


def _pairs(text: str, *, values: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in split_top_level(text):
        m = _PAIR.fullmatch(item)
        if m is None or (values and m.group(4) is None) or (not values and m.group(4) is not None):
            form = "'key'='value'" if values else "'key'"
            raise SchemaError(f"TBLPROPERTIES: expected {form}, got {item.strip()!r}")
        out[m.group(2)] = m.group(4) or ""
    return out


def _unset_if_exists(keys: list[str]) -> Change:
    def change(schema: TableSchema) -> TableSchema:
        present = [k for k in keys if k.strip().lower() in schema.properties]
        return unset_properties(present)(schema) if present else schema

    return change


def _change_column(old: str, new: str, type_text: str) -> Change:
    new_type = parse_type(type_text)

    def change(schema: TableSchema) -> TableSchema:
        col = schema.column(old)
        out = schema
        if new_type != col.type:
            out = widen_column(col.name, type_text)(out)
        if new.lower() != col.name:
            out = rename_column(col.name, new)(out)
        if out is schema:
            raise SchemaError(f"CHANGE {old}: nothing changes")
        return out

    return change


def parse_alter(statement: str) -> AlterStatement | None:
    """The ALTER TABLE statement of store/alter.py in ``statement``, or None.

    Raises:
        SchemaError: a statement of one of these forms that does not parse.
    """
    text = statement.strip().rstrip(";").strip()
    head = _HEAD.match(text)
    if head is None:
        return None
    try:
        table, rest = _table_name(text[head.end():])
    except SchemaError:
        return None
    m = _ACTION.match(rest)
    if m is None:
        return None
    action = " ".join(m.group(1).upper().split())
    body = rest[m.end():].strip()
    operation = f"{action} {body}"
    change: Change
    if action.startswith("ADD"):
        change = add_columns(columns_from_defs(parse_column_defs(_parenthesised(body, action))))
    elif action.startswith("DROP"):
        inner = _parenthesised(body, action) if body.startswith("(") else body
        change = drop_columns(_names(inner))
    elif action == "RENAME COLUMN":
        old, pos = read_name(body, 0)
        tail = re.match(r"(?is)\s+TO\s+", body[pos:])
        if tail is None:
            raise SchemaError(f"RENAME COLUMN: expected 'a TO b', got {body!r}")
        new, end = read_name(body, pos + tail.end())
        if body[end:].strip():
            raise SchemaError(f"RENAME COLUMN: unexpected {body[end:].strip()!r}")
        change = rename_column(old, new)
    elif action.startswith("CHANGE"):
        old, pos = read_name(body, 0)
        while pos < len(body) and body[pos].isspace():
            pos += 1
        new, pos = read_name(body, pos)
        type_text = re.sub(r"(?is)\s+COMMENT\s+'.*'$", "", body[pos:].strip())
        change = _change_column(old, new, type_text)
    elif action == "ALTER COLUMN":
        old, pos = read_name(body, 0)
        while body[pos:pos + 1] == ".":  # a struct field by path: s.a, s.t.x
            field, pos = read_name(body, pos + 1)
            old = f"{old}.{field}"
        tail = re.match(r"(?is)\s+TYPE\s+", body[pos:])
        if tail is None:
            raise SchemaError(f"ALTER COLUMN: expected 'c TYPE type', got {body!r}")
        change = widen_column(old, body[pos + tail.end():].strip())
    elif action == "SET TBLPROPERTIES":
        change = set_properties(_pairs(_parenthesised(body, action), values=True))
    else:
        keys = list(_pairs(_parenthesised(body, action), values=False))
        change = _unset_if_exists(keys) if "IF EXISTS" in action else unset_properties(keys)
    return AlterStatement(table=table, operation=operation[:200], change=change)
