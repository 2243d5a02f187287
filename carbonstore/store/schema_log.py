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
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from carbonstore.errors import CorruptMetadataError
from carbonstore.store.fs import StoreFS
from carbonstore.store.paths import TablePaths
from carbonstore.store.schema import TableSchema

__all__ = [
    "SCHEMA_LOG_DIR",
    "SchemaVersion",
    "read_schema_log",
    "schema_as_of",
    "schema_of_version",
    "schema_version_of_entry",
    "write_schema_version",
]

SCHEMA_LOG_DIR = "schema_log"
ENTRY_KEY = "schemaVersion"  # the key in a segment's tablestatus entry


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaVersion:
    """One schema version and the tablestatus version it applies from."""

    version: int
    applies_from: int
    schema: TableSchema
    operation: str = "CREATE"


_cache: dict[str, SchemaVersion] = {}  # path -> decoded file (files are immutable)
_lock = threading.Lock()


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
        obj = orjson.loads(data)
        applies = int(obj["appliesFrom"])
        operation = str(obj.get("operation", "ALTER"))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise CorruptMetadataError(f"schema file {path} is unreadable: {err}") from err
    schema = TableSchema.from_bytes(data, path=path)
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
        try:
            out.append(_decode(sfs, f"{folder}/{_file_name(version)}", version))
        except FileNotFoundError:  # not there
            if version > top:
                return out
        version += 1


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
    data = orjson.dumps(obj, option=orjson.OPT_INDENT_2)
    return sfs.put_if_absent(f"{folder}/{_file_name(schema.schema_version)}", data)
