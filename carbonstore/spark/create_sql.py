"""``CREATE TABLE ... USING carbonstore`` and ``DROP TABLE`` read as Spark SQL (sqlglot's
Spark dialect), for the statements :mod:`carbonstore.spark.catalog` runs itself.

Accepted::

    CREATE TABLE [IF NOT EXISTS] [db.]t [(col type [NOT NULL] [COMMENT '...'], ...)]
        USING carbonstore
        [OPTIONS (store '<location>', table '<db.table>', 'carbon.<key>' '<value>', ...)]
        [PARTITIONED BY (col | transform(col), ...)]
        [CLUSTERED BY (col, ...) INTO n BUCKETS]
        [TBLPROPERTIES ('sort_columns'='a,b', 'dictionary_include'='c', 'bloom_columns'='d', ...)]
        [AS SELECT ...]

OPTIONS ``table`` names the store table when it is not the statement's name (the catalog
name is the statement's). TBLPROPERTIES are the store's table properties (an unknown one is
refused by the store, with the list of known ones); PARTITIONED BY and CLUSTERED BY are
the ``partition_by`` and ``bucket_columns`` / ``bucket_number`` properties. Any other
clause (OR REPLACE, LOCATION, COMMENT, ...) is refused in one line: it would be ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from carbonstore.errors import UserError

__all__ = ["CreateStatement", "parse_create", "parse_drop", "strip_comments"]

PROVIDER = "carbonstore"
_CREATE_TABLE = re.compile(r"\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:EXTERNAL\s+)?TABLE\s", re.I)
_COMMENTS = re.compile(r"\s*(?:--[^\n]*(?:\n|$)|/\*.*?\*/)", re.S)


def strip_comments(statement: str) -> str:
    """``statement`` without the comments before its first word."""
    while True:
        m = _COMMENTS.match(statement)
        if not m:
            return statement
        statement = statement[m.end():]


@dataclass(frozen=True)
class CreateStatement:
    """One ``CREATE TABLE ... USING carbonstore``. ``columns``: the schema string (None:
    no column list); ``query``: the SELECT of a CREATE ... AS SELECT; ``store_table``: the
    store table's name when OPTIONS (table ...) gives one (else ``database.table``)."""

    database: str
    table: str
    columns: str | None
    properties: dict[str, str] = field(default_factory=dict)
    store: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    if_not_exists: bool = False
    query: str | None = None
    store_table: str | None = None


def _parse(statement: str):  # type: ignore[no-untyped-def]
    import sqlglot
    from sqlglot.errors import ParseError

    try:
        return sqlglot.parse_one(statement.strip().rstrip(";"), read="spark")
    except ParseError:
        return None  # Spark reports its own parse error


def _value(node: object) -> str:
    from sqlglot import exp

    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Expression):
        return node.name or node.sql(dialect="spark")
    return str(node)


def _name(table: object, current_database: str) -> tuple[str, str]:
    from sqlglot import exp

    assert isinstance(table, exp.Table)
    if table.catalog and table.catalog.lower() != "spark_catalog":
        raise UserError(f"CREATE TABLE {table.sql(dialect='spark')} USING carbonstore: "
                        "carbonstore tables live in the session catalog (spark_catalog)")
    return (table.db or current_database), table.name


def parse_create(statement: str, current_database: str) -> CreateStatement | None:
    """The CREATE of ``statement`` when it creates a table ``USING carbonstore``, else None.

    Raises:
        UserError: a clause carbonstore would ignore, in one line.
    """
    from sqlglot import exp

    tree = _parse(statement)
    if tree is None and _CREATE_TABLE.match(statement):  # never left to Spark: catalog-only
        raise UserError("cannot read this CREATE TABLE ... USING carbonstore; write "
                        "CREATE TABLE db.t (col type, ...) USING carbonstore "
                        "[OPTIONS (...)] [PARTITIONED BY (...)] [TBLPROPERTIES (...)]")
    if not isinstance(tree, exp.Create) or str(tree.args.get("kind", "")).upper() != "TABLE":
        return None
    props = tree.args.get("properties")
    items = list(props.expressions) if props is not None else []
    using = [p for p in items if isinstance(p, exp.FileFormatProperty)]
    if not using or _value(using[0].this).lower() != PROVIDER:
        return None
    target = tree.this
    columns: str | None = None
    if isinstance(target, exp.Schema):
        columns = ", ".join(_column(c) for c in target.expressions)
        target = target.this
    database, table = _name(target, current_database)
    where = f"CREATE TABLE {database}.{table} USING carbonstore"
    if tree.args.get("replace"):
        raise UserError(f"{where}: OR REPLACE is not supported; DROP TABLE it first")
    properties: dict[str, str] = {}
    store: str | None = None
    store_table: str | None = None
    conf: dict[str, str] = {}
    for item in items:
        if isinstance(item, exp.FileFormatProperty):
            continue
        if isinstance(item, exp.OptionsProperty):
            for opt in item.expressions:
                key, value = _value(opt.this), _value(opt.args.get("value"))
                if key.lower() == "store":
                    store = value
                elif key.lower() == "table":
                    store_table = value
                elif key.lower().startswith("carbon."):
                    conf[key.lower()] = value
                else:
                    raise UserError(f"{where}: unknown option {key!r}; OPTIONS take 'store', "
                                    "'table' and carbon.* settings, table properties go in "
                                    "TBLPROPERTIES")
        elif isinstance(item, exp.PartitionedByProperty):
            parts = item.this.expressions if isinstance(item.this, exp.Schema) else [item.this]
            properties["partition_by"] = ", ".join(
                p.sql(dialect="spark").replace("`", "") for p in parts)
        elif isinstance(item, exp.ClusteredByProperty):
            properties["bucket_columns"] = ",".join(
                c.sql(dialect="spark").replace("`", "") for c in item.expressions)
            properties["bucket_number"] = _value(item.args.get("buckets"))
        elif type(item) is exp.Property:  # TBLPROPERTIES ('k'='v')
            properties[_value(item.this).lower()] = _value(item.args.get("value"))
        else:
            clause = item.sql(dialect="spark").split("(")[0].strip() or type(item).__name__
            raise UserError(f"{where}: {clause} is not supported (a carbonstore table lives "
                            "in its store: give OPTIONS (store '...') and TBLPROPERTIES)")
    query = tree.expression
    if columns is None and query is None and properties:
        raise UserError(f"{where}: table properties need the column list")
    return CreateStatement(
        database=database, table=table, columns=columns, properties=properties,
        store=store, conf=conf, if_not_exists=bool(tree.args.get("exists")),
        query=query.sql(dialect="spark") if query is not None else None,
        store_table=store_table,
    )


def _column(node: object) -> str:
    """One column definition as the store's schema string reads it (comments dropped)."""
    from sqlglot import exp

    if not isinstance(node, exp.ColumnDef):
        raise UserError(f"column list: cannot read {node}")
    node = node.copy()
    node.set("constraints", [c for c in node.args.get("constraints") or []
                             if not isinstance(c.args.get("kind"), exp.CommentColumnConstraint)])
    return str(node.sql(dialect="spark", identify=True))


def parse_drop(statement: str, current_database: str) -> tuple[str, bool] | None:
    """(``db.table``, IF EXISTS) of a ``DROP TABLE`` statement, else None."""
    from sqlglot import exp

    tree = _parse(statement)
    if not isinstance(tree, exp.Drop) or str(tree.args.get("kind", "")).upper() != "TABLE":
        return None
    tables = tree.args.get("tables") or ([tree.this] if tree.this is not None else [])
    if len(tables) != 1 or not isinstance(tables[0], exp.Table):
        return None
    table = tables[0]
    if table.catalog and table.catalog.lower() != "spark_catalog":
        return None
    return f"{table.db or current_database}.{table.name}", bool(tree.args.get("exists"))
