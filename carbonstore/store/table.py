"""``Store`` (a folder of databases and tables) and ``Table`` (one table's handles)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from carbonstore.errors import InvalidNameError, TableExistsError, TableNotFoundError
from carbonstore.store.conf import CarbonConf, load_conf
from carbonstore.store.fs import StoreFS, resolve_fs
from carbonstore.store.locks import LockManager
from carbonstore.store.paths import TableName, TablePaths, parse_table_name
from carbonstore.store.schema import (
    Column,
    TableSchema,
    normalise_properties,
    parse_schema_string,
)
from carbonstore.store.tablestatus import TableStatus, now_ms

__all__ = ["Store", "Table"]


@dataclass(frozen=True, slots=True)
class Table:
    """Handles to one existing table: schema, paths, locks, tablestatus, resolved conf."""

    store: Store
    name: TableName
    schema: TableSchema

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
    def status(self) -> TableStatus:
        return TableStatus(self.paths, self.locks)

    def describe(self) -> dict[str, Any]:
        snap = self.status.read()
        readable = snap.readable
        return {
            "table": str(self.name),
            "location": self.paths.root,
            "columns": [
                {"name": c.name, "type": str(c.type), "nullable": c.nullable, "columnId": c.column_id}
                for c in self.schema.columns
            ],
            "properties": dict(sorted(self.schema.properties.items())),
            "segments": len(snap.entries),
            "readableSegments": len(readable),
            "rows": sum(e.row_count for e in readable),
            "dataSize": sum(e.data_size for e in readable),
        }


class Store:
    """A carbonstore: ``<location>/<db>/<table>/...`` over pyarrow.fs."""

    def __init__(self, location: str | None = None, *, conf: CarbonConf | None = None) -> None:
        self.conf = conf if conf is not None else load_conf()
        self.location = location or self.conf.get("carbon.storelocation")
        self.sfs: StoreFS = resolve_fs(self.location)

    def __repr__(self) -> str:
        return f"Store({self.location!r})"

    def _paths(self, name: str | TableName) -> TablePaths:
        tn = name if isinstance(name, TableName) else parse_table_name(name)
        return TablePaths(self.sfs, tn)

    def exists(self, name: str | TableName) -> bool:
        return self.sfs.exists(self._paths(name).schema)

    def table(self, name: str | TableName) -> Table:
        """Open an existing table or raise TableNotFoundError."""
        paths = self._paths(name)
        if not self.sfs.exists(paths.schema):
            raise TableNotFoundError(
                f"table {paths.name} does not exist in store {self.location}; "
                "create it with 'carbonstore create'"
            )
        schema = TableSchema.from_bytes(self.sfs.read_bytes(paths.schema), path=paths.schema)
        return Table(self, paths.name, schema)

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
        table_schema = TableSchema(
            database=paths.name.database,
            table=paths.name.table,
            columns=tuple(columns),
            properties=normalise_properties(properties or {}),
            created_ms=now_ms(),
        )
        self.sfs.makedirs(paths.metadata)
        locks = LockManager(paths, self.conf)
        with locks.hold("meta.lock"):
            if self.sfs.exists(paths.schema):
                if if_not_exists:
                    return self.table(paths.name)
                raise TableExistsError(f"table {paths.name} already exists")
            self.sfs.makedirs(paths.fact_dir)
            self.sfs.write_atomic(paths.schema, table_schema.to_bytes())
        return Table(self, paths.name, table_schema)

    def drop_table(self, name: str) -> None:
        """Remove the table and all its files."""
        table = self.table(name)
        with table.locks.hold("meta.lock"):
            self.sfs.delete_dir(table.paths.root)

    def tables(self) -> list[TableName]:
        """Every table of the store, sorted."""
        out: list[TableName] = []
        for db in self.sfs.list_dir(self.sfs.base):
            if not db.is_file and not db.base_name.startswith("."):
                for t in self.sfs.list_dir(db.path):
                    if self.sfs.exists(f"{t.path}/Metadata/schema"):
                        try:
                            out.append(parse_table_name(f"{db.base_name}.{t.base_name}"))
                        except InvalidNameError:  # a foreign folder, not a table
                            continue
        return sorted(out, key=str)


