"""A Parquet relation whose ``NOT NULL`` columns Spark knows are never null, at no cost.

Spark's file sources make every column of a read schema nullable
(``DataSource.resolveRelation`` applies ``asNullable``). Projecting a column through
``coalesce(c, zero)`` restores the nullability but hides the column behind an expression:
Spark's optimizer then substitutes ``coalesce(c, zero)`` for the column in every filter and
join key above it, so constraint-based rewrites that work on attributes stop working (in
TPC-H Q20 the semi join with ``part`` is no longer inferred for the ``lineitem`` side, and
every filter is evaluated twice, once on the column and once on the ``coalesce``).
:func:`not_null_relation` instead copies the relation's ``LogicalRelation`` with those
output attributes marked non-nullable: the columns stay plain attributes (filters pushed to
the Parquet reader, constraints inferred as for ``spark.read.parquet``), and the schema is
exact. The load rejects nulls in ``NOT NULL`` columns, so the mark is true of the data.

The copy goes through the JVM's internal API (``LogicalRelation.copy``,
``classic.Dataset.ofRows``, Spark 4); when that API is not there or the frame is not a bare
relation, the caller falls back to ``coalesce``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["not_null_relation"]


def not_null_relation(spark: Any, df: Any, ddl: str) -> Any | None:
    """``df`` (a bare Parquet read) with the output attributes of ``ddl`` (its read schema,
    ``NOT NULL`` where the table says so), or None when Spark's internal API does not allow
    it. A handful of JVM calls, whatever the number of columns."""
    from py4j.protocol import Py4JError
    from pyspark.sql import DataFrame

    try:
        struct_type, utils, dataset = _classes(spark)
        plan = df._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() != "LogicalRelation":
            return None
        attrs = utils.toAttributes(struct_type.fromDDL(ddl))
        copy = plan.copy(plan.relation(), attrs, plan.catalogTable(), plan.isStreaming(),
                         plan.stream())
        return DataFrame(dataset.ofRows(spark._jsparkSession, copy), spark)
    except (Py4JError, AttributeError, TypeError):
        return None


_class_cache: dict[int, tuple[Any, Any, Any]] = {}


def _classes(spark: Any) -> tuple[Any, Any, Any]:
    """The JVM classes used above, looked up once per gateway (each lookup is JVM calls)."""
    jvm = spark._jvm
    hit = _class_cache.get(id(jvm))
    if hit is None:
        hit = (jvm.org.apache.spark.sql.types.StructType,
               jvm.org.apache.spark.sql.catalyst.types.DataTypeUtils,
               jvm.org.apache.spark.sql.classic.Dataset)
        _class_cache[id(jvm)] = hit
    return hit
