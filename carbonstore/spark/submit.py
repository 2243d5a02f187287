"""The spark-submit job file: runs any ``carbonstore`` command inside spark-submit.

    spark-submit --master spark://host:7077 \\
        "$(python -c 'import carbonstore.spark.submit as m; print(m.__file__)')" \\
        load sales --input /shared/in/*.csv --store /shared/carbon.store

The commands start no Spark of their own here: ``get_spark`` sees the session that
spark-submit prepared and keeps its master. See docs/cluster.md for shipping the package to
executors.
"""

from __future__ import annotations

import sys

from carbonstore.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
