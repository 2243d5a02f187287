"""``Table.append``: write rows as one new segment through the load writer, one commit,
without a JVM.

The rows go the way a ``carbonstore load`` writes them (segments/writer.py and
segments/partition_writer.py): the table's sort columns (``sort_scope`` other than
``no_sort``: the rows are sorted by them, nulls first, as Spark's ``sortWithinPartitions``),
its index and blooms, dictionary columns encoded (the new values committed first, as a load
does), partition folders and bucket files, statistics. The segment is begun ``In Progress``
with a renewed lease and committed by ``LoadTransaction.commit`` (one tablestatus version,
then the automatic compaction when ``carbon.enable.auto.load.merge`` asks); a failure aborts
it (its entry ``Failure``, its folder removed): nothing half-written is ever read.

Accepted data: a pyarrow ``Table``, ``RecordBatch`` or ``RecordBatchReader``, a pandas
``DataFrame``, or any object exporting an Arrow C stream (``__arrow_c_stream__``: polars,
DuckDB relations, nanoarrow ...). Columns are matched by name regardless of case; a
nullable column the data lacks is null; values are cast to the table's types.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from carbonstore.dictionary import distinct_values, prepare_dictionaries
from carbonstore.errors import UserError
from carbonstore.segments.commit import LoadTransaction
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import write_task
from carbonstore.store.table import Table

__all__ = ["AppendResult", "append_rows", "as_arrow"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendResult:
    """What one ``append`` committed."""

    segment: str | None  # the new segment (None: no rows, nothing committed)
    rows: int  # rows written
    bad_records: int = 0  # rows a bad-record action other than FAIL left out

    def to_json(self) -> dict[str, Any]:
        return {"operation": "APPEND", "segment": self.segment, "rows": self.rows,
                "badRecords": self.bad_records}


def as_arrow(data: Any) -> pa.Table | pa.RecordBatchReader:
    """``data`` as a pyarrow Table or a stream of batches (see the module's list)."""
    if isinstance(data, (pa.Table, pa.RecordBatchReader)):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if type(data).__module__.partition(".")[0] == "pandas":
        return pa.Table.from_pandas(data, preserve_index=False)
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data)
    raise UserError(
        f"append: cannot read rows from a {type(data).__name__}; give a pyarrow Table or "
        "RecordBatchReader, a pandas DataFrame, or an object with __arrow_c_stream__")


def append_rows(table: Table, data: Any, *, options: Mapping[str, str] | None = None) -> AppendResult:
    """Append ``data`` to ``table`` as one new segment (module docstring).

    ``options``: load options (``bad_records_action``, ``sort_scope``, ``sort_columns``,
    ``overwrite_partitions`` ...; docs/load.md).

    Raises:
        UserError: the data does not fit the table (unknown column, a value that does not
            cast), or a bad row under ``BAD_RECORDS_ACTION=FAIL`` (nothing is committed).
    """
    if table.pinned_version is not None:
        raise UserError(f"append: table {table.name} is opened as of version "
                        f"{table.pinned_version}, which is read-only; open it again")
    source = as_arrow(data)
    _check_columns(table, source.schema)
    opts = parse_load_options(table, options)
    dict_cols = list(table.schema.dictionary_columns)
    sorting = opts.sort_scope != "no_sort" and bool(opts.sort_columns)
    if isinstance(source, pa.RecordBatchReader) and (dict_cols or sorting):
        source = source.read_all()  # two passes (dictionary values) or one sort: in memory
    if isinstance(source, pa.Table):
        if not source.num_rows:
            return AppendResult(segment=None, rows=0)
        if sorting:
            source = _sorted(source, opts.sort_columns)
    txn = LoadTransaction.begin(table)
    try:
        sid = txn.segment_id
        settings = write_settings(table, sid, opts)
        table.store.sfs.makedirs(settings.segment_dir)
        if dict_cols:
            assert isinstance(source, pa.Table)
            prepare_dictionaries(table, distinct_values(_batches(source, dict_cols), dict_cols),
                                 sid)
        try:
            result = write_task(_batches(source), settings, task_id="00000",
                                fs=table.store.sfs)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
            raise UserError(f"append to {table.name}: the data does not fit the table: "
                            f"{str(err).splitlines()[0]}; nothing was written") from None
        if not result.rows and not result.bad_records:
            txn.abort("no rows to append")
            return AppendResult(segment=None, rows=0)
        entry = txn.commit([result], settings)
    except BaseException as err:
        txn.abort(str(err)[:500] or type(err).__name__)
        raise
    finally:
        txn.release()
    return AppendResult(segment=entry.load_name, rows=result.rows,
                        bad_records=result.bad_records)


def _check_columns(table: Table, schema: pa.Schema) -> None:
    names = set(table.schema.column_names)
    extra = [n for n in schema.names if n.lower() not in names]
    if extra:
        raise UserError(f"append to {table.name}: the data has column(s) {', '.join(extra)} "
                        f"the table does not; the table has {', '.join(table.schema.column_names)}")
    lower = [n.lower() for n in schema.names]
    twice = sorted({n for n in lower if lower.count(n) > 1})
    if twice:
        raise UserError(f"append to {table.name}: the data names column(s) {', '.join(twice)} "
                        "more than once (names are case-insensitive)")


def _sorted(data: pa.Table, columns: Iterable[str]) -> pa.Table:
    """``data`` sorted by the table's sort columns, ascending, nulls first (Spark's order)."""
    by_lower = {n.lower(): n for n in data.schema.names}
    keys = [(by_lower[c], "ascending", "at_start") for c in columns if c in by_lower]
    return data.sort_by(keys) if keys else data


def _batches(source: pa.Table | pa.RecordBatchReader,
             columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    if isinstance(source, pa.RecordBatchReader):
        yield from source
        return
    if columns is not None:  # the dictionary columns' values, by the data's own names
        by_lower = {n.lower(): n for n in source.schema.names}
        picked = source.select([by_lower[c] for c in columns if c in by_lower])
        picked = picked.rename_columns([n.lower() for n in picked.schema.names])
        yield from picked.to_batches()
        return
    yield from source.to_batches(max_chunksize=1 << 16)
