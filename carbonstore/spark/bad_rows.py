"""Where a bad record read by Spark's CSV reader is: its file, line, column and value.

A load that reads its CSV through Spark's reader (a form the in-task parser leaves to
Spark) and fails with ``BAD_RECORDS_ACTION=FAIL`` knows its first bad rows as raw text
only. This module finds, on the driver and only on that failure path, the local file and
line that hold the first of them (a search of the input bytes), and its column and value
(the line parsed again by Spark, as text and with the table's types: the first field
that is text but no value of its type).
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Sequence

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructField, StructType, _parse_datatype_string

from carbonstore.segments.csvbad import hint
from carbonstore.segments.load import LoadOptions
from carbonstore.segments.load_inputs import (
    COMPRESSED,
    file_fields,
    header_columns,
    input_files,
)
from carbonstore.store.table import Table

__all__ = ["first_sample", "locate_bad_row"]

_SAMPLES = "first bad rows: "
_MAX_SEARCH = 4 << 30  # bytes of input searched for the line


def first_sample(reason: str) -> str | None:
    """The first raw bad row quoted in a FAIL load's reason, or None."""
    at = reason.find(_SAMPLES)
    if at < 0:
        return None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(reason[at + len(_SAMPLES):]).readline):
            if tok.type == tokenize.STRING:
                value = ast.literal_eval(tok.string)
                return value if isinstance(value, str) else None
            if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT):
                return None
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return None


def _find_line(paths: Sequence[str], raw: str) -> tuple[str, int] | None:
    """The local file and 1-based line that start with ``raw``."""
    needle = raw.encode("utf-8")
    searched = 0
    for path in input_files(paths):
        if "://" in path or path.lower().endswith(COMPRESSED):
            continue
        try:
            with open(path, "rb") as f:
                data = f.read(_MAX_SEARCH - searched)
        except OSError:
            continue
        searched += len(data)
        at = 0 if data.startswith(needle) else data.find(b"\n" + needle)
        if at >= 0:
            at += 0 if data.startswith(needle) else 1
            return path, data.count(b"\n", 0, at) + 1
        if searched >= _MAX_SEARCH:
            break
    return None


def _bad_field(
    spark: SparkSession, table: Table, paths: Sequence[str], opts: LoadOptions, raw: str
) -> tuple[str, str, str] | None:
    """(column, type, text) of the first field of ``raw`` Spark cannot read as its type."""
    names = (file_fields(table, header_columns(list(paths), opts.csv) or [])
             if opts.header else list(table.schema.column_names))
    cols = {c.name: c for c in table.schema.columns}
    if not names or not any(n in cols for n in names):
        return None
    reader = {k: v for k, v in opts.csv.items() if k not in ("header", "multiLine")}
    lines = spark.sparkContext.parallelize([raw], 1)
    text = spark.read.schema(StructType([StructField(n, StringType()) for n in names])).options(
        **reader).csv(lines).collect()
    typed_fields = [
        StructField(n, _parse_datatype_string(str(cols[n].type)) if n in cols and
                    cols[n].type.name != "binary" else StringType())
        for n in names
    ]
    typed = spark.read.schema(StructType(typed_fields)).options(**reader).option(
        "mode", "PERMISSIVE").csv(lines).collect()
    if len(text) != 1 or len(typed) != 1:
        return None
    for n in names:
        if n in cols and text[0][n] is not None and typed[0][n] is None:
            return n, str(cols[n].type), str(text[0][n])
    return None


def locate_bad_row(
    spark: SparkSession, table: Table, paths: Sequence[str], opts: LoadOptions, raw: str
) -> str:
    """``<file> line <n>, column <c> (<type>): '<value>' is not a <type>`` for the bad row
    ``raw``, as much of it as can be found ("" when nothing is)."""
    parts = []
    found = _find_line(paths, raw)
    if found is not None:
        parts.append(f"{found[0]} line {found[1]}")
    try:
        field = _bad_field(spark, table, paths, opts, raw) if len(raw) < 200 else None
    except (PySparkException, Py4JError):  # a best-effort description of a failure
        field = None
    if field is not None:
        column, type_, value = field
        parts.append(f"column {column} ({type_}): {value[:80]!r} is not a {type_}")
        advice = hint(type_, value)
        if advice:
            return ", ".join(parts) + "; " + advice
    return ", ".join(parts)
