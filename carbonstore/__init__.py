"""carbonstore: a segment store of Parquet files with side indexes, driven by PySpark.

The public API::

    from carbonstore import Store, prune, compact, clean_files

    table = Store("/data/carbon.store").table("db.sales")
    plan = prune(table, "id = 42")          # a TablePlan: segments, files, row groups
    table.delete("id = 42")                 # row-level DML (docs/dml.md)
    compact(table, "minor")
    clean_files(table, dry_run=False)    # default: a dry run

Names are imported on first use (a module ``__getattr__``), so ``import carbonstore`` stays
cheap: a command that only reads the indexes does not pay for what it does not use.
Spark: ``carbonstore.spark.api.to_spark`` and the ``carbonstore`` data source.
"""

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from typing import Any

    from carbonstore import errors
    from carbonstore.api import Store, Table
    from carbonstore.pruning.plan import TablePlan, prune
    from carbonstore.segments.clean import clean_files
    from carbonstore.segments.compaction import compact

__all__ = ["Store", "Table", "TablePlan", "clean_files", "compact", "errors", "prune"]

# public name -> module that defines it (None: the name is the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "Store": ("carbonstore.api", "Store"),
    "Table": ("carbonstore.api", "Table"),
    "TablePlan": ("carbonstore.pruning.plan", "TablePlan"),
    "prune": ("carbonstore.pruning.plan", "prune"),
    "compact": ("carbonstore.segments.compaction", "compact"),
    "clean_files": ("carbonstore.segments.clean", "clean_files"),
    "errors": ("carbonstore.errors", None),
}


def __getattr__(name: str) -> "Any":
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'carbonstore' has no attribute {name!r}") from None
    __import__(module)  # importlib would cost an import of its own
    value = sys.modules[module]
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
