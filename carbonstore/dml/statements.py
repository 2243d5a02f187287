"""DELETE and UPDATE as Spark jobs (docs/dml.md, "Execution").

The driver plans (the index keeps the segments and files the condition's bound conjuncts
can match), Spark reads those files natively, evaluates the condition and the SET values as
Spark SQL (any function Spark has, in the session's ANSI mode and time zone), and its tasks
write the delete deltas and the new rows; the driver commits one version.

A DELETE whose whole condition the store's filter parser binds keeps the JVM-free path
(``segments.dml.delete_rows``: the index evaluator, tested against brute force).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from carbonstore.dml.engine import (
    LazyRows,
    Target,
    adaptive_off,
    commit_statement,
    pruning_filter,
    spark_errors,
    spark_for,
    statement_zone,
)
from carbonstore.errors import ExpressionError, UserError
from carbonstore.expressions.expr import Expr
from carbonstore.expressions.sql_checks import unknown_column
from carbonstore.segments import dml as local_dml
from carbonstore.segments.dml_commit import DmlResult, run_replanned
from carbonstore.segments.dml_conflicts import FileKey, Reads
from carbonstore.store.ddl import quote_name
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import TableStatusSnapshot

__all__ = ["assigned_columns", "check_columns", "delete_rows", "update_rows"]


def delete_rows(table: Table, where: str | Expr | None, *, time_zone: str = "UTC") -> DmlResult:
    """``DELETE FROM table WHERE where`` (docs/dml.md): JVM-free when the filter parser binds
    the whole condition, else a Spark job."""
    if local_dml.jvm_free(table, where, time_zone):
        return local_dml.delete_rows(table, where, time_zone=time_zone)
    assert isinstance(where, str)
    return _run(table, "DELETE", where, None, time_zone)


def update_rows(
    table: Table, assignments: Mapping[str, str], where: str | Expr | None, *,
    time_zone: str = "UTC",
) -> DmlResult:
    """``UPDATE table SET c = expr, ... WHERE where``: the matched rows get a delete delta
    and their new versions go to one insert segment, in one version."""
    unknown = [c for c in assignments if c.lower() not in table.schema.column_names]
    if unknown or not assignments:
        raise UserError(f"UPDATE {table.name} SET: unknown column(s) "
                        f"{', '.join(unknown) or '(none given)'}; the table has "
                        f"{', '.join(table.schema.column_names)}")
    if where is not None and not isinstance(where, str):
        raise UserError("UPDATE: give the condition as text")
    sets = {c.lower(): v for c, v in assignments.items()}
    for name, value in sets.items():  # before Spark starts: NULL into a NOT NULL column
        if not table.schema.column(name).nullable and value.strip().upper() == "NULL":
            raise UserError(f"UPDATE {table.name} SET {name} = NULL: column {name} is NOT NULL")
    return _run(table, "UPDATE", where, sets, time_zone)


def assigned_columns(
    spark: Any, table: Table, frame: Any, sets: Mapping[str, str], what: str,
    keep: str | None = None,
) -> list[Any]:
    """The table's columns over ``frame``: ``sets`` (column -> Spark SQL) assigned with
    Spark's store assignment (its ANSI rule: a value of a type the column cannot take is
    refused before any row is read), the others kept (``keep``: qualified by that alias)."""
    from pyspark.sql import functions as F

    values = {}
    for c in table.schema.columns:
        if c.name in sets:
            values[c.name] = F.expr(sets[c.name])
        else:
            values[c.name] = F.col(f"{keep}.{quote_name(c.name)}" if keep else quote_name(c.name))
    probe = frame.select(*[v.alias(n) for n, v in values.items() if n in sets])
    _check_assignable(spark, table, probe, what)
    return [values[c.name].cast(str(c.type)).alias(c.name) if c.name in sets
            else values[c.name].alias(c.name) for c in table.schema.columns]


def _check_assignable(spark: Any, table: Table, probe: Any, what: str) -> None:
    """Spark's ``Cast.canANSIStoreAssign`` of each assigned value's type to its column's."""
    try:
        jvm = spark._jvm
        cast = jvm.org.apache.spark.sql.catalyst.expressions.Cast
        parse = spark._jsparkSession.parseDataType
    except Exception:  # noqa: BLE001 - a session without a JVM here: Spark's cast decides
        return
    for field in probe.schema.fields:
        want = table.schema.column(field.name).type
        from pyspark.sql.types import _parse_datatype_string

        to = parse(_parse_datatype_string(str(want)).json())
        if not cast.canANSIStoreAssign(parse(field.dataType.json()), to):
            raise UserError(
                f"{what} {field.name}: a value of type {field.dataType.simpleString()} cannot "
                f"be stored in column {field.name} of type {want} (Spark's store assignment "
                "rule); cast it explicitly")


def check_columns(table: Table, texts: Mapping[str, str]) -> None:
    """A column a condition or value names that the table does not have, in one line before
    Spark starts (Spark would say it too, after the JVM's start)."""
    for what, text in texts.items():
        name = unknown_column(text, table.schema.column_names, table.name.table, what)
        if name is not None:
            raise ExpressionError(f"{what}: unknown column {name}; {table.name} has "
                                  f"{', '.join(table.schema.column_names)}")


def _run(
    table: Table, operation: str, where: str | None, sets: Mapping[str, str] | None,
    time_zone: str | None,
) -> DmlResult:
    from pyspark.sql import functions as F

    check_columns(table, {**({f"{operation} WHERE": where} if where else {}),
                          **{f"{operation} SET {c}": v for c, v in (sets or {}).items()}})
    spark = spark_for(table)
    prune_by = pruning_filter(table, where, time_zone)
    alias = table.name.table

    def matched(target: Target) -> Any:
        frame = target.frame.alias(alias)
        return frame.where(F.expr(where)) if where else frame

    def read(snap: TableStatusSnapshot, segments: Any = None) -> dict[FileKey, Any]:
        target = Target(spark, table, prune_by, snap, segments)
        return target.positions(matched(target))

    def step(snap: TableStatusSnapshot) -> DmlResult:
        with spark_errors(operation):
            target = Target(spark, table, prune_by, snap)
            rows = matched(target)
            new = None
            if sets is not None:
                values = assigned_columns(spark, table, rows, sets, f"{operation} SET")
                # one read of the target: the delta job keeps the matched rows it reads,
                # the insert job (when they are any) takes their new versions from them
                rows = rows.persist()
                new = rows.select(*values)
        reads = Reads(LazyRows(target.keys(), lambda: read(snap)), match=read)
        try:
            return commit_statement(spark, table, snap, operation=operation, gone=rows,
                                    files=target.files, new_rows=new, reads=reads,
                                    replaces=True)
        finally:
            if new is not None:
                rows.unpersist()

    with statement_zone(spark, time_zone), adaptive_off(spark):
        return run_replanned(table, operation, step)
