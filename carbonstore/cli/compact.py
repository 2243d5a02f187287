"""compact TABLE --type minor|major|custom|cluster [--segments 2,3,4] [--by a,b]
[--curve zorder|hilbert] [--where FILTER] [--engine spark|local]."""

from __future__ import annotations

import argparse
from typing import Any

from carbonstore.cli._common import add_json, open_store, print_json, print_table, split_ids
from carbonstore.progress import progress


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compact", parents=parents,
        help="merge segments (minor: level thresholds, major: size, custom: given ids, "
        "cluster: along a Z-order / Hilbert curve)",
    )
    p.add_argument("table")
    p.add_argument("--type", dest="compaction_type", required=True,
                   choices=["minor", "major", "custom", "cluster"])
    p.add_argument("--segments", help="comma-separated segment ids (custom, cluster)")
    p.add_argument("--by", help="cluster: 1-4 comma-separated columns (default: the table's "
                   "clustering.columns property)")
    p.add_argument("--curve", choices=["zorder", "hilbert"],
                   help="cluster: the space-filling curve (default: clustering.curve, else "
                   "zorder)")
    p.add_argument("--where", help="cluster: only segments that may hold rows matching this "
                   "filter")
    p.add_argument(
        "--engine", choices=["spark", "local"], default="spark",
        help="spark: merge on Spark executors (default); local: merge in this process with "
        "pyarrow (small segments, no JVM)",
    )
    add_json(p)
    p.set_defaults(func=_compact)


def _compact(args: argparse.Namespace) -> int:
    from carbonstore.segments.compaction import compact

    table = open_store(args).table(args.table)
    ids = split_ids(args.segments) if args.segments is not None else None
    if args.compaction_type == "custom" and ids is None:
        ids = []  # compact() says "Segment ids should not be empty"
    by = [c for c in args.by.split(",")] if args.by is not None else None
    merger = cluster_merger = None
    if args.engine == "spark":
        from carbonstore.spark.compact_job import spark_cluster_merger, spark_merger

        merger, cluster_merger = spark_merger(), spark_cluster_merger()

    with progress(None, f"compacting {table.name} ({args.compaction_type})", json=args.json):
        result = compact(table, args.compaction_type, segment_ids=ids, merger=merger,
                         by=by, curve=args.curve, where=args.where,
                         cluster_merger=cluster_merger)
    if args.json:
        print_json(result.to_json())
        return 0
    if not result.merged:
        print(f"nothing to compact ({args.compaction_type}) in {table.name}")
        return 0
    print_table([m.to_json() | {"sources": ",".join(m.sources)} for m in result.merged],
                ["output", "sources", "rows", "dataSize", "indexSize", "seconds", "clustering"])
    return 0
