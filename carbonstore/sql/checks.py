"""What a query's text can be refused for before Spark sees it, decided from the store alone.

Spark's analyzer would refuse these too, but only after a JVM started (20 s and more on a
loaded machine). Only what the store decides exactly is refused here; anything the store
cannot be sure of is left to Spark, so a statement Spark runs is never refused:

- a ``db.table`` name (FROM, JOIN, a subquery, a CTE's body, an INSERT's source) that is no
  table of the store, no CTE and no registered view. An unqualified name may be a view or
  a table of Spark's own catalog: Spark decides it.
- an unknown column, when the statement reads exactly one store table, at its latest
  version (no ``VERSION AS OF``, no ``--as-of``: an older version may have other columns),
  and nothing else whose columns the store does not know (no other table, no CTE, VALUES,
  table function, LATERAL VIEW, PIVOT, generator such as explode or inline), and the
  session holds no names of the user's (``closed``: the CLI's own session; a user's
  session may have SQL variables). A name is unknown when it is no column of the table
  (case-insensitive, as Spark), no alias the statement gives (Spark resolves lateral column
  aliases and ORDER BY aliases), no lambda variable and no parameterless function Spark
  allows without parentheses. A qualified ``x.c`` is checked only when ``x`` names the
  table and is no column of it (else it may be a struct field).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from carbonstore.errors import InvalidNameError, TableNotFoundError, UserError
from carbonstore.store.table import StoreRoot, Table

__all__ = ["check_query"]

# Spark functions called without parentheses (sqlglot reads some of them as columns), and
# the GROUP BY / ORDER BY ALL keyword
_NO_PARENS = frozenset({
    "all", "current_catalog", "current_database", "current_date", "current_path",
    "current_role", "current_schema", "current_time", "current_timestamp", "current_timezone",
    "current_user", "localtimestamp", "session_user", "user",
})
# sources whose columns the store does not know: with one, a name may come from it
_FOREIGN = (exp.Lateral, exp.Unnest, exp.Values, exp.Pivot, exp.Explode, exp.UDTF)
# Spark's generators: their output columns (col1, key, value, pos ...) may be named later
_GENERATORS = frozenset({
    "explode", "explode_outer", "posexplode", "posexplode_outer", "inline", "inline_outer",
    "stack", "json_tuple", "variant_explode", "variant_explode_outer",
})


def _generates(tree: exp.Expr) -> bool:
    for f in tree.find_all(exp.Func):
        name = f.name if isinstance(f, exp.Anonymous) else f.sql_name()
        if name.lower() in _GENERATORS:
            return True
    return False


def check_query(store: StoreRoot, tree: exp.Expr, *, aliases: Mapping[str, Table] | None = None,
                closed: bool = False, as_of: int | str | None = None) -> None:
    """Refuse ``tree`` (a query, or an INSERT's source) for a table name or a column the
    store knows cannot be (see the module docstring). ``aliases``: names that stand for
    tables (``register``'s views); ``closed``: the session knows no name of the user's;
    ``as_of``: the statement reads an older version (its columns may differ from today's:
    they are left to Spark, as a ``VERSION AS OF`` in the statement).

    Raises:
        TableNotFoundError: a ``db.table`` that is no table of the store nor a view.
        UserError: an unknown column of the one store table the statement reads.
    """
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    found: list[tuple[exp.Table, Table]] = []
    foreign = bool(ctes) or any(True for _ in tree.find_all(*_FOREIGN)) or _generates(tree)
    for node in tree.find_all(exp.Table):
        table = _resolve(store, node, ctes, aliases)
        if table is None:
            foreign = True
        else:
            found.append((node, table))
    if closed and as_of is None and not foreign and len(found) == 1 \
            and found[0][0].args.get("version") is None:
        _check_columns(tree, *found[0])


def _resolve(store: StoreRoot, node: exp.Table, ctes: set[str],
             aliases: Mapping[str, Table] | None) -> Table | None:
    """The store table ``node`` names, or None when it is something else (a CTE, a view, a
    table function, a file source, an unqualified name of Spark's catalog).

    Raises:
        TableNotFoundError: ``db.table`` that no table of the store and no view has.
    """
    name, db = node.name, node.db
    if not isinstance(node.this, exp.Identifier) or not name or node.catalog:
        return None
    if not db and name.lower() in ctes:
        return None
    key = f"{db}.{name}".lower() if db else name.lower()
    if aliases and key in aliases:
        return aliases[key]
    try:
        return store.table(f"{db}.{name}" if db else name)
    except InvalidNameError:
        return None  # parquet.`/path` and the like: Spark's
    except TableNotFoundError:
        if db and db.lower() != "global_temp":
            raise
        return None


def _check_columns(tree: exp.Expr, node: exp.Table, table: Table) -> None:
    columns = set(table.schema.column_names)
    given = {a.alias.lower() for a in tree.find_all(exp.Alias) if a.alias}
    given |= {i.name.lower() for a in tree.find_all(exp.Aliases) for i in a.expressions}
    given |= {i.name.lower() for lam in tree.find_all(exp.Lambda)
              for i in lam.expressions if isinstance(i, exp.Identifier | exp.Column)}
    given |= {w.alias_or_name.lower() for w in tree.find_all(exp.Window) if w.alias}
    alias = node.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return  # FROM t AS x(a, b) renames the columns: left to Spark
    names = {node.name.lower(), alias.name.lower() if alias is not None else node.name.lower()}
    for col in tree.find_all(exp.Column):
        if not isinstance(col.this, exp.Identifier):
            continue  # t.*
        name = col.name.lower()
        qualifier, db = col.table.lower(), col.db.lower()
        if db and (db, qualifier) != (node.db.lower(), node.name.lower()):
            continue  # a.b.c: a struct field of a column, or another table's
        if qualifier and (qualifier not in names or qualifier in columns):
            continue  # s.f: a field of struct column s
        if name in columns or name in given or name in _NO_PARENS or name.startswith("_metadata"):
            continue
        raise UserError(f"unknown column {col.name!r} of {table.name}; it has "
                        f"{', '.join(table.schema.column_names)}")
