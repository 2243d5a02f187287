"""Reading segments written with an older schema version: columns are matched by column id.

A segment's files hold the columns of the schema version it was written with (its entry's
``schemaVersion``, store/schema_log.py), under the names of that version. A reader with
another schema (the current one, or the one a time-travel read pins) gets, for each of its
columns, a :class:`ColumnSource`:

- the column id exists in the segment's schema: read the segment's (physical) name, rename
  to the read name, cast to the read type when it was widened (int->long, float->double,
  decimal(p,s)->decimal(p',s)); values are kept exactly;
- it does not (added later): a column of the column's default (null when it has none);
- columns of the segment that the read schema lacks (dropped) are not read at all.

``projection`` returns None when nothing differs, so reads of unaltered tables pay nothing.
Dictionary columns keep their INT32 surrogates here; the dictionary decoder (keyed by
column id) runs after the projection, then the caller conforms to the read types.

The projections are plain Python over the schemas; pyarrow is imported by the functions that
build Arrow values (defaults, projected batches), not with the module: the metadata
commands and a plan import this module and need no Arrow (docs/cli.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from carbonstore.errors import CorruptMetadataError
from carbonstore.store.records import Frozen
from carbonstore.store.schema import Column, TableSchema, arrow_type
from carbonstore.store.schema_log import schema_of_version, schema_version_of_entry

if TYPE_CHECKING:
    import pyarrow as pa

    from carbonstore.store.entries import LoadEntry
    from carbonstore.store.table import Table

__all__ = [
    "ColumnSource",
    "Projection",
    "default_array",
    "project_batch",
    "project_table",
    "projection",
    "segment_projections",
    "storage_types",
    "index_column_ids",
    "struct_field_column",
    "struct_leaf_ids",
    "written_schema",
]


class ColumnSource(Frozen):
    """Where a read column comes from in one segment's files."""

    name: str  # the read schema's name
    physical: str | None  # the name in the segment's files; None: not there (added later)
    column: Column  # the read schema's column (type, default)
    widened: bool = False  # the segment stores a narrower type
    written: Column | None = None  # the segment's column (its stored type)


Projection = tuple[ColumnSource, ...]


def projection(read: TableSchema, written: TableSchema) -> Projection | None:
    """How to read ``written``-version files as ``read``; None when they match exactly."""
    by_id = {c.column_id: c for c in written.columns}
    out: list[ColumnSource] = []
    same = len(read.columns) == len(written.columns)
    for c in read.columns:
        w = by_id.get(c.column_id)
        if w is None:
            out.append(ColumnSource(c.name, None, c))
            same = False
            continue
        widened = w.type != c.type
        if w.name != c.name or widened:
            same = False
        out.append(ColumnSource(c.name, w.name, c, widened, w))
    if same and [c.column_id for c in read.columns] == [c.column_id for c in written.columns]:
        return None
    return tuple(out)


def physical_names(proj: Projection) -> list[str]:
    """The columns to read from the files."""
    return [s.physical for s in proj if s.physical is not None]


def default_array(column: Column, n: int, arrow_type: pa.DataType) -> pa.Array:
    """``n`` copies of the column's default (nulls when it has none) as ``arrow_type``."""
    import pyarrow as pa  # noqa: F811 - the Arrow side only (see the module doc)

    default = column_default(column)
    if default is None:
        return pa.nulls(n, arrow_type)
    return pa.repeat(default.cast(arrow_type), n)


def column_default(column: Column) -> Any:
    """The default value of ``column`` as an Arrow scalar of its type, or None."""
    text = column.default
    if text is None:
        return None
    return parse_default(text, arrow_type(column.type))


def parse_default(text: str, arrow_type: pa.DataType) -> pa.Scalar:
    """A default value given as SQL literal text, as a scalar of ``arrow_type``.

    Raises:
        ValueError: the text is not a value of the type.
    """
    import pyarrow as pa  # noqa: F811 - the Arrow side only (see the module doc)

    raw = text.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        raw = raw[1:-1]
    try:
        if pa.types.is_timestamp(arrow_type):
            return pa.scalar(raw).cast(pa.timestamp("us")).cast(arrow_type) if "+" not in raw \
                and not raw.endswith("Z") else pa.scalar(raw).cast(arrow_type)
        if pa.types.is_boolean(arrow_type):
            low = raw.lower()
            if low not in ("true", "false"):
                raise ValueError(f"{text!r} is not true or false")
            return pa.scalar(low == "true")
        if pa.types.is_binary(arrow_type):
            return pa.scalar(raw.encode(), pa.binary())
        return pa.scalar(raw).cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
        raise ValueError(f"{text!r} is not a {arrow_type} value: {err}") from err


def project_batch(
    batch: pa.RecordBatch | pa.Table, proj: Projection, storage_types: dict[str, pa.DataType]
) -> pa.RecordBatch:
    """``batch`` (a segment's columns) as the read schema's columns, in its order.

    ``storage_types``: read name -> the Arrow type of a column added later (what its
    default is built as; for dictionary columns, the caller decodes after this).
    """
    import pyarrow as pa  # noqa: F811 - the Arrow side only (see the module doc)

    n = batch.num_rows
    arrays: list[pa.Array] = []
    names: list[str] = []
    for s in proj:
        if s.physical is None:
            arrays.append(default_array(s.column, n, storage_types[s.name]))
        else:
            col = batch.column(batch.schema.get_field_index(s.physical))
            arrays.append(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
        names.append(s.name)
    return pa.RecordBatch.from_arrays(arrays, names=names)


def project_table(
    table: pa.Table, proj: Projection, storage_types: dict[str, pa.DataType],
    *, cast: bool = True,
) -> pa.Table:
    """:func:`project_batch` over a table; ``cast`` conforms to ``storage_types`` too."""
    import pyarrow as pa  # noqa: F811 - the Arrow side only (see the module doc)

    cols: list[Any] = []
    names: list[str] = []
    for s in proj:
        want = storage_types[s.name]
        if s.physical is None:
            cols.append(default_array(s.column, table.num_rows, want))
        else:
            col = table.column(s.physical)
            cols.append(col.cast(want) if cast and col.type != want else col)
        names.append(s.name)
    return pa.Table.from_arrays(cols, names=names)


def group_by_version(items: Sequence[tuple[Any, int]]) -> dict[int, list[Any]]:
    """Items grouped by schema version, first-seen order kept within each group."""
    out: dict[int, list[Any]] = {}
    for item, version in items:
        out.setdefault(version, []).append(item)
    return out


def struct_leaf_ids(name: str, column_id: str, t: Any) -> dict[str, str]:
    """``{"s.a": "<id>/a", "s.t.x": "<id>/t/x"}`` for the struct fields of a column."""
    out: dict[str, str] = {}
    for field_name, ft in t.fields:
        path, cid = f"{name}.{field_name}", f"{column_id}/{field_name}"
        if ft.name == "struct":
            out.update(struct_leaf_ids(path, cid, ft))
        elif not ft.is_nested:
            out[path] = cid
    return out


def struct_field_column(column: Column, path: Sequence[str]) -> Column | None:
    """The pseudo column of a struct field path (``s.a``): its type, id ``<id>/a``; None
    when the path does not reach a primitive field through structs."""
    t = column.type
    for part in path:
        if t.name != "struct":
            return None
        found = [ft for n, ft in t.fields if n == part.lower()]
        if not found:
            return None
        t = found[0]
    if t.is_nested:
        return None
    return Column(name=".".join([column.name, *(p.lower() for p in path)]), type=t,
                  nullable=True, column_id="/".join([column.column_id, *(p.lower() for p in path)]))


def segment_projections(table: Table, entries: Sequence[LoadEntry]) -> dict[str, Projection]:
    """Segment id -> how to read it as ``table.schema``, for segments written with another
    schema version (segments absent from the result read as they are)."""
    read = table.schema
    out: dict[str, Projection] = {}
    cache: dict[int, Projection | None] = {}
    for e in entries:
        sid = e.load_name
        raw = e.extra.get("schemaVersion")
        if raw == read.schema_version or (raw is None and read.schema_version <= 1):
            continue  # the common cases (never altered: version 1): no schema read at all
        v = schema_version_of_entry(e.extra, 1)
        if v == read.schema_version:
            continue
        if v not in cache:
            cache[v] = projection(read, written_schema(table, e))
        proj = cache[v]
        if proj is not None:
            out[sid] = proj
    return out


def storage_types(table: Table) -> dict[str, pa.DataType]:
    """Read name -> the Arrow type the read path holds before decoding (dictionary
    columns: INT32 surrogates)."""
    import pyarrow as pa  # noqa: F811 - the Arrow side only (see the module doc)

    dictionary = set(table.schema.dictionary_columns)
    return {c.name: pa.int32() if c.name in dictionary else arrow_type(c.type)
            for c in table.schema.columns}


def written_schema(table: Table, entry: LoadEntry) -> TableSchema:
    """The schema version a segment's files were written with (rebuilding its index labels
    the columns with that version's ids, not the current ones)."""
    raw = entry.extra.get("schemaVersion")
    if raw == table.schema.schema_version or (raw is None and table.schema.schema_version <= 1):
        return table.schema
    v = schema_version_of_entry(entry.extra, 1)

    def base() -> TableSchema:
        path = table.paths.schema
        return TableSchema.from_bytes(table.store.sfs.read_bytes(path), path=path)

    found = schema_of_version(table.store.sfs, table.paths, v, base)
    if found is not None:
        return found
    raise CorruptMetadataError(
        f"segment {entry.load_name} of {table.name} was written with schema version {v}, "
        "which the table's Metadata/schema_log does not hold"
    )


def index_column_ids(schema: TableSchema) -> dict[str, str]:
    """Index leaf name -> column id for files written with ``schema`` (struct fields too)."""
    out: dict[str, str] = {}
    for c in schema.columns:
        out[c.name] = c.column_id
        if c.type.name == "struct":
            out.update(struct_leaf_ids(c.name, c.column_id, c.type))
    return out
