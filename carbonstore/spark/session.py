"""The one SparkSession factory every entry point uses.

Embedded default: ``local[*]``, UI off, few shuffle partitions, session time zone
``spark.sql.session.timeZone`` of carbon.properties (default UTC),
executors running this interpreter, Spark's own logging quiet (``carbon.spark.log.level``,
default ``FATAL``: the command reports failures itself, in one line) and no stage progress
bars unless stderr is a terminal. Python filter pushdown is left as configured: the
``carbonstore`` data source implements no ``pushFilters`` (docs/semantics.md). An active session (a notebook)
is honoured: its master is kept and only the settings carbonstore needs are set on it.
Under ``spark-submit`` (any job file) the session is started from spark-submit's own
settings (``--master``, ``--conf``, ``spark-defaults.conf``), which win over the embedded
defaults; only the required settings are added, and the time zone is carbon.properties'
(default UTC) unless ``spark.sql.session.timeZone`` was given.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from carbonstore.errors import QUIET_ERROR_LOGS, ConfigError
from carbonstore.store import CarbonConf, load_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LOG_LEVEL_KEY", "get_spark", "register_data_source", "start_spark"]

_REQUIRED = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
_TIME_ZONE = "spark.sql.session.timeZone"
LOG_LEVEL_KEY = "carbon.spark.log.level"
_LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")


def _log_level(conf: CarbonConf | None) -> str:
    value = (conf or load_conf()).get(LOG_LEVEL_KEY).strip().upper()
    if value not in _LEVELS:
        raise ConfigError(f"{LOG_LEVEL_KEY}={value!r}: use one of {', '.join(_LEVELS)}")
    return value


def _conf_zone(conf: CarbonConf | None) -> str:
    """``spark.sql.session.timeZone`` of carbon.properties (default UTC)."""
    from carbonstore.segments.timezones import conf_time_zone

    return conf_time_zone(conf or load_conf())


def _log4j_file(level: str) -> str:
    """A log4j2 configuration sending Spark's log at ``level`` and above to stderr (written
    once per level into the temp folder: the JVM reads it at start-up, before any
    setLogLevel, so even start-up warnings follow it)."""
    path = Path(tempfile.gettempdir()) / f"carbonstore-log4j2-{level.lower()}.properties"
    # Spark prints 'Setting default log level to "WARN"' at start-up unless the root level
    # is WARN: quieter levels keep the root at WARN and filter on the appender instead.
    quiet = _LEVELS.index(level) < _LEVELS.index("WARN")
    text = (
        f"rootLogger.level = {'warn' if quiet else level.lower()}\n"
        "rootLogger.appenderRef.stderr.ref = console\n"
        "appender.console.type = Console\n"
        "appender.console.name = console\n"
        "appender.console.target = SYSTEM_ERR\n"
        "appender.console.filter.threshold.type = ThresholdFilter\n"
        f"appender.console.filter.threshold.level = {level.lower()}\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex\n"
    )
    try:
        if not path.is_file() or path.read_text() != text:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
    except OSError:  # an unwritable temp folder: Spark's default logging, then setLogLevel
        return ""
    return str(path)


def get_spark(
    *, master: str | None = None, app_name: str = "carbonstore", shuffle_partitions: int = 4,
    conf: CarbonConf | None = None, console_progress: bool | None = None,
) -> SparkSession:
    """Return the active session (adjusted) or start one.

    ``console_progress``: Spark's console progress bar for a session started here (None:
    when stderr is a terminal; False for a command that draws its own bar).

    Under spark-submit ``master``, ``app_name`` and ``shuffle_partitions`` are not used:
    spark-submit's settings decide. ``conf`` (default: ``load_conf()``) gives
    ``carbon.spark.log.level`` for a session started here; an active session's logging is
    left alone.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return _adjust(active)
    level = _log_level(conf)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # spark-submit started the JVM with the user's settings (PYSPARK_GATEWAY_PORT is
        # set): build the session from them alone, as builder.config() would override them.
        spark = SparkSession.builder.getOrCreate()
        if not spark.sparkContext.getConf().contains(_TIME_ZONE):
            spark.conf.set(_TIME_ZONE, _conf_zone(conf))
        spark.sparkContext.setLogLevel(level)
        return _adjust(spark)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif "SPARK_MASTER" in os.environ:
        builder = builder.master(os.environ["SPARK_MASTER"])
    else:
        builder = builder.master("local[*]")
    java_options = "-Dderby.system.home=/tmp"
    log4j = _log4j_file(level)
    if log4j:
        java_options += f" -Dlog4j2.configurationFile=file:{log4j}"
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.ui.showConsoleProgress",
                "true" if sys.stderr.isatty() and console_progress is not False else "false")
        # A native read lists its kept files by path: on the driver, not in a Spark job.
        .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
        .config(_TIME_ZONE, _conf_zone(conf))
        # PySpark's daemon without a traceback when a LIMIT closes a worker's socket.
        .config("spark.python.daemon.module", "carbonstore.spark.daemon")
    )
    for key, value in _REQUIRED.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(level)
    register_data_source(spark)
    _quiet_error_logs()
    return spark


def start_spark(*, conf: CarbonConf | None = None) -> Callable[[], SparkSession]:
    """:func:`get_spark` started on a background thread; returns the function that waits for
    it (and raises what it raised).

    A one-shot command starts the JVM this way before it plans: the JVM boots (seconds)
    while this process imports PySpark's modules, parses the statement and prunes (Python,
    the JVM's boot mostly waits on its own process), so the planning costs no wall time.
    Nothing is shared with the caller while it runs: the caller uses the session only after
    the wait.
    """
    _log_level(conf)  # a bad log level is a user error here, before any thread
    done: list[SparkSession] = []
    failed: list[BaseException] = []

    def start() -> None:
        try:
            done.append(get_spark(conf=conf))
        except BaseException as err:  # noqa: BLE001 - handed to the waiting caller
            failed.append(err)

    thread = threading.Thread(target=start, name="carbonstore-spark-start", daemon=True)
    thread.start()

    def wait() -> SparkSession:
        thread.join()
        if failed:
            raise failed[0]
        spark = done[0]
        # Spark's active session is per thread (the JVM's, one per Python thread): make it
        # the active one of this thread too, as get_spark would have
        from pyspark.sql import SparkSession

        if SparkSession.getActiveSession() is not spark:
            SparkSession._activeSession = spark
            SparkSession._get_j_spark_session_class(spark._jvm).setActiveSession(
                spark._jsparkSession)
        return spark

    return wait


def _adjust(spark: SparkSession) -> SparkSession:
    """Set what carbonstore cannot work without on a session someone else configured."""
    for key, value in _REQUIRED.items():
        spark.conf.set(key, value)
    register_data_source(spark)
    _quiet_error_logs()
    return spark


def _quiet_error_logs() -> None:
    """Turn off PySpark's JSON log of a failed query's context when the caller reports
    every error itself (the CLI sets QUIET_ERROR_LOGS)."""
    if os.environ.get(QUIET_ERROR_LOGS):
        from pyspark.logger import PySparkLogger

        for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
            PySparkLogger.getLogger(name).disabled = True


def register_data_source(spark: SparkSession) -> None:
    """Register the ``carbonstore`` Python data source once the module exists."""
    try:
        from carbonstore.spark.datasource import CarbonDataSource
    except ImportError:  # the data source module is optional until the load path lands
        return
    spark.dataSource.register(CarbonDataSource)
