"""prune / query / sql: driver-side index lookups and queries through the data source."""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from typing import Any

from carbonstore.commands._common import add_json, open_store, print_json, print_table, split_ids
from carbonstore.errors import UserError
from carbonstore.store.table import Store

__all__ = ["register", "rewrite_table_names"]


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("prune", parents=parents,
                       help="plan a scan from the indexes: what survives and why the rest is skipped")
    p.add_argument("table")
    p.add_argument("--where", help='filter, e.g. "id = 42 AND d >= DATE \'2024-01-01\'"')
    p.add_argument("--segments", help="only these segment ids, e.g. 1,3")
    p.add_argument("--explain", action="store_true", help="say why each dropped unit was dropped")
    p.add_argument("--time-zone", default="UTC",
                   help="zone timestamps without an offset are read in, as Spark's "
                        "spark.sql.session.timeZone (default UTC), e.g. Europe/Paris or +08:00")
    add_json(p)
    p.set_defaults(func=_prune)

    p = sub.add_parser("query", parents=parents, help="read a table through Spark (pruned by --where)")
    p.add_argument("table")
    p.add_argument("--select", help="comma-separated columns (default: all)")
    p.add_argument("--where", help="filter (pushed to the pruner, evaluated by Spark)")
    p.add_argument("--segments", help="only these segment ids, e.g. 1,3")
    p.add_argument("--limit", type=int, help="at most N rows")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print rows as JSON")
    fmt.add_argument("--csv", action="store_true", help="print rows as CSV")
    p.set_defaults(func=_query)

    p = sub.add_parser("sql", parents=parents,
                       help='run Spark SQL where tables of the store are usable as db.table')
    p.add_argument("statement", help='e.g. "SELECT cat, count(*) FROM db.sales GROUP BY cat"')
    p.add_argument("--limit", type=int, help="at most N rows")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print rows as JSON")
    fmt.add_argument("--csv", action="store_true", help="print rows as CSV")
    p.set_defaults(func=_sql)


def _prune(args: argparse.Namespace) -> int:
    from carbonstore.indexfiles.expr import session_zone
    from carbonstore.indexfiles.tableplan import prune

    started = time.perf_counter()
    zone = session_zone(args.time_zone)
    if zone is None:
        raise UserError(f"--time-zone {args.time_zone!r} is not a time zone; use a region such as "
                        "Europe/Paris, UTC, or an offset such as +08:00")
    table = open_store(args).table(args.table)
    plan = prune(table, args.where, segments=split_ids(args.segments), explain=args.explain,
                 started=started, time_zone=zone)
    if args.json:
        out = plan.to_json()
        if args.explain:
            out["explain"] = plan.explain().splitlines()
        print_json(out)
    else:
        print(plan.explain() if args.explain else "\n".join(plan.explain().splitlines()[:6]))
    return 0


_SPECIAL_FLOATS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
MAX_LIMIT = 2**31 - 1  # Spark's LIMIT is a 32-bit int


def _special(value: Any) -> Any:
    """NaN and infinities as Spark spells them (strings): JSON has no NaN, and null
    must stay null (docs/query.md, output formats)."""
    if isinstance(value, float) and not math.isfinite(value):
        return _SPECIAL_FLOATS[repr(value)]
    return value


def _emit(args: argparse.Namespace, columns: list[str], rows: list[dict[str, Any]]) -> None:
    if any(isinstance(v, float) and not math.isfinite(v) for r in rows for v in r.values()):
        rows = [{k: _special(v) for k, v in r.items()} for r in rows]
    if args.json:
        print_json(rows)
    elif args.csv:
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r[c] is None else r[c] for c in columns])
    else:
        print_table(rows, columns)


def _check_limit(limit: int | None) -> None:
    if limit is not None and not 0 <= limit <= MAX_LIMIT:
        raise UserError(f"--limit must be between 0 and {MAX_LIMIT}, got {limit}")


def _query(args: argparse.Namespace) -> int:
    from carbonstore.spark.reader import collect_rows, to_spark
    from carbonstore.spark.session import get_spark

    table = open_store(args).table(args.table)
    if args.select:
        names = [c.strip().lower() for c in args.select.split(",") if c.strip()]
        unknown = [c for c in names if c not in table.schema.column_names]
        if unknown or not names:
            raise UserError(
                f"--select: unknown column(s) {', '.join(unknown) or '(none given)'}; table "
                f"{table.name} has {', '.join(table.schema.column_names)}"
            )
    else:
        names = list(table.schema.column_names)
    _check_limit(args.limit)
    from carbonstore.indexfiles.tableplan import bind_where

    bind_where(table, args.where)  # a bad filter is a user error before Spark starts
    spark = get_spark(conf=table.store.conf)
    df = to_spark(table, spark, where=args.where, segments=split_ids(args.segments)).select(*names)
    _emit(args, names, collect_rows(df, args.limit))
    return 0


def rewrite_table_names(statement: str, store: Store) -> tuple[str, dict[str, Any]]:
    """Point each ``db.table`` reference of the store at its own temp view ``db_table__N``.

    Returns the rewritten SQL (Spark dialect) and view name -> Table. Names that are not
    tables of the store (CTEs, other views) are left alone. See
    :func:`carbonstore.spark.statements.plan_statement`, which also finds each reference's
    own conjuncts.

    Raises:
        UserError: the statement does not parse, or names ``db.table`` that does not exist.
    """
    from carbonstore.spark.statements import plan_statement

    planned = plan_statement(statement, store)
    return planned.sql, {o.view: o.table for o in planned.occurrences}


def _sql(args: argparse.Namespace) -> int:
    from carbonstore.spark.reader import collect_rows
    from carbonstore.spark.session import get_spark
    from carbonstore.spark.sql import run_statement
    from carbonstore.spark.statements import plan_statement

    _check_limit(args.limit)
    store = open_store(args)
    plan_statement(args.statement, store)  # a bad statement is a user error before Spark starts
    spark = get_spark(conf=store.conf)
    df = run_statement(spark, store, args.statement)
    _emit(args, list(df.columns), collect_rows(df, args.limit))
    return 0
