"""SQL statements over the store: each table occurrence planned with its own conjuncts.

``carbonstore sql`` gives every occurrence of a store table in a statement its own view
(``db_table__N``), a DataFrame planned by the index for the WHERE conjuncts that belong to
that occurrence alone. A conjunct belongs to an occurrence when it is a conjunct of the
WHERE of the SELECT whose FROM/JOIN names the occurrence, every column it references
resolves to that occurrence, it holds no subquery, and the occurrence is not on the
null-supplying side of an outer join (a predicate there may keep a row that the pruned
read would drop: ``LEFT JOIN r ... WHERE r.x IS NULL``). An occurrence without such a
conjunct reads every readable segment. The statement keeps its WHERE: pruning only
chooses which rows are read, Spark decides which rows match.

Pure sqlglot: no pyspark import, testable without a JVM.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from carbonstore.errors import TableNotFoundError, UserError
from carbonstore.expressions.expr import AlwaysTrue, Expr, nodes
from carbonstore.expressions.parser import and_terms, parse_where, sql_error_message
from carbonstore.pruning.plan import bind_where
from carbonstore.store.table import StoreRoot, Table

__all__ = ["IndexWhere", "Occurrence", "PlannedStatement", "conjuncts", "index_where",
           "parse_statement", "plan_statement", "pushable_where", "split_where"]


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One table reference of a statement: the view it was rewritten to, its conjuncts."""

    view: str
    table: Table
    where: str | None


@dataclass(frozen=True, slots=True)
class PlannedStatement:
    sql: str
    occurrences: tuple[Occurrence, ...]


def parse_statement(statement: str) -> exp.Expr:
    """One Spark SQL statement as a sqlglot tree; a user error if it does not parse."""
    try:
        trees = sqlglot.parse(statement, read="spark")
    except (ParseError, TokenError) as err:
        raise UserError(f"cannot parse SQL: {sql_error_message(err)}") from err
    except RecursionError as err:
        raise UserError("cannot parse SQL: the statement nests too deeply") from err
    if len(trees) != 1 or trees[0] is None:
        raise UserError("give exactly one SQL statement")
    return trees[0]


def conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    """The top-level AND terms of ``condition`` (parentheses removed)."""
    return and_terms(condition)


def pushable_where(where: str | None, columns: frozenset[str]) -> str | None:
    """The conjuncts of ``where`` that reference only ``columns`` and hold no subquery
    (AND-ed, Spark SQL), or None."""
    return split_where(where, columns)[0]


def split_where(where: str | None, columns: frozenset[str]) -> tuple[str | None, str | None]:
    """``where`` as (the conjuncts that reference only ``columns`` and hold no subquery,
    the other conjuncts), each AND-ed in Spark SQL or None. A ``where`` that does not parse
    here is all "other"."""
    if not where:
        return None, None
    try:
        cond = sqlglot.parse_one(where, read="spark")
    except (ParseError, TokenError, RecursionError):
        return None, where
    keep: list[str] = []
    rest: list[str] = []
    for c in conjuncts(cond):
        # the column a reference reads: ``s.f`` reads column s (field f)
        refs = {(col.parts[0].name if col.table else col.name).lower()
                for col in c.find_all(exp.Column)}
        ok = not c.find(exp.Subquery, exp.Select) and refs and refs <= columns
        (keep if ok else rest).append(f"({c.sql(dialect='spark')})")
    return " AND ".join(keep) or None, " AND ".join(rest) or None


@dataclass(frozen=True, slots=True)
class IndexWhere:
    """What the index can use of a filter: the top-level AND terms of it that bind to the
    table (``where``, AND-ed in Spark SQL, None: none; ``expr``, their bound expression,
    AlwaysTrue: none), and whether they are the whole filter (``exact``). A term that does
    not bind (a function, arithmetic, a column compared with a column, LIKE '%x', an OR
    with such a side, ...) prunes nothing: Spark evaluates the whole filter over what the
    others keep."""

    where: str | None
    expr: Expr
    exact: bool


def index_where(
    table: Table, where: str | None, *, time_zone: dt.tzinfo = dt.UTC, strict: bool = True,
) -> IndexWhere:
    """The part of ``where`` the index can use (see :class:`IndexWhere`).

    ``strict``: a filter the index cannot read at all stays an error (raised), as does a
    term naming a column the table does not have (the binder's message, which names the
    table's columns); a filter that binds whole costs one bind (cached per text).
    ``strict=False`` (a statement's occurrence, whose terms may name outer columns):
    nothing is raised, a term that does not bind is left out.

    Raises:
        ExpressionError: (``strict``) the filter does not parse as one SQL condition, nests
            too deeply, is not UTF-8 text, or names an unknown column.
    """
    if not where or not where.strip():
        return IndexWhere(None, AlwaysTrue(), True)
    try:
        return IndexWhere(where, bind_where(table, where, time_zone=time_zone), True)
    except (UserError, RecursionError) as err:
        first: BaseException = err
    terms = _terms(where)
    if terms is None or "nests too deeply" in str(first) or _has_surrogate(where):
        if strict:  # not a condition Spark could read either: the binder's message
            raise first
        return IndexWhere(None, AlwaysTrue(), False)
    kept: list[str] = []
    for term in terms:
        text = term.sql(dialect="spark")
        try:
            bind_where(table, text, time_zone=time_zone)
        except (UserError, RecursionError) as err:
            if strict and isinstance(err, UserError) and _names_unknown_column(table, text):
                raise
            continue
        kept.append(f"({text})")
    if not kept:
        return IndexWhere(None, AlwaysTrue(), False)
    joined = " AND ".join(kept)
    try:
        return IndexWhere(joined, bind_where(table, joined, time_zone=time_zone), False)
    except (UserError, RecursionError):
        return IndexWhere(None, AlwaysTrue(), False)


def _terms(where: str) -> list[Any] | None:
    """The top-level AND terms of ``where`` as sqlglot trees, or None when it is not one
    SQL condition sqlglot reads."""
    try:
        trees = sqlglot.parse(where, read="spark")
    except (ParseError, TokenError, RecursionError, ValueError):
        return None
    if len(trees) != 1 or trees[0] is None:
        return None
    try:
        return conjuncts(trees[0])
    except RecursionError:
        return None


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _names_unknown_column(table: Table, term: str) -> bool:
    """True when ``term`` reads as a condition the binder supports and one of its columns
    (the head of ``s.f``) is not a column of the table: Spark's analysis would refuse it
    too. A struct / map access the binder cannot resolve on a real column is left to Spark."""
    try:
        parsed = parse_where(term)
    except (UserError, RecursionError):
        return False
    names = {c.lower() for c in table.schema.column_names}
    for node in nodes(parsed):
        name = getattr(node, "term", None)
        if isinstance(name, str) and name.lower() not in names \
                and name.split(".")[0].lower() not in names:
            return True
    return False


def _sources(select: exp.Select) -> list[tuple[exp.Expr, str, bool]]:
    """(source, name it is referenced by, preserved) of a SELECT's FROM and JOINs, in order.

    A source is preserved when no outer join can null-extend it: the FROM source unless a
    later join is RIGHT or FULL; a joined source when its join has no side and no later join
    is RIGHT or FULL.
    """
    from_ = select.args.get("from_") or select.args.get("from")
    items: list[tuple[exp.Expr, str | None]] = []
    if from_ is not None:
        items.append((from_.this, None))
    for j in select.args.get("joins") or []:
        items.append((j.this, (j.side or "").upper() or (j.kind or "").upper() or "INNER"))
    out = []
    for i, (src, how) in enumerate(items):
        later = [h for _, h in items[i + 1:]]
        nulled_later = any(h in ("RIGHT", "FULL") for h in later)
        preserved = not nulled_later and (how is None or how in ("INNER", "CROSS"))
        out.append((src, src.alias_or_name.lower(), preserved))
    return out


def plan_statement(
    statement: str | exp.Expr, store: StoreRoot, *, as_of: int | str | None = None,
    aliases: Mapping[str, Table] | None = None,
    view: Callable[[Table, str | None], str] | None = None,
    lookup: bool = True,
) -> PlannedStatement:
    """Rewrite every store table reference to its own view and find its conjuncts.

    Names that are not tables of the store (CTEs, other views) are left alone; a plain
    ``table`` resolves to ``default.table`` when that exists. Every occurrence of one table
    reads one version: ``as_of`` (a version, a local time or ``@epoch ms``) when given, else
    the latest version when the statement is planned. ``aliases``: more names (lower case,
    ``name`` or ``db.name``) that stand for tables, e.g. the views and the catalog tables of
    ``register``; ``lookup=False``: only they do (any other name is left to Spark). ``view``:
    the name (``[db.]name``) of an occurrence's view, given its pinned table and conjuncts
    (default: ``db_table__N``, N its position).

    ``statement``: SQL text, or its tree from :func:`parse_statement` (rewritten in place).

    Raises:
        UserError: the statement does not parse, or names ``db.table`` that does not exist.
    """
    tree = statement if isinstance(statement, exp.Expr) else parse_statement(statement)
    if not isinstance(tree, exp.Query):
        text = tree.sql(dialect="spark") if isinstance(statement, exp.Expr) else statement
        first = text.split()[0].upper() if text.split() else ""
        raise UserError(
            f"carbonstore sql runs queries (SELECT, WITH ..., UNION, VALUES) and the CarbonData "
            f"verbs (SHOW SEGMENTS FOR TABLE, ALTER TABLE t COMPACT, CLEAN FILES FOR TABLE, "
            f"DELETE FROM TABLE t WHERE SEGMENT.ID IN (...), CREATE TABLE ... STORED AS "
            f"carbondata, DROP TABLE); this {first} statement is not one of them")
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables: dict[int, Table] = {}
    pinned: dict[str, Table] = {}
    for node in tree.find_all(exp.Table):
        name, db = node.name, node.db
        if not name or node.catalog or (not db and name.lower() in ctes):
            continue
        alias = aliases.get(f"{db}.{name}".lower() if db else name.lower()) if aliases \
            else None
        if alias is None and not lookup:
            continue
        try:
            found = alias if alias is not None else store.table(f"{db}.{name}" if db else name)
        except TableNotFoundError:
            if db:
                raise
            continue
        version = node.args.get("version")  # FROM t VERSION|TIMESTAMP AS OF x: this occurrence
        if isinstance(version, exp.Version) and isinstance(version.expression, exp.Literal):
            when = version.expression.name
            tables[id(node)] = found.as_of(int(when) if version.name.upper() == "VERSION"
                                           and when.isdigit() else when)
            continue
        if version is not None:
            raise UserError(f"{version.sql(dialect='spark')}: give a version number or a "
                            "'yyyy-MM-dd HH:mm:ss' literal")
        key = f"{found.store.location}|{found.name}"
        if key not in pinned:
            pinned[key] = found.as_of(as_of) if as_of is not None else found.as_of(
                found.status.read().version, check_files=False)
        tables[id(node)] = pinned[key]
    # the names the statement gives its tables (an alias may differ from the table's own)
    names = {(t.name.database, t.name.table) for t in tables.values()} | {
        (n.db.lower(), n.name.lower()) for n in tree.find_all(exp.Table)
        if id(n) in tables and n.db}
    for col in tree.find_all(exp.Column):
        # db.table.column: the rewritten reference keeps only the table name as its alias
        if col.args.get("db") and (col.db.lower(), col.table.lower()) in names:
            col.set("db", None)
    wheres: dict[int, list[str]] = {}
    for select in tree.find_all(exp.Select):
        where = select.args.get("where")
        if where is None:
            continue
        sources = _sources(select)
        owners = _column_owners(sources, tables)
        for conj in conjuncts(where.this):
            if conj.find(exp.Subquery, exp.Select, exp.Exists):
                continue
            cols = list(conj.find_all(exp.Column))
            if not cols:
                continue
            owner_ids = {_owner(c, sources, owners) for c in cols}
            if len(owner_ids) != 1 or None in owner_ids:
                continue
            (src_id,) = owner_ids
            src = next(s for s, _, p in sources if id(s) == src_id and p)  # preserved only
            unqualified = conj.copy().transform(
                lambda n: exp.column(n.name, quoted=True) if isinstance(n, exp.Column) else n)
            wheres.setdefault(id(src), []).append(unqualified.sql(dialect="spark"))
    occurrences: list[Occurrence] = []
    for node in list(tree.find_all(exp.Table)):
        table = tables.get(id(node))
        if table is None:
            continue
        parts = wheres.get(id(node))
        where = " AND ".join(f"({p})" for p in parts) if parts else None
        name = f"{table.name.database}_{table.name.table}__{len(occurrences)}" \
            if view is None else view(table, where)
        occurrences.append(Occurrence(name, table, where))
        new = exp.to_table(name)
        alias = node.args.get("alias")
        # keep the name the statement uses for the table's columns (``db.t.c`` -> ``t``)
        new.set("alias", alias if alias is not None else exp.TableAlias(
            this=exp.to_identifier(node.name)))
        node.replace(new)
    return PlannedStatement(tree.sql(dialect="spark"), tuple(occurrences))


def _column_owners(
    sources: list[tuple[exp.Expr, str, bool]], tables: dict[int, Table]
) -> dict[str, int | None]:
    """Unqualified column name -> id of the one source that has it (None: ambiguous or
    unknown, e.g. a subquery source whose columns are not known here)."""
    if len(sources) == 1:
        return {"*": id(sources[0][0])}
    known = all(id(s) in tables for s, _, _ in sources)
    if not known:
        return {}
    owners: dict[str, int | None] = {}
    for s, _, _ in sources:
        for c in tables[id(s)].schema.column_names:
            owners[c] = None if c in owners else id(s)
    return owners


def _owner(
    col: exp.Column, sources: list[tuple[exp.Expr, str, bool]], owners: dict[str, int | None]
) -> int | None:
    qualifier = col.table.lower() if col.table else ""
    if qualifier:
        hits = [id(s) for s, name, preserved in sources if name == qualifier and preserved]
        if len(hits) == 1 and not col.args.get("db"):
            return hits[0] if _is_store_source(sources, hits[0]) else None
        return None
    if "*" in owners:
        src_id = owners["*"]
        return src_id if any(id(s) == src_id and p for s, _, p in sources) else None
    src_id = owners.get(col.name.lower())
    if src_id is None or not any(id(s) == src_id and p for s, _, p in sources):
        return None
    return src_id


def _is_store_source(sources: list[tuple[exp.Expr, str, bool]], src_id: int) -> bool:
    return any(id(s) == src_id and isinstance(s, exp.Table) for s, _, _ in sources)
