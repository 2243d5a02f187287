"""Table layout, filesystem, schema, tablestatus, locks and configuration."""

from carbonstore.store.conf import CarbonConf, load_conf
from carbonstore.store.paths import TableName, TablePaths, parse_table_name
from carbonstore.store.schema import Column, DataType, TableSchema, parse_schema_string
from carbonstore.store.table import StoreRoot, Table
from carbonstore.store.tablestatus import LoadEntry, TableStatus, TableStatusSnapshot, VersionInfo

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
