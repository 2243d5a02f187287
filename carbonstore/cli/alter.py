"""alter: ALTER TABLE sub-actions (add/drop/rename/widen columns, set/unset properties)."""

from __future__ import annotations

import argparse
from typing import Any

from carbonstore.cli._common import add_json, open_store, print_json
from carbonstore.errors import UserError
from carbonstore.store.alter import SUB_ACTIONS, alter_table


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    usage = "; ".join(f"{name} {args}" for name, (args, _) in SUB_ACTIONS.items())
    p = sub.add_parser(
        "alter", parents=parents,
        help="change a table's schema or properties (a new schema version; no data rewritten)",
        description=f"Sub-actions: {usage}. See docs/schema-evolution.md.",
    )
    p.add_argument("table", help="table name: table or db.table")
    p.add_argument("action", help=", ".join(SUB_ACTIONS))
    p.add_argument("args", nargs="*", help="the sub-action's arguments")
    add_json(p)
    p.set_defaults(func=_alter)


def _alter(args: argparse.Namespace) -> int:
    entry = SUB_ACTIONS.get(args.action.lower())
    if entry is None:
        raise UserError(
            f"unknown alter action {args.action!r}; use one of {', '.join(SUB_ACTIONS)}"
        )
    usage, build = entry
    if not args.args:
        raise UserError(f"alter {args.action} needs arguments: {usage}")
    change = build(args.args)
    table = open_store(args).table(args.table)
    schema = alter_table(table, change, operation=f"{args.action} {' '.join(args.args)}")
    if getattr(args, "json", False):
        print_json({"table": str(table.name), "schemaVersion": schema.schema_version,
                    "columns": [c.to_json() for c in schema.columns],
                    "properties": schema.properties})
    else:
        print(f"altered {table.name}: schema version {schema.schema_version}")
    return 0
