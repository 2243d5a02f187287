"""The session time zone of DML expressions (docs/dml.md, "Time zones").

Spark's TIMESTAMP is an instant that Spark shows and reads in ``spark.sql.session.timeZone``:
its text (``cast(ts AS string)``, ``concat(ts, ...)``, a timestamp stored into a string
column), its date and fields (``cast(ts AS date)``, ``year(ts)``) and every timestamp given
without an offset (``TIMESTAMP '2024-01-01 10:00'``, ``cast(s AS timestamp)``, a date or a
TIMESTAMP_NTZ taken as a timestamp) depend on that zone. DML expressions are evaluated by
Spark (carbonstore/dml) with the statement's session time zone set to this zone.

Where the zone comes from (the first that applies): the ``time_zone`` a caller gives; the
session of a Spark DataFrame given as a MERGE source, or the active Spark session of the
process (Python API); the session spark-submit started (``--conf
spark.sql.session.timeZone=...``); ``spark.sql.session.timeZone`` in carbon.properties; UTC.
"""

from __future__ import annotations

import sys
from typing import Any

from carbonstore.errors import ConfigError
from carbonstore.expressions.bind import session_zone

__all__ = ["SESSION_TIME_ZONE_KEY", "conf_time_zone", "process_time_zone"]

#: carbon.properties key of the session time zone (Spark's own key name)
SESSION_TIME_ZONE_KEY = "spark.sql.session.timeZone"


def conf_time_zone(conf: Any) -> str:
    """The session time zone carbon.properties gives (``spark.sql.session.timeZone``)."""
    value = str(conf.get(SESSION_TIME_ZONE_KEY) or "UTC").strip() or "UTC"
    if session_zone(value) is None:  # a bad value is a user error before anything runs
        raise ConfigError(f"configuration key {SESSION_TIME_ZONE_KEY}={value!r} is not a time "
                          "zone: use a region such as Europe/Paris, UTC, or an offset such as "
                          "+08:00")
    return value


def process_time_zone(conf: Any, *, source: Any = None) -> str:
    """The session time zone of a DML statement run through the Python API.

    ``source``: a MERGE source; a Spark DataFrame's session decides. Otherwise the active
    Spark session of the process, else carbon.properties (``carbonstore`` commands under
    spark-submit ask spark-submit's session themselves: ``cli/dml.py``).
    """
    spark = getattr(source, "sparkSession", None)
    sql = sys.modules.get("pyspark.sql")
    if spark is None and sql is not None:
        # PySpark is imported only when the user (or carbonstore.spark) imported it: ask its
        # active session; never import it here (a second of start-up for every statement)
        spark = sql.SparkSession.getActiveSession()
    if spark is not None:
        return str(spark.conf.get(SESSION_TIME_ZONE_KEY))
    return conf_time_zone(conf)
