"""The located read of a plan through a Python data source, for stores Spark's JVM cannot
open (s3://): the DML target's rows with ``__carbon_file`` / ``__carbon_pos``.

The native read (``dml/target.located_frame``) takes a row's file and position from
``_metadata.file_path`` / ``_metadata.row_index`` of Spark's own Parquet scan; that scan
needs the JVM to open the files. Here the executors read them in Python through the store's
file layer instead (``segments.dml_read.located_batches``: the reader of the ``carbonstore``
data source, plus the two columns), so a statement sees the same columns either way:
deleted rows dropped, older schema versions projected by column id, dictionary columns
decoded.

The source is ``carbonstore_located`` (registered per session on first use). Its one
option carries the pickled read: the store (location and conf), the table, the planned
version, the plan's slices grouped into partitions (``segments.arrow_read.plan_slices``).
``partitions()`` runs on the driver host, ``read()`` in the tasks.
"""

from __future__ import annotations

import base64
import pickle
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from carbonstore.pruning.plan import TablePlan
from carbonstore.segments.arrow_read import Slice, plan_projections, plan_slices
from carbonstore.segments.dml_read import FILE, POS, located_batches
from carbonstore.store import CarbonConf, StoreRoot
from carbonstore.store.ddl import quote_name
from carbonstore.store.table import Table

__all__ = ["NAME", "located_read"]

NAME = "carbonstore_located"
_registered: set[int] = set()
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class _Read:
    """What the tasks need: where the table is, which version, which slices."""

    location: str
    conf: CarbonConf
    table: str
    version: int | None
    parts: tuple[tuple[Slice, ...], ...]

    def open(self) -> Table:
        table = StoreRoot(self.location, conf=self.conf).table(self.table)
        return table if self.version is None else table.as_of(self.version, check_files=False)


class _Partition(InputPartition):
    def __init__(self, index: int) -> None:
        super().__init__(index)


class _Reader(DataSourceReader):
    def __init__(self, read: _Read) -> None:
        self.job = read

    def partitions(self) -> Sequence[InputPartition]:
        return [_Partition(i) for i in range(len(self.job.parts))] or [_Partition(-1)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        index = int(partition.value)
        if index < 0:
            return iter(())
        return located_batches(self.job.open(), self.job.parts[index])


class _LocatedSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:  # pragma: no cover - the read always gives its schema
        raise NotImplementedError

    def reader(self, schema: Any) -> _Reader:
        job = pickle.loads(base64.b64decode(self.options["read"]))  # noqa: S301 - our own
        return _Reader(job)


def located_read(spark: Any, table: Table, plan: TablePlan) -> Any:
    """A DataFrame of the live rows of ``plan``'s files, read in Python: the table's columns
    (nullable, values decoded) plus ``__carbon_file`` (the path :func:`dml.target.file_key`
    maps to the planned file) and ``__carbon_pos``."""
    with _lock:
        if id(spark) not in _registered:
            spark.dataSource.register(_LocatedSource)
            _registered.add(id(spark))
    mb = table.conf.get_int("carbon.read.partition.size.mb")
    parts = plan_slices(plan, max_bytes=max(1, mb) << 20,
                        projections=plan_projections(table, plan))
    job = _Read(table.store.location, table.store.conf, str(table.name), plan.version,
                tuple(parts))
    ddl = ", ".join(f"{quote_name(c.name)} {c.type}" for c in table.schema.columns)
    return (spark.read.format(NAME).schema(f"{ddl}, {FILE} string, {POS} bigint")
            .option("read", base64.b64encode(pickle.dumps(job)).decode()).load())
