"""``carbonstore dictionary TABLE COLUMN``: a global dictionary's size, chunks, loads, lookups."""

from __future__ import annotations

import argparse
import datetime as dt
from decimal import Decimal
from typing import Any

from carbonstore.cli._common import add_json, open_store, print_json, print_table
from carbonstore.dictionary.codec import parse_text_values
from carbonstore.dictionary.column import (
    check_covers,
    dictionary_column,
    load_dictionary,
    max_surrogate,
)
from carbonstore.errors import UserError


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dictionary", parents=parents,
        help="show a column's global dictionary; look values or surrogates up",
    )
    p.add_argument("table", help="table name: table or db.table")
    p.add_argument("column", help="a dictionary_include column")
    p.add_argument("--lookup", metavar="VALUE", action="append",
                   help="print the surrogate of VALUE (repeatable)")
    p.add_argument("--key", metavar="N", type=int, action="append",
                   help="print the value of surrogate N (repeatable)")
    add_json(p)
    p.set_defaults(func=_dictionary)


def _show(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, dt.date | dt.datetime | Decimal):
        return str(value)
    return value


def _dictionary(args: argparse.Namespace) -> int:
    table = open_store(args).table(args.table)
    col = dictionary_column(table, args.column)
    d = load_dictionary(table, col)
    # The segments' surrogates must all be in it: no dictionary file is not "0 values".
    from carbonstore.pruning.table_index import readable_segments, table_index

    view = table_index(table, readable_segments(table.status.read()))
    check_covers(d, max_surrogate(view.bounds, col.column_id),
                 what=f"the segments of {table.name}")
    info: dict[str, Any] = {
        "table": str(table.name),
        "column": col.name,
        "columnId": col.column_id,
        "type": str(col.type),
        "size": d.size,
        "maxSurrogate": d.max_surrogate,
        "bytes": d.meta.committed_end,
        "chunks": sum(e.chunk_count for e in d.meta.entries),
        "loads": [e.to_json() for e in d.meta.entries],
    }
    lookups = []
    if args.lookup:
        parsed = parse_text_values(list(args.lookup), col.type)
        if len(parsed) != len(args.lookup):
            raise UserError("--lookup values must not be empty for this column type")
        for text, s in zip(args.lookup, d.lookup_many(parsed), strict=True):
            lookups.append({"value": text, "surrogate": int(s) or None})
    keys = [{"surrogate": k, "value": _show(d.value_of(k))} for k in args.key or []]
    if args.json:
        info["lookups"] = lookups
        info["keys"] = keys
        print_json(info)
        return 0
    print(f"column    {info['table']}.{col.name} ({col.type}, id {col.column_id})")
    print(f"size      {d.size} values (surrogates 2..{d.max_surrogate}; 1 is null)")
    print(f"file      {info['bytes']} bytes in {info['chunks']} chunk(s), {len(d.meta.entries)} load(s)")
    if d.meta.entries:
        print()
        print_table([e.to_json() for e in d.meta.entries],
                    ["segmentId", "minSurrogate", "maxSurrogate", "chunkCount", "startOffset",
                     "endOffset", "time"])
    if lookups:
        print()
        print_table([{"value": r["value"], "surrogate": r["surrogate"] or "(absent)"} for r in lookups],
                    ["value", "surrogate"])
    if keys:
        print()
        print_table(keys, ["surrogate", "value"])
    return 0
