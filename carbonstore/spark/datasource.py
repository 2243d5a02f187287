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
Spark starts for planning, reuses, and kills when idle for a minute), ``write()`` once per
task on the executors, ``commit()`` / ``abort()`` on the driver after all tasks, in
another Python worker. The writer object is pickled between them, so the lease of a bare
``df.write`` is renewed by a detached process (``carbonstore.store.renewer``) that
``commit()`` / ``abort()`` stop.

The read side is :class:`carbonstore.spark.reader.CarbonReader` (``reader()``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from carbonstore.errors import CarbonStoreError, CommitConflictError, SchemaError, UserError
from carbonstore.segments.badrecords import HIDDEN_COLUMNS
from carbonstore.segments.commit import LoadTransaction, lease_seconds, marked_dead_error
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import TaskResult, WriteSettings, write_task
from carbonstore.spark.reader import CarbonReader
from carbonstore.spark.types import one_line_errors, schema_ddl
from carbonstore.store import StoreRoot, load_conf
from carbonstore.store.renewer import Renewal, spawn_renewer, stop_renewer
from carbonstore.store.table import Table, as_of_option

__all__ = ["CarbonCommitMessage", "CarbonDataSource", "CarbonWriter"]

# Options that are not load options.
STORE_OPTION = "store"
SEGMENT_OPTION = "segment"
TABLE_OPTION = "table"
_INTERNAL = frozenset({"path", STORE_OPTION, SEGMENT_OPTION, TABLE_OPTION, "versionasof", "timestampasof"})


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
        raise UserError(NO_TABLE_ERROR)
    return StoreRoot(options.get(STORE_OPTION) or None, conf=conf).table(name)


# Spark passes a catalog table's OPTIONS to no Python call of its data source: a table made
# by CREATE TABLE ... USING carbonstore that carbonstore did not make reaches here unnamed
NO_TABLE_ERROR = (
    'no table named: read or write one with .load("db.table") / .save("db.table"); a Spark '
    "catalog table USING carbonstore reads and writes a store table only when made by "
    "carbonstore.spark.register(spark, store=...) or by CREATE TABLE ... USING carbonstore "
    "in a session it registered (docs/spark.md)")


_NUMERIC = frozenset({"byte", "short", "integer", "int", "long", "float", "double", "decimal"})


def check_write_schema(table: Table, schema: StructType) -> None:
    """The DataFrame's columns must be the table's, by name (any order, any case), and each
    type the table's or one the writer casts exactly (numeric to numeric: a value the
    table type cannot hold fails the write, it is never changed; an all-null column).

    Raises:
        SchemaError: naming the missing, unknown and mistyped columns and the fix.
    """

    given = {f.name.lower(): f for f in schema.fields if f.name not in HIDDEN_COLUMNS}
    wanted = {c.name: c for c in table.schema.columns}
    unknown = [f.name for n, f in given.items() if n not in wanted]
    missing = [n for n in wanted if n not in given]
    problems = []
    if unknown:
        problems.append(f"unknown column(s) {', '.join(unknown)}")
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)}")
    for name, col in wanted.items():
        f = given.get(name)
        if f is None:
            continue
        have = f.dataType.typeName()
        want = col.type.name
        same = (have == want or (have, want) in {("integer", "int")}) and (
            want != "decimal" or f.dataType.simpleString() == str(col.type))
        if not same and have != "void" and not (have in _NUMERIC and want in _NUMERIC):
            problems.append(f"column {name} is {f.dataType.simpleString()}, the table's is "
                            f"{col.type}")
    if problems:
        raise SchemaError(
            f"cannot write to {table.name}: {'; '.join(problems)}. The DataFrame's columns "
            f"must be the table's ({', '.join(f'{c.name} {c.type}' for c in wanted.values())}), "
            "matched by name: rename or cast them (df.select(col('a').cast('int').alias('x'), "
            "...)), or load the data with 'carbonstore load' (bad-record handling)"
        )


@dataclass(frozen=True)
class CarbonCommitMessage(WriterCommitMessage):
    """One task's result, sent back to the driver; ``dead``: the task found its load marked
    dead by clean files (its folder removed) and wrote nothing - the error ``commit()``
    raises, so the user sees it as one line from the driver instead of a task failure (a
    worker traceback, a JVM stack and retries of a task that can never succeed)."""

    result: TaskResult | None
    dead: str | None = None


class CarbonDataSource(DataSource):
    """``spark.read/write.format("carbonstore")``.

    A subclass per store table (:func:`carbonstore.spark.catalog.table_source`) backs that
    table's Spark catalog table: ``provider`` is its own data source name and ``bound``
    the options naming the table (``store``, ``table``, ``carbon.*``), which Spark does not
    pass for a catalog table (its reads and writes get only the statement's own options).
    """

    provider = "carbonstore"
    bound: dict[str, str] = {}  # read only: set per subclass

    @classmethod
    def name(cls) -> str:
        return cls.provider

    def _opts(self) -> dict[str, str]:
        opts = {**self.bound, **{str(k): str(v) for k, v in dict(self.options).items()}}
        if self.bound.get(TABLE_OPTION):  # a table's own source reads that table only
            opts[TABLE_OPTION] = self.bound[TABLE_OPTION]
            opts[STORE_OPTION] = self.bound[STORE_OPTION]
        # a catalog table (register's views) names its table by the ``table`` option:
        # Spark sets a catalog table's ``path`` option to its location
        if opts.get(TABLE_OPTION):
            opts["path"] = opts.pop(TABLE_OPTION)
        return opts

    @one_line_errors
    def schema(self) -> str:
        opts = self._opts()  # a read as of a version has that version's schema
        return schema_ddl(open_table(opts).as_of(as_of_option(opts), check_files=False))

    @one_line_errors
    def reader(self, schema: StructType) -> Any:
        opts = self._opts()
        # Spark keeps a catalog table's schema (register's views): a table altered or
        # re-created with other columns since then is a clear error, not PySpark's
        # DATA_SOURCE_RETURN_SCHEMA_MISMATCH from every task
        table = open_table(opts).as_of(as_of_option(opts), check_files=False)
        have = [c.name.lower() for c in table.schema.columns]
        if [f.name.lower() for f in schema.fields] != have:
            raise UserError(
                f"table {table.name} now has the columns {', '.join(have)}, this relation "
                f"was made for {', '.join(f.name for f in schema.fields)}: run "
                "carbonstore.spark.register again (or load the DataFrame again)")
        return CarbonReader(opts)

    @one_line_errors
    def writer(self, schema: StructType, overwrite: bool) -> CarbonWriter:
        opts = self._opts()
        table = open_table(opts)
        check_write_schema(table, schema)  # before any segment exists
        conf_overrides, load_opts = _split_options(opts)
        options = parse_load_options(table, load_opts)
        segment = opts.get(SEGMENT_OPTION)
        conf = {**table.store.conf.values, **conf_overrides}
        renewal: Renewal | None = None
        if not segment:
            # A bare df.write: allocate here. This planning worker does not live until the
            # commit (Spark kills it when idle and commits from another worker), so a
            # detached renewer keeps the lease until commit() / abort() (load() renews
            # from its own driver process and passes the segment).
            txn = LoadTransaction.begin(table, overwrite=overwrite, hold_lock=False)
            segment = txn.segment_id
            try:
                settings = write_settings(table, segment, options)
            except BaseException:
                txn.abort(reason="the write could not start")
                raise
            renewal = spawn_renewer(
                store_location=table.store.location, conf=conf, table_name=str(table.name),
                table_id=table.table_id, segment_id=segment, seconds=lease_seconds(table),
            )
        else:
            settings = write_settings(table, segment, options)
        return CarbonWriter(
            settings=settings,
            store_location=table.store.location,
            conf_overrides=conf,
            table_name=str(table.name),
            overwrite=overwrite,
            renewal=renewal,
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
        renewal: Renewal | None = None,
    ) -> None:
        self.settings = settings
        self.store_location = store_location
        self.conf_overrides = dict(conf_overrides)
        self.table_name = table_name
        self.overwrite = overwrite
        self.renewal = renewal  # the lease renewer of a bare df.write (stopped by commit/abort)

    def _table(self) -> Table:
        conf = load_conf().with_overrides(self.conf_overrides)
        return StoreRoot(self.store_location, conf=conf).table(self.table_name)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CarbonCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None:
            task_id = f"{ctx.partitionId():05d}-{ctx.attemptNumber()}"
        else:  # pragma: no cover - pyspark always sets a context in tasks
            import uuid

            task_id = uuid.uuid4().hex[:8]
        try:
            return CarbonCommitMessage(write_task(iterator, self.settings, task_id=task_id))
        except OSError:
            # Its folder removed under it: clean files marked the load dead - that is the
            # error (the same on every load path), not the task's [Errno 2]. Reported by
            # commit() on the driver: a failed task would carry a worker traceback.
            dead = marked_dead_error(self._table(), self.settings.segment_id)
            if dead is not None:
                return CarbonCommitMessage(None, dead=str(dead))
            raise

    @one_line_errors
    def commit(self, messages: list[Any]) -> None:
        dead = next((m.dead for m in messages
                     if isinstance(m, CarbonCommitMessage) and m.dead is not None), None)
        if dead is not None:
            try:  # remove what tasks wrote after clean files removed the folder
                LoadTransaction.resume(self._table(), self.settings.segment_id).abort(
                    reason="marked dead by clean files")
            finally:
                self._stop_renewal()
            raise CommitConflictError(dead)
        results = [m.result if isinstance(m, CarbonCommitMessage) else None for m in messages]
        try:
            txn = LoadTransaction.resume(
                self._table(), self.settings.segment_id, overwrite=self.overwrite
            )
            txn.commit(results, self.settings)
        finally:  # committed or not (Spark calls abort() after a failed commit)
            self._stop_renewal()

    def abort(self, messages: list[Any]) -> None:
        try:
            LoadTransaction.resume(self._table(), self.settings.segment_id).abort(
                reason="a load task failed; see the Spark log"
            )
        finally:
            self._stop_renewal()

    def _stop_renewal(self) -> None:
        """Stop the renewer of a bare df.write and remove its heartbeat."""
        if self.renewal is None:
            return
        stop_renewer(self.renewal)
        try:
            self._table().status.leases.delete_lease(self.settings.segment_id)
        except CarbonStoreError:  # dropped: the heartbeat went with the table
            pass
