"""Schema versions: ``Metadata/schema`` (the schema of create) plus one file per ALTER.

Contract (docs/schema-evolution.md):

- ``Metadata/schema`` is the table's first schema version, numbered by its ``schemaVersion``
  field (1 for every table created so far). It is never rewritten.
- Each ALTER TABLE adds ``Metadata/schema_log/<20-digit n>.json``, written once with
  put-if-absent: the full schema with ``schemaVersion`` n, plus ``appliesFrom``, the
  tablestatus version (operation ``ALTER``) the ALTER committed first. Two ALTERs that race
  for n: one wins the put, the other re-reads and re-applies its change to the winner's
  schema (its own tablestatus version stays behind, changing nothing: history lists an
  ALTER version that no schema file names as not applied - store/table.py).
- The current schema is the largest n. The schema of a table pinned at tablestatus version V
  (time travel) is the largest n whose ``appliesFrom`` <= V.
- Every segment entry records the schema version its files were written with
  (``schemaVersion`` in the entry; entries without it were written with the first version).
  Readers map the read schema's column ids to that version's names (store/evolution.py).
- Each version file is signed like ``Metadata/schema`` (first key ``checksum``,
  store/checksums.py) and names its table (``tableId``): a version whose checksum fails,
  that holds a key no writer writes, that says another version number than its name or
  another table id than ``Metadata/schema`` is ``CorruptMetadataError`` naming it, and so
  is a version missing below one that exists (versions are written in order, each once).
  Files written before checksums read as before (unknown keys still refused).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import orjson

from carbonstore.errors import CorruptMetadataError, SchemaError
from carbonstore.store.checksums import checked_object, with_checksum
from carbonstore.store.fs import StoreFS
from carbonstore.store.paths import TablePaths
from carbonstore.store.records import Frozen
from carbonstore.store.schema import SCHEMA_KEYS, TableSchema

__all__ = [
    "SCHEMA_LOG_DIR",
    "SchemaVersion",
    "check_log_owner",
    "forget_decoded",
    "read_schema_log",
    "schema_as_of",
    "schema_of_version",
    "schema_version_of_entry",
    "write_schema_version",
]

SCHEMA_LOG_DIR = "schema_log"
ENTRY_KEY = "schemaVersion"  # the key in a segment's tablestatus entry
_LOG_KEYS = SCHEMA_KEYS | {"appliesFrom", "operation"}


class SchemaVersion(Frozen, kw_only=True):
    """One schema version and the tablestatus version it applies from."""

    version: int
    applies_from: int
    schema: TableSchema
    operation: str = "CREATE"


_cache: dict[str, SchemaVersion] = {}  # path -> decoded file (files are immutable)
_lock = threading.Lock()


def forget_decoded() -> None:
    """Drop the decoded versions this process holds (tests that damage files on disk)."""
    with _lock:
        _cache.clear()


def _log_dir(paths: TablePaths) -> str:
    return f"{paths.metadata}/{SCHEMA_LOG_DIR}"


def _file_name(version: int) -> str:
    return f"{version:020d}.json"


def _decode(sfs: StoreFS, path: str, version: int) -> SchemaVersion:
    with _lock:
        hit = _cache.get(path)
    if hit is not None:
        return hit
    data = sfs.read_bytes(path)
    try:
        obj, _ = checked_object(data, _LOG_KEYS)
        applies, operation = obj.pop("appliesFrom"), obj.pop("operation", "ALTER")
        if type(applies) is not int or applies < 0:
            raise ValueError(f"appliesFrom is {applies!r}, not a tablestatus version")
        if not isinstance(operation, str):
            raise ValueError(f"operation is {operation!r}, not text")
        schema = TableSchema.from_json(obj)
    except (KeyError, TypeError, ValueError, SchemaError) as err:
        raise CorruptMetadataError(f"schema file {path} is unreadable: {err}") from err
    if schema.schema_version != version:
        raise CorruptMetadataError(
            f"schema file {path} holds schema version {schema.schema_version}, not {version}"
        )
    item = SchemaVersion(version=version, applies_from=applies, schema=schema,
                         operation=operation)
    with _lock:
        if len(_cache) > 4096:
            _cache.clear()
        _cache[path] = item
    return item


def read_schema_log(sfs: StoreFS, paths: TablePaths, base: TableSchema) -> list[SchemaVersion]:
    """Every schema version of the table, oldest first (``base``: ``Metadata/schema``)."""
    out = [SchemaVersion(version=base.schema_version, applies_from=0, schema=base)]
    folder = _log_dir(paths)
    listed = {int(stem) for i in sfs.list_dir(folder)
              if i.is_file and (stem := i.base_name.removesuffix(".json")).isdigit()
              and i.base_name.endswith(".json")}  # a foreign or stray file is no version
    listed = {v for v in listed if v > base.schema_version}
    # Versions are numbered densely (an ALTER writes the newest + 1). A listing of an object
    # store may lag a finished write: a number it skips or the ones after its newest are
    # read by name (one GET each, a miss ends the probe).
    top = max(listed, default=base.schema_version)
    version = base.schema_version + 1
    while True:
        path = f"{folder}/{_file_name(version)}"
        try:
            item = _decode(sfs, path, version)
        except FileNotFoundError as err:  # not there: the end, or a lost version
            if version > top:
                return out
            # versions are written in order, each once: a gap below a listed one is a lost
            # file (time travel into its range would use the schema before it)
            raise CorruptMetadataError(
                f"schema file {path} is missing while version {top} exists; restore it "
                "from a backup") from err
        else:
            if item.schema.table_id != base.table_id:  # another table's file in its place
                raise CorruptMetadataError(
                    f"schema file {path} belongs to table id {item.schema.table_id!r}, "
                    f"{paths.relative(paths.schema)} to {base.table_id!r}; restore the files "
                    "of this table from a backup")
            out.append(item)
        version += 1


def check_log_owner(sfs: StoreFS, paths: TablePaths, schema: TableSchema) -> None:
    """For a table that reads as dropped: its tablestatus log folder is named by the table
    id (docs/tablestatus.md), so a schema naming an id without a log while the table folder
    holds another table id's log is another table's schema file in its place, not a drop.

    Raises:
        CorruptMetadataError: naming ``Metadata/schema``.
    """
    if not schema.table_id or sfs.is_dir(f"{paths.tablestatus_log}/{schema.table_id}"):
        return
    others = [i.base_name for i in sfs.list_dir(paths.tablestatus_log) if not i.is_file]
    if others:
        raise CorruptMetadataError(
            f"schema file {paths.schema} belongs to table id {schema.table_id!r}, the "
            f"table's tablestatus log to {others[0]!r}; restore the table's schema from a backup")


def schema_of_version(
    sfs: StoreFS, paths: TablePaths, version: int, base: Callable[[], TableSchema]
) -> TableSchema | None:
    """Schema version ``version`` without listing the log (files are immutable and cached
    once decoded); ``base`` reads ``Metadata/schema``. None when there is no such version."""
    if version > 1:
        path = f"{_log_dir(paths)}/{_file_name(version)}"
        try:
            return _decode(sfs, path, version).schema
        except OSError:  # not there (FileNotFoundError locally): maybe the first version
            pass
    first = base()
    return first if first.schema_version == version else None


def schema_as_of(log: list[SchemaVersion], tablestatus_version: int | None) -> TableSchema:
    """The schema in force at a tablestatus version (None: the newest)."""
    if tablestatus_version is None:
        return log[-1].schema
    best = log[0]
    for item in log:
        if item.applies_from <= tablestatus_version:
            best = item
    return best.schema


def schema_version_of_entry(extra: dict[str, object], base_version: int) -> int:
    """The schema version a segment's files were written with (from its entry's extra keys)."""
    value = extra.get(ENTRY_KEY)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return base_version


def write_schema_version(
    sfs: StoreFS, paths: TablePaths, schema: TableSchema, *, applies_from: int, operation: str
) -> bool:
    """Write schema version ``schema.schema_version`` once; False when that number is taken."""
    folder = _log_dir(paths)
    sfs.makedirs(folder)
    obj = schema.to_json()
    obj["appliesFrom"] = applies_from
    obj["operation"] = operation
    data = with_checksum(orjson.dumps(obj, option=orjson.OPT_INDENT_2))
    return sfs.put_if_absent(f"{folder}/{_file_name(schema.schema_version)}", data)
