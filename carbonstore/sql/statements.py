"""The statement language of ``carbonstore sql`` and ``carbonstore.spark.sql()``, parsed once.

:func:`parse` reads one statement into a typed object, trying in order:

1. ``ALTER TABLE t ADD COLUMNS / DROP / RENAME / CHANGE / SET|UNSET TBLPROPERTIES`` (:class:`Alter`)
2. the CarbonData verbs and the DDL the store runs itself (:class:`Verb`, regular
   expressions: sqlglot does not read ``SHOW SEGMENTS``, ``CLEAN FILES``, ``STORED AS``)
3. ``DESCRIBE [EXTENDED] t``, ``DESCRIBE HISTORY t``, ``SHOW TABLES [IN db]``,
   ``SHOW CREATE TABLE t`` (:class:`Catalog`)
4. ``DELETE`` / ``UPDATE`` / ``MERGE`` (:class:`Dml`, ``sql.dml_parse``)
5. ``INSERT INTO t [(c, ...)] VALUES ... | SELECT ...`` (:class:`Insert`, sqlglot)
6. any other statement sqlglot reads as a query (:class:`Query`); anything else is refused
   in one line naming what is accepted.

Nothing here runs a statement or needs a JVM (:mod:`carbonstore.sql.router` runs them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from carbonstore.errors import UserError
from carbonstore.expressions.parser import sql_error_message
from carbonstore.expressions.sql_checks import checked_statement
from carbonstore.spark.statements import parse_statement
from carbonstore.sql.dml_parse import DmlStatement, parse_dml
from carbonstore.sql.verbs import match_verb, unquote_name
from carbonstore.store.alter_sql import AlterStatement, parse_alter

__all__ = ["ACCEPTED", "Alter", "Catalog", "Dml", "Insert", "Query", "Statement", "Verb",
           "parse"]

# What the refusal of an unknown statement lists (docs/sql.md has the full grammar)
ACCEPTED = (
    "queries (SELECT, WITH, VALUES, ... [VERSION|TIMESTAMP AS OF]), INSERT INTO, DELETE, "
    "UPDATE, MERGE INTO, CREATE TABLE ... STORED AS carbondata | USING carbonstore, "
    "DROP TABLE, ALTER TABLE, DESCRIBE [EXTENDED|HISTORY], SHOW TABLES, SHOW CREATE TABLE, "
    "SHOW SEGMENTS, SHOW PARTITIONS, CLEAN FILES, ALTER TABLE t COMPACT, "
    "DELETE FROM TABLE t WHERE SEGMENT.ID IN (...)"
)


@dataclass(frozen=True, slots=True)
class Statement:
    """One parsed statement: its text and its kind (the class name, lower case)."""

    text: str

    @property
    def kind(self) -> str:
        return type(self).__name__.lower()


@dataclass(frozen=True, slots=True)
class Query(Statement):
    """A query: answered from the index when exact (count/min/max), else run by Spark."""

    tree: Any = None


@dataclass(frozen=True, slots=True)
class Insert(Statement):
    """``INSERT INTO|OVERWRITE t [(c, ...)] <query>``: a load of the query's rows (one segment)."""

    table: str = ""
    columns: tuple[str, ...] | None = None
    source: str = ""  # the query whose rows are loaded, Spark SQL
    overwrite: bool = False


@dataclass(frozen=True, slots=True)
class Dml(Statement):
    """DELETE / UPDATE / MERGE (``sql.dml_parse``, run by ``sql.dml_run``)."""

    dml: DmlStatement | None = None


@dataclass(frozen=True, slots=True)
class Alter(Statement):
    """An ALTER TABLE schema change (``store.alter_sql``)."""

    alter: AlterStatement | None = None


@dataclass(frozen=True, slots=True)
class Verb(Statement):
    """A CarbonData verb or store DDL: ``verb`` (show_segments, compact, clean, delete_ids,
    delete_before, create, show_partitions, drop) and its parts."""

    verb: str = ""
    parts: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Catalog(Statement):
    """``describe`` / ``history`` / ``show_tables`` / ``show_create`` of ``name``."""

    what: str = ""
    name: str | None = None
    extended: bool = False


_IDENT = r"(?:`(?:[^`]|``)+`|[^\W\d]\w*)"
_QNAME = rf"(?P<name>{_IDENT}(?:\s*\.\s*{_IDENT})?)"
_CATALOG = [
    ("history", re.compile(rf"(?:DESCRIBE|DESC)\s+HISTORY\s+{_QNAME}", re.I | re.S)),
    ("describe", re.compile(rf"(?:DESCRIBE|DESC)\s+(?:TABLE\s+)?(?P<ext>EXTENDED\s+|FORMATTED\s+)?"
                            rf"{_QNAME}", re.I | re.S)),
    ("show_tables", re.compile(rf"SHOW\s+TABLES(?:\s+(?:IN|FROM)\s+(?P<name>{_IDENT}))?",
                               re.I | re.S)),
    ("show_create", re.compile(rf"SHOW\s+CREATE\s+TABLE\s+{_QNAME}", re.I | re.S)),
]


def _catalog(text: str) -> Catalog | None:
    for what, pattern in _CATALOG:
        m = pattern.fullmatch(text)
        if m is None:
            continue
        name = m.group("name")
        if what == "describe" and name and name.strip().upper() in ("HISTORY", "EXTENDED"):
            raise UserError(f"{text}: name a table, e.g. DESCRIBE {name.strip()} db.t")
        return Catalog(text, what=what, name=unquote_name(name) if name else None,
                       extended=bool(m.groupdict().get("ext")))
    return None


def _insert(text: str) -> Insert | None:
    if not re.match(r"(?is)INSERT\s+(INTO|OVERWRITE)\b", text):
        return None
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except (ParseError, TokenError, RecursionError) as err:
        raise UserError(f"cannot parse INSERT: {sql_error_message(err)}") from err
    if not isinstance(tree, exp.Insert):
        raise UserError("write INSERT INTO db.t [(c, ...)] VALUES (...), ... | SELECT ...")
    target = tree.this
    columns: tuple[str, ...] | None = None
    if isinstance(target, exp.Schema):
        columns = tuple(c.name.lower() for c in target.expressions)
        target = target.this
    if not isinstance(target, exp.Table) or not target.name or target.catalog:
        raise UserError("INSERT INTO: name a table of the store (db.table)")
    if tree.args.get("partition") or tree.args.get("where"):
        raise UserError("INSERT INTO ... PARTITION / REPLACE WHERE: leave them out; the "
                        "table's partitioning places each row")
    source = tree.expression
    if source is None:
        raise UserError("INSERT INTO db.t: give VALUES (...) or a SELECT")
    if isinstance(source, exp.Values):  # VALUES (...) as a query Spark runs: SELECT * FROM
        body = f"SELECT * FROM {source.sql(dialect='spark')}"
    else:
        body = source.sql(dialect="spark")
    name = f"{target.db}.{target.name}" if target.db else target.name
    return Insert(text, table=name, columns=columns, source=body,
                  overwrite=bool(tree.args.get("overwrite")))


def parse(statement: str) -> Statement:
    """One statement as a typed object (see the module docstring).

    Raises:
        UserError: the statement is too long or deep, does not parse, or is no statement
            of the language (one line naming what is accepted).
    """
    checked_statement(statement)  # length and depth limits, before anything else reads it
    text = statement.strip().rstrip(";").strip()
    if not text:
        raise UserError("give a SQL statement")
    alter = parse_alter(text)
    if alter is not None:
        return Alter(text, alter=alter)
    verb = match_verb(text)
    if verb is not None:
        return Verb(text, verb=verb[0], parts=verb[1])
    catalog = _catalog(text)
    if catalog is not None:
        return catalog
    dml = parse_dml(text)
    if dml is not None:
        return Dml(text, dml=dml)
    insert = _insert(text)
    if insert is not None:
        return insert
    tree = parse_statement(text)
    if not isinstance(tree, exp.Query):
        first = text.split()[0].upper()
        raise UserError(f"carbonstore sql runs {ACCEPTED}; this {first} statement is not one of "
                        "them")
    return Query(text, tree=tree)
