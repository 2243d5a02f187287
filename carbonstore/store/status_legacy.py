"""The single-file tablestatus of earlier versions (read as version 0, upgraded by the
first write) and ``tablestatus.history``: part of
:class:`carbonstore.store.tablestatus.TableStatus`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from carbonstore.errors import CorruptMetadataError, TableNotFoundError
from carbonstore.store.entries import LoadEntry, now_ms
from carbonstore.store.versions import TableStatusSnapshot, decode_legacy, encode_version, floor_of

if TYPE_CHECKING:
    from carbonstore.store.paths import TablePaths

__all__ = ["LegacyStatus"]


class LegacyStatus:
    """The legacy-format and history methods of TableStatus."""

    __slots__ = ()

    if TYPE_CHECKING:  # provided by TableStatus
        paths: TablePaths
        table_id: str
        legacy_schema: bool

        @property
        def log_dir(self) -> str: ...

        def _version_path(self, version: int) -> str: ...

        def _gone(self) -> TableNotFoundError: ...

    def _legacy(self) -> TableStatusSnapshot:
        """A table of the single-file format, read as version 0 (upgraded on first write)."""
        sfs = self.paths.sfs
        # Only a table whose schema (still) has no id: never a table created since.
        if not self.legacy_schema or not sfs.exists(self.paths.schema) or (
            b'"tableId"' in sfs.read_bytes(self.paths.schema)
        ):
            raise self._gone()
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
        history = self.read_history()
        floor = floor_of([*entries, *history], 0)
        return TableStatusSnapshot(entries, 0, floor, self.table_id, 0, legacy=True)


    def read_history(self) -> list[LoadEntry]:
        """Entries removed for good by clean files (``tablestatus.history``)."""
        sfs = self.paths.sfs
        path = self.paths.tablestatus_history
        if not sfs.exists(path):
            return []
        return list(decode_legacy(sfs.read_bytes(path), path, path))


    def _upgrade(self, legacy: TableStatusSnapshot) -> None:
        """Write a legacy table's entries as version 0 of its log (whoever wins, once)."""
        self.paths.sfs.makedirs(self.log_dir)
        data = encode_version(
            version=0, table_id=self.table_id, operation="UPGRADE", floor=legacy.id_floor,
            checkpoint=legacy.entries, upserts=(), removes=(), base=(), timestamp=now_ms(),
        )
        self.paths.sfs.put_if_absent(self._version_path(0), data)


    def _append_history(self, removed: list[LoadEntry]) -> None:
        history = self.read_history()
        known = {e.load_name for e in history}
        history += [e for e in removed if e.load_name not in known]
        self.paths.sfs.write_atomic(
            self.paths.tablestatus_history,
            orjson.dumps([e.to_json() for e in history], option=orjson.OPT_INDENT_2),
        )
