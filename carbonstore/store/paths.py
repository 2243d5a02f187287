"""Table names and the on-disk layout of one table (DESIGN.md section 2)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from carbonstore.errors import InvalidNameError, UserError
from carbonstore.limits import MAX_LOCATION_LENGTH

if TYPE_CHECKING:
    from carbonstore.store.fs import StoreFS

__all__ = [
    "DEFAULT_DB", "LOCATION_SCHEMES", "TableName", "TablePaths", "check_location",
    "parse_table_name", "segment_dir_name",
]

DEFAULT_DB = "default"
_PART_RE = re.compile(r"[A-Za-z0-9_]{1,128}", re.ASCII)
_SEGMENT_RE = re.compile(r"\d+(\.\d+)?", re.ASCII)


@dataclass(frozen=True, slots=True)
class TableName:
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


#: URI schemes a store location or input path may use (a local path needs none).
LOCATION_SCHEMES = ("file", "s3", "hdfs", "viewfs")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_location(location: object, what: str = "location") -> str:
    """``location`` when it is a usable store location or input path: text of at most
    :data:`MAX_LOCATION_LENGTH` characters without control characters; a URI has a scheme
    of :data:`LOCATION_SCHEMES`, no ``..`` or ``.`` path segment (object keys and URIs
    resolve none; a local path may have them) and no fragment.

    Raises:
        UserError: one line naming the location and what to change.
    """
    if not isinstance(location, str) or not location.strip():
        raise UserError(f"{what} is empty; give a local path or a URI such as s3://bucket/prefix")
    shown = repr(location if len(location) <= 120 else location[:117] + "...")
    if len(location) > MAX_LOCATION_LENGTH:
        raise UserError(f"{what} {shown} is {len(location):,} characters long: at most "
                        f"{MAX_LOCATION_LENGTH:,} are supported")
    if (bad := _CONTROL.search(location)) is not None:
        raise UserError(f"{what} {shown} holds a control character "
                        f"(U+{ord(bad.group()):04X}); paths and URIs hold none")
    if "://" not in location:
        return location
    scheme = location.split("://", 1)[0].lower()
    if scheme not in LOCATION_SCHEMES:
        raise UserError(f"{what} {shown} is not usable: the scheme {scheme + '://'!r} is not "
                        f"supported; use a local path or one of "
                        f"{', '.join(s + '://' for s in LOCATION_SCHEMES)}")
    parts = urlsplit(location)
    if parts.fragment or location.endswith("#"):
        raise UserError(f"{what} {shown} has a fragment ('#...'); remove it")
    if any(seg in ("..", ".") for seg in parts.path.split("/")):
        raise UserError(f"{what} {shown} has a '..' or '.' path segment; a URI names its "
                        "folder directly (write the path without '..')")
    return location


def check_segment_id(segment_id: str) -> str:
    """Segment ids look like ``3`` or ``3.1``; anything else could escape the folder."""
    if not isinstance(segment_id, str) or not _SEGMENT_RE.fullmatch(segment_id):
        raise InvalidNameError(f"invalid segment id {segment_id!r}: expected e.g. 3 or 3.1")
    return segment_id


def segment_dir_name(segment_id: str) -> str:
    return f"Segment_{check_segment_id(segment_id)}"


@dataclass(frozen=True, slots=True)
class TablePaths:
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
