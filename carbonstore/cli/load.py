"""load: write input files into a new segment with the embedded (or spark-submit) Spark.

Without ``--format`` the format comes from the local input files themselves: their
extensions (``.parquet``, ``.orc``, ``.json``/``.jsonl``, ``.csv``/``.tsv``/``.txt``, a
compression suffix ignored) or, for other names, their first bytes (``PAR1``, ``ORC``);
files of two formats are refused. Remote inputs and files of no known kind load as CSV.
"""

from __future__ import annotations

import argparse
import glob
import os
from collections.abc import Iterator, Sequence
from typing import Any

from carbonstore.cli._common import add_json, open_store, parse_key_values, print_json
from carbonstore.errors import UserError

_EXTENSIONS = {
    "parquet": "parquet", "parq": "parquet", "orc": "orc", "json": "json", "jsonl": "json",
    "ndjson": "json", "csv": "csv", "tsv": "csv", "txt": "csv",
}
_COMPRESSION = {"gz", "bz2", "xz", "zst", "zstd", "lz4", "snappy", "deflate", "zip"}
_MAX_FILES = 1000  # files looked at to decide; a folder holds one kind of file in practice


def _input_files(paths: Sequence[str]) -> Iterator[str]:
    """Local files of the inputs as Spark lists them (hidden and ``_`` names skipped)."""
    for raw in paths:
        path = raw[len("file://"):] if raw.startswith("file://") else raw
        if "://" in path:
            if path.startswith("s3://"):
                yield path  # a bucket's object or folder: its name's extension tells
            continue
        path = os.path.expanduser(path)
        for match in (glob.glob(path) if glob.has_magic(path) else [path]):
            if os.path.isfile(match):
                yield match
            elif os.path.isdir(match):
                for root, dirs, files in os.walk(match):
                    dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
                    for name in sorted(files):
                        if not name.startswith(("_", ".")):
                            yield os.path.join(root, name)


def _kind(path: str) -> str | None:
    parts = os.path.basename(path).lower().split(".")[1:]
    while parts and parts[-1] in _COMPRESSION:
        parts.pop()
    if parts and parts[-1] in _EXTENSIONS:
        return _EXTENSIONS[parts[-1]]
    return _magic(path)


def _magic(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return None
    if head == b"PAR1":
        return "parquet"
    if head[:3] == b"ORC":
        return "orc"
    return None


def infer_format(paths: Sequence[str], given: str | None) -> str | None:
    """The input format: ``given``, else what the local files are (see the module
    docstring); None when nothing local tells (the load's default, CSV, applies).

    Raises:
        UserError: the files are of two formats, or ``given`` is a text format while the
            files are Parquet or ORC (a load that cannot succeed, with a misleading error).
    """
    found: dict[str, str] = {}
    for i, path in enumerate(_input_files(paths)):
        if i >= _MAX_FILES:
            break
        kind = _kind(path) if given is None else _magic(path)
        if kind is not None:
            found.setdefault(kind, path)
    if given is not None:
        binary = {k: v for k, v in found.items() if k in ("parquet", "orc") and k != given}
        if binary and given in ("csv", "json"):
            kind, path = next(iter(binary.items()))
            raise UserError(f"input {path} is a {kind} file, not {given}; use --format {kind} "
                            "(or leave --format out)")
        return given
    if len(found) > 1:
        shown = ", ".join(f"{k} ({v})" for k, v in sorted(found.items()))
        raise UserError(f"the input mixes file formats: {shown}; load each format separately "
                        "or give --format")
    return next(iter(found), None)


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
    fmt = infer_format(args.input, args.format)
    # Refuse bad options (e.g. REDIRECT without a path) before starting Spark.
    from carbonstore.dictionary import PREBUILT_OPTION
    from carbonstore.segments.load import parse_load_options

    parse_load_options(
        table, {k: v for k, v in options.items() if k.lower() != PREBUILT_OPTION.lower()}
    )
    from carbonstore.progress import progress
    from carbonstore.spark.load_job import load
    from carbonstore.spark.session import get_spark

    spark = get_spark(master=args.master, conf=table.store.conf)
    with progress(None, f"loading into {table.name}", json=getattr(args, "json", False)):
        entry = load(
            table,
            args.input,
            spark=spark,
            format=fmt,
            options=options,
            mode="overwrite" if args.overwrite else "append",
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
