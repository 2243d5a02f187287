"""Filesystem access through pyarrow.fs: the one place that writes durably.

The durable writes (nothing else in the product opens a file for a durable write):

- ``put_if_absent(path, data)`` creates ``path`` only if nothing exists there and says
  whether this call created it. It is the commit primitive (tablestatus versions,
  committed dictionary ranges): two writers racing for one name, exactly one wins, and
  the file is whole when it appears. Local stores write a temp file, fsync it and
  ``os.link`` it to the final name (link fails if the name exists, on local disks and NFS
  alike), then fsync the folder. Other filesystems need a conditional put
  (``If-None-Match: *``), which pyarrow.fs lacks: ``StoreFS.conditional`` plugs one in
  (see ``ConditionalPut``); without it a commit on such a store is refused, never
  attempted unsafely.
- ``write_atomic(path, data)`` replaces ``path`` so readers see the old or the new file,
  never half; for files that may be rewritten (hints, derived files). Local: temp file,
  fsync, rename, fsync of the folder (pyarrow.fs exposes no fsync). Object stores
  (``s3://``): one PUT of the final name, which S3 makes visible whole or not at all (no
  temp object, no rename: S3 has none). Other filesystems: write-to-temp then move, which is
  atomic where rename is (HDFS). A write that fails removes its temp file; ``crash=NAME`` is
  the crash point (carbonstore/store/faults.py) between the written temp file and the
  rename, where a killed writer leaves a temp file and the old file (clean files removes
  what a dead writer left).
- ``append_durable(path, data)`` appends to a file on a local disk (``O_APPEND``: bytes
  of concurrent appenders never overlap) and fsyncs it, and its folder when the call
  created the file; ``truncate_durable`` and ``write_at_durable`` cut and patch such a file
  (the dictionary's ``.dict``, docs/dictionary.md). Object stores cannot append.

Object stores (carbonstore/store/objectstore.py, docs/object-stores.md) need nothing else:
no rename, no listing that must show a write that just finished.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from carbonstore.errors import UnsupportedStoreError, UserError
from carbonstore.store.faults import crash_point
from carbonstore.store.local_files import FileInfo, FileType, LocalFileInfo, list_local, stat_local
from carbonstore.store.location import check_location, shipped_location

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    from carbonstore.store.conf import CarbonConf

__all__ = [
    "AnyFS", "ConditionalPut", "FileInfo", "FileType", "LocalFileInfo", "StoreFS", "UnsupportedStoreError",
    "as_store_fs", "filesystem_of", "input_files", "local_disk", "resolve_fs",
]



_RACE_TRIES = 5  # looks at a path another process removes at the same time


class ConditionalPut(Protocol):
    """A put-if-absent write for a filesystem that pyarrow.fs cannot do it on."""

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data``; False (and nothing written) when it exists."""
        ...


def _pieces(data: Any) -> list[Any]:
    """``data``: one bytes-like object, or a list or tuple of them written one after another."""
    return list(data) if isinstance(data, (list, tuple)) else [data]


def _joined(data: Any) -> Any:
    return b"".join(data) if isinstance(data, (list, tuple)) else data


def _write_fsynced(path: str, data: Any) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        for piece in _pieces(data):
            view = memoryview(piece).cast("B")
            while view:
                view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    dfd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class StoreFS:
    """A pyarrow filesystem plus the base path of the store on it.

    On the local disk (``local``) the filesystem is made on first use (``fs``): the reads a
    metadata command makes (``exists``, ``is_dir``, ``size``, ``file_info``, ``list_dir``,
    ``read_bytes``) go to ``os`` directly, so listing tables or reading a JSON tablestatus
    imports no pyarrow (with numpy, about 0.2 s of CPU at start; docs/cli.md).
    Immutable; equal when on the same filesystem and base.
    """

    __slots__ = ("_fs", "base", "conditional", "local", "object_store")

    _fs: pafs.FileSystem | None
    base: str
    local: bool
    conditional: ConditionalPut | None
    #: A PUT is atomic and there is no rename (object stores): ``write_atomic`` writes the
    #: final name once, ``move`` copies then deletes.
    object_store: bool

    def __init__(self, fs: pafs.FileSystem | None, base: str, local: bool,
                 conditional: ConditionalPut | None = None, object_store: bool = False) -> None:
        """``fs`` None: the local disk (``local`` must be True), made on first use."""
        if fs is None and not local:
            raise ValueError("a StoreFS without a filesystem is the local disk")
        for name, value in (("_fs", fs), ("base", base), ("local", local),
                            ("conditional", conditional), ("object_store", object_store)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"StoreFS is immutable (setting {name})")

    def __reduce__(self) -> tuple[Any, ...]:
        return StoreFS, (self._fs, self.base, self.local, self.conditional, self.object_store)

    def _key(self) -> tuple[Any, ...]:
        fs = self._fs
        # a local disk made on first use equals one made at once
        plain_local = fs is None or (self.local and type(fs).__name__ == "LocalFileSystem")
        return ("local" if plain_local else fs, self.base, self.local, self.conditional,
                self.object_store)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoreFS):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.base, self.local, self.object_store))

    def __repr__(self) -> str:
        kind = "local disk" if self._fs is None else type(self._fs).__name__
        return f"StoreFS({kind}, base={self.base!r})"

    @property
    def fs(self) -> pafs.FileSystem:
        """The pyarrow filesystem (on the local disk, made here on first use)."""
        fs = self._fs
        if fs is None:
            import pyarrow.fs as pafs  # noqa: F811 - ~0.2 s of CPU with pyarrow and numpy

            fs = pafs.LocalFileSystem()
            object.__setattr__(self, "_fs", fs)
        return fs

    def check_commits(self) -> None:
        """Refuse a store whose conditional put does not work (probed once per process).

        Raises:
            UnsupportedStoreError: the server ignores conditional writes.
        """
        check = getattr(self.conditional, "check", None)
        if check is not None:
            check()

    def same_kind(self, other: StoreFS) -> bool:
        """Whether ``other`` is on the same kind of filesystem (paths compare between them)."""
        return type(self.fs) is type(other.fs)

    def display(self, path: str) -> str:
        """``path`` as a user writes it (``s3://bucket/key`` on object stores)."""
        return f"s3://{path}" if self.object_store else path

    def join(self, *parts: str) -> str:
        return "/".join([self.base.rstrip("/"), *parts])

    def exists(self, path: str) -> bool:
        return self.file_info(path).type != FileType.NotFound

    def is_dir(self, path: str) -> bool:
        return self.file_info(path).type == FileType.Directory

    def size(self, path: str) -> int:
        info = self.file_info(path)
        return int(info.size or 0)

    def makedirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    def make_dir(self, path: str) -> None:
        """Create the folder ``path`` whose parent exists (never its parents: a folder a
        drop removed must not come back). FileExistsError where the filesystem says so."""
        self.fs.create_dir(path, recursive=False)

    def file_info(self, path: str) -> FileInfo:
        """One look at ``path``: its type (``is_file``), ``size`` and ``mtime``."""
        if self._fs is None:
            return LocalFileInfo(path, stat_local(path))
        return self.fs.get_file_info(path)  # type: ignore[no-any-return]

    def open_input_file(self, path: str) -> pa.NativeFile:
        """``path`` for reads at any offset (``read_at``, ``size``); close it (``with``).

        On the local disk this is pyarrow's ``OSFile``, the file LocalFileSystem opens
        too (same errors), without importing pyarrow.fs (and ssl, ~13 ms) for it."""
        if self._fs is None:
            import pyarrow as pa  # noqa: F811 - a metadata command opens no file: no pyarrow

            return pa.OSFile(path)
        return self.fs.open_input_file(path)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        """``path`` for one front-to-back read; close it (``with``)."""
        return self.fs.open_input_stream(path)

    def open_output_stream(self, path: str) -> pa.NativeFile:
        """``path`` for one front-to-back write (replaces it; not durable, not atomic: for
        data files a commit names only once they are whole); close it (``with``)."""
        return self.fs.open_output_stream(path)

    def walk(self, path: str) -> list[FileInfo]:
        """Everything under the folder ``path``, at any depth (files and folders; ``is_file``
        tells them apart). FileNotFoundError when ``path`` is not there."""
        import pyarrow.fs as pafs  # noqa: F811 - the filesystem's own listing

        return self.fs.get_file_info(pafs.FileSelector(path, recursive=True))  # type: ignore[no-any-return]

    def copy_from(self, source: StoreFS, src: str, dst: str) -> None:
        """Copy the file ``src`` of ``source`` (another store or filesystem) to ``dst`` here."""
        import pyarrow.fs as pafs  # noqa: F811

        pafs.copy_files(src, dst, source_filesystem=source.fs, destination_filesystem=self.fs)

    def delete_dir_contents(self, path: str) -> None:
        """Empty the folder ``path`` (kept); nothing to do when it is not there."""
        self.fs.delete_dir_contents(path, missing_dir_ok=True)

    def parquet_dataset(self, source: str | list[str], **options: Any) -> ds.Dataset:
        """A ``pyarrow.dataset`` of the Parquet file(s) ``source`` on this store."""
        import pyarrow.dataset as ds  # noqa: F811 (~40 ms; compaction and s3 inputs use it)

        return ds.dataset(source, format="parquet", filesystem=self.fs, **options)

    def map_file(self, path: str) -> memoryview | None:
        """``path``'s bytes memory-mapped read-only, on a local disk (None elsewhere: read
        it). For immutable files only (written whole under their final name, replaced by a
        rename, never cut in place: index snapshots, checkpoints): a reader then pays for
        the pages it touches, not a copy of the file. FileNotFoundError when missing."""
        if not self.local or (self._fs is not None and type(self._fs).__name__ != "LocalFileSystem"):
            return None
        import mmap

        with open(path, "rb") as f:
            if not os.fstat(f.fileno()).st_size:
                return memoryview(b"")
            return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))

    def read_bytes(self, path: str) -> bytes:
        if self.object_store and hasattr(self.conditional, "get"):
            return self.conditional.get(path)  # type: ignore[union-attr]
        if self._fs is None:
            with open(path, "rb") as f:
                return f.read()
        with self.fs.open_input_file(path) as f:
            return bytes(f.read())

    def write_bytes(self, path: str, data: bytes) -> None:
        if self.object_store and hasattr(self.conditional, "put"):
            self.conditional.put(path, data)  # type: ignore[union-attr]
            return
        with self.fs.open_output_stream(path) as f:
            f.write(data)

    def write_atomic(
        self, path: str, data: bytes | list[Any], *, durable: bool = True, crash: str | None = None
    ) -> None:
        """Replace ``path`` with ``data`` so readers see the old or the new file, never half.

        ``data``: bytes, or a list of bytes-like pieces (written one after another on a local
        disk; joined for an object store's one PUT).

        ``durable=False`` skips the fsyncs (a hint that may be lost in a power cut, never torn).
        ``crash`` names the crash point reached between the written temp file and the rename
        (on object stores, before the one PUT).
        """
        if self.object_store:
            if crash:
                crash_point(crash)
            self.write_bytes(path, _joined(data))
            return
        parent = path.rsplit("/", 1)[0]
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            if self.local:
                if durable:
                    _write_fsynced(tmp, data)
                else:
                    with open(tmp, "xb") as f:
                        for piece in _pieces(data):
                            f.write(piece)
                if crash:
                    crash_point(crash)
                os.replace(tmp, path)
            else:
                self.write_bytes(tmp, _joined(data))
                if crash:
                    crash_point(crash)
                self.fs.move(tmp, path)
        except BaseException:
            self._remove_temp(tmp)
            raise
        if self.local and durable:
            _fsync_dir(parent)

    def _remove_temp(self, tmp: str) -> None:
        """Remove the temp file of a failed write (never masks the write's own error)."""
        if self.local:
            try:
                os.unlink(tmp)
            except OSError:
                pass  # never created, or already renamed
            return
        import pyarrow as pa  # noqa: F811 - a remote store has it loaded

        try:
            self.fs.delete_file(tmp)
        except (OSError, pa.ArrowException):
            pass  # never created, or already renamed

    def append_durable(self, path: str, data: bytes) -> int:
        """Append ``data`` to ``path`` (created if missing) and fsync it; return the file's
        size right after this append (``data`` starts ``len(data)`` bytes before it unless
        another process appended in between).

        Raises:
            UnsupportedStoreError: the store is not on a local disk (no append there).
        """
        self._local_only("append to")
        created = not os.path.exists(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            end = os.lseek(fd, 0, os.SEEK_CUR)
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            _fsync_dir(path.rsplit("/", 1)[0])
        return end

    def truncate_durable(self, path: str, size: int) -> None:
        """Cut ``path`` (a local file) to ``size`` bytes and fsync it."""
        self._local_only("truncate")
        with open(path, "r+b") as f:
            f.truncate(size)
            f.flush()
            os.fsync(f.fileno())

    def write_at_durable(self, path: str, chunks: Iterable[tuple[int, bytes]]) -> None:
        """Write each ``(offset, bytes)`` into ``path`` (a local file, created if missing),
        then fsync it once."""
        self._local_only("patch")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            for offset, data in chunks:
                os.pwrite(fd, data, offset)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _local_only(self, what: str) -> None:
        if not self.local:
            raise UnsupportedStoreError(
                f"cannot {what} a file on {type(self.fs).__name__}: only local and NFS stores "
                "support it"
            )

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create ``path`` holding ``data`` unless it exists; True when this call created it.

        The parent folder must exist: a commit into a folder that was removed (a dropped
        table) fails with FileNotFoundError instead of bringing the folder back.

        Raises:
            UnsupportedStoreError: the filesystem has no put-if-absent write.
            FileNotFoundError: the parent folder does not exist.
        """
        if self.conditional is not None:
            if self.object_store and not self.is_dir(path.rsplit("/", 1)[0]):
                # Folders are only name prefixes there: a removed table folder (a drop) must
                # not come back through a late commit.
                raise FileNotFoundError(f"{path.rsplit('/', 1)[0]} does not exist")
            return self.conditional.put_if_absent(path, data)
        if not self.local:
            raise UnsupportedStoreError(
                f"{type(self.fs).__name__} has no put-if-absent write, which commits need; "
                "use a local or NFS store, or an object store with conditional writes"
            )
        parent = path.rsplit("/", 1)[0]
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        _write_fsynced(tmp, data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        _fsync_dir(parent)
        return True

    # Listing, sizing and deleting take a path another process may remove at the same time
    # (clean files and a dead load's own abort remove one segment folder): a path that is,
    # or becomes, absent is listed as empty, sized 0 and counts as deleted - never an error.
    def list_dir(self, path: str) -> list[FileInfo]:
        if self._fs is None:
            return list_local(path)
        import pyarrow.fs as pafs  # noqa: F811 - the filesystem's own listing

        if not self.exists(path):
            return []
        try:
            return self.fs.get_file_info(pafs.FileSelector(path, recursive=False))  # type: ignore[no-any-return]
        except FileNotFoundError:  # removed meanwhile
            return []

    def tree_size(self, path: str) -> int:
        import pyarrow.fs as pafs  # noqa: F811 - the filesystem's own listing

        for _ in range(_RACE_TRIES):
            if not self.exists(path):
                return 0
            try:
                infos = self.fs.get_file_info(pafs.FileSelector(path, recursive=True))
            except FileNotFoundError:  # it, or a folder in it, went meanwhile: look again
                continue
            return sum(int(i.size or 0) for i in infos if i.type == FileType.File)
        return 0

    def delete_dir(self, path: str) -> None:
        for attempt in range(_RACE_TRIES):
            if not self.exists(path):
                return
            try:
                self.fs.delete_dir(path)
                return
            except FileNotFoundError:  # something in it went meanwhile: look again
                continue
            except OSError as err:
                # A file appeared in it meanwhile (a writer that is still running): again.
                if err.errno != errno.ENOTEMPTY or attempt == _RACE_TRIES - 1:
                    raise

    def delete_file(self, path: str) -> None:
        if self.exists(path):
            try:
                self.fs.delete_file(path)
            except FileNotFoundError:  # removed meanwhile
                pass

    def move(self, src: str, dst: str) -> None:
        """Rename ``src`` (a file or folder); on object stores a copy, then a delete."""
        if not self.object_store:
            self.fs.move(src, dst)
            return
        if not self.is_dir(src):
            self.fs.copy_file(src, dst)
            self.fs.delete_file(src)
            return
        self.makedirs(dst)
        for info in self.walk(src):
            target = dst + info.path[len(src):]
            if info.type == FileType.Directory:
                self.makedirs(target)
            else:
                self.fs.copy_file(info.path, target)
        self.fs.delete_dir(src)


#: What the readers of index and data files take while some callers still hand them the bare
#: pyarrow filesystem of a store (``sfs.fs``): ``as_store_fs`` makes it a StoreFS at once.
AnyFS: TypeAlias = "StoreFS | pafs.FileSystem"


def as_store_fs(fs: AnyFS) -> StoreFS:
    """``fs`` as a StoreFS (a bare pyarrow filesystem is wrapped, without a base path)."""
    if isinstance(fs, StoreFS):
        return fs
    import pyarrow.fs as pafs  # noqa: F811 - a bare pyarrow filesystem: pyarrow is loaded

    return StoreFS(fs, "", isinstance(fs, pafs.LocalFileSystem))


def local_disk() -> StoreFS:
    """The local disk, without a base path (files given by absolute path)."""
    return StoreFS(None, "", True)


def filesystem_of(uri: str) -> tuple[StoreFS, str]:
    """The filesystem of ``uri`` (no base path) and the path in it, as pyarrow resolves a
    URI, unchecked: for inputs read once (a CSV header), whose errors the caller handles."""
    import pyarrow.fs as pafs  # noqa: F811 - a URI is resolved by pyarrow

    fs, path = pafs.FileSystem.from_uri(uri)
    return StoreFS(fs, "", isinstance(fs, pafs.LocalFileSystem)), path


def resolve_fs(location: str, conf: CarbonConf | None = None) -> StoreFS:
    """Turn a local path or URI into a ``StoreFS``; local paths are made absolute.

    ``s3://bucket/prefix`` takes its endpoint, region, addressing and credentials from the
    location's query, then ``conf`` (None: ``load_conf()``), then the AWS environment
    (carbonstore/store/objectstore.py); the filesystem is made once per process.
    """
    check_location(location)  # shape and scheme first: one line, before any library sees it
    if location.startswith("s3://"):
        from carbonstore.store import objectstore  # pyarrow's S3 filesystem and obstore

        options = objectstore.s3_options(location, conf)
        fs, conditional = objectstore.s3_filesystem(options)
        return StoreFS(fs, options.base, False, conditional, object_store=True)
    if "://" in location:
        import pyarrow as pa  # noqa: F811 - a URI is resolved by pyarrow
        import pyarrow.fs as pafs  # noqa: F811

        try:
            fs, path = pafs.FileSystem.from_uri(location)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            raise UserError(
                f"location {location!r} is not usable: {' '.join(str(err).split())}; give a "
                "local path or a URI such as file:///data/store or s3://bucket/prefix"
            ) from None
        local = isinstance(fs, pafs.LocalFileSystem)
        return StoreFS(fs, path.rstrip("/") or "/", local)
    path = os.path.abspath(os.path.expanduser(location))
    return StoreFS(None, path, True)


def input_files(paths: Sequence[str], conf: CarbonConf | None) -> tuple[str, list[tuple[str, int]]] | None:
    """The files of ``s3://`` load inputs as Spark would list them, without the JVM.

    Each input is an object or a folder of objects (names starting with ``_`` or ``.``
    skipped, no sub-folders, no glob). Returns the location tasks resolve the bucket's
    filesystem from and ``(path, size)`` of every file, or None when an input is not on
    s3:// or not of that form.

    Raises:
        UserError: an input names no object.
    """
    if not paths or not all(p.startswith("s3://") for p in paths):
        return None
    location = ""
    out: list[tuple[str, int]] = []
    for raw in paths:
        if any(ch in raw for ch in "*?["):
            return None
        uri = shipped_location(raw, conf)
        sfs = resolve_fs(uri, conf)
        location = location or uri
        info = sfs.fs.get_file_info(sfs.base)
        if info.type == FileType.File:
            out.append((info.path, int(info.size or 0)))
            continue
        if info.type != FileType.Directory:
            raise UserError(f"input {raw} does not exist")
        for child in sorted(sfs.list_dir(sfs.base), key=lambda i: i.path):
            if child.base_name.startswith(("_", ".")):
                continue
            if child.type != FileType.File:
                return None
            out.append((child.path, int(child.size or 0)))
    return (location, out) if out else None
