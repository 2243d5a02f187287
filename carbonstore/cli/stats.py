"""analyze TABLE [--columns a,b] [--segments ...] and stats TABLE [--column c] [--segment id].

In the spirit of the Hive metastore calls: ``analyze`` updates (recomputes) statistics of
segments, ``stats`` gets them for the table (merged from its readable segments) or for one
segment, and ``stats --delete`` deletes them (one segment, or every segment; all columns or
one).
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from carbonstore.cli._common import add_json, open_store, print_json, print_table, split_ids
from carbonstore.errors import SegmentNotFoundError, UserError
from carbonstore.progress import progress
from carbonstore.spark.session import get_spark
from carbonstore.statistics.model import ColumnStatistics
from carbonstore.statistics.store import (
    delete_segment_statistics,
    delete_table_statistics,
    get_segment_statistics,
    get_table_statistics,
)

_COLUMNS = ["column", "type", "numNulls", "numDVs", "lowValue", "highValue", "numNaNs",
            "numTrues", "numFalses", "maxColLen", "avgColLen", "lastAnalyzed"]


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "analyze", parents=parents,
        help="compute column statistics of segments (ANALYZE ... COMPUTE STATISTICS FOR COLUMNS)",
        description="Recompute the column statistics of TABLE's segments from their data "
        "files (loads and compactions store them already; use this for segments written "
        "before, added with add-segment, or whose statistics were deleted).",
    )
    p.add_argument("table", help="table name: table or db.table")
    p.add_argument("--columns", help="comma-separated columns (default: all)")
    p.add_argument("--segments", help="comma-separated segment ids (default: every readable one)")
    p.add_argument("--missing", action="store_true",
                   help="only segments that have no statistics yet")
    p.add_argument("--engine", choices=["spark", "local"], default="spark",
                   help="spark: read the files on Spark executors (default); local: in this "
                   "process with pyarrow (small tables, no JVM)")
    p.add_argument("--master", help="Spark master for the embedded session (default local[*])")
    add_json(p)
    p.set_defaults(func=_analyze)

    p = sub.add_parser(
        "stats", parents=parents,
        help="show (or delete) column statistics of a table or of one segment",
    )
    p.add_argument("table", help="table name: table or db.table")
    p.add_argument("--column", help="one column (default: all)")
    p.add_argument("--segment", help="one segment's statistics instead of the table's")
    p.add_argument("--delete", action="store_true",
                   help="delete the statistics (of --segment, else of every segment; "
                   "of --column, else of all columns)")
    add_json(p)
    p.set_defaults(func=_stats)


def _analyze(args: argparse.Namespace) -> int:
    table = open_store(args).table(args.table)
    columns = split_ids(args.columns, "--columns") if args.columns is not None else None
    segments = split_ids(args.segments) if args.segments is not None else None
    if args.engine == "spark":
        from carbonstore.spark.analyze_job import analyze
        from carbonstore.statistics.accumulator import StatsAccumulator
        from carbonstore.statistics.analyze import analyze_targets, table_column_specs

        # unknown columns and segments are user errors before the JVM starts (analyze checks
        # them again, for its library callers)
        if columns is not None:
            StatsAccumulator(table_column_specs(table), columns=columns)
        analyze_targets(table, segments)
        spark = get_spark(master=args.master, conf=table.store.conf)
        with progress(None, f"analyzing {table.name}", json=args.json):
            done = analyze(table, spark=spark, segments=segments, columns=columns,
                           missing_only=args.missing)
    else:
        from carbonstore.segments.analyze import analyze_local

        with progress(None, f"analyzing {table.name}", json=args.json):
            done = analyze_local(table, segments=segments, columns=columns,
                                 missing_only=args.missing)
    rows = [{"segment": s.segment_id, "rows": s.row_count, "columns": len(s.columns)}
            for s in done]
    if args.json:
        print_json(rows)
    elif not rows:
        print(f"nothing to analyze in {table.name}")
    else:
        print_table(rows, ["segment", "rows", "columns"])
    return 0


def _row(c: ColumnStatistics) -> dict[str, Any]:
    row = c.to_json()
    row["lastAnalyzed"] = (
        dt.datetime.fromtimestamp(c.last_analyzed / 1000, dt.UTC).isoformat(timespec="seconds")
    )
    if isinstance(row.get("avgColLen"), float):
        row["avgColLen"] = round(row["avgColLen"], 2)
    return row


def _stats(args: argparse.Namespace) -> int:
    table = open_store(args).table(args.table)
    columns = [args.column] if args.column else None
    if columns:
        known = {c.name for c in table.schema.columns}
        if args.column.lower() not in known:
            raise UserError(f"table {table.name} has no column {args.column!r}")
    if args.delete:
        return _delete(args, table, columns)
    if args.segment is not None:
        seg = get_segment_statistics(table, args.segment, columns=columns)
        if seg is None:
            if table.status.read().find(args.segment) is None:
                raise SegmentNotFoundError(
                    f"segment {args.segment} of {table.name} does not exist (see "
                    "'carbonstore show-segments')")
            raise UserError(
                f"segment {args.segment} of {table.name} has no statistics; run "
                f"'carbonstore analyze {table.name} --segments {args.segment}'"
            )
        if args.json:
            out = seg.to_json()
            out.pop("sketches")
            print_json(out)
            return 0
        print(f"segment {seg.segment_id} of {seg.table}: {seg.row_count} rows ({seg.source})")
        print_table([_row(c) for c in seg.columns], _COLUMNS)
        return 0
    ts = get_table_statistics(table, columns=columns)
    if args.json:
        print_json(ts.to_json())
        return 0
    print(f"table {ts.table}: {ts.row_count} rows in {len(ts.segments)} segment(s) with statistics")
    if ts.missing_segments:
        print(f"segments without statistics: {', '.join(ts.missing_segments)} "
              f"(run 'carbonstore analyze {ts.table} --missing')")
    print_table([_row(c) for c in ts.columns], _COLUMNS)
    return 0


def _delete(args: argparse.Namespace, table: Any, columns: list[str] | None) -> int:
    if args.segment is not None:
        changed = [args.segment] if delete_segment_statistics(
            table, args.segment, columns=columns) else []
    else:
        changed = delete_table_statistics(table, columns=columns)
    if args.json:
        print_json({"deleted": changed})
    else:
        what = f"column {args.column}" if args.column else "all columns"
        print(f"deleted statistics ({what}) of {len(changed)} segment(s) of {table.name}")
    return 0
