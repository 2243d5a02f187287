"""Column definitions of DDL text: ``name type [NOT NULL] [DEFAULT value]``, comma-separated.

A name is a bare identifier (letters, digits, underscores) or any text in backticks, where a
doubled backtick stands for one (```a``b``` is the name a`b). A type may nest
(``array<struct<a: int, b: map<string, decimal(10,2)>>>``): commas inside ``<>`` and
``()`` do not end a column. ``DEFAULT`` takes one literal: a number, a quoted string, true,
false or null.
"""

from __future__ import annotations

import re

from carbonstore.errors import SchemaError
from carbonstore.limits import MAX_COLUMNS
from carbonstore.store.records import Frozen

__all__ = [
    "BARE_NAME_RE",
    "ColumnDef",
    "parse_column_defs",
    "quote_name",
    "read_name",
    "split_top_level",
    "too_many_columns",
]


BARE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}", re.ASCII)  # needs no backticks


class ColumnDef(Frozen):
    """One parsed column definition (the type still as text)."""

    name: str
    type_text: str
    nullable: bool = True
    default: str | None = None
    quoted: bool = False  # the name was written in backticks


def quote_name(name: str) -> str:
    """``name`` as a backticked identifier (Spark SQL's quoting)."""
    return "`" + name.replace("`", "``") + "`"


def read_name(text: str, pos: int) -> tuple[str, int]:
    """The identifier at ``pos`` (bare or backticked) and the position after it.

    Raises:
        SchemaError: no identifier there, or an unclosed backtick.
    """
    n = len(text)
    if pos < n and text[pos] == "`":
        out: list[str] = []
        i = pos + 1
        while i < n:
            if text[i] == "`":
                if i + 1 < n and text[i + 1] == "`":
                    out.append("`")
                    i += 2
                    continue
                if not out:
                    raise SchemaError(f"empty quoted name in {text!r}")
                return "".join(out), i + 1
            out.append(text[i])
            i += 1
        raise SchemaError(f"unclosed backtick in {text!r}")
    i = pos
    while i < n and (text[i].isalnum() or text[i] == "_"):
        i += 1
    if i == pos:
        raise SchemaError(f"invalid column name at {text[pos:pos + 20]!r} in {text!r}: use "
                          "letters, digits and underscores, or quote it in backticks")
    return text[pos:i], i


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside ``()``, ``<>``, backticks and quotes."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    quote: str | None = None
    for ch in text:
        if quote is not None:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "`'\"":
            quote = ch
        elif ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


_KEYWORDS = ("not", "null", "default")
_NOT_NULL = re.compile(r"(?i)not\s+null\b")
_NULL = re.compile(r"(?i)null\b")
_DEFAULT = re.compile(r"(?i)default\b")


def _type_end(text: str, pos: int) -> int:
    """Where the type starting at ``pos`` ends: at a top-level NOT / NULL / DEFAULT word."""
    depth = 0
    i = pos
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif depth == 0 and ch.isspace():
            j = i
            while j < n and text[j].isspace():
                j += 1
            word = ""
            k = j
            while k < n and (text[k].isalnum() or text[k] == "_"):
                k += 1
            word = text[j:k].lower()
            if word in _KEYWORDS and (k == n or not (text[k].isalnum() or text[k] == "_")):
                return i
        i += 1
    return n


def _parse_one(item: str, whole: str) -> ColumnDef:
    text = item.strip()
    if not text:
        raise SchemaError(f"empty column definition in schema {whole!r}")
    name, pos = read_name(text, 0)
    if pos < len(text) and not text[pos].isspace() and text[pos] != ":":
        raise SchemaError(f"invalid column name in {text!r}: use letters, digits and "
                          "underscores, or quote it in backticks")
    while pos < len(text) and (text[pos].isspace() or text[pos] == ":"):
        pos += 1
    end = _type_end(text, pos)
    type_text = text[pos:end].strip()
    if not type_text:
        raise SchemaError(f"column {name!r} has no type; write it as 'name type'")
    rest = text[end:]
    nullable = True
    default: str | None = None
    while rest.strip():
        rest = rest.lstrip()
        if m := _NOT_NULL.match(rest):
            nullable = False
            rest = rest[m.end():]
        elif m := _NULL.match(rest):
            rest = rest[m.end():]
        elif m := _DEFAULT.match(rest):
            default, rest = _literal(rest[m.end():], text)
        else:
            raise SchemaError(f"unexpected {rest.split()[0]!r} in column definition {text!r}")
    return ColumnDef(name=name, type_text=type_text, nullable=nullable, default=default,
                     quoted=text.startswith("`"))


def _literal(text: str, whole: str) -> tuple[str | None, str]:
    """The literal at the start of ``text`` (None for null) and the rest."""
    t = text.lstrip()
    if not t:
        raise SchemaError(f"DEFAULT needs a value in {whole!r}")
    if t[0] in "'\"":
        q = t[0]
        i = 1
        out: list[str] = []
        while i < len(t):
            if t[i] == q:
                if i + 1 < len(t) and t[i + 1] == q:
                    out.append(q)
                    i += 2
                    continue
                return "".join(out), t[i + 1:]
            out.append(t[i])
            i += 1
        raise SchemaError(f"unclosed quote in DEFAULT of {whole!r}")
    word, _, rest = t.partition(" ")
    if word.startswith("-") and not word[1:2].isdigit():
        raise SchemaError(f"invalid DEFAULT value {word!r} in {whole!r}")
    if word.lower() == "null":
        return None, rest
    return word, rest


def parse_column_defs(text: str) -> list[ColumnDef]:
    """Parse ``"id long not null, `名前` string default 'x'"`` into definitions.

    Raises:
        SchemaError: a definition is malformed, or there are more than
            :data:`~carbonstore.limits.MAX_COLUMNS` of them.
    """
    items = split_top_level(text)
    if len(items) > MAX_COLUMNS:
        raise too_many_columns(len(items))
    return [_parse_one(item, text) for item in items]


def too_many_columns(count: int, table: str = "a table") -> SchemaError:
    return SchemaError(
        f"{table} would have {count:,} columns: at most {MAX_COLUMNS:,} columns are supported, "
        "each field of a struct, array or map counted as one (docs/reliability.md#limits)")
