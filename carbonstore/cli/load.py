"""load: write input files into a new segment with the embedded (or spark-submit) Spark.

Every check of the input that needs no JVM (paths, format, CSV header, empty input; see
carbonstore/segments/load_inputs.py) runs before Spark starts.
"""

from __future__ import annotations

import argparse
from typing import Any

from carbonstore.cli._common import add_json, open_store, parse_key_values, print_json
from carbonstore.errors import UserError
from carbonstore.progress import load_progress, progress_enabled
from carbonstore.segments.load_inputs import (
    check_inputs,
    infer_format,
    local_bytes,
    local_files,
)

__all__ = ["infer_format", "register"]


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "load",
        parents=parents,
        help="load CSV/Parquet/JSON/ORC files into a new segment",
        description="Load input files into a new segment of TABLE (see docs/load.md).",
    )
    p.add_argument("table", help="table name: table or db.table")
    p.add_argument("--input", required=True, action="append",
                   help="input file, folder or glob (repeatable)")
    p.add_argument("--format", choices=["csv", "parquet", "json", "orc"],
                   help="input format (default: from the input files' extensions or first "
                   "bytes, else csv)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="load option, e.g. header=false, BAD_RECORDS_ACTION=FORCE (repeatable)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the table's data (older segments become Marked for Delete)")
    p.add_argument("--overwrite-partitions", action="store_true",
                   help="dynamic partition overwrite: replace only the partitions the input "
                   "holds (partitioned tables, docs/partitioning.md)")
    p.add_argument("--allow-empty", action="store_true",
                   help="commit an empty segment when the input holds no rows (else refused)")
    p.add_argument("--master", help="Spark master for the embedded session (default local[*])")
    add_json(p)
    p.set_defaults(func=_load)


def _load(args: argparse.Namespace) -> int:
    store = open_store(args)
    table = store.table(args.table)
    options = parse_key_values(args.option, "--option")
    if getattr(args, "overwrite_partitions", False):
        if args.overwrite:
            raise UserError("--overwrite and --overwrite-partitions exclude each other")
        options["overwrite_partitions"] = "true"
    if getattr(args, "allow_empty", False):
        options["allow_empty"] = "true"
    fmt = infer_format(args.input, args.format)
    # Refuse bad options (e.g. REDIRECT without a path) and inputs before starting Spark.
    from carbonstore.dictionary import PREBUILT_OPTION
    from carbonstore.segments.load import parse_load_options

    opts = parse_load_options(
        table, {k: v for k, v in options.items() if k.lower() != PREBUILT_OPTION.lower()}
    )
    check_inputs(table, args.input, fmt or "csv", opts)
    from carbonstore.spark.load_job import load
    from carbonstore.spark.session import get_spark

    json = getattr(args, "json", False)
    drawn = progress_enabled(json=json)
    # One bar at a time: Spark's console progress is off while ours draws.
    spark = get_spark(master=args.master, conf=table.store.conf,
                      console_progress=False if drawn else None)
    total = local_bytes(args.input)
    with load_progress(f"loading into {table.name}", files=local_files(args.input),
                       total_bytes=total or None, json=json) as update:
        entry = load(
            table,
            args.input,
            spark=spark,
            format=fmt,
            options=options,
            mode="overwrite" if args.overwrite else "append",
            progress=update if drawn else None,
        )
    out = {
        "table": str(table.name),
        "segment": entry.load_name,
        "status": entry.status,
        "rows": entry.row_count,
        "badRecords": entry.bad_record_count,
        "dataSize": entry.data_size,
        "indexSize": entry.index_size,
        "timeTakenMs": entry.time_taken_ms,
    }
    if getattr(args, "json", False):
        print_json(out)
    else:
        print(
            f"segment {entry.load_name} of {table.name}: {entry.status}, {entry.row_count} rows"
            + (f", {entry.bad_record_count} bad records" if entry.bad_record_count else "")
            + f", {entry.data_size} data bytes, {entry.time_taken_ms} ms"
        )
    return 0
