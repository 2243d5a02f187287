"""index rebuild TABLE [--segments 1,3]: rewrite index files from the Parquet footers.

The sub-command lives under ``carbonstore index`` (cli/index.py calls
:func:`add_rebuild`); this module registers no top-level command of its own.
"""

from __future__ import annotations

import argparse
from typing import Any

from carbonstore.cli._common import add_json, open_store, print_json, print_table, split_ids
from carbonstore.progress import progress


def add_rebuild(isub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add ``rebuild`` to the ``index`` sub-parsers."""
    p = isub.add_parser(
        "rebuild", parents=parents,
        help="rebuild the .carbonindex / .carbonindexmerge files of segments from their "
        "Parquet files (after an index file was lost or damaged)",
    )
    p.add_argument("table")
    p.add_argument("--segments", help="comma-separated segment ids (default: every readable one)")
    add_json(p)
    p.set_defaults(func=_rebuild)


def _rebuild(args: argparse.Namespace) -> int:
    from carbonstore.segments.rebuild import count_data_files, rebuild_indexes

    table = open_store(args).table(args.table)
    ids = split_ids(args.segments)
    total = count_data_files(table, ids)
    with progress(total, f"rebuilding indexes of {table.name}", json=args.json) as advance:
        results = rebuild_indexes(table, ids, on_file=advance)
    if args.json:
        print_json({"table": str(table.name), "segments": [r.to_json() for r in results]})
        return 0
    if not results:
        print(f"{table.name} has no readable segment; nothing rebuilt")
        return 0
    print_table([r.to_json() for r in results],
                ["segment", "files", "rows", "taskIndexes", "segmentFile", "indexSize"])
    return 0
