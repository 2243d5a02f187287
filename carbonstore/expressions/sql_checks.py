"""Limits of SQL text a user gives (``--where``, ``--set``, DML conditions, ``sql``
statements), checked before the text is used: its length, and how deep its parsed tree
nests (carbonstore.limits). Code that walks a parsed tree recursively (the DuckDB
translation of DML expressions, sqlglot's own transforms, Spark's analyzer) stays far from
Python's recursion limit, and a statement that would take minutes to translate is refused
at once with one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from carbonstore.errors import ExpressionError
from carbonstore.limits import MAX_EXPRESSION_DEPTH, MAX_SQL_TEXT

__all__ = ["check_sql_text", "check_tree_depth", "checked_statement", "too_deep_sql",
           "unknown_column"]


def _shown(text: str, limit: int = 80) -> str:
    if len(text) > limit:
        text = f"{text[: limit // 2]} ... {text[-limit // 2:]}"
    return repr(text)


def check_sql_text(text: object, what: str) -> str:
    """``text`` when it is a string of at most :data:`MAX_SQL_TEXT` characters without a
    NUL; else an ``ExpressionError`` naming ``what`` (``--set``, ``the statement``)."""
    if not isinstance(text, str):
        raise ExpressionError(f"{what} must be SQL text, got {type(text).__name__}")
    if len(text) > MAX_SQL_TEXT:
        raise ExpressionError(
            f"{what} is {len(text):,} characters long: at most {MAX_SQL_TEXT:,} characters "
            "are supported (docs/reliability.md#limits)")
    if "\x00" in text:
        raise ExpressionError(f"{what} {_shown(text)} holds a NUL character")
    return text


def too_deep_sql(what: str, text: str) -> ExpressionError:
    return ExpressionError(
        f"{what} {_shown(text)} nests too deeply: at most {MAX_EXPRESSION_DEPTH} levels are "
        "supported, each operand of a chain such as a + b + c counting one "
        "(docs/reliability.md#limits)")


def tree_depth(tree: Any, flat: tuple[type, ...] = ()) -> int:
    """Levels of a sqlglot tree, walked without recursion; a node of a ``flat`` type under
    a parent of the same type (a chain of ANDs) adds no level."""
    from sqlglot import exp

    deepest = 0
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        for value in node.args.values():
            children = value if isinstance(value, list) else [value]
            for child in children:
                if isinstance(child, exp.Expr):
                    same = flat and type(child) is type(node) and isinstance(child, flat)
                    stack.append((child, d if same else d + 1))
    return deepest


def check_tree_depth(tree: Any, what: str, text: str, flat: tuple[type, ...] = ()) -> None:
    """Refuse a parsed ``tree`` (of ``text``) deeper than :data:`MAX_EXPRESSION_DEPTH`."""
    if tree_depth(tree, flat) > MAX_EXPRESSION_DEPTH:
        raise too_deep_sql(what, text)


def checked_statement(text: str, what: str = "statement") -> None:
    """Refuse a SQL statement that is too long, or parses into a tree deeper than the limit
    (chains of AND / OR are no nesting: Spark and sqlglot walk them without recursion). A
    statement that does not parse passes: the code that runs it reports the mistake."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    check_sql_text(text, what)
    try:
        trees = sqlglot.parse(text, read="spark")
    except (ParseError, TokenError):
        return
    except RecursionError:
        raise too_deep_sql(what, text) from None
    for tree in trees:
        if tree is not None:
            check_tree_depth(tree, what, text, flat=(exp.And, exp.Or))


def unknown_column(text: str, columns: Sequence[str], alias: str,
                   what: str = "the expression") -> str | None:
    """The first column Spark SQL ``text`` names that is not one of ``columns`` (lower case):
    only names Spark would resolve against the table are checked - unqualified or qualified
    by ``alias`` - not a lambda's variables; None also for text sqlglot cannot read (Spark's
    parser decides those)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    try:
        tree = sqlglot.parse_one(text, read="spark")
    except (ParseError, TokenError):
        return None
    except RecursionError:  # deeper than the parser walks: over the limit, in one line
        raise too_deep_sql(what, text) from None
    check_tree_depth(tree, what, text)
    names = set(columns)
    variables = {p.name.lower() for lam in tree.find_all(exp.Lambda) for p in lam.expressions}
    for col in tree.find_all(exp.Column):
        name = col.name.lower()
        if col.table.lower() in ("", alias.lower()) and name not in names | variables:
            return str(col.name)
    return None
