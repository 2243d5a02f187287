"""The one SparkSession factory every entry point uses.

Embedded default: ``local[*]``, UI off, few shuffle partitions, Python filter pushdown on,
executors running this interpreter. An active session (a notebook, ``spark-submit``) is
honoured: its master is kept and only the settings carbonstore needs are set on it.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

__all__ = ["get_spark", "register_data_source"]

_REQUIRED = {
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def get_spark(
    *, master: str | None = None, app_name: str = "carbonstore", shuffle_partitions: int = 4
) -> SparkSession:
    """Return the active session (adjusted) or start an embedded local one."""
    active = SparkSession.getActiveSession()
    if active is not None:
        for key, value in _REQUIRED.items():
            active.conf.set(key, value)
        register_data_source(active)
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    # spark-submit sets spark.master itself; only choose one when nobody did.
    if master is not None:
        builder = builder.master(master)
    elif "SPARK_MASTER" in os.environ:
        builder = builder.master(os.environ["SPARK_MASTER"])
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:
        # Under spark-submit the JVM is already up (PYSPARK_GATEWAY_PORT is set) and its
        # --master wins; everywhere else we start the embedded local Spark.
        builder = builder.master("local[*]")
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        .config("spark.driver.extraJavaOptions", "-Dderby.system.home=/tmp")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in _REQUIRED.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_data_source(spark)
    return spark


def register_data_source(spark: SparkSession) -> None:
    """Register the ``carbonstore`` Python data source once the module exists."""
    try:
        from carbonstore.spark.datasource import CarbonDataSource
    except ImportError:  # the data source module is optional until the load path lands
        return
    spark.dataSource.register(CarbonDataSource)
