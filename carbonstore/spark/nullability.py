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

from collections.abc import Collection
from typing import Any

__all__ = ["not_null_relation"]


def not_null_relation(spark: Any, df: Any, not_null: Collection[str]) -> Any | None:
    """``df`` (a bare Parquet read, columns in the order of its schema) with the columns
    ``not_null`` non-nullable, or None when Spark's internal API does not allow it."""
    from py4j.protocol import Py4JError
    from pyspark.sql import DataFrame

    try:
        plan = df._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() != "LogicalRelation":
            return None
        output = plan.output()
        attrs = []
        for i, name in enumerate(df.columns):
            attr = output.apply(i)
            attrs.append(attr.withNullability(False) if name in not_null else attr)
        copy = plan.copy(plan.relation(), spark._jvm.PythonUtils.toSeq(attrs),
                         plan.catalogTable(), plan.isStreaming(), plan.stream())
        jdf = spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, copy)
        return DataFrame(jdf, spark)
    except (Py4JError, AttributeError, TypeError):
        return None
