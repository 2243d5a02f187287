"""``StoreRoot`` (a folder of databases and tables) and ``Table`` (one table's handles).

The user's classes, which add row-level DML and the partition spec (code of the layers
above this one), are their subclasses in ``carbonstore.api`` (``from carbonstore import
Store``): ``carbonstore.Store`` is the one public store class; ``StoreRoot`` is its base,
for code of the package that must not import the layers above the store.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any, ClassVar

from carbonstore.errors import (
    CorruptMetadataError,
    InvalidNameError,
    TableExistsError,
    TableNotFoundError,
    UserError,
    VersionNotFoundError,
)
from carbonstore.store.conf import CarbonConf, load_conf
from carbonstore.store.faults import crash_point
from carbonstore.store.fs import StoreFS, resolve_fs
from carbonstore.store.location import shipped_location
from carbonstore.store.locks import LockManager
from carbonstore.store.paths import TableName, TablePaths, parse_table_name
from carbonstore.store.records import Frozen, replace
from carbonstore.store.schema import (
    Column,
    TableSchema,
    normalise_properties,
    parse_schema_string,
)
from carbonstore.store.schema_log import check_log_owner, read_schema_log, schema_as_of
from carbonstore.store.tablestatus import (
    MARKED_FOR_DELETE,
    LoadEntry,
    TableStatus,
    TableStatusSnapshot,
    VersionInfo,
    now_ms,
)
from carbonstore.store.types import check_column_count

__all__ = ["ALTER_PREFIX", "NOT_APPLIED", "StoreRoot", "Table", "as_of_option", "legacy_table_id"]

_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d")
_AS_OF_OPTIONS = ("versionasof", "timestampasof")


def as_of_option(options: dict[str, str]) -> str | None:
    """The ``versionAsOf`` / ``timestampAsOf`` option of a data source read, if any."""
    for key, value in options.items():
        text = str(value).strip()
        if key.lower() in _AS_OF_OPTIONS and text:
            # timestampAsOf in epoch ms: not a version number
            return f"@{text}" if key.lower() == "timestampasof" and text.isdigit() else text
    return None


_SEGMENT_DIR_RE = re.compile(r"^Segment_(\d+)(?:\.\d+)?$")
ALTER_PREFIX = "ALTER "  # the operation of an ALTER's tablestatus version
#: how history lists an ALTER's tablestatus version that no schema file names
NOT_APPLIED = "NO CHANGE (ALTER not applied)"


def legacy_table_id(schema: TableSchema) -> str:
    """A stable id for a table whose schema predates table ids."""
    key = f"carbonstore:{schema.database}.{schema.table}:{schema.created_ms}"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, key))


class Table(Frozen):
    """Handles to one existing table: schema, paths, locks, tablestatus, resolved conf."""

    store: StoreRoot
    name: TableName
    schema: TableSchema
    pinned_version: int | None = None

    @property
    def paths(self) -> TablePaths:
        return TablePaths(self.store.sfs, self.name)

    @property
    def conf(self) -> CarbonConf:
        """Store conf with this table's properties layered on top."""
        return self.store.conf.for_table(self.schema.properties)

    @property
    def locks(self) -> LockManager:
        return LockManager(self.paths, self.store.conf)

    @property
    def table_id(self) -> str:
        """The table's uuid (tables created before ids existed get one derived from the
        schema, the same in every process)."""
        return self.schema.table_id or legacy_table_id(self.schema)

    @property
    def status(self) -> TableStatus:
        return TableStatus(self.paths, self.locks, self.table_id, self.pinned_version,
                           legacy_schema=not self.schema.table_id)

    # ---- time travel ---------------------------------------------------------------------
    def history(self, limit: int | None = None) -> list[VersionInfo]:
        """Every tablestatus version, oldest first (version, time, operation, segments, rows);
        with ``limit``, only the newest ``limit`` versions (only their files are read).

        An ALTER commits its tablestatus version first and its schema file second (the
        commit point, store/alter.py): an ALTER version that no schema version applies from
        (its process died between the two, or it lost the schema file to another ALTER and
        committed again later) changed nothing, and is listed as ``NOT_APPLIED``.
        """
        infos = self.status.log(limit)
        if not any(i.operation.startswith(ALTER_PREFIX) for i in infos):
            return infos
        applied = {v.applies_from for v in self.schema_versions()[1:]}
        return [replace(i, operation=NOT_APPLIED)
                if i.operation.startswith(ALTER_PREFIX) and i.version not in applied else i
                for i in infos]

    def as_of(self, when: int | str | None, *, check_files: bool = True) -> Table:
        """This table as it was at a version (int or digits), a local time
        (``yyyy-MM-dd HH:mm:ss``) or ``@<epoch ms>``: read-only, every read pinned there.

        ``check_files`` (default) refuses a version whose files clean files removed, with one
        existence check per segment; readers that re-open the table per partition skip it.

        Raises:
            VersionNotFoundError: no such version, or files it needs were cleaned.
            UserError: ``when`` is neither a version nor a time.
        """
        if when is None or (isinstance(when, str) and not when.strip()):
            return self
        version = self._resolve_version(when)
        snap = self.status.read(version)
        if check_files:
            self._check_files(snap, f"version {version}")
        schema = schema_as_of(self.schema_versions(), version)
        return replace(self, pinned_version=version, schema=schema)

    # ---- schema versions (docs/schema-evolution.md) ----------------------------------------
    def schema_versions(self) -> list[Any]:
        """Every schema version (``schema_log.SchemaVersion``), oldest first."""
        path = self.paths.schema
        base = TableSchema.from_bytes(self.store.sfs.read_bytes(path), path=path)
        return read_schema_log(self.store.sfs, self.paths, base)

    def _resolve_version(self, when: int | str) -> int:
        if isinstance(when, int) and not isinstance(when, bool):
            return when
        text = str(when).strip()
        if text.isdigit():
            return int(text)
        if text.startswith("@") and text[1:].isdigit():  # epoch milliseconds
            return self.status.version_as_of(int(text[1:]))
        for fmt in _TIME_FORMATS:
            try:
                ms = int(datetime.strptime(text, fmt).timestamp() * 1000)
            except ValueError:
                continue
            return self.status.version_as_of(ms)
        raise UserError(
            f"invalid version or time {when!r}: give a version number (see 'carbonstore "
            "history') or a local time yyyy-MM-dd HH:mm:ss"
        )

    def _check_files(self, snap: TableStatusSnapshot, what: str) -> None:
        """Refuse ``snap`` when clean files removed a file its readable entries name.

        Only the entries whose files the latest version does not also name are looked at:
        clean files never deletes a file the latest version's readable entries name (it
        removes the folders of segments no longer readable and the files a clean-files
        version lists as replaced), so time travel to a version of a big table probes the
        files of what changed since, not of every segment."""
        sfs = self.store.sfs
        latest = replace(self.status, pinned=None).read()
        if latest.version == snap.version:
            return
        then = snap.view.readable_files()
        now = latest.view.readable_files(then)  # (those of an old version only: it may be small)
        changed = [name for name, files in then.items() if now.get(name) != files]
        for e in (snap.get(name) for name in changed):
            seg = self.paths.segment_dir(e.load_name)
            if not sfs.exists(f"{seg}/{e.segment_file}" if e.segment_file else seg):
                raise VersionNotFoundError(
                    f"{what} of {self.name} cannot be read: the files of its segment "
                    f"{e.load_name} were removed by clean files (after "
                    "carbon.segment.retention.minutes)"
                )
            for d in e.delete_deltas:  # superseded deltas go after the retention time too
                if not sfs.exists(f"{seg}/{d.delta_file}"):
                    raise VersionNotFoundError(
                        f"{what} of {self.name} cannot be read: the delete delta "
                        f"{d.delta_file} of its segment {e.load_name} was removed by clean "
                        "files (after carbon.segment.retention.minutes)"
                    )

    def files_named(self, snap: TableStatusSnapshot) -> dict[str, tuple[str, str, str]]:
        """The files inside segment folders that a version's readable entries name, by path
        relative to the table folder: ``(what, segment id, file name)`` - the merge index
        and every delete delta (data files go only with their segment's folder)."""
        out: dict[str, tuple[str, str, str]] = {}
        for e in snap.readable:
            seg = self.paths.relative(self.paths.segment_dir(e.load_name))
            if e.segment_file:
                out[f"{seg}/{e.segment_file}"] = ("merge index", e.load_name, e.segment_file)
            for d in e.delete_deltas:
                out[f"{seg}/{d.delta_file}"] = ("delete delta", e.load_name, d.delta_file)
        return out

    def _removed_after(self, version: int, upto: int) -> tuple[dict[str, int], int]:
        """The files clean files recorded removing (``filesRemoved``) in the versions after
        ``version``, at least up to ``upto``: (path -> the version that recorded it, the
        newest version read). Only those versions' files are read (the chain is gapless)."""
        if upto <= version:
            return {}, version
        limit = upto - version
        while True:
            infos = self.status.log(limit)
            if not infos or infos[0].version <= version + 1:
                break
            limit = infos[-1].version - version  # newer versions came meanwhile
        found = {f: i.version for i in infos if i.version > version for f in i.files_removed}
        return found, max([version, *(i.version for i in infos)])

    def restore(self, version: int) -> TableStatusSnapshot:
        """Commit a new version whose readable segments are exactly ``version``'s.

        Segments readable now but not then become Marked for Delete; segments readable
        then get back their entry of then. Running loads are left alone.

        The commit checks, on the version it builds on, that no clean files after
        ``version`` recorded removing a file it names (clean records them in a version
        before it deletes them: docs/tablestatus.md, conflict rules), and that its files
        still exist; a clean files committing meanwhile makes the put lose and the check
        run again. So a restored version never names a removed file.

        Raises:
            VersionNotFoundError: no such version, or its files were cleaned.
        """
        old = self.status.read(version)
        self._check_files(old, f"version {version}")
        wanted = {e.load_name: e for e in old.readable}
        needed = self.files_named(old)
        removed: dict[str, int] = {}
        scanned = [version]  # versions read so far (a retry reads only the newer ones)

        def apply(snap: TableStatusSnapshot) -> list[LoadEntry]:
            more, scanned[0] = self._removed_after(scanned[0], snap.version)
            removed.update(more)
            for path, (what, seg, name) in needed.items():
                if path in removed:
                    raise VersionNotFoundError(
                        f"version {version} of {self.name} cannot be restored: the {what} "
                        f"{name} of its segment {seg} was removed by clean files (its "
                        f"version {removed[path]})")
            self._check_files(old, f"version {version}")
            ts = now_ms()
            out = []
            for e in snap.entries:
                if e.load_name in wanted:
                    e = wanted[e.load_name]
                elif e.readable:
                    e = e.with_status(MARKED_FOR_DELETE, modification_or_deletion_timestamp=ts)
                out.append(e)
            have = {e.load_name for e in out}
            gone = sorted(set(wanted) - have)
            if gone:
                raise VersionNotFoundError(
                    f"version {version} of {self.name} cannot be restored: segment(s) "
                    f"{', '.join(gone)} were removed by clean files"
                )
            return out

        return self.status.update(apply, operation=f"RESTORE {version}")

    def describe(self) -> dict[str, Any]:
        """The table's schema, properties and totals. The totals come from the entries'
        columns (a big table's checkpoint): no entry is built."""
        snap = self.status.read()
        readable, rows = snap.view.readable_stats()
        (size,) = snap.view.readable_sums("data_size")
        return {
            "table": str(self.name),
            "location": self.store.sfs.display(self.paths.root),
            "schemaVersion": self.schema.schema_version,
            "columns": [
                {"name": c.name, "type": str(c.type), "nullable": c.nullable, "columnId": c.column_id,
                 **({"default": c.default} if c.default is not None else {})}
                for c in self.schema.columns
            ],
            "properties": dict(sorted(self.schema.properties.items())),
            "segments": len(snap.view),
            "readableSegments": readable,
            "rows": rows,
            "dataSize": size,
        }


class StoreRoot:
    """A carbonstore: ``<location>/<db>/<table>/...`` through its file layer (``StoreFS``)."""

    # The class of the tables this store opens and creates: carbonstore.api.Store (the
    # user's Store) sets its Table, which adds the operations of the layers above.
    table_class: ClassVar[type[Table]] = Table

    def __init__(self, location: str | None = None, *, conf: CarbonConf | None = None) -> None:
        self.conf = conf if conf is not None else load_conf()
        # An s3:// location carries the conf's endpoint settings, so tasks given only the
        # location reach the same store (carbonstore/store/objectstore.py).
        self.location = shipped_location(location or self.conf.get("carbon.storelocation"), self.conf)
        self.sfs: StoreFS = resolve_fs(self.location, self.conf)
        self.sfs.check_commits()  # an object store that ignores conditional writes: refused

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    def _paths(self, name: str | TableName) -> TablePaths:
        tn = name if isinstance(name, TableName) else parse_table_name(name)
        return TablePaths(self.sfs, tn)

    def exists(self, name: str | TableName) -> bool:
        """The table exists: its schema does and its drop did not commit (or its schema is
        missing while its tablestatus says it lives: there, damaged)."""
        paths = self._paths(name)
        if not self.sfs.exists(paths.schema):
            return isinstance(self._without_schema(paths), CorruptMetadataError)
        try:
            return not self._open(paths).status.dropped()
        except CorruptMetadataError:  # a damaged schema: the table is there, damaged
            return True

    def table(self, name: str | TableName) -> Table:
        """Open an existing table or raise TableNotFoundError.

        A table whose drop committed is not opened, even while its folder is still there
        (a drop cut short before it removed the folder): ``create`` moves that to the trash
        and ``drop`` finishes removing it.
        """
        paths = self._paths(name)
        if not self.sfs.exists(paths.schema):
            raise self._without_schema(paths)
        table = self._open(paths)
        if table.status.dropped():
            check_log_owner(self.sfs, paths, table.schema)  # not a drop: another's schema
            raise TableNotFoundError(
                f"table {paths.name} does not exist in store {self.location}: it was dropped "
                "(its folder is not removed yet: 'carbonstore drop' finishes that, "
                "'carbonstore create' moves it to the trash)"
            )
        return table

    def _without_schema(self, paths: TablePaths) -> TableNotFoundError | CorruptMetadataError:
        """Why a table without ``Metadata/schema`` cannot be opened.

        The schema is written right after a new table's version 0 and deleted first by a
        drop (after its DROP version), so a tablestatus that was not dropped means the
        schema was lost: damage, not a missing table (before, every command said "does not
        exist"). Only a create cut short between the two leaves the same files; the message
        says so when the log holds only version 0 (``create`` starts afresh either way).
        """
        absent = TableNotFoundError(
            f"table {paths.name} does not exist in store {self.location}; "
            "create it with 'carbonstore create'")
        sfs = self.sfs
        live: list[str] = []
        only_created = True
        for info in sfs.list_dir(paths.tablestatus_log):
            if info.is_file or not any(  # a create cut short before its version 0
                    i.base_name.removesuffix(".json").isdigit() for i in sfs.list_dir(info.path)):
                continue
            status = TableStatus(paths, LockManager(paths, self.conf), info.base_name)
            try:
                if status.dropped():
                    continue
                newest = status.log(limit=1)
            except (TableNotFoundError, CorruptMetadataError):  # removed meanwhile, damaged
                newest = []
            live.append(self.sfs.display(status.log_dir))
            only_created = only_created and bool(newest) and newest[-1].version == 0
        if not live and sfs.exists(paths.tablestatus):  # the single-file format
            live.append(sfs.display(paths.tablestatus))
            only_created = False
        if not live:
            return absent
        return CorruptMetadataError(
            f"schema file {sfs.display(paths.schema)} of table {paths.name} is missing, but "
            f"its tablestatus ({live[0]}) says the table exists: restore the file from a "
            "backup of the table" + (" (its tablestatus holds only the version of its "
            "create: if that create was cut short, create the table again)"
            if only_created else ""))

    def _open(self, paths: TablePaths) -> Table:
        schema = TableSchema.from_bytes(self.sfs.read_bytes(paths.schema), path=paths.schema)
        schema = read_schema_log(self.sfs, paths, schema)[-1].schema  # the newest ALTER's
        return self.table_class(self, paths.name, schema)

    def create_table(
        self,
        name: str,
        schema: str | list[Column],
        *,
        properties: dict[str, str] | None = None,
        if_not_exists: bool = False,
    ) -> Table:
        """Create a table from a schema string (``"id long not null, name string"``)."""
        paths = self._paths(name)
        columns = parse_schema_string(schema) if isinstance(schema, str) else list(schema)
        check_column_count(columns, f"table {paths.name}")
        table_schema = TableSchema(
            database=paths.name.database,
            table=paths.name.table,
            columns=tuple(columns),
            properties=normalise_properties(properties or {}),
            created_ms=now_ms(),
            table_id=str(uuid.uuid4()),
        )
        self.sfs.makedirs(paths.metadata)
        locks = LockManager(paths, self.conf)
        with locks.hold("meta.lock"):  # a courtesy: two creates of one name do not interleave
            if self.sfs.exists(paths.schema):
                if self._live(paths.name):
                    if if_not_exists:
                        return self.table(paths.name)
                    raise TableExistsError(f"table {paths.name} already exists")
            floor = self._trash_leftovers(paths)
            table = self.table_class(self, paths.name, table_schema)
            self.sfs.makedirs(paths.fact_dir)
            table.status.create(id_floor=floor)
            if not self.sfs.put_if_absent(paths.schema, table_schema.to_bytes()):
                raise TableExistsError(f"table {paths.name} already exists")
        return table

    def _live(self, name: TableName) -> bool:
        """The schema exists and the table was not dropped (a drop that did not finish)."""
        try:
            self.table(name).status.read()
        except TableNotFoundError:
            return False
        return True

    def _trash_leftovers(self, paths: TablePaths) -> int:
        """Move whatever is in a new table's folder to ``<store>/.Trash/``; never adopt it.

        Returns the smallest segment id the new table may use, so a writer of the old table
        that still runs never shares a segment folder with the new one.
        """
        names = [i.base_name for i in self.sfs.list_dir(paths.root) if i.base_name != "LockFiles"]
        if not names or (names == ["Metadata"] and not self.sfs.list_dir(paths.metadata)):
            return 0
        floor = 0
        for info in self.sfs.list_dir(paths.fact_dir):
            m = _SEGMENT_DIR_RE.match(info.base_name)
            if m is not None:
                floor = max(floor, int(m.group(1)) + 1)
        target = self.sfs.join(".Trash", f"{paths.name}.{now_ms()}")
        self.sfs.makedirs(self.sfs.join(".Trash"))
        self.sfs.move(paths.root, target)
        self.sfs.makedirs(paths.metadata)
        return floor

    def drop_table(self, name: str | TableName) -> bool:
        """Commit the table's DROP version, then remove its folder.

        A load or compaction still running fails its commit (the table is gone), and a
        later create of the same name starts from an empty folder. The schema goes first,
        so a removal cut short leaves no table behind; a drop cut short before that (the
        DROP version committed, the folder still there) is finished by dropping again.

        Returns:
            True when this call committed the drop, False when it finished an earlier one.

        Raises:
            TableNotFoundError: there is no such table (nor a drop of it to finish).
        """
        paths = self._paths(name)
        if not self.sfs.exists(paths.schema):
            self.table(paths.name)  # raises TableNotFoundError
        with LockManager(paths, self.conf).hold("meta.lock"):
            table = self._open(paths)
            committed = True
            try:
                table.status.drop()
            except TableNotFoundError:  # an earlier drop committed but did not finish
                committed = False
            crash_point("drop.after_commit")
            try:
                self.sfs.delete_file(paths.schema)
            except FileNotFoundError:
                pass
            self.sfs.delete_dir(paths.root)
        return committed

    def tables(self) -> list[TableName]:
        """Every table of the store, sorted."""
        out: list[TableName] = []
        for db in self.sfs.list_dir(self.sfs.base):
            if not db.is_file and not db.base_name.startswith("."):
                for t in self.sfs.list_dir(db.path):
                    if self.sfs.exists(f"{t.path}/Metadata/schema"):
                        try:
                            name = parse_table_name(f"{db.base_name}.{t.base_name}")
                        except InvalidNameError:  # a foreign folder, not a table
                            continue
                        if self.exists(name):  # not a drop that did not remove the folder
                            out.append(name)
        return sorted(out, key=str)


