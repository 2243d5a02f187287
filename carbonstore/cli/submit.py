"""The spark-submit job file: runs any ``carbonstore`` command inside spark-submit.

    spark-submit --master spark://host:7077 \\
        "$(python -c 'import carbonstore.cli.submit as m; print(m.__file__)')" \\
        load sales --input /shared/in/*.csv --store /shared/carbon.store

The session is started here from what spark-submit was given (``--master``, ``--conf``,
``spark-defaults.conf``) before the command runs (``get_spark`` under spark-submit), so the
command finds it active: carbonstore only adds the settings it cannot work without (Python
filter pushdown, Arrow). As in the embedded session, the session time zone is UTC unless
``spark.sql.session.timeZone`` was given, and executors run this interpreter unless
``spark.pyspark.python`` or ``PYSPARK_PYTHON`` names another. See docs/cluster.md for
shipping the package to executors.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and sys.path and sys.path[0] and (
        os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__))):
    # Run as a file, Python puts this folder first on sys.path: its modules (load.py,
    # tables.py, ...) would shadow top-level modules of those names for every library.
    del sys.path[0]

from carbonstore.cli.app import main  # noqa: E402 - after the sys.path fix above


def start_session() -> None:
    """Start the session spark-submit configured (its settings win over carbonstore's)."""
    from carbonstore.spark.session import get_spark

    get_spark()


if __name__ == "__main__":
    start_session()
    sys.exit(main(sys.argv[1:]))
