"""The ``carbonstore`` Python data source, found by Spark without registration.

Spark 4 looks Python data sources up by itself on first use: every top-level module named
``pyspark_*`` whose ``DefaultSource`` is a DataSource (pyspark.sql.worker.
lookup_data_sources). This module is that for ``spark.read.format("carbonstore")`` in any
session whose Python workers import carbonstore, Spark Connect servers included.
"""

from carbonstore.spark.datasource import CarbonDataSource as DefaultSource

__all__ = ["DefaultSource"]
