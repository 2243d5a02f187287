"""The Python Data Source ``carbonstore``.

Write side::

    df.write.format("carbonstore").mode("append").option("store", "/data/carbon.store") \\
        .save("db.table")

``mode("overwrite")`` replaces the table's readable segments with the new one in the same
atomic tablestatus write. Options: ``store`` (default: ``carbon.storelocation`` of the
configuration), the load options of docs/load.md (BAD_RECORDS_ACTION, ...), and any
``carbon.*`` configuration key. :func:`carbonstore.spark.load_job.load` is the full load
(reading CSV/Parquet/JSON/ORC, bad-record detection, SORT_SCOPE); it allocates the segment
and holds its lock in the driver process and passes ``segment`` here.

Where pyspark calls what: ``writer()`` runs once on the driver (in a Python worker that
Spark starts for planning), ``write()`` once per task on the executors, ``commit()`` /
``abort()`` on the driver after all tasks. The writer object is pickled between them.

The read side (``reader()``, ``pushFilters``) is added in this module by the read path.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from carbonstore.segments.commit import abort_segment, begin_segment, commit_segment
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import TaskResult, WriteSettings, write_task
from carbonstore.store import Store, load_conf
from carbonstore.store.table import Table

__all__ = ["CarbonCommitMessage", "CarbonDataSource", "CarbonWriter", "schema_ddl"]

# Options that are not load options.
STORE_OPTION = "store"
SEGMENT_OPTION = "segment"
_INTERNAL = frozenset({"path", STORE_OPTION, SEGMENT_OPTION, "versionasof", "timestampasof"})


def schema_ddl(table: Table) -> str:
    """The table schema as a Spark DDL string (NOT NULL kept)."""
    return ", ".join(
        f"`{c.name}` {c.type}{'' if c.nullable else ' NOT NULL'}" for c in table.schema.columns
    )


def _split_options(options: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(carbon.* configuration overrides, load options)."""
    conf = {k.lower(): v for k, v in options.items() if k.lower().startswith("carbon.")}
    load = {
        k: v for k, v in options.items()
        if k.lower() not in _INTERNAL and not k.lower().startswith("carbon.")
    }
    return conf, load


def open_table(options: dict[str, str]) -> Table:
    """The table named by the ``path`` option, in the store of the ``store`` option."""
    conf_overrides, _ = _split_options(options)
    conf = load_conf().with_overrides(conf_overrides) if conf_overrides else load_conf()
    name = options.get("path")
    if not name:
        from carbonstore.errors import UserError

        raise UserError('save the DataFrame to a table: .save("db.table")')
    return Store(options.get(STORE_OPTION) or None, conf=conf).table(name)


@dataclass(frozen=True)
class CarbonCommitMessage(WriterCommitMessage):
    """One task's result, sent back to the driver."""

    result: TaskResult


class CarbonDataSource(DataSource):
    """``spark.read/write.format("carbonstore")``."""

    @classmethod
    def name(cls) -> str:
        return "carbonstore"

    def _opts(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in dict(self.options).items()}

    def schema(self) -> str:
        return schema_ddl(open_table(self._opts()))

    def reader(self, schema: StructType) -> Any:
        from carbonstore.spark.reader import CarbonReader

        return CarbonReader(self._opts())

    def writer(self, schema: StructType, overwrite: bool) -> CarbonWriter:
        opts = self._opts()
        table = open_table(opts)
        conf_overrides, load_opts = _split_options(opts)
        options = parse_load_options(table, load_opts)
        segment = opts.get(SEGMENT_OPTION)
        if not segment:
            # A bare df.write: allocate here. No process holds the segment lock for the whole
            # write in this case (this planning worker exits); load() does hold it.
            entry, lock = begin_segment(table, overwrite=overwrite, hold_lock=False)
            segment = entry.load_name
        settings = write_settings(table, segment, options)
        return CarbonWriter(
            settings=settings,
            store_location=table.store.location,
            conf_overrides={**table.store.conf.values, **conf_overrides},
            table_name=str(table.name),
            overwrite=overwrite,
        )


class CarbonWriter(DataSourceArrowWriter):
    """Pickled to every task; ``commit``/``abort`` run on the driver."""

    def __init__(
        self,
        *,
        settings: WriteSettings,
        store_location: str,
        conf_overrides: dict[str, str],
        table_name: str,
        overwrite: bool,
    ) -> None:
        self.settings = settings
        self.store_location = store_location
        self.conf_overrides = dict(conf_overrides)
        self.table_name = table_name
        self.overwrite = overwrite

    def _table(self) -> Table:
        conf = load_conf().with_overrides(self.conf_overrides)
        return Store(self.store_location, conf=conf).table(self.table_name)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CarbonCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None:
            task_id = f"{ctx.partitionId():05d}-{ctx.attemptNumber()}"
        else:  # pragma: no cover - pyspark always sets a context in tasks
            import uuid

            task_id = uuid.uuid4().hex[:8]
        return CarbonCommitMessage(write_task(iterator, self.settings, task_id=task_id))

    def commit(self, messages: list[Any]) -> None:
        results = [m.result if isinstance(m, CarbonCommitMessage) else None for m in messages]
        commit_segment(
            self._table(),
            self.settings.segment_id,
            results,
            overwrite=self.overwrite,
            action=self.settings.action,
            bad_record_dir=self.settings.bad_record_dir,
        )

    def abort(self, messages: list[Any]) -> None:
        abort_segment(
            self._table(), self.settings.segment_id, reason="a load task failed; see the Spark log"
        )
