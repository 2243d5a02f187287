"""Run a parsed SQL DELETE / UPDATE / MERGE (``carbonstore.sql.dml_parse``) on the Spark
DML engine (``carbonstore.dml``).

Conditions, SET values and MERGE clauses are Spark SQL evaluated by Spark
(``carbonstore.dml``). A MERGE source that is a store table is read natively by the MERGE
(its live rows); any other source (a subquery, VALUES, a view) is given to the caller's
``read_source`` (Spark, in ``carbonstore sql``: a DataFrame the MERGE joins in Spark).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from carbonstore.dml.merge import WhenMatched, WhenNotMatched, WhenNotMatchedBySource, merge_rows
from carbonstore.dml.statements import delete_rows, update_rows
from carbonstore.errors import TableNotFoundError, UserError
from carbonstore.segments.dml_commit import DmlResult
from carbonstore.sql.dml_parse import DmlStatement
from carbonstore.store.table import StoreRoot, Table

__all__ = ["run_dml"]


def _table(store: StoreRoot, node: Any, verb: str) -> Table:
    if not isinstance(node, exp.Table) or not node.name:
        raise UserError(f"{verb}: name a table of the store (db.table)")
    name = f"{node.db}.{node.name}" if node.db else node.name
    return store.table(name)


def _where_text(where: Any) -> str | None:
    """A WHERE clause as the store's filter text (column qualifiers dropped)."""
    if where is None:
        return None
    cond = where.this.copy().transform(
        lambda n: exp.column(n.name, quoted=True) if isinstance(n, exp.Column) else n)
    return str(cond.sql(dialect="spark"))


def _sets(expressions: list[Any], verb: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in expressions:
        if not isinstance(e, exp.EQ) or not isinstance(e.this, exp.Column):
            raise UserError(f"{verb} SET: write column = expression, ... ({e.sql()!r} is not)")
        out[e.this.name.lower()] = e.expression.sql(dialect="spark")
    return out


def run_dml(
    store: StoreRoot, dml: DmlStatement, *, read_source: Callable[[str], Any] | None = None,
    time_zone: str = "UTC",
) -> DmlResult:
    """Run a parsed statement; ``read_source(sql)`` gives the rows of a non-table source (a
    Spark DataFrame, or a pyarrow table);
    ``time_zone``: Spark's session time zone (``segments.timezones``)."""
    tree = dml.tree
    table = _table(store, tree.this, dml.verb)
    if dml.verb == "DELETE":
        return delete_rows(table, _where_text(tree.args.get("where")), time_zone=time_zone)
    if dml.verb == "UPDATE":
        return update_rows(table, _sets(tree.expressions, "UPDATE"),
                           _where_text(tree.args.get("where")), time_zone=time_zone)
    return _merge(store, table, tree, read_source, time_zone)


def _merge(
    store: StoreRoot, table: Table, tree: Any, read_source: Callable[[str], Any] | None,
    time_zone: str,
) -> DmlResult:
    target_alias = tree.this.alias_or_name
    using = tree.args.get("using")
    if using is None or tree.args.get("on") is None:
        raise UserError("MERGE INTO t USING source ON condition WHEN ...: give USING and ON")
    source_alias = using.alias_or_name
    source: Any = None
    if isinstance(using, exp.Table) and not using.args.get("catalog"):
        try:
            source = _table(store, using, "MERGE USING")  # read natively by the MERGE
        except TableNotFoundError:
            if using.db:
                raise
    if source is None:
        if read_source is None:
            raise UserError("MERGE USING: the source must be a table of the store here")
        body = using.this if isinstance(using, exp.Subquery) else using.copy()
        if isinstance(body, exp.Table):
            body.set("alias", None)
            sql = f"SELECT * FROM {body.sql(dialect='spark')}"
        else:
            sql = body.sql(dialect="spark")
        source = read_source(sql)
    matched: list[WhenMatched] = []
    not_matched: list[WhenNotMatched] = []
    by_source: list[WhenNotMatchedBySource] = []
    whens = tree.args.get("whens")
    for w in (whens.expressions if whens is not None else []):
        cond = w.args.get("condition")
        cond_sql = cond.sql(dialect="spark") if cond is not None else None
        then = w.args.get("then")
        if w.args.get("source"):  # WHEN NOT MATCHED BY SOURCE
            if isinstance(then, exp.Update):
                by_source.append(WhenNotMatchedBySource(
                    action="update", condition=cond_sql,
                    assignments=_sets(then.expressions, "MERGE UPDATE")))
            elif isinstance(then, exp.Var) and str(then.this).upper() == "DELETE":
                by_source.append(WhenNotMatchedBySource(action="delete", condition=cond_sql))
            else:
                raise UserError("MERGE: WHEN NOT MATCHED BY SOURCE THEN UPDATE SET ... or DELETE")
            continue
        if w.args.get("matched"):
            if isinstance(then, exp.Update):
                star = len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star)
                matched.append(WhenMatched(
                    action="update", condition=cond_sql,
                    assignments=None if star else _sets(then.expressions, "MERGE UPDATE")))
            elif isinstance(then, exp.Var) and str(then.this).upper() == "DELETE":
                matched.append(WhenMatched(action="delete", condition=cond_sql))
            else:
                raise UserError("MERGE: WHEN MATCHED THEN UPDATE SET ... or DELETE")
        else:
            if not isinstance(then, exp.Insert):
                raise UserError("MERGE: WHEN NOT MATCHED THEN INSERT ...")
            if isinstance(then.this, exp.Star):
                not_matched.append(WhenNotMatched(condition=cond_sql))
                continue
            cols = [c.name.lower() for c in then.this.expressions]
            vals = then.expression.expressions if then.expression is not None else []
            if len(cols) != len(vals):
                raise UserError("MERGE INSERT: as many VALUES as columns")
            not_matched.append(WhenNotMatched(condition=cond_sql, values={
                c: v.sql(dialect="spark") for c, v in zip(cols, vals, strict=True)}))
    return merge_rows(table, source, on=tree.args["on"].sql(dialect="spark"), matched=matched,
                      not_matched=not_matched, not_matched_by_source=by_source,
                      target_alias=target_alias,
                      source_alias=source_alias, time_zone=time_zone)
