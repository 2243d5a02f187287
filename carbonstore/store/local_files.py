"""The local disk as pyarrow.fs describes it, without pyarrow: a path's ``FileType`` and
``FileInfo`` from ``os.stat`` / ``os.scandir``.

The store's file layer (fs.py) answers a local store's metadata reads (does a path exist,
what is in a folder, a file's bytes) with these, so a command that only reads JSON metadata
imports no pyarrow; pyarrow.fs's own ``FileInfo`` objects (other filesystems) have the same
attributes, and its ``FileType`` members compare equal to these.
"""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from enum import IntEnum
from typing import Protocol

__all__ = ["FileInfo", "FileType", "LocalFileInfo", "list_local", "stat_local"]


class FileType(IntEnum):
    """The kinds of path a listing or ``file_info`` tells apart: pyarrow.fs's ``FileType``
    values (a pyarrow ``FileInfo.type`` compares equal to these), named here so the rest of
    the product needs no pyarrow.fs."""

    NotFound = 0
    Unknown = 1
    File = 2
    Directory = 3


class FileInfo(Protocol):
    """What a listing or ``file_info`` returns: pyarrow.fs's ``FileInfo``, or, on the local
    disk, a ``LocalFileInfo`` with the same attributes."""

    @property
    def path(self) -> str: ...
    @property
    def type(self) -> int: ...
    @property
    def size(self) -> int | None: ...
    @property
    def mtime(self) -> datetime | None: ...
    @property
    def mtime_ns(self) -> int | None: ...
    @property
    def base_name(self) -> str: ...
    @property
    def is_file(self) -> bool: ...


class LocalFileInfo:
    """One path of the local disk as pyarrow.fs would describe it (its ``FileInfo``
    attributes), from one ``os.stat``."""

    __slots__ = ("mtime_ns", "path", "size", "type")

    def __init__(self, path: str, st: os.stat_result | None) -> None:
        self.path = path
        if st is None:
            self.type, self.size, self.mtime_ns = FileType.NotFound, None, None
            return
        mode = st.st_mode
        self.type = (FileType.Directory if stat.S_ISDIR(mode)
                     else FileType.File if stat.S_ISREG(mode) else FileType.Unknown)
        self.size = st.st_size if self.type == FileType.File else None
        self.mtime_ns = st.st_mtime_ns

    @property
    def base_name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def extension(self) -> str:
        base = self.base_name
        return base.rsplit(".", 1)[1] if "." in base else ""

    @property
    def is_file(self) -> bool:
        return self.type == FileType.File

    @property
    def mtime(self) -> datetime | None:
        if self.mtime_ns is None:
            return None
        return datetime.fromtimestamp(self.mtime_ns / 1e9, tz=UTC)

    def __repr__(self) -> str:
        return f"<LocalFileInfo for {self.path!r}: type={self.type!s}>"


def stat_local(path: str) -> os.stat_result | None:
    """``os.stat`` of a local path, None when nothing is there (as pyarrow.fs says
    NotFound: also a path below a file); other errors (permissions) are raised."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def list_local(path: str) -> list[FileInfo]:
    """The entries of the local folder ``path`` (none when it is not there, or goes while
    listed); a file is NotADirectoryError, as pyarrow.fs says."""
    out: list[FileInfo] = []
    try:
        with os.scandir(path) as it:
            for entry in it:
                try:
                    st = entry.stat()
                except FileNotFoundError:  # removed meanwhile (or a dangling link)
                    continue
                out.append(LocalFileInfo(f"{path.rstrip('/')}/{entry.name}", st))
    except FileNotFoundError:
        return []
    return out
