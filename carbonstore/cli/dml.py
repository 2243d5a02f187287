"""delete / update: row-level DML from the command line (docs/dml.md); the SQL DELETE /
UPDATE / MERGE statements run through ``carbonstore.sql``."""

from __future__ import annotations

import argparse
from typing import Any

from carbonstore.cli._common import add_json, open_store, print_json, print_table
from carbonstore.errors import UserError
from carbonstore.expressions.sql_checks import check_sql_text, check_tree_depth, too_deep_sql
from carbonstore.segments.timezones import SESSION_TIME_ZONE_KEY, conf_time_zone
from carbonstore.spark.session import get_spark
from carbonstore.store.table import StoreRoot

__all__ = ["register", "session_time_zone"]

_COLUMNS = ["operation", "version", "deleted", "inserted", "files", "segments", "insertedSegment"]


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("delete", parents=parents,
                       help="delete the rows matching --where (delete deltas; no file rewritten)")
    p.add_argument("table")
    p.add_argument("--where", required=True,
                   help="filter, e.g. \"id = 42\" (--where true deletes every row)")
    add_json(p)
    p.set_defaults(func=_delete)

    p = sub.add_parser("update", parents=parents,
                       help="set columns of the rows matching --where (Spark SQL expressions)")
    p.add_argument("table")
    p.add_argument("--set", required=True, action="append", metavar="'c = expr'",
                   help="an assignment, e.g. \"score = score * 2\" (repeat, or separate by ',')")
    p.add_argument("--where", help="filter (default: every row)")
    add_json(p)
    p.set_defaults(func=_update)


def _emit(args: argparse.Namespace, result: Any) -> None:
    row = result.to_json()
    if getattr(args, "json", False):
        print_json(row)
    else:
        print_table([row], _COLUMNS)


def session_time_zone(store: StoreRoot) -> str:
    """Spark's session time zone of a DML command (docs/dml.md, "Time zones"): under
    spark-submit its session's (``--conf spark.sql.session.timeZone=...``), else
    ``spark.sql.session.timeZone`` of carbon.properties (default UTC)."""
    import os

    if "PYSPARK_GATEWAY_PORT" in os.environ:  # spark-submit started the JVM: its settings
        return str(get_spark(conf=store.conf).conf.get(SESSION_TIME_ZONE_KEY))
    return conf_time_zone(store.conf)


def _delete(args: argparse.Namespace) -> int:
    from carbonstore.dml import delete_rows

    where = args.where.strip()
    if not where:
        raise UserError("--where: give a filter (--where true deletes every row)")
    store = open_store(args)
    table = store.table(args.table)
    _emit(args, delete_rows(table, where, time_zone=session_time_zone(store)))
    return 0


def parse_assignments(items: list[str]) -> dict[str, str]:
    """``["a = 1, b = upper(b)"]`` -> {"a": "1", "b": "upper(b)"} (split by sqlglot, so a comma
    inside a function call or a string stays in its expression)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    out: dict[str, str] = {}
    for item in items:
        check_sql_text(item, "--set")
        try:
            tree = sqlglot.parse_one(f"UPDATE t SET {item}", read="spark")
        except RecursionError:
            raise too_deep_sql("--set", item) from None
        except (ParseError, TokenError) as err:
            raise UserError(f"--set {item!r}: write column = expression") from err
        for e in tree.expressions if isinstance(tree, exp.Update) else []:
            if not isinstance(e, exp.EQ) or not isinstance(e.this, exp.Column):
                raise UserError(f"--set {item!r}: write column = expression")
            check_tree_depth(e.expression, "--set", item)
            out[e.this.name.lower()] = e.expression.sql(dialect="spark")
    if not out:
        raise UserError("--set: give at least one column = expression")
    return out


def _update(args: argparse.Namespace) -> int:
    from carbonstore.dml import update_rows

    store = open_store(args)
    table = store.table(args.table)
    where = (args.where or "").strip() or None
    _emit(args, update_rows(table, parse_assignments(args.set), where,
                            time_zone=session_time_zone(store)))
    return 0
