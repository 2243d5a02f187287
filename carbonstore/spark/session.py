"""The one SparkSession factory every entry point uses.

Embedded default: ``local[*]``, UI off, few shuffle partitions, Python filter pushdown on,
session time zone UTC, executors running this interpreter. An active session (a notebook)
is honoured: its master is kept and only the settings carbonstore needs are set on it.
Under ``spark-submit`` (any job file) the session is started from spark-submit's own
settings (``--master``, ``--conf``, ``spark-defaults.conf``), which win over the embedded
defaults; only the required settings are added, and the time zone is UTC unless
``spark.sql.session.timeZone`` was given.
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
_TIME_ZONE = "spark.sql.session.timeZone"


def get_spark(
    *, master: str | None = None, app_name: str = "carbonstore", shuffle_partitions: int = 4
) -> SparkSession:
    """Return the active session (adjusted) or start one.

    Under spark-submit ``master``, ``app_name`` and ``shuffle_partitions`` are not used:
    spark-submit's settings decide.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return _adjust(active)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # spark-submit started the JVM with the user's settings (PYSPARK_GATEWAY_PORT is
        # set): build the session from them alone, as builder.config() would override them.
        spark = SparkSession.builder.getOrCreate()
        if not spark.sparkContext.getConf().contains(_TIME_ZONE):
            spark.conf.set(_TIME_ZONE, "UTC")
        return _adjust(spark)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif "SPARK_MASTER" in os.environ:
        builder = builder.master(os.environ["SPARK_MASTER"])
    else:
        builder = builder.master("local[*]")
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        .config("spark.driver.extraJavaOptions", "-Dderby.system.home=/tmp")
        .config(_TIME_ZONE, "UTC")
        # PySpark's daemon without a traceback when a LIMIT closes a worker's socket.
        .config("spark.python.daemon.module", "carbonstore.spark.daemon")
    )
    for key, value in _REQUIRED.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_data_source(spark)
    return spark


def _adjust(spark: SparkSession) -> SparkSession:
    """Set what carbonstore cannot work without on a session someone else configured."""
    for key, value in _REQUIRED.items():
        spark.conf.set(key, value)
    register_data_source(spark)
    return spark


def register_data_source(spark: SparkSession) -> None:
    """Register the ``carbonstore`` Python data source once the module exists."""
    try:
        from carbonstore.spark.datasource import CarbonDataSource
    except ImportError:  # the data source module is optional until the load path lands
        return
    spark.dataSource.register(CarbonDataSource)
