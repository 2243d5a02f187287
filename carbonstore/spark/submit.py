"""The spark-submit job file: runs any ``carbonstore`` command inside spark-submit.

    spark-submit --master spark://host:7077 \\
        "$(python -c 'import carbonstore.spark.submit as m; print(m.__file__)')" \\
        load sales --input /shared/in/*.csv --store /shared/carbon.store

The session is started here from what spark-submit was given (``--master``, ``--conf``,
``spark-defaults.conf``) before the command runs, so ``get_spark`` finds it active and only
adds the settings carbonstore cannot work without (Python filter pushdown, Arrow). As in
the embedded session, the session time zone is UTC unless ``spark.sql.session.timeZone`` was
given, and executors run this interpreter unless ``spark.pyspark.python`` or
``PYSPARK_PYTHON`` names another. See docs/cluster.md for shipping the package to executors.
"""

from __future__ import annotations

import os
import sys

from carbonstore.cli import main

_TIME_ZONE = "spark.sql.session.timeZone"


def start_session() -> None:
    """Start the session spark-submit configured (its settings win over carbonstore's)."""
    from pyspark.sql import SparkSession

    # spark-submit puts spark.pyspark.python into PYSPARK_PYTHON; the context reads it.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.getOrCreate()
    if not spark.sparkContext.getConf().contains(_TIME_ZONE):
        spark.conf.set(_TIME_ZONE, "UTC")


if __name__ == "__main__":
    start_session()
    sys.exit(main(sys.argv[1:]))
