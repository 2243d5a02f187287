"""CSV parsed with pyarrow inside the load tasks: the rows Spark's CSV reader would give.

Spark's CSV scan hands every row to the Python writer tasks through the JVM: a row-wise
parse, then a conversion to Arrow and a socket hop, which together cost more than Spark's
own Parquet writer. A load task that parses its part of the files with pyarrow skips all
of it: the writer gets Arrow batches straight from the bytes.

The rows must be exactly the ones Spark's CSV reader (``PERMISSIVE``, the table's schema,
the session time zone UTC) gives. A task takes a split only when every value in it is in a
form both parsers read the same way; anything else raises :class:`NeedsSparkParser` and the
load reads the input through Spark instead (bad records are then found there too):

- no escape character and no byte-order mark in the split, and the quote character only
  around whole fields (``"a,b"`` right after a delimiter or line start, right before a
  delimiter or line end, not empty, no quote or line break inside): the two parsers'
  rules for escapes, doubled quotes and stray quotes differ;
- every row has the header's number of fields; text is valid UTF-8;
- integers, decimals, booleans (``true``/``false`` in lower, title or upper case) and
  dates (``yyyy-MM-dd``) as pyarrow parses them: pyarrow is the stricter of the two
  (``+5``, ``1.234`` for ``decimal(10,2)`` and ``2024-1-1`` stop the fast path);
- doubles and floats as pyarrow parses them, with a non-finite value only when spelled
  the way Spark reads it (the ``nanValue``, ``positiveInf`` and ``negativeInf`` options,
  ``NaN``, ``Inf`` and ``-Inf`` by default, and Java's ``[+-]Infinity``, ``[+-]NaN``; with
  the defaults ``nan`` and ``inf`` are bad records to Spark, and ``1e400`` is infinite);
- timestamps ``yyyy-MM-dd[( |T)HH:mm[:ss[.SSSSSS][zone]]]``, the zone ``Z`` or an offset
  ``+HH:mm`` / ``+HHmm``; a value without a zone is read as UTC.

Empty fields, quoted empty fields (``""``) and the ``nullValue`` text are null in every
column, as in Spark (a quoted empty field needs the default ``nullValue``).

A value that Spark would certainly take for a bad record (``nan`` in a double column
with the default ``nanValue``, ``abc`` in an int column, ``yes`` in a boolean column)
raises :class:`BadValue`, which names the file, line, column and value: a load with
``BAD_RECORDS_ACTION=FAIL`` fails on it at once, without reading the input a second time.

A split is a byte range of one file; it holds the lines that start inside it (the first
line of a later split starts after the newline before its first byte, and a split's last
line runs past its end to the next newline), so splits of a file hold every line once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from carbonstore.segments.csvbad import certainly_bad, hint, nth_row_line
from carbonstore.segments.writer import (
    ColumnSpec,
    TaskResult,
    WriteSettings,
    arrow_schema,
    write_task,
)
from carbonstore.store.fs import StoreFS, local_disk, resolve_fs

__all__ = [
    "BadValue",
    "CsvScan",
    "CsvSplit",
    "Fallback",
    "NeedsSparkParser",
    "csv_task",
    "distinct_task",
    "pack_splits",
    "read_splits",
    "sort_like_spark",
]

_BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 16
_TRUE = ["true", "True", "TRUE"]
_FALSE = ["false", "False", "FALSE"]
#: What Java's ``Double.parseDouble`` reads as a non-finite value (Spark's CSV reader
#: falls back on it after the ``nanValue`` / ``positiveInf`` / ``negativeInf`` texts).
_JAVA_NONFINITE = ("NaN", "+NaN", "-NaN", "Infinity", "+Infinity", "-Infinity")
_ZONE = r"(Z|[+-]\d{2}:?\d{2})"
_TIMESTAMP = (r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?" + _ZONE
              + r"?)?)?$")
_FLOATS = frozenset({"float", "double"})


class NeedsSparkParser(Exception):  # noqa: N818 - a signal, not an error of the user
    """The split holds a form only Spark's CSV reader decides; the load falls back to it."""


class BadValue(NeedsSparkParser):
    """A value Spark's CSV reader certainly takes for a bad record (see the module doc)."""

    def __init__(self, path: str, line: int, column: str, type_name: str, value: str,
                 hint: str = "") -> None:
        self.path, self.line, self.column = path, line, column
        self.type_name, self.value, self.hint = type_name, value, hint
        super().__init__(self.describe())

    def describe(self) -> str:
        where = f"{self.path} line {self.line}" if self.line > 0 else self.path
        return (f"{where}, column {self.column} ({self.type_name}): {self.value[:80]!r} is not "
                f"a {self.type_name}" + (f"; {self.hint}" if self.hint else ""))


@dataclass(frozen=True, slots=True)
class CsvSplit:
    """Bytes ``[start, end)`` of one file (``end`` -1: to the end of the file)."""

    path: str
    start: int
    end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CsvScan:
    """How a load's CSV files are read; resolved on the driver and shipped to tasks.

    ``file_columns`` are the names of the fields in file order (fields that are not table
    columns are named ``__extra_<i>``); ``columns`` are every table column, in table order.
    """

    file_columns: tuple[str, ...]
    columns: tuple[ColumnSpec, ...]
    header: bool
    delimiter: str = ","
    quote: str = '"'
    escape: str = "\\"
    null_value: str = ""
    nan_value: str = "NaN"
    positive_inf: str = "Inf"
    negative_inf: str = "-Inf"
    batch_bytes: int = 16 << 20
    #: Where the input files are: "" for local paths, else an ``s3://`` location whose
    #: filesystem holds them (their paths are then ``bucket/key``).
    input_location: str = ""

    def input_fs(self) -> StoreFS:
        if not self.input_location:
            return local_disk()
        return resolve_fs(self.input_location)

    def _parse_types(self) -> dict[str, pa.DataType]:
        """What pyarrow parses each present column as (floats and timestamps: text first)."""
        schema = arrow_schema(self.columns)
        present = set(self.file_columns)
        out: dict[str, pa.DataType] = {}
        for c in self.columns:
            if c.name in present:
                t = schema.field(c.name).type
                is_text = c.type in _FLOATS or c.type == "timestamp"
                out[c.name] = pa.string() if is_text else t
        return out


def pack_splits(
    files: Sequence[tuple[str, int]], *, max_bytes: int, open_cost: int = 4 << 20
) -> list[list[CsvSplit]]:
    """Cut files into splits of at most ``max_bytes`` and pack them into tasks as Spark does.

    Args:
        files: (path, size) of every input file.
        max_bytes: the largest split (Spark's ``maxSplitBytes``).
        open_cost: what opening a file costs, in bytes (``spark.sql.files.openCostInBytes``).

    Returns:
        The splits of each task; a task's splits are read in order.
    """
    splits: list[tuple[int, CsvSplit]] = []
    for path, size in files:
        if size <= 0:
            continue
        for start in range(0, size, max_bytes):
            end = min(size, start + max_bytes)
            splits.append((end - start, CsvSplit(path, start, -1 if end == size else end)))
    splits.sort(key=lambda s: -s[0])
    tasks: list[list[CsvSplit]] = []
    current: list[CsvSplit] = []
    current_bytes = 0
    for length, split in splits:
        if current and current_bytes + length > max_bytes:
            tasks.append(current)
            current, current_bytes = [], 0
        current.append(split)
        current_bytes += length + open_cost
    if current:
        tasks.append(current)
    return tasks


def _next_newline(f: pa.NativeFile, pos: int, size: int) -> int:
    """Position of the first ``\\n`` at or after ``pos`` (``size`` when there is none)."""
    f.seek(pos)
    while pos < size:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        i = chunk.find(b"\n")
        if i >= 0:
            return pos + i
        pos += len(chunk)
    return size


def _split_bytes(fs: StoreFS, split: CsvSplit) -> tuple[int, bytes]:
    """The lines that start in ``split``, whole, and where in the file they begin."""
    with fs.open_input_file(split.path) as f:
        size = f.size()
        end = size if split.end < 0 else min(split.end, size)
        begin = 0 if split.start == 0 else _next_newline(f, split.start - 1, size) + 1
        if begin >= end:
            return begin, b""
        stop = end if end == size else _next_newline(f, end - 1, size) + 1
        f.seek(begin)
        return begin, f.read(min(stop, size) - begin)


def _lines_before(fs: StoreFS, path: str, offset: int) -> int:
    """How many lines of the file end before byte ``offset``."""
    count = 0
    with fs.open_input_file(path) as f:
        while offset > 0:
            chunk = f.read(min(_CHUNK * 16, offset))
            if not chunk:
                break
            count += chunk.count(b"\n")
            offset -= len(chunk)
    return count


def _check_bytes(scan: CsvScan, data: bytes, split: CsvSplit) -> tuple[bytes, bool]:
    """The split's data rows, and whether they hold quoted fields (all of the simple kind)."""
    if split.start == 0 and data.startswith(_BOM):
        raise NeedsSparkParser(f"{split.path} starts with a byte-order mark")
    if scan.escape and scan.escape.encode() in data:
        raise NeedsSparkParser(f"{split.path} holds the escape character {scan.escape!r}")
    if split.start == 0 and scan.header:
        first = data.find(b"\n")
        if first <= 0 or data[:first].strip(b"\r") == b"":
            raise NeedsSparkParser(f"{split.path} does not start with its header line")
        data = data[first + 1:]
    quoted = bool(scan.quote) and scan.quote.encode() in data
    if quoted and not _simple_quoting(data, scan.quote, scan.delimiter,
                                      empty=scan.null_value == ""):
        raise NeedsSparkParser(f"{split.path} quotes a field in a way only Spark decides")
    return data, quoted


def _simple_quoting(data: bytes, quote: str, delimiter: str, *, empty: bool = False) -> bool:
    """Every quote character opens or closes a whole field: ``"..."`` right after a
    delimiter or line start, closed right before a delimiter or line end, with at least
    one character (none allowed when ``empty``: ``""`` is null to both parsers when the
    null text is empty), no quote and no line break inside. Such fields read the same in
    both parsers; doubled quotes and quotes inside fields do not."""
    q, d = quote.encode(), delimiter.encode()
    if len(q) != 1 or len(d) != 1:
        return False
    buf = np.frombuffer(data, dtype=np.uint8)
    pos = np.flatnonzero(buf == q[0])
    if len(pos) % 2:
        return False
    opens, closes = pos[0::2], pos[1::2]
    if np.any(closes - opens < (1 if empty else 2)):
        return False
    n = len(buf)
    before = buf[opens[opens > 0] - 1]
    if not np.all((before == d[0]) | (before == 0x0A)):
        return False
    after = buf[closes[closes < n - 1] + 1]
    if not np.all((after == d[0]) | (after == 0x0A) | (after == 0x0D)):
        return False
    breaks = np.flatnonzero((buf == 0x0A) | (buf == 0x0D))
    return bool(np.array_equal(np.searchsorted(breaks, opens), np.searchsorted(breaks, closes)))


def _to_floats(text: pa.Array, t: pa.DataType, name: str, scan: CsvScan) -> pa.Array:
    special = {scan.nan_value: "NaN", scan.positive_inf: "Inf", scan.negative_inf: "-Inf"}
    spelled = text
    for given, canonical in special.items():
        if given != canonical and pc.any(pc.equal(text, given)).as_py():
            spelled = pc.if_else(pc.equal(text, given), canonical, spelled)
    try:
        values = pc.cast(spelled, t)
    except pa.ArrowInvalid:
        raise _NotParsed(name) from None
    nonfinite = pc.fill_null(pc.invert(pc.is_finite(values)), False)
    if pc.any(nonfinite).as_py():
        allowed = pa.array(sorted({*_JAVA_NONFINITE, *special}))
        wrong = pc.and_(nonfinite, pc.invert(pc.is_in(text, value_set=allowed)))
        if pc.any(wrong).as_py():
            raise _NotParsed(name)
    return values


def _to_timestamps(text: pa.Array, t: pa.DataType, name: str) -> pa.Array:
    valid = text.drop_null()
    if len(valid) and not pc.all(pc.match_substring_regex(valid, _TIMESTAMP)).as_py():
        raise NeedsSparkParser(f"column {name}: a timestamp form only Spark reads")
    zoned = pc.fill_null(pc.match_substring_regex(text, _ZONE + "$"), False)
    if not pc.any(zoned).as_py():
        return pc.cast(pc.cast(text, pa.timestamp(t.unit)), t)
    null = pa.scalar(None, pa.string())
    local = pc.cast(pc.cast(pc.if_else(zoned, null, text), pa.timestamp(t.unit)), t)
    instant = pc.cast(pc.if_else(zoned, text, null), pa.timestamp(t.unit, "UTC"))
    return pc.if_else(zoned, pc.cast(instant, t), local)


class _NotParsed(Exception):  # noqa: N818 - a signal inside the parse
    """A column's text did not convert; :func:`_locate_bad` finds the value."""

    def __init__(self, column: str) -> None:
        super().__init__(column)
        self.column = column


def _conform(batch: pa.RecordBatch, scan: CsvScan, schema: pa.Schema) -> pa.RecordBatch:
    """The parsed batch as the table's columns, in table order, with the table's types."""
    arrays: list[pa.Array] = []
    for c, field in zip(scan.columns, schema, strict=True):
        idx = batch.schema.get_field_index(c.name)
        if idx < 0:
            arrays.append(pa.nulls(batch.num_rows, field.type))
            continue
        arr = batch.column(idx)
        if c.type in _FLOATS:
            arr = _to_floats(arr, field.type, c.name, scan)
        elif c.type == "timestamp":
            arr = _to_timestamps(arr, field.type, c.name)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _parse(
    scan: CsvScan, data: bytes, schema: pa.Schema, *, quoted: bool
) -> Iterator[pa.RecordBatch]:
    for batch in _reader(scan, data, scan._parse_types(), quoted=quoted):
        yield _conform(batch, scan, schema)


def _reader(
    scan: CsvScan, data: bytes, types: dict[str, pa.DataType], *, quoted: bool
) -> pacsv.CSVStreamingReader:
    return pacsv.open_csv(
        pa.BufferReader(data),
        read_options=pacsv.ReadOptions(
            column_names=list(scan.file_columns), use_threads=False,
            block_size=scan.batch_bytes,
        ),
        parse_options=pacsv.ParseOptions(
            delimiter=scan.delimiter, quote_char=scan.quote if quoted else False,
            escape_char=False,
            double_quote=False, newlines_in_values=False, ignore_empty_lines=True,
        ),
        convert_options=pacsv.ConvertOptions(
            column_types=types, include_columns=list(types),
            null_values=sorted({"", scan.null_value}), strings_can_be_null=True,
            true_values=_TRUE, false_values=_FALSE, check_utf8=True,
        ),
    )


def _first_bad(scan: CsvScan, data: bytes, *, quoted: bool) -> tuple[int, ColumnSpec, str] | None:
    """The first (row, column, text) of ``data`` that Spark certainly reads as a bad
    record (see carbonstore/segments/csvbad.py), or None."""
    types = {name: pa.string() for name in scan._parse_types()}
    try:
        rows = pa.Table.from_batches(list(_reader(scan, data, types, quoted=quoted)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None  # the shape of the rows, not a value: Spark's reader decides
    specials = (scan.nan_value, scan.positive_inf, scan.negative_inf)
    best: tuple[int, ColumnSpec, str] | None = None
    for c in scan.columns:
        if c.name not in types or rows.num_rows == 0:
            continue
        text = rows.column(c.name).combine_chunks()
        mask = certainly_bad(text, c.type, specials)
        if mask is None or not pc.any(mask).as_py():
            continue
        row = int(pc.index(mask, True).as_py())
        if best is None or row < best[0]:
            best = (row, c, str(text[row].as_py()))
    return best


def read_splits(
    scan: CsvScan, splits: Iterable[CsvSplit], fs: StoreFS
) -> Iterator[pa.RecordBatch]:
    """The rows of ``splits`` as batches of the table's columns.

    Raises:
        NeedsSparkParser: a split holds something only Spark's CSV reader decides (the
            message says what); the task drops what it wrote and the load falls back.
    """
    schema = arrow_schema(scan.columns)
    for split in splits:
        begin, raw = _split_bytes(fs, split)
        data, quoted = _check_bytes(scan, raw, split)
        if not data:
            continue
        try:
            yield from _parse(scan, data, schema, quoted=quoted)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, _NotParsed) as err:
            bad = _first_bad(scan, data, quoted=quoted)
            if bad is not None:
                row, col, value = bad
                start = begin + len(raw) - len(data)  # after the header line when it was cut
                line = _lines_before(fs, split.path, start) + nth_row_line(data, row)
                raise BadValue(split.path, line, col.name, col.type, value,
                               hint(col.type, value)) from None
            what = (f"column {err.column}: a value Spark reads otherwise"
                    if isinstance(err, _NotParsed) else str(err).splitlines()[0])
            raise NeedsSparkParser(f"{split.path}: {what}") from None


def sort_like_spark(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """Rows ordered as Spark's ascending sort: nulls first, NaN after every number."""
    keys: list[tuple[str, str]] = []
    extra: dict[str, pa.ChunkedArray] = {}
    for i, name in enumerate(columns):
        col = table.column(name)
        extra[f"__valid_{i}"] = pc.is_valid(col)
        keys.append((f"__valid_{i}", "ascending"))
        if pa.types.is_floating(col.type):
            extra[f"__nan_{i}"] = pc.fill_null(pc.is_nan(col), False)
            keys.append((f"__nan_{i}", "ascending"))
        keys.append((name, "ascending"))
    keyed = table
    for k, v in extra.items():
        keyed = keyed.append_column(k, v)
    order = pc.sort_indices(keyed, sort_keys=keys)
    return table.take(order)


@dataclass(frozen=True, slots=True)
class Fallback:
    """A task's answer when its splits need Spark's CSV reader (it wrote nothing).

    ``bad``: the reason is a value Spark certainly reads as a bad record (:class:`BadValue`);
    a load with ``BAD_RECORDS_ACTION=FAIL`` fails on it without reading through Spark.
    """

    task_id: str
    reason: str
    bad: bool = False


def csv_task(
    scan: CsvScan,
    settings: WriteSettings,
    splits: Sequence[CsvSplit],
    *,
    task_id: str,
    local_sort: bool = False,
) -> TaskResult | Fallback:
    """One load task: parse ``splits`` and write them into the segment.

    With ``local_sort`` the task's rows are sorted on ``settings.sort_columns`` first, as
    ``sortWithinPartitions`` would.
    """
    in_fs = scan.input_fs()
    try:
        batches: Iterable[pa.RecordBatch] = read_splits(scan, splits, in_fs)
        if local_sort and settings.sort_columns:
            rows = pa.Table.from_batches(list(batches), schema=arrow_schema(scan.columns))
            batches = sort_like_spark(rows, settings.sort_columns).to_batches(
                max_chunksize=1 << 16
            )
        return write_task(
            batches, settings, task_id=task_id, fs=resolve_fs(settings.store_location)
        )
    except NeedsSparkParser as err:
        return Fallback(task_id, str(err), bad=isinstance(err, BadValue))


def distinct_task(
    scan: CsvScan, splits: Sequence[CsvSplit], columns: Sequence[str], *, task_id: str
) -> dict[str, pa.Array] | Fallback:
    """The distinct values of ``columns`` in ``splits`` (a load's dictionary pass).

    Every column is parsed, so a split that needs Spark's reader says so here, before any
    dictionary value is committed.
    """
    seen: dict[str, list[pa.Array]] = {c: [] for c in columns}
    try:
        for batch in read_splits(scan, splits, scan.input_fs()):
            for c in columns:
                seen[c].append(pc.unique(batch.column(c)))
    except NeedsSparkParser as err:
        return Fallback(task_id, str(err), bad=isinstance(err, BadValue))
    schema = arrow_schema(scan.columns)
    return {
        c: pc.unique(pa.chunked_array(parts, type=schema.field(c).type))
        if parts else pa.array([], schema.field(c).type)
        for c, parts in seen.items()
    }
