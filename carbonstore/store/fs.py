"""Filesystem access through pyarrow.fs, with an atomic replace for metadata files.

Local stores use the operating system directly for ``write_atomic`` (temp file, fsync,
rename, fsync of the folder) because pyarrow.fs exposes no fsync. Other filesystems get
write-to-temp then move, which is atomic where the filesystem's rename is (HDFS) and a
copy elsewhere (object stores); docs/layout.md says so.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import pyarrow.fs as pafs

__all__ = ["StoreFS", "resolve_fs"]


@dataclass(frozen=True, slots=True)
class StoreFS:
    """A pyarrow filesystem plus the base path of the store on it."""

    fs: pafs.FileSystem
    base: str
    local: bool

    def join(self, *parts: str) -> str:
        return "/".join([self.base.rstrip("/"), *parts])

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        return self.fs.get_file_info(path).type == pafs.FileType.Directory

    def size(self, path: str) -> int:
        info = self.fs.get_file_info(path)
        return int(info.size or 0)

    def makedirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    def read_bytes(self, path: str) -> bytes:
        with self.fs.open_input_file(path) as f:
            return bytes(f.read())

    def write_bytes(self, path: str, data: bytes) -> None:
        with self.fs.open_output_stream(path) as f:
            f.write(data)

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace ``path`` with ``data`` so readers see the old or the new file, never half."""
        parent = path.rsplit("/", 1)[0]
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        if self.local:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            dfd = os.open(parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        else:
            self.write_bytes(tmp, data)
            self.fs.move(tmp, path)

    def list_dir(self, path: str) -> list[pafs.FileInfo]:
        if not self.exists(path):
            return []
        return self.fs.get_file_info(pafs.FileSelector(path, recursive=False))

    def tree_size(self, path: str) -> int:
        if not self.exists(path):
            return 0
        infos = self.fs.get_file_info(pafs.FileSelector(path, recursive=True))
        return sum(int(i.size or 0) for i in infos if i.type == pafs.FileType.File)

    def delete_dir(self, path: str) -> None:
        if self.exists(path):
            self.fs.delete_dir(path)

    def delete_file(self, path: str) -> None:
        if self.exists(path):
            self.fs.delete_file(path)

    def move(self, src: str, dst: str) -> None:
        self.fs.move(src, dst)


def resolve_fs(location: str) -> StoreFS:
    """Turn a local path or URI into a ``StoreFS``; local paths are made absolute."""
    if "://" in location:
        fs, path = pafs.FileSystem.from_uri(location)
        local = isinstance(fs, pafs.LocalFileSystem)
        return StoreFS(fs, path.rstrip("/") or "/", local)
    path = os.path.abspath(os.path.expanduser(location))
    return StoreFS(pafs.LocalFileSystem(), path, True)
