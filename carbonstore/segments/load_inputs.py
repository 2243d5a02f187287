"""Checks of a load's input that need no JVM, run before Spark starts.

Everything here reads only the local input files (their names, sizes, first bytes and
first line), so a mistake shows in one line within a second, not after Spark started:

- every local input path exists, or its pattern matches a file;
- the format: without ``--format`` it comes from the files themselves, their extensions
  (``.parquet``, ``.orc``, ``.json``/``.jsonl``, ``.csv``/``.tsv``/``.txt``, a compression
  suffix ignored) or, for other names, their first bytes (``PAR1``, ``ORC``); files of two
  formats are refused. A given format the files are not (``--format parquet`` on CSV text,
  ``--format csv`` on a Parquet file) is refused, naming the file and what it looks like.
  Remote inputs and files of no known kind load as CSV;
- CSV: no nested column in the table; the header of the first file names the table's
  columns (a header that names none of them says which delimiter it looks like it uses),
  and every NOT NULL column;
- an input that holds no rows (every file empty, or a CSV header line alone) is refused
  unless the load asks for an empty segment (the ``allow_empty`` option, ``--allow-empty``).
"""

from __future__ import annotations

import contextlib
import csv
import glob
import io
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from carbonstore.errors import SchemaError, UserError
from carbonstore.store.fs import FileType, StoreFS, filesystem_of, local_disk, resolve_fs

if TYPE_CHECKING:
    from carbonstore.segments.load import LoadOptions
    from carbonstore.store.table import Table

__all__ = [
    "COMPRESSED", "check_inputs", "file_fields", "header_columns", "infer_format", "input_files",
    "local_bytes", "local_files", "local_path", "looks_like",
]

COMPRESSED = (".gz", ".bz2", ".zst", ".deflate", ".lz4", ".snappy", ".xz", ".zip")

_EXTENSIONS = {
    "parquet": "parquet", "parq": "parquet", "orc": "orc", "json": "json", "jsonl": "json",
    "ndjson": "json", "csv": "csv", "tsv": "csv", "txt": "csv",
}
_COMPRESSION = {"gz", "bz2", "xz", "zst", "zstd", "lz4", "snappy", "deflate", "zip"}
_MAX_FILES = 1000  # files looked at to decide; a folder holds one kind of file in practice


def input_files(paths: Sequence[str]) -> Iterator[str]:
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
    for i, path in enumerate(input_files(paths)):
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


def _first_file(path: str) -> tuple[StoreFS, str] | None:
    """The file whose first line Spark takes as the header (first in name order)."""
    if path.startswith("s3://"):  # the store's endpoint settings are in the query
        sfs = resolve_fs(path)
        fs, p = sfs, sfs.base
    elif "://" in path:
        fs, p = filesystem_of(path)
    else:
        fs, p = local_disk(), os.path.abspath(os.path.expanduser(path))
        if glob.has_magic(p):
            hits = sorted(glob.glob(p))
            return (fs, hits[0]) if hits and os.path.isfile(hits[0]) else None
    info = fs.file_info(p)
    if info.is_file:
        return fs, p
    if info.type != FileType.Directory:
        return None
    files = sorted(
        i.path for i in fs.list_dir(p)
        if i.is_file and not i.base_name.startswith(("_", "."))
    )
    return (fs, files[0]) if files else None


def header_columns(paths: list[str], reader_opts: dict[str, str]) -> list[str] | None:
    """The CSV header read directly (no Spark job), or None when Spark must do it."""
    if reader_opts.get("multiLine") == "true" or not paths:
        return None
    try:
        found = _first_file(paths[0])
        if found is None or found[1].lower().endswith(COMPRESSED):
            return None
        fs, path = found
        with fs.open_input_file(path) as f:
            head = f.read(1 << 20)
        text = head.decode(reader_opts.get("encoding", "utf-8"), errors="replace")
        if text.startswith("\ufeff"):
            text = text[1:]
        comment = reader_opts.get("comment")
        escape = reader_opts.get("escape", "\\")
        rows = csv.reader(
            io.StringIO(text),
            delimiter=reader_opts.get("sep", ","),
            quotechar=reader_opts.get("quote", '"') or None,
            escapechar=escape if escape and escape != reader_opts.get("quote", '"') else None,
            doublequote=True,
        )
        for row in rows:
            if not row or (comment and row[0].startswith(comment)):
                continue
            return [c.strip() for c in row]
    except (OSError, ValueError, csv.Error, LookupError, TypeError):
        return None
    return None


def file_fields(table: Table, file_cols: Sequence[str]) -> list[str]:
    """Each file field's table column, matched by name (any case); ``__extra_<i>`` if none.

    Raises:
        SchemaError: a NOT NULL column of the table is not in the file.
    """
    cols = {c.name: c for c in table.schema.columns}
    out: list[str] = []
    present: set[str] = set()
    for i, name in enumerate(file_cols):
        c = cols.get(name.strip().lower())
        if c is None or c.name in present:
            out.append(f"__extra_{i}")
            continue
        present.add(c.name)
        out.append(c.name)
    for c in table.schema.columns:
        if c.name not in present and not c.nullable:
            raise SchemaError(f"the input has no column {c.name!r}, which is NOT NULL")
    return out


def local_path(raw: str) -> str | None:
    """An input path on this machine's filesystem (``file://`` and ``~`` resolved), or None
    for a remote URI."""
    path = raw[len("file://"):] if raw.startswith("file://") else raw
    if "://" in path or path.startswith("file:"):
        return None
    return os.path.abspath(os.path.expanduser(path))




_DELIMITERS = (";", "\t", "|", ",")
_HEAD = 1 << 16  # bytes read to tell a header-only CSV


def _local_inputs(paths: Sequence[str]) -> list[str]:
    return [p for i, p in enumerate(input_files(paths)) if i < _MAX_FILES and "://" not in p]


def local_bytes(paths: Sequence[str]) -> int:
    """The bytes of the local input files (0: none, or remote inputs only)."""
    total = 0
    for path in input_files(paths):
        if "://" not in path:
            with contextlib.suppress(OSError):
                total += os.path.getsize(path)
    return total


def local_files(paths: Sequence[str]) -> int:
    """How many local input files there are."""
    return sum(1 for p in input_files(paths) if "://" not in p)


def check_paths(paths: Sequence[str]) -> None:
    """Refuse no input, and a local input path that does not exist or a glob that matches
    nothing."""
    if not paths:
        raise UserError("no input given")
    for raw in paths:
        local = local_path(raw)
        if local is None:
            continue  # remote: the reader says
        found = glob.glob(local) if glob.has_magic(local) else os.path.exists(local)
        if not found:
            raise UserError(f"input {raw} does not exist" + (
                " (the pattern matches no file; quote it so the shell does not expand it)"
                if glob.has_magic(local) else ""))


def looks_like(path: str) -> str:
    """What a local file looks like, for a message: ``is empty (0 bytes)``, ``is a
    Parquet file``, ``looks like CSV text (first line 'id,name')``, ..."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as err:
        return f"cannot be read ({err.strerror or err})"
    if size == 0:
        return "is empty (0 bytes)"
    if head[:4] == b"PAR1":
        return "is a Parquet file"
    if head[:3] == b"ORC":
        return "is an ORC file"
    for magic, what in ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ", "xz"),
                        (b"\x28\xb5\x2f\xfd", "zstd"), (b"PK\x03\x04", "zip")):
        if head.startswith(magic):
            return f"is {what}-compressed data"
    try:
        text = head.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError:
        return f"is binary data (first bytes {head[:8]!r})"
    first = text.splitlines()[0] if text.strip() else ""
    kind = "JSON" if first.lstrip().startswith(("{", "[")) else "CSV"
    return f"looks like {kind} text (first line {first[:60]!r})"


def _check_binary(paths: Sequence[str], fmt: str) -> None:
    """Every local file of a Parquet or ORC load is one (its first, and for Parquet its
    last, bytes)."""
    for path in _local_inputs(paths):
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                head = f.read(4)
                f.seek(max(0, size - 4))
                tail = f.read(4)
        except OSError:
            continue  # the reader says
        ok = (head == b"PAR1" and tail == b"PAR1" and size >= 12) if fmt == "parquet" else (
            head[:3] == b"ORC")
        if not ok:
            what = looks_like(path)
            if head == b"PAR1" and fmt == "parquet":
                what = "starts as a Parquet file but has no Parquet footer (cut short?)"
            raise UserError(f"input {path} is not a {fmt} file: it {what}; "
                            + ("use --format csv or --format json, or leave --format out"
                               if "text" in what else "load it with the format it has"))


def _check_json(paths: Sequence[str]) -> None:
    """Every local file of a JSON load starts (after blanks) with ``{`` or ``[``."""
    for path in _local_inputs(paths):
        if path.lower().endswith(COMPRESSED):
            continue
        try:
            with open(path, "rb") as f:
                head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        except OSError:
            continue
        if head and head[:1] not in (b"{", b"["):
            raise UserError(f"input {path} is not a json file: it {looks_like(path)}; use "
                            "--format csv, or leave --format out")


def _rows_possible(path: str, fmt: str, opts: LoadOptions) -> str | None:
    """Why the local file holds no rows (None: it may hold some)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return None
    if size == 0:
        return f"{path} is empty (0 bytes)"
    if fmt == "parquet" and size >= 12:
        import pyarrow.parquet as pq

        try:
            if pq.read_metadata(path).num_rows == 0:
                return f"{path} is a Parquet file of 0 rows"
        except (OSError, ValueError):
            return None
        return None
    if fmt not in ("csv", "json") or size > _HEAD or path.lower().endswith(COMPRESSED):
        return None
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace").lstrip("\ufeff")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return f"{path} holds only blank lines"
    if fmt == "csv" and opts.header and len(lines) == 1 and opts.csv.get(
            "multiLine", "false") == "false":
        return f"{path} holds only its header line"
    return None


def _check_rows(paths: Sequence[str], fmt: str, opts: LoadOptions) -> None:
    files = _local_inputs(paths)
    if not files or any("://" in (local_path(p) or "://") for p in paths):
        return  # remote inputs: not looked at
    reasons = []
    for path in files:
        why = _rows_possible(path, fmt, opts)
        if why is None:
            return
        reasons.append(why)
    shown = reasons[0] if len(reasons) == 1 else (
        f"all {len(reasons)} input files are empty or hold only a header ({reasons[0]}, ...)")
    raise UserError(f"the input holds no rows: {shown}; nothing was loaded (load with "
                    "--allow-empty, the option allow_empty=true, to commit an empty segment)")


def _check_header(table: Table, paths: Sequence[str], opts: LoadOptions) -> None:
    cols = header_columns(list(paths), opts.csv)
    if cols is None:
        return
    names = set(table.schema.column_names)
    found = _first_file(paths[0])
    where = f"the header of {found[1] if found else paths[0]}"
    if not any(c.strip().lower() in names for c in cols):
        shown = opts.delimiter.join(cols)
        hint = "if the file has no header line, load with --option header=false"
        if len(cols) == 1:
            for d in _DELIMITERS:
                if d != opts.delimiter and any(
                        p.strip().strip('"').lower() in names for p in cols[0].split(d)):
                    shown_d = "\\t" if d == "\t" else d
                    hint = f"it looks {d!r}-delimited: load with --option 'sep={shown_d}'"
                    break
        raise UserError(f"{where} ({shown[:80]!r}) names none of the columns of {table.name} "
                        f"({', '.join(table.schema.column_names)}); {hint}")
    try:
        file_fields(table, cols)
    except SchemaError as err:
        raise SchemaError(f"{err} ({where} names {', '.join(cols)})") from None


def check_inputs(table: Table, paths: Sequence[str], fmt: str, opts: LoadOptions) -> None:
    """The checks of the module docstring for a load of ``paths`` as ``fmt``.

    Raises:
        UserError: what is wrong, naming the file, in one line.
    """
    check_paths(paths)
    if fmt == "csv":
        nested = [c.name for c in table.schema.columns if c.type.is_nested]
        if nested:
            raise SchemaError(f"CSV cannot hold the nested column(s) {', '.join(nested)} of "
                              f"{table.name}: load Parquet, JSON or ORC files, or a DataFrame")
    if fmt in ("parquet", "orc"):
        _check_binary(paths, fmt)
    if fmt == "json":
        _check_json(paths)
    if not opts.allow_empty:
        _check_rows(paths, fmt, opts)
    if fmt == "csv" and opts.header:
        _check_header(table, paths, opts)
