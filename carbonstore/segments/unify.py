"""Reading one data file as the table's current schema: the one mapping every row reader uses.

A table's segments differ in how their files store its columns:

- segments written before an ALTER name and type the columns of their schema version
  (renamed, added later, widened): :mod:`carbonstore.store.evolution` says, by column id,
  where each current column comes from (its ``Projection``);
- segments adopted with ``add-segment`` are ordinary Parquet: a ``NOT NULL`` column of the
  table is usually a nullable field there, names may differ in case, strings may be
  ``large_string``;
- segments the store wrote carry the table's nullability in their Arrow schema.

Readers that put rows of several files together (DELETE / UPDATE / MERGE's scan, local and
Spark compaction, statistics) read each file through :func:`unify`, so every piece has
exactly the fields of :func:`storage_schema` - the same names, types and nullability - and
pieces concatenate whatever file they came from. A null actually found in a ``NOT NULL``
column is reported as a :class:`~carbonstore.errors.SchemaError` naming the file (one line),
never passed on as a value the table promises cannot exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa

from carbonstore.errors import SchemaError
from carbonstore.store.evolution import Projection, default_array
from carbonstore.store.schema import arrow_type

if TYPE_CHECKING:
    from carbonstore.store.table import Table

__all__ = ["file_columns", "storage_schema", "unify"]

Data = TypeVar("Data", pa.Table, pa.RecordBatch)


def storage_schema(table: Table, names: Sequence[str] | None = None) -> pa.Schema:
    """The Arrow schema rows are held in before dictionary decoding: the table's current
    names, types (dictionary columns: INT32 surrogates) and nullability; ``names`` (current
    names) selects and orders the fields."""
    dictionary = set(table.schema.dictionary_columns)
    by_name = {c.name: c for c in table.schema.columns}
    out = []
    for name in names if names is not None else list(by_name):
        c = by_name[name]
        t = pa.int32() if c.name in dictionary else arrow_type(c.type)
        out.append(pa.field(c.name, t, nullable=c.nullable))
    return pa.schema(out)


def _physical(name: str, proj: Projection | None) -> str | None:
    """The name column ``name`` has in the files (None: added after they were written)."""
    if proj is None:
        return name
    for s in proj:
        if s.name == name:
            return s.physical
    return name


def file_columns(file_schema: pa.Schema, names: Sequence[str], proj: Projection | None) -> list[str]:
    """The file's own column names to read for the current columns ``names`` (columns added
    after the file was written are not read; names match regardless of case)."""
    by_lower = {n.lower(): n for n in file_schema.names}
    out: list[str] = []
    for name in names:
        phys = _physical(name, proj)
        if phys is None:
            continue
        found = by_lower.get(phys.lower())
        if found is not None and found not in out:
            out.append(found)
    return out


def unify(data: Data, target: pa.Schema, proj: Projection | None = None, *,
          source: str = "") -> Data:
    """``data`` (columns read from one data file, under the file's names) as ``target``.

    Each target field is found by column id through ``proj`` (renamed columns), or by name
    regardless of case; a column the file does not have takes the column's default (null
    without one) when ``proj`` says it was added later. Values are cast to the target type
    (widened columns, ``large_string`` and alike) and the result has exactly ``target``'s
    fields, nullability included.

    Raises:
        SchemaError: a ``NOT NULL`` column of ``target`` holds nulls in this file, or the
            file lacks one of the table's columns; ``source`` names the file.
    """
    by_lower = {n.lower(): i for i, n in enumerate(data.schema.names)}
    sources = {s.name: s for s in proj} if proj is not None else {}
    n = data.num_rows
    arrays = []
    for f in target:
        s = sources.get(f.name)
        phys = f.name if s is None else s.physical
        i = by_lower.get(phys.lower()) if phys is not None else None
        if i is None:
            if s is None:
                raise SchemaError(f"{source or 'a data file'}: has no column {f.name}, which "
                                  "the table has; the file does not belong to the table")
            arrays.append(default_array(s.column, n, f.type))
            continue
        arr = data.column(i)
        if arr.type != f.type:
            arr = arr.cast(f.type)
        if not f.nullable and arr.null_count:
            raise SchemaError(
                f"{source or 'a data file'}: NOT NULL column {f.name} holds {arr.null_count} "
                "null value(s); the file does not match the table (was it replaced?)")
        arrays.append(arr)
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(arrays, schema=target)
    return pa.Table.from_arrays(arrays, schema=target)
