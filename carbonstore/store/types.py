"""Spark SQL data types: ``DataType``, parsing a type's text (nested types at any depth,
within :data:`~carbonstore.limits.MAX_TYPE_DEPTH`), and counting the columns a type stores.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

from carbonstore.errors import SchemaError
from carbonstore.limits import MAX_COLUMNS, MAX_IDENTIFIER, MAX_TYPE_DEPTH
from carbonstore.store.ddl import (
    BARE_NAME_RE,
    quote_name,
    read_name,
    split_top_level,
    too_many_columns,
)
from carbonstore.store.records import Frozen

__all__ = [
    "DataType",
    "check_column_count",
    "leaf_count",
    "parse_nested_type",
    "parse_type",
    "type_depth",
]

_SIMPLE_TYPES: dict[str, str] = {
    "boolean": "boolean", "bool": "boolean",
    "byte": "byte", "tinyint": "byte",
    "short": "short", "smallint": "short",
    "int": "int", "integer": "int",
    "long": "long", "bigint": "long",
    "float": "float", "real": "float",
    "double": "double",
    "string": "string", "varchar": "string", "char": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
}
_DECIMAL_RE = re.compile(r"^decimal\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")


class DataType(Frozen):
    """A Spark SQL type. ``precision``/``scale`` are set for decimals only; ``fields`` for
    nested types: ``array`` (one field ``element``), ``map`` (``key``, ``value``) and
    ``struct`` (its named fields, in order)."""

    name: str
    precision: int = 0
    scale: int = 0
    fields: tuple[tuple[str, DataType], ...] = ()

    def __str__(self) -> str:
        if self.name == "decimal":
            return f"decimal({self.precision},{self.scale})"
        if self.name == "array":
            return f"array<{self.fields[0][1]}>"
        if self.name == "map":
            return f"map<{self.fields[0][1]},{self.fields[1][1]}>"
        if self.name == "struct":
            inner = ",".join(
                f"{n if BARE_NAME_RE.fullmatch(n) else quote_name(n)}:{t}" for n, t in self.fields
            )
            return f"struct<{inner}>"
        return self.name

    @property
    def is_nested(self) -> bool:
        return self.name in ("array", "map", "struct")

    @property
    def is_integral(self) -> bool:
        return self.name in ("byte", "short", "int", "long")

    @property
    def is_floating(self) -> bool:
        return self.name in ("float", "double")

    @property
    def is_numeric(self) -> bool:
        return self.is_integral or self.is_floating or self.name == "decimal"


def parse_type(text: str) -> DataType:
    """Parse a Spark SQL type such as ``long``, ``decimal(10,2)`` or, nested,
    ``array<struct<a: int, b: map<string, decimal(10,2)>>>``."""
    if "<" in text:
        return parse_nested_type(text, parse_type)
    t = text.strip().lower()
    if t in _SIMPLE_TYPES:
        return DataType(_SIMPLE_TYPES[t])
    m = _DECIMAL_RE.match(t)
    if m:
        precision = int(m.group(1) or 10)
        scale = int(m.group(2) or 0)
        if not 1 <= precision <= 38:
            raise SchemaError(f"decimal precision must be between 1 and 38, got {precision}")
        if not 0 <= scale <= precision:
            raise SchemaError(f"decimal scale must be between 0 and the precision, got {text!r}")
        return DataType("decimal", precision, scale)
    raise SchemaError(
        f"unknown type {text.strip()!r}; use one of boolean, byte, short, int, long, float, "
        "double, decimal(p,s), string, binary, date, timestamp, array<T>, map<K,V>, "
        "struct<name: T, ...>"
    )


class Typed(Protocol):
    """What ``check_column_count`` counts: anything with a type (a schema's ``Column``)."""

    @property
    def type(self) -> DataType: ...


def leaf_count(t: DataType) -> int:
    """Columns a type stores: 1 for a primitive, the sum of its fields' for a nested type
    (walked without recursion)."""
    count = 0
    stack = [t]
    while stack:
        cur = stack.pop()
        if cur.fields:
            stack.extend(f for _, f in cur.fields)
        else:
            count += 1
    return count


def check_column_count(columns: Sequence[Typed], table: str = "a table") -> None:
    """Refuse a table of more than :data:`~carbonstore.limits.MAX_COLUMNS` stored columns
    (a one-row insert at the limit writes in a few seconds; see docs/reliability.md)."""
    total = sum(leaf_count(c.type) for c in columns)
    if total > MAX_COLUMNS:
        raise too_many_columns(total, table)


def type_depth(text: str) -> int:
    """How deep ``<`` nests in a type's text (backticked names skipped), without recursion."""
    depth = deepest = 0
    quoted = False
    for ch in text:
        if ch == "`":
            quoted = not quoted
        elif quoted:
            continue
        elif ch == "<":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ">":
            depth -= 1
    return deepest


def _close(text: str, start: int) -> int:
    """Index of the ``>`` closing the ``<`` at ``start``."""
    depth = 0
    quote = False
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "`":
            quote = not quote
        elif quote:
            continue
        elif ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                return i
    raise SchemaError(f"unbalanced '<' in type {text.strip()!r}")


def parse_nested_type(text: str, parse_type: Callable[[str], DataType]) -> DataType:
    """``array<T>``, ``map<K, V>``, ``struct<a: T, ...>`` (recursively; ``parse_type`` parses
    every inner type, so decimals and nested types work at any depth).

    Raises:
        SchemaError: unbalanced brackets, an empty struct, a map without two types, a
            duplicate struct field.
    """
    t = text.strip()
    if (deep := type_depth(t)) > MAX_TYPE_DEPTH:
        shown = t if len(t) <= 80 else f"{t[:38]} ... {t[-38:]}"
        raise SchemaError(f"type {shown!r} nests {deep} levels deep: at most {MAX_TYPE_DEPTH} "
                          "levels of array / map / struct are supported "
                          "(docs/reliability.md#limits)")
    open_at = t.find("<")
    head = t[:open_at].strip().lower()
    end = _close(t, open_at)
    if t[end + 1:].strip():
        raise SchemaError(f"unexpected {t[end + 1:].strip()!r} after type {t[:end + 1]!r}")
    inner = t[open_at + 1:end]
    if head == "array":
        return DataType("array", fields=(("element", parse_type(inner)),))
    if head == "map":
        parts = split_top_level(inner)
        if len(parts) != 2:
            raise SchemaError(f"map needs a key and a value type: {t!r}")
        key = parse_type(parts[0])
        if key.is_nested:
            raise SchemaError(f"a map key must be a primitive type: {t!r}")
        return DataType("map", fields=(("key", key), ("value", parse_type(parts[1]))))
    if head == "struct":
        fields: list[tuple[str, DataType]] = []
        seen: set[str] = set()
        for item in split_top_level(inner):
            part = item.strip()
            if not part:
                raise SchemaError(f"empty field in {t!r}")
            name, pos = read_name(part, 0)
            if len(name) > MAX_IDENTIFIER:
                raise SchemaError(f"struct field name {name[:40]!r}... is {len(name)} characters "
                                  f"long: at most {MAX_IDENTIFIER} characters are supported")
            rest = part[pos:].lstrip()
            if rest.startswith(":"):
                rest = rest[1:]
            elif pos < len(part) and not part[pos].isspace():
                raise SchemaError(f"invalid struct field name in {t!r}: quote it in backticks")
            lname = name.lower()
            if lname in seen:
                raise SchemaError(f"struct field {name!r} is defined twice in {t!r}")
            seen.add(lname)
            fields.append((lname, parse_type(rest)))
        return DataType("struct", fields=tuple(fields))
    raise SchemaError(f"unknown type {t!r}; nested types are array<T>, map<K,V>, struct<...>")
