"""index inspect / add-segment: the index-file commands."""

from __future__ import annotations

import argparse
from typing import Any

from carbonstore.cli._common import add_json, open_store, parse_key_values, print_json
from carbonstore.cli.rebuild import add_rebuild
from carbonstore.errors import UserError
from carbonstore.store.conf import load_conf
from carbonstore.store.fs import resolve_fs


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("index", parents=parents, help="inspect or rebuild index files")
    isub = p.add_subparsers(dest="index_command", metavar="ACTION", required=True)
    ip = isub.add_parser(
        "inspect", parents=parents,
        help="show the index of a .parquet, .carbonindex or .carbonindexmerge file",
    )
    ip.add_argument("path")
    ip.add_argument("--probe", action="append", metavar="COLUMN=VALUE",
                    help="check a value against a column's bloom filters (repeatable, one "
                    "value per column)")
    add_json(ip)
    ip.set_defaults(func=_inspect)
    add_rebuild(isub, parents)

    p = sub.add_parser("add-segment", parents=parents,
                       help="adopt a folder of Parquet files as a new segment (files are copied)")
    p.add_argument("table")
    p.add_argument("--path", required=True, help="folder (or file) of Parquet files")
    add_json(p)
    p.set_defaults(func=_add_segment)


def _inspect(args: argparse.Namespace) -> int:
    from carbonstore.indexfiles.inspect import inspect_path

    sfs = resolve_fs(args.path, load_conf(args.conf))  # s3://: the conf's endpoint settings
    if not sfs.exists(sfs.base):
        raise UserError(f"index inspect: {args.path} does not exist")
    probe = _parse_probes(args.probe)
    result = inspect_path(sfs, sfs.base, probe)
    if args.json:
        print_json(result)
        return 0
    for f in result["files"]:
        print(f"{f['path']}: {f['num_rows']} rows, {len(f['row_groups'])} row groups, "
              f"written by {f['created_by']}")
        for rg in f["row_groups"]:
            print(f"  row group {rg['index']}: {rg['num_rows']} rows")
            for c in rg["columns"]:
                pages = c["pages"]["count"] if c["pages"] else "-"
                bloom = c["bloom"]
                btxt = "-" if bloom is None else f"{bloom['num_bytes']} B"
                if bloom is not None and "might_contain" in bloom:
                    btxt += f" might_contain={bloom['might_contain']}"
                print(f"    {c['path']:<20} min={c['min']!r} max={c['max']!r} "
                      f"nulls={c['null_count']} nans={c['nan_count']} pages={pages} bloom={btxt}")
    return 0


def _parse_probes(items: list[str] | None) -> dict[str, str] | None:
    """``--probe COLUMN=VALUE`` options; a column probed twice is refused, not overwritten.

    The report has one ``might_contain`` per column and row group, so a second value for
    the same column has nowhere to go: probe it in another run.
    """
    seen: dict[str, str] = {}
    for item in items or []:
        one = parse_key_values([item], "--probe")
        (column, value), = one.items()
        if column in seen:
            raise UserError(
                f"--probe names column {column} twice ({column}={seen[column]} and "
                f"{column}={value}); give one value per column and run the command again "
                "for the other"
            )
        seen[column] = value
    return seen or None


def _add_segment(args: argparse.Namespace) -> int:
    from carbonstore.cli.tables import segment_row
    from carbonstore.segments.addsegment import add_segment

    table = open_store(args).table(args.table)
    entry = add_segment(table, args.path)
    if args.json:
        print_json(segment_row(entry))
    else:
        print(f"added segment {entry.load_name} to {table.name}: {entry.row_count} rows")
    return 0
