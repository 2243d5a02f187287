"""Table names and the on-disk layout of one table (DESIGN.md section 2)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from carbonstore.errors import InvalidNameError
from carbonstore.store.records import Frozen

if TYPE_CHECKING:
    from carbonstore.store.fs import StoreFS

__all__ = [
    "DEFAULT_DB", "TableName", "TablePaths",
    "parse_table_name", "segment_dir_name",
]

DEFAULT_DB = "default"
_PART_RE = re.compile(r"[A-Za-z0-9_]{1,128}", re.ASCII)
_SEGMENT_RE = re.compile(r"\d+(\.\d+)?", re.ASCII)


class TableName(Frozen):
    database: str
    table: str

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"


def parse_table_name(name: str) -> TableName:
    """Parse ``db.table`` or ``table`` (database ``default``); refuse anything else.

    Names hold letters, digits and underscores only, so no name can escape the store
    (``../x``, ``a/b``, absolute paths, empty parts are all refused). Names are case
    insensitive and stored lower case.
    """
    if not isinstance(name, str) or not name:
        raise InvalidNameError("a table name is required, e.g. sales or mydb.sales")
    parts = name.split(".")
    if len(parts) == 1:
        parts = [DEFAULT_DB, parts[0]]
    if len(parts) != 2 or not all(_PART_RE.fullmatch(p) for p in parts):
        raise InvalidNameError(
            f"invalid table name {name!r}: use 'table' or 'db.table' where each part has "
            "only letters, digits and underscores (at most 128 characters)"
        )
    return TableName(parts[0].lower(), parts[1].lower())


def check_segment_id(segment_id: str) -> str:
    """Segment ids look like ``3`` or ``3.1``; anything else could escape the folder."""
    if not isinstance(segment_id, str) or not _SEGMENT_RE.fullmatch(segment_id):
        raise InvalidNameError(f"invalid segment id {segment_id!r}: expected e.g. 3 or 3.1")
    return segment_id


def segment_dir_name(segment_id: str) -> str:
    return f"Segment_{check_segment_id(segment_id)}"


class TablePaths(Frozen):
    """Every path of one table, as strings on ``sfs``."""

    sfs: StoreFS
    name: TableName

    @property
    def root(self) -> str:
        return self.sfs.join(self.name.database, self.name.table)

    @property
    def metadata(self) -> str:
        return f"{self.root}/Metadata"

    @property
    def schema(self) -> str:
        return f"{self.metadata}/schema"

    @property
    def tablestatus(self) -> str:
        return f"{self.metadata}/tablestatus"

    @property
    def tablestatus_log(self) -> str:
        """Folder of the tablestatus version logs, one sub-folder per table id."""
        return f"{self.metadata}/tablestatus_log"

    @property
    def tablestatus_backup(self) -> str:
        return f"{self.metadata}/tablestatus.backup"

    @property
    def tablestatus_history(self) -> str:
        return f"{self.metadata}/tablestatus.history"

    @property
    def dictionary_dir(self) -> str:
        return f"{self.metadata}/dictionary"

    @property
    def stats_dir(self) -> str:
        return f"{self.metadata}/stats"

    @property
    def index_snapshot_dir(self) -> str:
        return f"{self.metadata}/index"

    @property
    def fact_dir(self) -> str:
        return f"{self.root}/Fact/Part0"

    def segment_dir(self, segment_id: str) -> str:
        return f"{self.fact_dir}/{segment_dir_name(segment_id)}"

    @property
    def trash_dir(self) -> str:
        return f"{self.root}/.Trash"

    @property
    def lock_dir(self) -> str:
        return f"{self.root}/LockFiles"

    def relative(self, path: str) -> str:
        """``path`` relative to the table folder (for user-facing output)."""
        prefix = self.root.rstrip("/") + "/"
        return path[len(prefix):] if path.startswith(prefix) else path
