"""SQL DELETE / UPDATE / MERGE statements, parsed with sqlglot (run by
``carbonstore.sql.dml_run``).

- ``DELETE FROM db.t [WHERE cond]``
- ``UPDATE db.t SET c = expr, ... [WHERE cond]``
- ``MERGE INTO db.t [AS t] USING source [AS s] ON cond
  WHEN MATCHED [AND cond] THEN UPDATE SET c = expr, ... | UPDATE SET * | DELETE ...
  WHEN NOT MATCHED [AND cond] THEN INSERT (c, ...) VALUES (expr, ...) | INSERT *``
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from carbonstore.errors import UserError
from carbonstore.expressions.parser import sql_error_message

__all__ = ["DmlStatement", "parse_dml"]


@dataclass(frozen=True, slots=True)
class DmlStatement:
    """One parsed DELETE / UPDATE / MERGE."""

    verb: str  # DELETE | UPDATE | MERGE
    tree: Any  # the sqlglot tree


def parse_dml(statement: str) -> DmlStatement | None:
    """The statement when it is a DELETE / UPDATE / MERGE of a table, else None.

    ``DELETE FROM TABLE t WHERE SEGMENT.ID IN (...)`` (CarbonData's segment delete) is
    matched as a verb before this; ``DELETE FROM TABLE t WHERE <row condition>`` is read as
    ``DELETE FROM t WHERE ...``.
    """
    text = statement.strip().rstrip(";")
    head = text.split(None, 1)[0].upper() if text.split() else ""
    if head not in ("DELETE", "UPDATE", "MERGE"):
        return None
    if head == "DELETE" and re.match(r"DELETE\s+FROM\s+TABLE\s", text, re.I):
        if re.search(r"\bSEGMENT\s*\.\s*(ID|STARTTIME)\b", text, re.I):
            return None  # the segment verbs (matched first by carbonstore sql)
        text = re.sub(r"^DELETE\s+FROM\s+TABLE\s", "DELETE FROM ", text, flags=re.I)
    if head == "MERGE" and not re.search(r"\bWHEN\b", text, re.I):
        raise UserError("MERGE INTO t USING s ON ... needs WHEN MATCHED / WHEN NOT MATCHED "
                        "clauses")
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except (ParseError, TokenError, RecursionError) as err:
        raise UserError(f"cannot parse {head}: {sql_error_message(err)}") from err
    if isinstance(tree, exp.Delete):
        return DmlStatement("DELETE", tree)
    if isinstance(tree, exp.Update):
        return DmlStatement("UPDATE", tree)
    if isinstance(tree, exp.Merge):
        return DmlStatement("MERGE", tree)
    return None
