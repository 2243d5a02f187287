"""prune / query / sql: driver-side index lookups, queries through the data source, and
statements of the store's language (``carbonstore.sql`` parses and runs them; this only
prints)."""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import TYPE_CHECKING, Any

from carbonstore.cli._common import (
    add_json,
    open_store,
    print_json,
    print_table,
    row_limit,
    split_ids,
)
from carbonstore.cli.history import add_as_of, pin
from carbonstore.errors import UserError
from carbonstore.store.paths import check_segment_id

if TYPE_CHECKING:
    from carbonstore.store.table import StoreRoot

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
    add_as_of(p)
    add_json(p)
    p.set_defaults(func=_prune)

    p = sub.add_parser("query", parents=parents, help="read a table through Spark (pruned by --where)")
    p.add_argument("table")
    p.add_argument("--select", help="comma-separated columns (default: all)")
    p.add_argument("--where", help="filter (pushed to the pruner, evaluated by Spark)")
    p.add_argument("--segments", help="only these segment ids, e.g. 1,3")
    p.add_argument("--limit", type=row_limit, help="at most N rows (0 to 2147483647)")
    p.add_argument("--count", action="store_true",
                   help="print only the number of matching rows (from the index when it "
                        "decides the filter exactly)")
    add_as_of(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print rows as JSON")
    fmt.add_argument("--csv", action="store_true", help="print rows as CSV")
    p.set_defaults(func=_query)

    p = sub.add_parser("sql", parents=parents,
                       help="run SQL statements over the store's tables (db.table): queries, "
                            "DML, DDL, CarbonData verbs (docs/sql.md)")
    p.add_argument("statement", nargs="?",
                   help='statements separated by ";", e.g. "SELECT cat, count(*) FROM db.sales '
                        'GROUP BY cat"; - reads them from stdin')
    p.add_argument("-f", "--file", metavar="FILE",
                   help='a file of statements separated by ";" (- for stdin)')
    p.add_argument("--limit", type=row_limit, help="at most N rows (0 to 2147483647)")
    add_as_of(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print rows as JSON")
    fmt.add_argument("--csv", action="store_true", help="print rows as CSV")
    p.set_defaults(func=_sql)


def _prune(args: argparse.Namespace) -> int:
    from carbonstore.expressions.bind import session_zone
    from carbonstore.pruning.plan import prune

    started = time.perf_counter()
    zone = session_zone(args.time_zone)
    if zone is None:
        raise UserError(f"--time-zone {args.time_zone!r} is not a time zone; use a region such as "
                        "Europe/Paris, UTC, or an offset such as +08:00")
    table = pin(open_store(args).table(args.table), args)
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
        import csv  # (here: a plan or a JSON answer writes no CSV)

        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r[c] is None else r[c] for c in columns])
    else:
        print_table(rows, columns)


def _query(args: argparse.Namespace) -> int:
    from carbonstore.spark.session import start_spark

    table = pin(open_store(args).table(args.table), args)
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
    from carbonstore.spark.statements import index_where

    # a filter that is no SQL condition, or names an unknown column, is a user error before
    # Spark starts; terms the index cannot bind (id % 2 = 0, ...) are evaluated by Spark
    pushed = index_where(table, args.where)
    ids = split_ids(args.segments)
    if ids is not None:  # an unknown or unreadable segment would read nothing
        table.status.read().refuse_unreadable(map(check_segment_id, ids), str(table.name))
    if args.count and args.segments is None and pushed.exact:
        from carbonstore.pruning.answers import Aggregate, answer

        counted = answer(table, [Aggregate(func="count")], args.where)
        if counted is not None:  # decided by the index: no Spark, no data read
            _emit(args, ["count"], [{"count": counted[0]}] if args.limit != 0 else [])
            return 0
    # the JVM boots while this process loads the table's indexes
    wait = start_spark(conf=table.store.conf)
    from carbonstore.spark.api import collect_rows, prepare_scan, to_spark

    if args.segments is None:
        prepare_scan(table, args.where)
    spark = wait()
    df = to_spark(table, spark, where=args.where, segments=ids).select(*names)
    if args.count:
        df = df.selectExpr("count(1) AS count")
        names = ["count"]
    _emit(args, names, collect_rows(df, args.limit))
    return 0


def rewrite_table_names(statement: str, store: StoreRoot) -> tuple[str, dict[str, Any]]:
    """Point each ``db.table`` reference of the store at its own temp view ``db_table__N``.

    Returns the rewritten SQL (Spark dialect) and view name -> Table (see
    :func:`carbonstore.spark.statements.plan_statement`).

    Raises:
        UserError: the statement does not parse, or names ``db.table`` that does not exist.
    """
    from carbonstore.spark.statements import plan_statement

    planned = plan_statement(statement, store)
    return planned.sql, {o.view: o.table for o in planned.occurrences}


def _script(args: argparse.Namespace) -> str:
    """The statements' text: the argument, ``-f FILE`` or stdin (``-``)."""
    if (args.statement is None) == (args.file is None):
        raise UserError("sql: give the statements as an argument or with -f FILE (- for stdin), "
                        "not both")
    source = args.file if args.file is not None else args.statement
    if args.file is None and source != "-":
        return str(source)
    if source == "-":
        return sys.stdin.read()
    try:
        with open(source, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"sql -f {source}: cannot read it ({err.__class__.__name__}: "
                        f"{getattr(err, 'strerror', None) or err})") from None


def _sql(args: argparse.Namespace) -> int:
    from carbonstore.spark.session import start_spark
    from carbonstore.spark.sql import SparkEngine
    from carbonstore.sql import parse, run, split_script

    texts = split_script(_script(args))
    if not texts:
        raise UserError("sql: no statement given")
    several = len(texts) > 1
    statements = []
    for i, text in enumerate(texts, 1):  # every statement parses before any runs
        try:
            statements.append(parse(text))
        except UserError as err:
            raise _numbered(err, i, len(texts), text) if several else err from None
    store = open_store(args)
    # one session for the script, started when the first statement needs it
    engine = SparkEngine(start=lambda st: start_spark(conf=st.conf))
    outputs: list[dict[str, Any]] = []
    for i, (text, statement) in enumerate(zip(texts, statements, strict=True), 1):
        try:
            result = run(store, statement, engine=engine, as_of=args.as_of)
            rows = result.rows
            if result.frame is not None:
                from carbonstore.spark.api import collect_rows

                rows = collect_rows(result.frame, args.limit)
        except UserError as err:
            raise _numbered(err, i, len(texts), text) if several else err from None
        if args.limit is not None:
            rows = rows[: args.limit]
        if several and args.json:
            outputs.append({"statement": text, "columns": result.columns,
                            "rows": [_specials(r) for r in rows], "summary": result.summary})
            continue
        if several and i > 1 and not args.json:
            print()
        _emit(args, result.columns, rows)
        if result.summary and not (args.json or args.csv):
            print(result.summary)
    if outputs:
        print_json(outputs)
    return 0


def _specials(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _special(v) for k, v in row.items()}


def _numbered(err: UserError, i: int, n: int, text: str) -> UserError:
    """``err`` naming the statement of the script it comes from."""
    head = " ".join(text.split())
    shown = head if len(head) <= 40 else head[:37] + "..."
    try:
        return type(err)(f"statement {i} of {n} ({shown}): {err}")
    except TypeError:  # an error class with more arguments
        return UserError(f"statement {i} of {n} ({shown}): {err}")
