"""history / restore: the table's tablestatus versions (time travel), and ``--as-of``."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING, Any

from carbonstore.cli._common import add_json, open_store, print_json, print_table

if TYPE_CHECKING:
    from carbonstore.store.table import Table

__all__ = ["add_as_of", "pin", "register", "version_limit"]


def add_as_of(p: argparse.ArgumentParser) -> None:
    """``--as-of VERSION|'yyyy-MM-dd HH:mm:ss'`` for a read command."""
    p.add_argument("--as-of", dest="as_of", metavar="VERSION|'yyyy-MM-dd HH:mm:ss'",
                   help="read the table as of a version ('carbonstore history') or local time")


def pin(table: Table, args: argparse.Namespace) -> Table:
    """The table as of ``--as-of`` (itself when not given)."""
    return table.as_of(getattr(args, "as_of", None))


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("history", parents=parents,
                       help="list the table's versions: time, operation, segments, rows")
    p.add_argument("table")
    p.add_argument("--limit", type=version_limit, metavar="N",
                   help="only the newest N versions (reads only those); default: all")
    add_json(p)
    p.set_defaults(func=_history)

    p = sub.add_parser("restore", parents=parents,
                       help="commit a new version whose readable segments are those of an old one")
    p.add_argument("table")
    p.add_argument("--to-version", dest="to_version", type=int, required=True, metavar="N",
                   help="the version to restore (see 'carbonstore history')")
    add_json(p)
    p.set_defaults(func=_restore)


def version_limit(text: str) -> int:
    """argparse type of ``history --limit``: a whole number of versions, at least 1."""
    value = text.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 18 or int(value) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of versions, at least 1, "
                                         f"got {text!r}")
    return int(value)


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if ms else ""


def _history(args: argparse.Namespace) -> int:
    table = open_store(args).table(args.table)
    rows = [v.to_json() for v in table.history(limit=args.limit)]
    if args.json:
        print_json(rows)
        return 0
    shown = [
        {**r, "time": _time(r["timestamp"]), "added": ",".join(r["segmentsAdded"]),
         "removed": ",".join(r["segmentsRemoved"])}
        for r in rows
    ]
    print_table(shown, ["version", "time", "operation", "added", "removed", "rows", "writer"])
    return 0


def _restore(args: argparse.Namespace) -> int:
    table = open_store(args).table(args.table)
    snap = table.restore(args.to_version)
    readable = [e.load_name for e in snap.readable]
    if args.json:
        print_json({"version": snap.version, "restored": args.to_version, "segments": readable,
                    "rows": sum(e.row_count - e.deleted_rows for e in snap.readable)})
    else:
        print(f"restored version {args.to_version} of {table.name} as version {snap.version}: "
              f"{len(readable)} readable segment(s), {sum(e.row_count - e.deleted_rows for e in snap.readable)} rows")
    return 0
