"""delete-segments / clean-files (show-segments lives with the table commands)."""

from __future__ import annotations

import argparse
from typing import Any

from carbonstore.cli._common import add_json, open_store, print_json, print_table
from carbonstore.cli.tables import segment_row
from carbonstore.errors import UserError


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "delete-segments", parents=parents,
        help="mark segments for delete, by id or by load start time",
    )
    p.add_argument("table")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--ids", help="comma-separated segment ids, e.g. 1,2")
    which.add_argument("--before", metavar="'yyyy-MM-dd HH:mm:ss'",
                       help="every segment whose load started before this local time")
    add_json(p)
    p.set_defaults(func=_delete)

    p = sub.add_parser(
        "clean-files", parents=parents,
        help="remove compacted, deleted and failed segments and unreferenced folders",
    )
    p.add_argument("table")
    p.add_argument("--dry-run", action="store_true", help="only report what would go")
    p.add_argument("--force", action="store_true",
                   help="ignore the retention time (needs carbon.clean.files.force.allowed)")
    p.add_argument("--stale-inprogress", action="store_true",
                   help="also remove In Progress segments whose load is no longer running")
    add_json(p)
    p.set_defaults(func=_clean)


def _delete(args: argparse.Namespace) -> int:
    from carbonstore.segments.manage import delete_segments, delete_segments_before

    table = open_store(args).table(args.table)
    if args.ids is not None:
        if not args.ids.strip(",").strip():
            raise UserError("--ids: Segment ids should not be empty")
        marked = delete_segments(table, args.ids)
    else:
        marked = delete_segments_before(table, args.before)
    rows = [segment_row(e) for e in marked]
    if args.json:
        print_json(rows)
    elif rows:
        print(f"marked for delete: {', '.join(r['id'] for r in rows)}")
    else:
        print("no segment matched")
    return 0


def _clean(args: argparse.Namespace) -> int:
    from carbonstore.segments.clean import clean_files

    table = open_store(args).table(args.table)
    report = clean_files(
        table, dry_run=args.dry_run, force=args.force, stale_inprogress=args.stale_inprogress
    )
    if args.json:
        print_json(report.to_json())
        return 0
    verb = "would free" if report.dry_run else "freed"
    rows = [i.to_json() | {"path": table.paths.relative(i.path)} for i in report.items]
    if rows:
        print_table(rows, ["kind", "segment", "bytes", "path", "reason"])
    print(f"{verb} {report.bytes} bytes ({len(report.items)} item(s))")
    for s in report.skipped:
        print(f"kept: {s}")
    return 0
