"""The exception hierarchy: one root, domain subclasses.

Every message says what happened and what the user can do about it. The CLI turns a
``UserError`` subclass into one line on stderr and exit status 2; anything else is a bug.
"""

from __future__ import annotations

__all__ = [
    "QUIET_ERROR_LOGS",
    "BadRecordError",
    "CarbonStoreError",
    "CommitConflictError",
    "CompactionError",
    "ConfigError",
    "CorruptIndexError",
    "CorruptMetadataError",
    "DictionaryError",
    "ExpressionError",
    "InvalidNameError",
    "LockTimeoutError",
    "SchemaError",
    "SegmentNotFoundError",
    "TableExistsError",
    "TableNotFoundError",
    "UnsupportedParquetError",
    "UnsupportedStoreError",
    "UserError",
    "VersionNotFoundError",
]


class CarbonStoreError(Exception):
    """Root of every error this package raises on purpose."""


class UserError(CarbonStoreError):
    """A mistake in the user's input: reported as one line, never as a traceback."""


class ConfigError(UserError):
    """A configuration key or value is unknown or malformed."""


class InvalidNameError(UserError):
    """A table or database name is not allowed (bad characters, path escape, ...)."""


class SchemaError(UserError):
    """A schema string, column or table property is invalid."""


class TableNotFoundError(UserError):
    """The named table does not exist in the store."""


class TableExistsError(UserError):
    """A table of that name already exists."""


class SegmentNotFoundError(UserError):
    """A segment id names no segment, or one in the wrong status for the operation."""


class ExpressionError(UserError):
    """A filter expression cannot be parsed or bound to the table schema."""


class BadRecordError(UserError):
    """A load met bad records and BAD_RECORDS_ACTION is FAIL."""


class CompactionError(UserError):
    """A compaction request cannot be carried out (bad ids, lock held, ...)."""


class CommitConflictError(UserError):
    """A tablestatus commit lost to a conflicting change, or kept losing the race to commit."""


class UnsupportedStoreError(UserError):
    """The store's filesystem cannot do what a commit needs (a put-if-absent write)."""


class VersionNotFoundError(UserError):
    """A tablestatus version (time travel, restore) does not exist or its files are gone."""


class DictionaryError(CarbonStoreError):
    """A global dictionary file is inconsistent."""


class LockTimeoutError(CarbonStoreError):
    """A lock could not be taken within the configured timeout and retries."""


class CorruptMetadataError(CarbonStoreError):
    """A metadata file (tablestatus, schema, ...) is truncated or unreadable."""


class CorruptIndexError(CarbonStoreError):
    """A Parquet footer, page index, bloom filter or carbonindex file is corrupt."""


class UnsupportedParquetError(CarbonStoreError):
    """A Parquet file uses a feature we cannot index (encrypted footer, ...)."""


#: set (by the CLI, which reports every error in one line itself) to turn off PySpark's own
#: JSON log of a failed query's context on stderr (carbonstore/spark/session.py)
QUIET_ERROR_LOGS = "CARBONSTORE_QUIET_SPARK_ERROR_LOGS"
