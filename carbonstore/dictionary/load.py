"""What a load (or any reader) calls: prepare dictionaries, encode and decode batches.

A load finds the distinct values of each dictionary column (or takes a pre-built file),
commits the new ones with ``prepare_dictionaries`` before writing any data, and hands the
returned ``DictionarySnapshot`` (picklable, so it travels to executors) to
``encode_batch`` for every batch it writes. Data files then hold INT32 surrogates and the
Parquet key-value metadata entry ``carbonstore.dictionary`` records, per dictionary column,
its column id and the dictionary size the file was written with. Plain Parquet readers see
the surrogates; ``decode_batch`` turns them back into values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from carbonstore.dictionary.codec import arrow_type
from carbonstore.dictionary.column import (
    ColumnDictionary,
    MissingDictionaryValueError,
    dictionary_column,
    load_dictionary,
)
from carbonstore.dictionary.writer import add_values, add_values_from_file
from carbonstore.errors import SchemaError, UserError
from carbonstore.store.table import StoreRoot

__all__ = [
    "METADATA_KEY",
    "PREBUILT_OPTION",
    "BatchEncoder",
    "DictionarySnapshot",
    "decode_batch",
    "decode_schema",
    "distinct_values",
    "encode_batch",
    "parse_prebuilt_option",
    "prepare_dictionaries",
    "snapshot",
    "storage_schema",
]

#: Parquet key-value metadata key of the dictionary columns of a data file.
METADATA_KEY = b"carbonstore.dictionary"
#: Load option naming pre-built dictionary files: ``city:/in/cities.txt,code:/in/codes.txt``.
PREBUILT_OPTION = "dictionary_files"


def parse_prebuilt_option(text: str | None) -> dict[str, str]:
    """``col:path,col:path`` -> {column: path} (the ``dictionary_files`` load option)."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        col, sep, path = part.partition(":")
        if not sep or not col.strip() or not path.strip():
            raise UserError(
                f"{PREBUILT_OPTION} expects column:path[,column:path...], got {part.strip()!r}"
            )
        out[col.strip().lower()] = path.strip()
    return out


@dataclass(frozen=True, slots=True)
class DictionarySnapshot:
    """The dictionaries of a table's dictionary columns as committed for one load."""

    columns: Mapping[str, ColumnDictionary]

    def metadata(self) -> dict[bytes, bytes]:
        """The Parquet key-value metadata entry recording column ids and sizes."""
        doc = {
            name: {"columnId": d.column.column_id, "size": d.size}
            for name, d in sorted(self.columns.items())
        }
        return {METADATA_KEY: orjson.dumps(doc)}


def snapshot(table: Any) -> DictionarySnapshot:
    """The current committed dictionaries of every dictionary column (no writes)."""
    return DictionarySnapshot(
        {name: load_dictionary(table, name) for name in table.schema.dictionary_columns}
    )


def distinct_values(
    batches: Iterable[pa.RecordBatch], columns: Iterable[str]
) -> dict[str, pa.Array]:
    """Distinct values per column over ``batches`` (for loads without Spark)."""
    names = list(columns)
    seen: dict[str, list[pa.Array]] = {c: [] for c in names}
    for batch in batches:
        for c in names:
            seen[c].append(pc.unique(batch.column(c)))
    out = {}
    for c, parts in seen.items():
        if parts:
            # Unique per batch and again across batches keeps memory at distinct values.
            out[c] = pc.unique(pa.chunked_array(parts))
            if isinstance(out[c], pa.ChunkedArray):
                out[c] = pa.concat_arrays(out[c].chunks)
    return out


def prepare_dictionaries(
    table: Any,
    distinct_values_by_column: Mapping[str, pa.Array | pa.ChunkedArray],
    segment_id: str,
    *,
    prebuilt: Mapping[str, str] | None = None,
) -> DictionarySnapshot:
    """Commit the new values of every dictionary column; return the snapshot to encode with.

    Args:
        table: the ``Table`` being loaded.
        distinct_values_by_column: column name -> its values in the load (distinct or not).
        segment_id: the segment the load writes (recorded in .dictmeta).
        prebuilt: column name -> a pre-built dictionary file (one value per line) whose values
            are added instead of (or as well as) the distinct values.

    Columns in neither mapping get their current dictionary, so a batch holding a value
    missing from it fails to encode with ``MissingDictionaryValueError``.
    """
    dict_cols = table.schema.dictionary_columns
    given = {c.lower() for c in [*distinct_values_by_column, *(prebuilt or {})]}
    unknown = sorted(given - set(dict_cols))
    if unknown:
        raise SchemaError(
            f"{', '.join(unknown)} of {table.name} have no global dictionary "
            f"(dictionary columns: {', '.join(dict_cols) or 'none'})"
        )
    lowered = {k.lower(): v for k, v in distinct_values_by_column.items()}
    files = {k.lower(): v for k, v in (prebuilt or {}).items()}
    out: dict[str, ColumnDictionary] = {}
    for name in dict_cols:
        col = dictionary_column(table, name)
        d = None
        if name in files:
            d = add_values_from_file(table, col, files[name], segment_id=segment_id)
        if name in lowered:
            d = add_values(table, col, lowered[name], segment_id=segment_id)
        out[name] = d if d is not None else load_dictionary(table, col)
    return DictionarySnapshot(out)


def encode_batch(batch: pa.RecordBatch, snapshot: DictionarySnapshot) -> pa.RecordBatch:
    """``batch`` with every dictionary column replaced by its INT32 surrogates.

    The schema gains the ``carbonstore.dictionary`` metadata entry; Parquet writers store
    it in the file's key-value metadata.
    """
    arrays = list(batch.columns)
    fields = list(batch.schema)
    lower = {f.name.lower(): i for i, f in enumerate(fields)}
    for name, d in snapshot.columns.items():
        i = lower.get(name)
        if i is None:
            continue
        arrays[i] = d.encode(arrays[i])
        fields[i] = pa.field(fields[i].name, pa.int32(), nullable=False, metadata=fields[i].metadata)
    meta = dict(batch.schema.metadata or {})
    meta.update(snapshot.metadata())
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields, metadata=meta))


def _decode_targets(schema: pa.Schema, table: Any) -> dict[int, Any]:
    dict_cols = set(table.schema.dictionary_columns)
    out = {}
    for i, f in enumerate(schema):
        name = f.name.lower()
        if name in dict_cols and pa.types.is_integer(f.type):
            out[i] = table.schema.column(name)
    return out


def decode_schema(schema: pa.Schema, table: Any) -> pa.Schema:
    """The schema ``decode_batch`` produces for batches of ``schema``."""
    fields = list(schema)
    for i, col in _decode_targets(schema, table).items():
        fields[i] = pa.field(fields[i].name, arrow_type(col.type), nullable=col.nullable)
    meta = {k: v for k, v in (schema.metadata or {}).items() if k != METADATA_KEY}
    return pa.schema(fields, metadata=meta or None)


def decode_batch(batch: pa.RecordBatch, table: Any) -> pa.RecordBatch:
    """``batch`` with the surrogates of every dictionary column decoded to values.

    Surrogates are global and never reused, so the current dictionary decodes the files of
    every load.
    """
    targets = _decode_targets(batch.schema, table)
    if not targets:
        return batch
    arrays = list(batch.columns)
    for i, col in targets.items():
        surr = arrays[i]
        if surr.type != pa.int32():
            surr = surr.cast(pa.int32())
        # The reader re-checks .dictmeta, so values committed since the last call decode too.
        arrays[i] = load_dictionary(table, col).decode(surr)
    return pa.RecordBatch.from_arrays(arrays, schema=decode_schema(batch.schema, table))




def storage_schema(schema: pa.Schema, columns: Iterable[str]) -> pa.Schema:
    """``schema`` with the fields of ``columns`` stored as INT32 surrogates (never null)."""
    names = {c.lower() for c in columns}
    return pa.schema(
        [
            pa.field(f.name, pa.int32(), nullable=False, metadata=f.metadata)
            if f.name.lower() in names else f
            for f in schema
        ],
        metadata=schema.metadata,
    )


class BatchEncoder:
    """Executor side of a load: encodes batches with the committed dictionaries.

    A load that ran ``prepare_dictionaries`` first never misses a value. A write that did
    not (a bare ``df.write.format("carbonstore")``) adds the values it meets under the
    column's dictionary lock (``add_missing``), one .dictmeta entry per task that found new
    values, each sorted.
    """

    def __init__(self, table: Any, segment_id: str, *, add_missing: bool = True) -> None:
        self.table = table
        self.segment_id = segment_id
        self.add_missing = add_missing
        self.snapshot = snapshot(table)

    @classmethod
    def open(
        cls, store_location: str, table_name: str, segment_id: str, *, add_missing: bool = True
    ) -> BatchEncoder:
        """An encoder for a table named in executor settings (store conf from CARBON_CONF)."""
        return cls(StoreRoot(store_location).table(table_name), segment_id, add_missing=add_missing)

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.snapshot.columns)

    def storage_schema(self, schema: pa.Schema) -> pa.Schema:
        return storage_schema(schema, self.columns)

    def metadata(self) -> dict[bytes, bytes]:
        """Key-value metadata for a file closed now (sizes cover every surrogate written)."""
        return self.snapshot.metadata()

    def encode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        try:
            return encode_batch(batch, self.snapshot)
        except MissingDictionaryValueError:
            if not self.add_missing:
                raise
        lower = {n.lower(): i for i, n in enumerate(batch.schema.names)}
        cols = dict(self.snapshot.columns)
        for name in cols:
            if name in lower:
                cols[name] = add_values(
                    self.table, cols[name].column, batch.column(lower[name]),
                    segment_id=self.segment_id,
                )
        self.snapshot = DictionarySnapshot(cols)
        return encode_batch(batch, self.snapshot)
