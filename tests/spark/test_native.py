"""Native frames (carbonstore.spark.native): exact schema without hiding columns from Spark."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

from carbonstore.spark.api import to_spark
from carbonstore.store import StoreRoot
from tests.indexfiles.segbuild import add_segments


def _rows(n: int, start: int) -> pa.Table:
    r = range(start, start + n)
    return pa.table({"id": [i for i in r], "s": [f"s{i:04d}" for i in r],
                     "v": [i / 7 for i in r], "note": [None if i % 3 else "x" for i in r]})


def test_not_null_columns_stay_columns_spark_pushes_filters_on(spark: object, store: StoreRoot) -> None:
    t = store.create_table("db.nn", "id long not null, s string not null, v double not null, "
                                    "note string")
    add_segments(t, [_rows(200, k * 200) for k in range(3)], row_group_size=50, page_rows=10)
    df = to_spark(t, spark)
    assert df.schema == T.StructType([
        T.StructField("id", T.LongType(), False), T.StructField("s", T.StringType(), False),
        T.StructField("v", T.DoubleType(), False), T.StructField("note", T.StringType(), True),
    ])
    # a filter applied on top (as a statement does over an occurrence) reaches the Parquet
    # reader on the column itself: no coalesce(id, 0) stands between them
    top = df.where("id >= 390 AND s < 's0395'")
    plan = top._jdf.queryExecution().executedPlan().toString()
    assert "coalesce" not in plan.lower()
    assert "GreaterThanOrEqual(id,390)" in plan and "LessThan(s,s0395)" in plan
    assert sorted(r.id for r in top.collect()) == [390, 391, 392, 393, 394]
    # the NaN guard stays: no predicate on a double column is pushed to parquet-java
    assert "(v," not in df.where("v > 50").\
        _jdf.queryExecution().executedPlan().toString().split("PushedFilters")[1].split("]")[0]
    assert df.where("v > 50").count() == sum(1 for i in range(600) if i / 7 > 50)
