"""Table layout, filesystem, schema, tablestatus, locks and configuration.

The names below are imported on first use (a module ``__getattr__``), so importing one
submodule (``carbonstore.store.paths``, ``carbonstore.store.conf`` ...) does not import the
others: the file layer (pyarrow.fs, numpy: ~0.2 s of CPU) only when a command opens the
store, not when it builds its parser or prints its ``--help``.
"""

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from carbonstore.store.conf import CarbonConf, load_conf
    from carbonstore.store.paths import TableName, TablePaths, parse_table_name
    from carbonstore.store.schema import Column, DataType, TableSchema, parse_schema_string
    from carbonstore.store.table import StoreRoot, Table
    from carbonstore.store.tablestatus import (
        LoadEntry,
        TableStatus,
        TableStatusSnapshot,
        VersionInfo,
    )

__all__ = [
    "CarbonConf",
    "Column",
    "DataType",
    "LoadEntry",
    "StoreRoot",
    "Table",
    "TableName",
    "TablePaths",
    "TableSchema",
    "TableStatus",
    "TableStatusSnapshot",
    "VersionInfo",
    "load_conf",
    "parse_schema_string",
    "parse_table_name",
]

_LAZY = {
    "CarbonConf": "conf", "load_conf": "conf",
    "TableName": "paths", "TablePaths": "paths", "parse_table_name": "paths",
    "Column": "schema", "DataType": "schema", "TableSchema": "schema",
    "parse_schema_string": "schema",
    "StoreRoot": "table", "Table": "table",
    "LoadEntry": "tablestatus", "TableStatus": "tablestatus",
    "TableStatusSnapshot": "tablestatus", "VersionInfo": "tablestatus",
}


def __getattr__(name: str) -> "Any":
    try:
        module = f"{__name__}.{_LAZY[name]}"
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    __import__(module)
    value = getattr(sys.modules[module], name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
