"""prune / query / sql: driver-side index lookups and queries through the data source."""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
import time
from typing import Any

from carbonstore.cli._common import (
    add_json,
    open_store,
    print_json,
    print_table,
    row_limit,
    split_ids,
)
from carbonstore.cli.history import add_as_of, pin
from carbonstore.errors import TableNotFoundError, UserError
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
                       help='run Spark SQL where tables of the store are usable as db.table')
    p.add_argument("statement", help='e.g. "SELECT cat, count(*) FROM db.sales GROUP BY cat"')
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
    df = to_spark(table, spark, where=args.where, segments=split_ids(args.segments)).select(*names)
    if args.count:
        df = df.selectExpr("count(1) AS count")
        names = ["count"]
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
    from carbonstore.expressions.sql_checks import checked_statement
    from carbonstore.spark.metadata_answers import answer_statement
    from carbonstore.spark.statements import plan_statement

    checked_statement(args.statement)  # length and depth limits, before anything runs
    store = open_store(args)
    if _alter_statement(store, args):
        return 0
    verb = match_verb(args.statement)
    if verb is not None:
        columns, rows = run_verb(store, *verb)
        _emit(args, columns, rows[: args.limit] if args.limit is not None else rows)
        return 0
    from carbonstore.cli.dml import run_sql_dml

    if run_sql_dml(args, store):  # DELETE / UPDATE / MERGE
        return 0
    # count / min / max the index decides exactly: no Spark, no data read (docs/query.md)
    answered = answer_statement(store, args.statement, as_of=args.as_of)
    if answered is not None:
        columns, rows = answered
        _emit(args, columns, rows[: args.limit] if args.limit is not None else rows)
        return 0
    # a bad statement (or --as-of) is a user error before Spark starts
    planned = plan_statement(args.statement, store, as_of=args.as_of)
    from carbonstore.spark.session import start_spark

    # the JVM boots while this process imports and loads the occurrences' indexes
    wait = start_spark(conf=store.conf)
    from carbonstore.spark.api import collect_rows, prepare_scan
    from carbonstore.spark.sql import run_statement

    for occurrence in planned.occurrences:
        prepare_scan(occurrence.table, occurrence.where)
    spark = wait()
    df = run_statement(spark, store, args.statement, as_of=args.as_of)
    _emit(args, list(df.columns), collect_rows(df, args.limit))
    return 0


def _alter_statement(store: Store, args: argparse.Namespace) -> bool:
    """ALTER TABLE ... ADD COLUMNS / DROP / RENAME / CHANGE / SET|UNSET TBLPROPERTIES: the
    code of 'carbonstore alter' (store/alter_sql.py); False for any other statement."""
    from carbonstore.store.alter import alter_table
    from carbonstore.store.alter_sql import parse_alter

    parsed = parse_alter(args.statement)
    if parsed is None:
        return False
    table = store.table(parsed.table)
    schema = alter_table(table, parsed.change, operation=parsed.operation)
    _emit(args, ["table", "schemaVersion"],
          [{"table": str(table.name), "schemaVersion": schema.schema_version}])
    return True


# ---- CarbonData SQL verbs --------------------------------------------------------------------
# Each maps to the code of the CLI command of the same meaning (docs/query.md, "SQL verbs").

_NAME = r"(?P<name>`?[A-Za-z_][\w]*`?(?:\.`?[A-Za-z_][\w]*`?)?)"
_VERBS: list[tuple[str, re.Pattern[str]]] = [
    ("show_segments", re.compile(rf"SHOW\s+SEGMENTS\s+(?:FOR|ON)\s+TABLE\s+{_NAME}"
                                 r"(?:\s+LIMIT\s+(?P<limit>\d+))?", re.I | re.S)),
    ("compact", re.compile(rf"ALTER\s+TABLE\s+{_NAME}\s+COMPACT\s+'(?P<kind>\w+)'"
                           r"(?:\s+WHERE\s+SEGMENT\.ID\s+IN\s*\((?P<ids>[^)]*)\))?", re.I | re.S)),
    # Delta's OPTIMIZE t [WHERE ...] ZORDER BY (a, b); HILBERT BY for the Hilbert curve
    ("optimize", re.compile(rf"OPTIMIZE\s+{_NAME}(?:\s+WHERE\s+(?P<where>.*?))?"
                            r"\s+(?P<curve>ZORDER|HILBERT)\s+BY\s*\((?P<by>[^)]*)\)", re.I | re.S)),
    ("clean", re.compile(rf"CLEAN\s+FILES\s+FOR\s+TABLE\s+{_NAME}"
                         r"(?:\s+OPTIONS\s*\((?P<options>.*)\))?", re.I | re.S)),
    ("delete_ids", re.compile(rf"DELETE\s+FROM\s+TABLE\s+{_NAME}\s+WHERE\s+SEGMENT\.ID\s+IN\s*"
                              r"\((?P<ids>[^)]*)\)", re.I | re.S)),
    ("delete_before", re.compile(rf"DELETE\s+FROM\s+TABLE\s+{_NAME}\s+WHERE\s+SEGMENT\."
                                 r"STARTTIME\s+BEFORE\s+'(?P<before>[^']*)'", re.I | re.S)),
    ("create", re.compile(rf"CREATE\s+TABLE\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?{_NAME}\s*"
                          r"\((?P<schema>.*)\)\s*STORED\s+(?:AS|BY)\s+'?(?:carbondata|carbonstore)'?"
                          r"(?:\s+PARTITIONED\s+BY\s*\((?P<partition_by>.*?)\))?"
                          r"(?:\s+CLUSTERED\s+BY\s*\((?P<bucket_columns>[^)]*)\)\s*INTO\s+"
                          r"(?P<bucket_number>\d+)\s+BUCKETS)?"
                          r"(?:\s+TBLPROPERTIES\s*\((?P<props>.*)\))?", re.I | re.S)),
    ("show_partitions", re.compile(rf"SHOW\s+PARTITIONS\s+{_NAME}", re.I | re.S)),
    ("drop", re.compile(rf"DROP\s+TABLE\s+(?P<ie>IF\s+EXISTS\s+)?{_NAME}", re.I | re.S)),
]
_PAIR = re.compile(r"'([^']*)'\s*=\s*'([^']*)'")


def match_verb(statement: str) -> tuple[str, dict[str, str | None]] | None:
    """(verb, its parts) when ``statement`` is one of the CarbonData SQL verbs, else None."""
    text = statement.strip().rstrip(";").strip()
    for verb, pattern in _VERBS:
        m = pattern.fullmatch(text)
        if m:
            parts = m.groupdict()
            parts["name"] = (parts.get("name") or "").replace("`", "")
            return verb, parts
    return None


_CLEAN_OPTIONS = ("force", "dryrun", "dry_run", "stale_inprogress")


def _clean_options(text: str | None) -> dict[str, bool]:
    """CLEAN FILES' OPTIONS('force'='true', ...): every pair quoted, known keys, true/false
    values; anything else is refused rather than ignored (a dropped 'dryrun' removes files)."""
    if text is None:
        return {}
    pairs = _PAIR.findall(text)
    rest = _PAIR.sub("", text).replace(",", "").strip()
    if rest or (text.strip() and not pairs):
        raise UserError(f"CLEAN FILES: cannot read OPTIONS({text.strip()}); write "
                        f"OPTIONS('key'='value', ...) with keys {', '.join(_CLEAN_OPTIONS)}")
    out: dict[str, bool] = {}
    for key, value in pairs:
        k, v = key.strip().lower(), value.strip().lower()
        if k not in _CLEAN_OPTIONS:
            raise UserError(f"CLEAN FILES: unknown option '{key}'; use {', '.join(_CLEAN_OPTIONS)}")
        if v not in ("true", "false"):
            raise UserError(f"CLEAN FILES: option '{k}' takes 'true' or 'false', got '{value}'")
        out[k] = v == "true"
    return out


def _ids(text: str | None) -> list[str]:
    ids = [x.strip().strip("'\"") for x in (text or "").split(",") if x.strip()]
    if not ids:
        raise UserError("SEGMENT.ID IN (...): Segment ids should not be empty")
    return ids


def run_verb(store: Store, verb: str, parts: dict[str, str | None]) -> tuple[list[str], list[dict[str, Any]]]:
    """Run one CarbonData SQL verb with the CLI's code; (columns, rows) to print."""
    from carbonstore.cli.tables import segment_row

    name = str(parts["name"])
    if verb == "show_segments":
        entries = list(store.table(name).status.read().entries)
        if parts.get("limit") is not None:  # the newest n; LIMIT 0 shows none
            entries = entries[len(entries) - min(int(str(parts["limit"])), len(entries)):]
        cols = ["id", "status", "loadStartTime", "timeTakenMs", "rows", "dataSize", "indexSize",
                "mergedTo", "format", "clusteredBy"]
        return cols, [segment_row(e) for e in entries]
    if verb == "compact":
        from carbonstore.segments.compaction import compact
        from carbonstore.spark.compact_job import spark_cluster_merger, spark_merger

        kind = str(parts["kind"]).lower()
        if kind not in ("minor", "major", "custom", "cluster"):
            raise UserError(f"COMPACT '{parts['kind']}': use 'MINOR', 'MAJOR', 'CUSTOM' or "
                            "'CLUSTER'")
        ids = _ids(parts.get("ids")) if kind == "custom" or (
            kind == "cluster" and parts.get("ids") is not None) else None
        result = compact(store.table(name), kind, segment_ids=ids,  # type: ignore[arg-type]
                         merger=spark_merger(), cluster_merger=spark_cluster_merger())
        rows = [m.to_json() | {"sources": ",".join(m.sources)} for m in result.merged]
        return ["output", "sources", "rows", "dataSize", "indexSize", "seconds",
                "clustering"], rows
    if verb == "optimize":
        from carbonstore.segments.compaction import compact
        from carbonstore.spark.compact_job import spark_cluster_merger, spark_merger

        by = [c.strip().strip("`") for c in str(parts["by"]).split(",")]
        result = compact(store.table(name), "cluster", by=by, curve=str(parts["curve"]).lower(),
                         where=parts.get("where"), merger=spark_merger(),
                         cluster_merger=spark_cluster_merger())
        rows = [m.to_json() | {"sources": ",".join(m.sources)} for m in result.merged]
        return ["output", "sources", "rows", "dataSize", "indexSize", "seconds",
                "clustering"], rows
    if verb == "clean":
        from carbonstore.segments.clean import clean_files

        opts = _clean_options(parts.get("options"))
        table = store.table(name)
        report = clean_files(table, dry_run=opts.get("dryrun", opts.get("dry_run", False)),
                             force=opts.get("force", False),
                             stale_inprogress=opts.get("stale_inprogress", False))
        rows = [i.to_json() | {"path": table.paths.relative(i.path)} for i in report.items]
        return ["kind", "segment", "bytes", "path", "reason"], rows
    if verb in ("delete_ids", "delete_before"):
        from carbonstore.segments.manage import delete_segments, delete_segments_before

        table = store.table(name)
        marked = (delete_segments(table, _ids(parts.get("ids"))) if verb == "delete_ids"
                  else delete_segments_before(table, str(parts["before"])))
        return ["id", "status"], [{"id": e.load_name, "status": e.status} for e in marked]
    if verb == "create":
        from carbonstore.errors import TableExistsError

        props = {k.lower(): v for k, v in _PAIR.findall(parts.get("props") or "")}
        for key in ("partition_by", "bucket_columns", "bucket_number"):  # docs/partitioning.md
            if parts.get(key):
                props[key] = str(parts[key]).replace("`", "")
        try:
            table = store.create_table(name, str(parts["schema"]), properties=props)
        except TableExistsError:
            if not parts.get("ine"):
                raise
            return ["table", "created"], [{"table": str(store.table(name).name), "created": False}]
        return ["table", "created"], [{"table": str(table.name), "created": True}]
    if verb == "show_partitions":
        from carbonstore.segments.partitions import show_partitions

        rows = [{"partition": p.partition, "segments": ",".join(p.segments), "files": p.files,
                 "rows": p.rows} for p in show_partitions(store.table(name))]
        return ["partition", "segments", "files", "rows"], rows
    if verb == "drop":
        if not store.exists(name):
            if parts.get("ie"):
                return ["table", "dropped"], [{"table": name, "dropped": False}]
            raise TableNotFoundError(f"DROP TABLE {name}: no such table in store {store.location}")
        dropped = str(store.table(name).name)
        store.drop_table(name)
        return ["table", "dropped"], [{"table": dropped, "dropped": True}]
    raise UserError(f"unknown SQL verb {verb}")  # pragma: no cover - _VERBS lists them all
