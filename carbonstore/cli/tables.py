"""create / describe / drop / tables / show-segments."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from carbonstore.cli._common import (
    add_json,
    open_store,
    parse_key_values,
    print_json,
    print_table,
    row_limit,
)
from carbonstore.errors import TableExistsError, UserError
from carbonstore.segments.cluster_spec import CLUSTERING_KEY, segment_clustering
from carbonstore.store.entries import LoadEntry
from carbonstore.store.paths import parse_table_name

if TYPE_CHECKING:
    from carbonstore.store.schema import Column
    from carbonstore.store.table import Table


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("create", parents=parents, help="create a table")
    p.add_argument("table", help="table name: table or db.table")
    p.add_argument("--schema", required=True, help='e.g. "id long not null, name string"')
    p.add_argument("--sort-columns", help="comma-separated sort columns")
    p.add_argument("--sort-scope", choices=["no_sort", "local_sort", "global_sort"])
    p.add_argument("--dictionary", help="comma-separated global dictionary columns")
    p.add_argument("--bloom", help="comma-separated bloom filter columns")
    p.add_argument("--partition-by", metavar="FIELDS",
                   help='partition fields, e.g. "region, day(ts), bucket(16, id)" '
                   "(docs/partitioning.md)")
    p.add_argument("--buckets", type=int, metavar="N", help="bucket files per segment")
    p.add_argument("--bucket-columns", metavar="COLUMNS",
                   help="comma-separated columns hashed into the --buckets buckets")
    p.add_argument("--property", action="append", metavar="KEY=VALUE", help="table property")
    p.add_argument("--if-not-exists", action="store_true",
                   help="exit 0 when the table exists (left unchanged; a warning says if "
                   "its schema or properties differ)")
    add_json(p)
    p.set_defaults(func=_create)

    p = sub.add_parser("describe", parents=parents, help="show a table's schema and properties")
    p.add_argument("table")
    p.add_argument("--clustering", action="store_true",
                   help="also say how clustered each segment is: the row groups / pages a "
                   "point filter on each clustering column keeps (plans a few filters)")
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
    p.add_argument("--limit", type=row_limit, help="at most N segments, the newest first")
    p.add_argument("--offset", type=row_limit, default=0,
                   help="with --limit: skip the N newest segments first (pages of a big table)")
    add_json(p)
    p.set_defaults(func=_show_segments)


def _create(args: argparse.Namespace) -> int:
    props = parse_key_values(args.property)
    for key, value in (
        ("sort_columns", args.sort_columns),
        ("sort_scope", args.sort_scope),
        ("dictionary_include", args.dictionary),
        ("bloom_columns", args.bloom),
        ("partition_by", args.partition_by),
        ("bucket_number", None if args.buckets is None else str(args.buckets)),
        ("bucket_columns", args.bucket_columns),
    ):
        if value is not None:
            props[key] = value
    store = open_store(args)
    created = True
    differences: list[str] = []
    try:
        # Without if_not_exists the store says whether *this* call created the table.
        table = store.create_table(args.table, args.schema, properties=props)
    except TableExistsError:
        if not args.if_not_exists:
            raise
        created = False
        table = store.table(args.table)
        from carbonstore.store.schema import normalise_properties, parse_schema_string

        differences = _differences(table, parse_schema_string(args.schema),
                                   normalise_properties(props))
    if not created and differences:
        print(
            f"carbonstore: warning: table {table.name} already exists with a different "
            f"definition; it was left unchanged: {'; '.join(differences)}",
            file=sys.stderr,
        )
    if args.json:
        print_json(table.describe() | {"created": created, "differences": differences})
    elif created:
        print(f"created table {table.name} at {table.store.sfs.display(table.paths.root)}")
    else:
        print(f"table {table.name} already exists at {table.paths.root}; not created")
    return 0


def _column_text(columns: Sequence[Column]) -> str:
    return ", ".join(f"{c.name} {c.type}" + ("" if c.nullable else " not null") for c in columns)


def _same_value(a: str, b: str) -> bool:
    def norm(v: str) -> list[str]:
        return [p.strip().lower() for p in v.split(",")]

    return norm(a) == norm(b)


def _differences(table: Table, columns: Sequence[Column], props: dict[str, str]) -> list[str]:
    """How the given schema and properties differ from the existing table's (empty: same)."""
    out: list[str] = []
    have = table.schema.columns
    if _column_text(have) != _column_text(columns):
        out.append(f"columns: existing '{_column_text(have)}', given '{_column_text(columns)}'")
    stored = table.schema.properties
    for key in sorted(set(stored) | set(props)):
        old, new = stored.get(key), props.get(key)
        if old is not None and new is not None and _same_value(old, new):
            continue
        show_old = "not set" if old is None else f"existing {old!r}"
        show_new = "not given" if new is None else f"given {new!r}"
        out.append(f"property {key}: {show_old}, {show_new}")
    return out


def _describe(args: argparse.Namespace) -> int:
    table = open_store(args).table(args.table)
    info = table.describe()
    # the few entries that record a clustering: none built for a table of plain loads
    clustered = {e.load_name: spec.describe()
                 for e in table.status.read().view.readable_with_extra(CLUSTERING_KEY)
                 if (spec := segment_clustering(e)) is not None}
    if clustered:  # only then: describe's JSON stays create --json's for other tables
        info["clusteredSegments"] = clustered
    if args.clustering:
        from carbonstore.segments.clustering_report import clustering_report

        info["clustering"] = [r.to_json() for r in clustering_report(table)]
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
    if clustered:
        print()
        print_table([{"segment": k, "clusteredBy": v} for k, v in clustered.items()],
                    ["segment", "clusteredBy"])
    if args.clustering:
        print()
        print_table([{"segment": r["segment"], "clusteredBy": r["clusteredBy"], "rows": r["rows"],
                      "rowGroups": r["rowGroups"]} | {
                         "column": f["column"], "pages": f["pages"],
                         "rowGroupsKept": f["rowGroupsKept"], "pagesKept": f["pagesKept"],
                         "rowsKept": f["rowsKept"]}
                     for r in info["clustering"] for f in r["pointFilters"]],
                    ["segment", "clusteredBy", "rows", "rowGroups", "column", "pages",
                     "rowGroupsKept", "pagesKept", "rowsKept"])
    return 0


def _drop(args: argparse.Namespace) -> int:
    store = open_store(args)
    name = parse_table_name(args.table)
    if store.drop_table(name):
        print(f"dropped table {name}")
    else:
        print(f"dropped table {name} (finished an earlier drop that had not removed its folder)")
    return 0


def _tables(args: argparse.Namespace) -> int:
    store = open_store(args)
    if not store.sfs.exists(store.sfs.base):
        raise UserError(
            f"store {store.location} does not exist; check --store (or carbon.storelocation), "
            "or create a table there with 'carbonstore create'"
        )
    if not store.sfs.is_dir(store.sfs.base):
        raise UserError(f"store {store.location} is not a folder")
    names = [str(n) for n in store.tables()]
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
        "deletedRows": e.deleted_rows,  # by row-level DML (docs/dml.md); rows - this are live
        "clusteredBy": None if (spec := segment_clustering(e)) is None else spec.describe(),
    }


def local_time(epoch_ms: int | None) -> str | None:
    """Epoch milliseconds as local ``yyyy-MM-dd HH:mm:ss.SSS``: the form ``delete-segments
    --before`` reads (local time, like CarbonData's SHOW SEGMENTS)."""
    if not epoch_ms:
        return None
    try:
        when = dt.datetime.fromtimestamp(epoch_ms / 1000)
    except (OverflowError, OSError, ValueError):  # a time no calendar holds: show the number
        return str(epoch_ms)
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{when.microsecond // 1000:03d}"


def _show_segments(args: argparse.Namespace) -> int:
    table = open_store(args).table(args.table)
    snap = table.status.read()
    if args.limit is not None and not args.history:  # a page, newest first: only its entries built
        entries = snap.newest(args.limit, args.offset)
    else:
        entries = list(snap.entries)
        if args.history:
            entries = table.status.history.read() + entries
        if args.limit is not None:
            end = len(entries) - args.offset
            entries = entries[max(0, end - args.limit): max(0, end)][::-1]
    rows = [segment_row(e) for e in entries]
    if args.json:
        print_json(rows)  # epoch ms, as the tablestatus holds them
        return 0
    for row in rows:
        row["loadStartTime"] = local_time(row["loadStartTime"])
    print_table(rows, ["id", "status", "loadStartTime", "timeTakenMs", "rows", "dataSize",
                       "indexSize", "mergedTo", "format", "clusteredBy"])
    return 0
