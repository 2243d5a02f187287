"""create / describe / drop / tables / show-segments."""

from __future__ import annotations

import argparse
from typing import Any

from carbonstore.commands._common import (
    add_json,
    open_store,
    parse_key_values,
    print_json,
    print_table,
)
from carbonstore.store.tablestatus import LoadEntry


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("create", parents=parents, help="create a table")
    p.add_argument("table", help="table name: table or db.table")
    p.add_argument("--schema", required=True, help='e.g. "id long not null, name string"')
    p.add_argument("--sort-columns", help="comma-separated sort columns")
    p.add_argument("--sort-scope", choices=["no_sort", "local_sort", "global_sort"])
    p.add_argument("--dictionary", help="comma-separated global dictionary columns")
    p.add_argument("--bloom", help="comma-separated bloom filter columns")
    p.add_argument("--property", action="append", metavar="KEY=VALUE", help="table property")
    p.add_argument("--if-not-exists", action="store_true")
    add_json(p)
    p.set_defaults(func=_create)

    p = sub.add_parser("describe", parents=parents, help="show a table's schema and properties")
    p.add_argument("table")
    add_json(p)
    p.set_defaults(func=_describe)

    p = sub.add_parser("drop", parents=parents, help="drop a table and all its files")
    p.add_argument("table")
    p.set_defaults(func=_drop)

    p = sub.add_parser("tables", parents=parents, help="list the tables of the store")
    add_json(p)
    p.set_defaults(func=_tables)

    p = sub.add_parser("show-segments", parents=parents, help="list a table's segments")
    p.add_argument("table")
    p.add_argument("--history", action="store_true", help="include removed segments")
    add_json(p)
    p.set_defaults(func=_show_segments)


def _create(args: argparse.Namespace) -> int:
    props = parse_key_values(args.property)
    for key, value in (
        ("sort_columns", args.sort_columns),
        ("sort_scope", args.sort_scope),
        ("dictionary_include", args.dictionary),
        ("bloom_columns", args.bloom),
    ):
        if value is not None:
            props[key] = value
    store = open_store(args)
    table = store.create_table(
        args.table, args.schema, properties=props, if_not_exists=args.if_not_exists
    )
    if args.json:
        print_json(table.describe())
    else:
        print(f"created table {table.name} at {table.paths.root}")
    return 0


def _describe(args: argparse.Namespace) -> int:
    info = open_store(args).table(args.table).describe()
    if args.json:
        print_json(info)
        return 0
    print(f"table     {info['table']}")
    print(f"location  {info['location']}")
    print(f"segments  {info['readableSegments']} readable of {info['segments']}, {info['rows']} rows")
    print()
    print_table(info["columns"], ["name", "type", "nullable", "columnId"])
    if info["properties"]:
        print()
        print_table([{"property": k, "value": v} for k, v in info["properties"].items()], ["property", "value"])
    return 0


def _drop(args: argparse.Namespace) -> int:
    store = open_store(args)
    name = store.table(args.table).name
    store.drop_table(args.table)
    print(f"dropped table {name}")
    return 0


def _tables(args: argparse.Namespace) -> int:
    names = [str(n) for n in open_store(args).tables()]
    if args.json:
        print_json(names)
    else:
        for n in names:
            print(n)
    return 0


def segment_row(e: LoadEntry) -> dict[str, Any]:
    """The show-segments JSON object of one entry (keys are a contract)."""
    return {
        "id": e.load_name,
        "status": e.status,
        "loadStartTime": e.load_start_time,
        "timeTakenMs": e.time_taken_ms,
        "rows": e.row_count,
        "dataSize": e.data_size,
        "indexSize": e.index_size,
        "mergedTo": e.merged_load_name,
        "format": e.file_format,
        "badRecords": e.bad_record_count,
        "visible": e.visibility,
    }


def _show_segments(args: argparse.Namespace) -> int:
    table = open_store(args).table(args.table)
    entries = list(table.status.read().entries)
    if args.history:
        entries = table.status.read_history() + entries
    rows = [segment_row(e) for e in entries]
    if args.json:
        print_json(rows)
        return 0
    print_table(rows, ["id", "status", "loadStartTime", "timeTakenMs", "rows", "dataSize",
                       "indexSize", "mergedTo", "format"])
    return 0
