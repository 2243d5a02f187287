"""show-partitions / partition: a partitioned table's partitions and its partition spec."""

from __future__ import annotations

import argparse
from typing import Any

from carbonstore.cli._common import add_json, open_store, print_json, print_table
from carbonstore.errors import UserError
from carbonstore.segments.partitions import set_partition_spec, show_partitions


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("show-partitions", parents=parents,
                       help="list a table's partitions: values, files, rows")
    p.add_argument("table")
    p.add_argument("--as-of", metavar="VERSION|TIME", help="as of a tablestatus version or time")
    add_json(p)
    p.set_defaults(func=_show)

    p = sub.add_parser("partition", parents=parents,
                       help="show or change the partition and bucket spec of new loads")
    p.add_argument("table")
    p.add_argument("--set-spec", metavar="FIELDS",
                   help='new partition fields, e.g. "region, month(ts)"; "" removes them')
    p.add_argument("--buckets", type=int, metavar="N", help="bucket files per segment (0: none)")
    p.add_argument("--bucket-columns", metavar="COLUMNS", help="columns of the bucket hash")
    add_json(p)
    p.set_defaults(func=_spec)


def _show(args: argparse.Namespace) -> int:
    table = open_store(args).table(args.table)
    if args.as_of:
        table = table.as_of(args.as_of)
    parts = show_partitions(table)
    if args.json:
        print_json([p.to_json() for p in parts])
        return 0
    rows = [{"partition": p.partition or "(unpartitioned)", "segments": ",".join(p.segments),
             "files": p.files, "rows": p.rows} for p in parts]
    print_table(rows, ["partition", "segments", "files", "rows"])
    return 0


def _spec(args: argparse.Namespace) -> int:
    table = open_store(args).table(args.table)
    if args.buckets is not None and args.buckets < 0:
        raise UserError(f"--buckets must be 0 or more, got {args.buckets}")
    if args.bucket_columns is not None and not args.buckets:
        raise UserError("--bucket-columns needs --buckets N")
    if args.set_spec is not None or args.buckets is not None:
        table = set_partition_spec(table, args.set_spec, buckets=args.buckets,
                                   bucket_columns=args.bucket_columns)
    props = table.schema.properties
    partition_by = props.get("partition_by", "")
    buckets = int(props.get("bucket_number", "0") or 0)
    columns = [c.strip() for c in props.get("bucket_columns", "").split(",") if c.strip()]
    if args.json:
        print_json({"table": str(table.name), "partitionBy": partition_by, "buckets": buckets,
                    "bucketColumns": columns})
    else:
        print(f"table {table.name}: partition by {partition_by or '(none)'}; "
              + (f"{buckets} buckets by {', '.join(columns)}" if buckets else "no buckets"))
    return 0
