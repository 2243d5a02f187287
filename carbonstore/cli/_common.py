"""Helpers shared by the CLI sub-commands: opening the store, printing results."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from carbonstore.errors import UserError

if TYPE_CHECKING:
    from carbonstore.api import Store

__all__ = [
    "add_json", "open_store", "parse_key_values", "print_json", "print_table", "row_limit",
    "split_ids",
]


def open_store(args: argparse.Namespace) -> Store:
    # imported here: the store layer (pyarrow.fs, numpy) is ~170 ms of CPU that a command's
    # parser and --help do not need (python -X importtime, quiet machine). The user's Store
    # (carbonstore.Store): the command line and the library open the same tables.
    from carbonstore.api import Store
    from carbonstore.store import load_conf

    conf = load_conf(args.conf)
    return Store(args.store, conf=conf)


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _default(obj: Any) -> Any:
    if isinstance(obj, bytes):
        return {"hex": obj.hex()}
    return str(obj)


def print_json(obj: Any) -> None:
    import orjson  # ~3 ms; only commands that print JSON pay it

    data = orjson.dumps(obj, default=_default, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    out = sys.stdout
    raw = getattr(out, "buffer", None)
    if raw is not None and os.linesep == "\n" and _utf8(getattr(out, "encoding", None)):
        # orjson's bytes are the UTF-8 the text stream would write: handed over as they are
        # (a scan's plan prints ~10 MB: decoding it, adding the newline and encoding it
        # again were three copies of it)
        out.flush()
        raw.write(data)
        raw.write(b"\n")
        return
    out.write(data.decode() + "\n")


def _utf8(encoding: str | None) -> bool:
    if not encoding:
        return False
    import codecs

    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    print(line.rstrip())
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def parse_key_values(items: Sequence[str] | None, what: str = "--property") -> dict[str, str]:
    """``KEY=VALUE`` options: the key is trimmed, the value is taken verbatim (a CSV
    delimiter or null value of one space, a probed string with a trailing space)."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{what} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


ROW_LIMIT_MAX = 2**31 - 1  # Spark's limit is an int


def row_limit(text: str) -> int:
    """argparse type of ``--limit``: an integer from 0 to 2147483647 (Spark's largest)."""
    value = text.strip()
    if not value.isascii() or not value.isdigit() or len(value) > 10 or int(value) > ROW_LIMIT_MAX:
        raise argparse.ArgumentTypeError(
            f"must be an integer from 0 to {ROW_LIMIT_MAX}, got {text!r}"
        )
    return int(value)


def split_ids(text: str | None, what: str = "--segments") -> list[str] | None:
    if text is None:
        return None
    ids = [p.strip() for p in text.split(",") if p.strip()]
    if not ids:
        raise UserError(f"{what}: Segment ids should not be empty")
    return ids
