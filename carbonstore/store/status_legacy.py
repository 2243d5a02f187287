"""The single-file tablestatus of earlier versions (read as version 0, upgraded by the
first write) and ``tablestatus.history``, which is still written in that format: two small
objects ``TableStatus`` uses (:class:`carbonstore.store.tablestatus.TableStatus`)."""

from __future__ import annotations

import orjson

from carbonstore.errors import CorruptMetadataError
from carbonstore.store.entries import LoadEntry, now_ms
from carbonstore.store.paths import TablePaths
from carbonstore.store.records import Frozen
from carbonstore.store.versions import TableStatusSnapshot, decode_legacy, encode_version, floor_of

__all__ = ["LegacyStatus", "StatusHistory"]


class StatusHistory(Frozen):
    """``tablestatus.history``: the entries clean files removed for good."""

    paths: TablePaths

    def read(self) -> list[LoadEntry]:
        """The removed entries, oldest first (none when the file does not exist)."""
        sfs = self.paths.sfs
        path = self.paths.tablestatus_history
        if not sfs.exists(path):
            return []
        return list(decode_legacy(sfs.read_bytes(path), path, path))

    def append(self, removed: list[LoadEntry]) -> None:
        """Add ``removed`` (entries already there are not added twice)."""
        history = self.read()
        known = {e.load_name for e in history}
        history += [e for e in removed if e.load_name not in known]
        self.paths.sfs.write_atomic(
            self.paths.tablestatus_history,
            orjson.dumps([e.to_json() for e in history], option=orjson.OPT_INDENT_2),
        )


class LegacyStatus(Frozen):
    """A table of the single-file format (``Metadata/tablestatus``): read as version 0 of
    its log, and written as that version by the first commit."""

    paths: TablePaths
    table_id: str
    legacy_schema: bool  # its schema predates table ids
    log_dir: str  # the table's tablestatus log folder

    def read(self) -> TableStatusSnapshot | None:
        """The table's entries as version 0; None when it is not a table of this format (a
        table created since, whose log went with a drop).

        Raises:
            CorruptMetadataError: the file, or the schema beside a version log, is damaged.
        """
        sfs = self.paths.sfs
        # Only a table whose schema (still) has no id: never a table created since.
        if not self.legacy_schema or not sfs.exists(self.paths.schema) or (
            b'"tableId"' in sfs.read_bytes(self.paths.schema)
        ):
            return None
        if sfs.is_dir(self.paths.tablestatus_log) and any(
            not i.is_file for i in sfs.list_dir(self.paths.tablestatus_log)
        ):
            # A schema without a table id beside a version log: the schema lost its
            # "tableId" (a flipped bit in the key). Read as a table of the old format it
            # would be empty - and its segment folders orphans for clean files to move.
            raise CorruptMetadataError(
                f"schema file {self.paths.schema} names no tableId, but the table has "
                f"tablestatus versions under {self.paths.tablestatus_log}: the schema file "
                "is damaged; restore it from a backup of the table"
            )
        path = self.paths.tablestatus
        entries: tuple[LoadEntry, ...] = ()
        if sfs.exists(path):
            entries = decode_legacy(sfs.read_bytes(path), path, self.paths.tablestatus_backup)
        elif sfs.exists(self.paths.tablestatus_backup):
            raise CorruptMetadataError(
                f"tablestatus file {path} is missing but its previous version "
                f"{self.paths.tablestatus_backup} exists; check the backup and copy it over "
                f"{path} to recover"
            )
        history = StatusHistory(self.paths).read()
        floor = floor_of([*entries, *history], 0)
        return TableStatusSnapshot(entries, 0, floor, self.table_id, 0, legacy=True)

    def upgrade(self, legacy: TableStatusSnapshot, version_path: str) -> None:
        """Write the entries of ``legacy`` as version 0 of the log, at ``version_path``
        (whoever wins, once)."""
        self.paths.sfs.makedirs(self.log_dir)
        data = encode_version(
            version=0, table_id=self.table_id, operation="UPGRADE", floor=legacy.id_floor,
            checkpoint=legacy.entries, upserts=(), removes=(), base=(), timestamp=now_ms(),
        )
        self.paths.sfs.put_if_absent(version_path, data)
