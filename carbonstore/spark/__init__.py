"""carbonstore in Spark: the ``carbonstore`` data source and store tables by name.

    import carbonstore.spark
    carbonstore.spark.register(spark, store="/data/carbon.store")
    spark.sql("SELECT count(*) FROM shop.orders")

``register`` is imported on first use (a module ``__getattr__``): importing a submodule
(``carbonstore.spark.session`` ...) does not import the catalog. The ``carbonstore`` data
source needs no registration where Spark looks Python data sources up by itself: the
top-level module ``pyspark_carbonstore`` (docs/spark.md).
"""

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from carbonstore.spark.catalog import register

__all__ = ["register"]

_LAZY = {"register": ("carbonstore.spark.catalog", "register")}


def __getattr__(name: str) -> "Any":
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'carbonstore.spark' has no attribute {name!r}") from None
    __import__(module)
    value = getattr(sys.modules[module], attr)
    globals()[name] = value
    return value
