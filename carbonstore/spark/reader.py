"""Read side of the ``carbonstore`` Python Data Source (``to_spark`` is in api.py).

::

    spark.read.format("carbonstore").option("store", "/data/carbon.store") \\
        .option("segments", "1,3").option("where", "id = 42").load("db.table")

Where pyspark calls what: ``reader()`` and ``partitions()`` run on the driver (in the
planning Python worker), ``read()`` once per partition on the executors. ``partitions`` plans
the table for the ``where`` option (pruning.plan: segments, files, row groups, page
row ranges) and groups the surviving row groups into partitions of about
``carbon.read.partition.size.mb`` (default 128 MB). ``read`` yields Arrow batches of only
those row groups, cut to the surviving row ranges, dictionary columns decoded, with the
table's exact schema and nullability.

The reader implements no ``pushFilters``: PySpark 4.3 plans every scan of a relation with
the reader of the last scan that pushed a filter (docs/semantics.md, "Spark's reader
reuse"), so a reader pruned by pushed filters would drop rows other scans need. Only the
``where`` and ``segments`` options, which belong to the relation, prune; Spark evaluates a
``.where()`` on the rows read. ``to_spark`` (and ``carbonstore sql``/``query``) plan on the
driver and read the kept files with Spark's own Parquet reader (carbonstore.spark.native).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from carbonstore.errors import UserError
from carbonstore.expressions.bind import session_zone
from carbonstore.expressions.expr import AlwaysTrue, Expr
from carbonstore.pruning.plan import TablePlan, bind_where, prune
from carbonstore.segments.arrow_read import (
    PARTITION_BYTES,
    PARTITION_ROW_GROUPS,
    Slice,
    arrow_read_schema,
    plan_projections,
    plan_slices,
    read_row_groups,
)
from carbonstore.spark.types import one_line_errors
from carbonstore.store import StoreRoot, load_conf
from carbonstore.store.evolution import Projection
from carbonstore.store.table import Table, as_of_option

__all__ = [
    "PARTITION_BYTES", "PARTITION_ROW_GROUPS", "CarbonPartition", "CarbonReader",
    "arrow_read_schema", "plan_partitions", "plan_projections", "read_row_groups",
]

SEGMENTS_OPTION = "segments"
WHERE_OPTION = "where"
TIME_ZONE_OPTION = "timezone"  # the zone the where option's timestamps are read in (UTC)
LOCAL_ROWS_KEY = "carbon.read.local.rows"


class CarbonPartition(InputPartition):
    """Row groups (and row ranges) of one or more files, read by one task."""

    def __init__(self, slices: Sequence[Slice]) -> None:
        super().__init__(len(slices))
        self.slices = tuple(slices)


def plan_partitions(
    plan: TablePlan, *, max_bytes: int = PARTITION_BYTES,
    projections: dict[str, Projection] | None = None,
) -> list[CarbonPartition]:
    """The plan's row groups as Spark partitions of about ``max_bytes`` (file order kept;
    ``segments.arrow_read.plan_slices``)."""
    return [CarbonPartition(s) for s in plan_slices(plan, max_bytes=max_bytes,
                                                    projections=projections)]


def _split(options: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items() if k.lower().startswith("carbon.")}


class CarbonReader(DataSourceReader):
    """Pickled from the planning worker to the executors; holds only small state."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = dict(options)
        self.expr: Expr = AlwaysTrue()
        where = self.options.get(WHERE_OPTION)
        if where:
            zone = session_zone(self.options.get(TIME_ZONE_OPTION) or "UTC")
            if zone is None:
                raise UserError(f"option {TIME_ZONE_OPTION}: not a time zone: "
                                f"{self.options.get(TIME_ZONE_OPTION)!r}")
            self.expr = bind_where(self._table(), where, time_zone=zone)

    def _table(self) -> Table:
        conf = load_conf().with_overrides(_split(self.options))
        name = self.options.get("path") or ""
        table = StoreRoot(self.options.get("store") or None, conf=conf).table(name)
        # versionAsOf / timestampAsOf (checked for cleaned files once, when the plan is made)
        return table.as_of(as_of_option(self.options), check_files=False)

    @one_line_errors
    def partitions(self) -> Sequence[InputPartition]:
        table = self._table()
        plan = prune(table, self.expr, segments=self.options.get(SEGMENTS_OPTION))
        mb = table.conf.get_int("carbon.read.partition.size.mb")
        parts = plan_partitions(plan, max_bytes=max(1, mb) << 20,
                                projections=plan_projections(table, plan))
        return parts or [CarbonPartition([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, CarbonPartition) or not partition.slices:
            return iter(())
        return read_row_groups(self._table(), partition.slices, expr=self.expr)


