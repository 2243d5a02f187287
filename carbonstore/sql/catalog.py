"""DESCRIBE [EXTENDED] t, DESCRIBE HISTORY t, SHOW TABLES [IN db], SHOW CREATE TABLE t, and
the rows of SHOW SEGMENTS: read from the store's metadata, no JVM, times as date-times."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from carbonstore.errors import UserError
from carbonstore.segments.cluster_spec import segment_clustering
from carbonstore.store.table import StoreRoot, Table
from carbonstore.store.tablestatus import LoadEntry

__all__ = ["SEGMENT_COLUMNS", "create_statement", "date_time", "describe_rows", "history_rows",
           "quote_name", "segment_rows", "table_rows"]

SEGMENT_COLUMNS = ["id", "status", "loadStartTime", "timeTakenMs", "rows", "dataSize",
                   "indexSize", "mergedTo", "format", "clusteredBy"]
# properties the PARTITIONED BY / CLUSTERED BY clauses of SHOW CREATE TABLE carry
_CLAUSE_PROPERTIES = ("partition_by", "bucket_columns", "bucket_number")


def date_time(epoch_ms: int | None) -> str | None:
    """Epoch milliseconds as local ``yyyy-MM-dd HH:mm:ss.SSS`` (as CarbonData's SHOW SEGMENTS
    and ``carbonstore show-segments`` print them; the form ``SEGMENT.STARTTIME BEFORE``
    reads); None for none."""
    if not epoch_ms:
        return None
    try:
        when = dt.datetime.fromtimestamp(epoch_ms / 1000)
    except (OverflowError, OSError, ValueError):  # a time no calendar holds: the number
        return str(epoch_ms)
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{when.microsecond // 1000:03d}"


def segment_rows(entries: list[LoadEntry]) -> list[dict[str, Any]]:
    return [{"id": e.load_name, "status": e.status, "loadStartTime": date_time(e.load_start_time),
             "timeTakenMs": e.time_taken_ms, "rows": e.row_count, "dataSize": e.data_size,
             "indexSize": e.index_size, "mergedTo": e.merged_load_name, "format": e.file_format,
             "clusteredBy": None if (spec := segment_clustering(e)) is None else spec.describe()}
            for e in entries]


def describe_rows(table: Table, extended: bool) -> list[dict[str, Any]]:
    """Spark's DESCRIBE columns (col_name, data_type, comment); EXTENDED adds the table's
    detail after an empty row, as Spark's ``# Detailed Table Information``."""
    rows: list[dict[str, Any]] = [
        {"col_name": c.name, "data_type": str(c.type),
         "comment": None if c.nullable else "not null"}
        for c in table.schema.columns]
    if not extended:
        return rows
    info = table.describe()
    detail = [("# Detailed Table Information", None), ("Table", info["table"]),
              ("Location", info["location"]), ("Provider", "carbonstore"),
              ("Schema Version", str(info["schemaVersion"])),
              ("Segments", f"{info['readableSegments']} readable of {info['segments']}"),
              ("Rows", str(info["rows"])), ("Data Size", str(info["dataSize"]))]
    if info["properties"]:
        detail.append(("Table Properties", "[" + ", ".join(
            f"{k}={v}" for k, v in info["properties"].items()) + "]"))
    rows.append({"col_name": "", "data_type": "", "comment": ""})
    rows.extend({"col_name": k, "data_type": v, "comment": ""} for k, v in detail)
    return rows


def history_rows(table: Table) -> list[dict[str, Any]]:
    return [{"version": v.version, "timestamp": date_time(v.timestamp), "operation": v.operation,
             "added": ",".join(v.added), "removed": ",".join(v.removed), "rows": v.rows,
             "writer": v.writer} for v in table.history()]


def table_rows(store: StoreRoot, database: str | None) -> list[dict[str, Any]]:
    names = store.tables()
    if database is not None:
        names = [n for n in names if n.database == database.lower()]
    return [{"database": n.database, "tableName": n.table} for n in names]


_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def quote_name(name: str) -> str:
    """A name part as SQL: bare when it is a plain identifier, else in backticks."""
    return name if _BARE.fullmatch(name) else "`" + name.replace("`", "``") + "`"


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def create_statement(table: Table) -> str:
    """The CREATE TABLE ... STORED AS carbondata statement that makes a table like ``table``
    (columns, NOT NULL, defaults, partitioning, buckets, properties)."""
    cols = []
    for c in table.schema.columns:
        text = f"{quote_name(c.name)} {c.type}"
        if not c.nullable:
            text += " NOT NULL"
        if c.default is not None:
            text += f" DEFAULT {c.default}"
        cols.append(text)
    props = dict(sorted(table.schema.properties.items()))
    out = f"CREATE TABLE {quote_name(table.name.database)}.{quote_name(table.name.table)} " \
          f"({', '.join(cols)})\nSTORED AS carbondata"
    if props.get("partition_by"):
        out += f"\nPARTITIONED BY ({props['partition_by']})"
    if props.get("bucket_columns") and props.get("bucket_number"):
        out += f"\nCLUSTERED BY ({props['bucket_columns']}) INTO {props['bucket_number']} BUCKETS"
    rest = {k: v for k, v in props.items() if k not in _CLAUSE_PROPERTIES}
    if rest:
        out += "\nTBLPROPERTIES (" + ", ".join(
            f"{_sql_string(k)}={_sql_string(v)}" for k, v in rest.items()) + ")"
    return out


def check_database(name: str | None) -> None:
    if name is not None and "." in name:
        raise UserError(f"SHOW TABLES IN {name}: name a database, not a table")
