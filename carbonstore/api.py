"""The user's ``Store`` and ``Table`` (docs/python-api.md): the store layer's classes
(carbonstore.store.table) plus the operations that run code of the layers above the store:
reads and appends without a JVM (``scan``, ``append``: carbonstore/table/), ALTER
(``alter``), row-level DML (``delete``, ``update``, ``merge``; docs/dml.md) and the
partition spec (``set_partition_spec``, ``partitions``; docs/partitioning.md).

The store layer cannot import segments/ (it sits below it), so these methods live in this
top-level module, above segments/, on subclasses: ``Store.table_class`` is the hook that
makes a ``carbonstore.Store`` open and create ``carbonstore.Table`` objects.
``import carbonstore`` and ``from carbonstore import Store`` give these classes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from carbonstore.errors import UserError
from carbonstore.store import alter as al
from carbonstore.store import table as base
from carbonstore.store.ddl import parse_column_defs
from carbonstore.store.paths import TableName
from carbonstore.store.schema import Column

if TYPE_CHECKING:
    from carbonstore.segments.dml_commit import DmlResult
    from carbonstore.segments.partitions import PartitionInfo
    from carbonstore.table.append import AppendResult
    from carbonstore.table.scan import TableScan

__all__ = ["Store", "Table"]


class Table(base.Table):
    """A table of the user's API: :class:`carbonstore.store.table.Table` (schema, paths,
    tablestatus, time travel) plus row-level DML and the partition spec."""

    __slots__ = ()

    # ---- reads and appends without a JVM (carbonstore/table/, docs/python-api.md) --------
    def scan(
        self, *, where: str | None = None, columns: Sequence[str] | None = None,
        as_of: int | str | None = None, time_zone: str | None = None,
        batch_rows: int = 65536,
    ) -> TableScan:
        """A read of this table planned by its index: ``.to_arrow()``, ``.to_batches()``
        (streaming), ``.to_pandas()``, ``.to_duckdb(con)``. Runs in this process, no JVM.

        Args:
            where: a condition the index evaluator binds (columns compared with literals,
                IN, IS [NOT] NULL, LIKE 'prefix%', AND/OR/NOT; docs/query.md); others are
                refused in one line (run them in Spark).
            columns: the columns to return (default: all, in table order).
            as_of: a version, a local time or ``@<epoch ms>`` (see :meth:`as_of`).
            time_zone: the zone timestamps without an offset in ``where`` are read in
                (default as :meth:`delete`).
            batch_rows: the most rows per batch ``to_batches`` yields.
        """
        from carbonstore.table.scan import TableScan

        return TableScan(self, where=where, columns=columns, as_of=as_of, time_zone=time_zone,
                         batch_rows=batch_rows)

    def append(self, data: Any, *, options: Mapping[str, str] | None = None) -> AppendResult:
        """Append rows as one new segment, one commit, through the load writer (sort
        columns, index, blooms, dictionaries, partitions, buckets). No JVM.

        ``data``: a pyarrow Table / RecordBatch / RecordBatchReader, a pandas DataFrame, or
        any object with ``__arrow_c_stream__``. ``options``: load options (docs/load.md).
        """
        from carbonstore.table.append import append_rows

        return append_rows(self, data, options=options)

    # ---- ALTER (carbonstore.store.alter, docs/schema-evolution.md) -------------------------
    def alter(
        self, *,
        add_columns: str | Sequence[Column] | None = None,
        drop_columns: str | Sequence[str] | None = None,
        rename_column: tuple[str, str] | None = None,
        widen: tuple[str, str] | None = None,
        set_properties: Mapping[str, str] | None = None,
        unset_properties: str | Sequence[str] | None = None,
    ) -> Table:
        """``ALTER TABLE``: the changes given, applied in this order, as ONE new schema
        version (no data file rewritten). Returns the table with its new schema.

        ``add_columns``: ``"c type [not null] [default v], ..."`` or Columns;
        ``rename_column`` / ``widen``: ``(old, new)`` / ``(column, type)``.

        Raises:
            SchemaError: a change is refused (nothing is written).
        """

        changes: list[Any] = []
        ops: list[str] = []
        if add_columns is not None:
            cols = (al.columns_from_defs(parse_column_defs(add_columns))
                    if isinstance(add_columns, str) else list(add_columns))
            changes.append(al.add_columns(cols))
            ops.append(f"add-column {', '.join(c.name for c in cols)}")
        if drop_columns is not None:
            names = [drop_columns] if isinstance(drop_columns, str) else list(drop_columns)
            changes.append(al.drop_columns(names))
            ops.append(f"drop-column {' '.join(names)}")
        if rename_column is not None:
            changes.append(al.rename_column(*_pair(rename_column, "rename_column")))
            ops.append(f"rename-column {' '.join(rename_column)}")
        if widen is not None:
            changes.append(al.widen_column(*_pair(widen, "widen")))
            ops.append(f"widen {' '.join(widen)}")
        if set_properties:
            changes.append(al.set_properties(dict(set_properties)))
            ops.append("set-property " + " ".join(f"{k}={v}" for k, v in set_properties.items()))
        if unset_properties:
            keys = [unset_properties] if isinstance(unset_properties, str) else list(unset_properties)
            changes.append(al.unset_properties(keys))
            ops.append(f"unset-property {' '.join(keys)}")
        if not changes:
            raise UserError("alter: give at least one change (add_columns=, drop_columns=, "
                            "rename_column=, widen=, set_properties=, unset_properties=)")

        def change(schema: Any) -> Any:
            for c in changes:
                schema = c(schema)
            return schema

        al.alter_table(self, change, operation="; ".join(ops))
        return self.store.table(self.name)  # type: ignore[return-value]

    # ---- row-level DML (carbonstore.segments.dml, docs/dml.md) -----------------------------
    def delete(self, where: str, *, time_zone: str | None = None) -> DmlResult:
        """``DELETE FROM table WHERE where``: delete deltas, one version. The condition is
        required (``"true"`` deletes every row). ``time_zone``: Spark's session time zone
        (default: the active Spark session's, else ``spark.sql.session.timeZone`` of
        carbon.properties; docs/dml.md).

        Returns a ``DmlResult`` (rows deleted, version committed, ...)."""
        from carbonstore.segments import dml as local_dml
        from carbonstore.segments.timezones import process_time_zone

        if not isinstance(where, str) or not where.strip():
            raise UserError("delete: give a condition (where=\"true\" deletes every row)")
        zone = time_zone or process_time_zone(self.store.conf)
        if local_dml.jvm_free(self, where, zone):  # the index decides every row: no Spark
            return local_dml.delete_rows(self, where, time_zone=zone)
        from carbonstore.dml import delete_rows

        return delete_rows(self, where, time_zone=zone)

    def update(
        self, set: dict[str, str], *, where: str | None = None,  # noqa: A002
        time_zone: str | None = None,
    ) -> DmlResult:
        """``UPDATE table SET c = expr, ... WHERE where``; ``set`` maps columns to Spark SQL
        expressions over the row (``{"score": "score * 2"}``). One version. ``time_zone``:
        Spark's session time zone (default as :meth:`delete`)."""
        from carbonstore.dml import update_rows
        from carbonstore.segments.timezones import process_time_zone

        return update_rows(self, set, where,
                           time_zone=time_zone or process_time_zone(self.store.conf))

    def merge(
        self,
        source: Any,
        *,
        on: str | list[str],
        when_matched_update: dict[str, str] | Literal["*"] | None = None,
        when_matched_delete: bool | str = False,
        when_not_matched_insert: dict[str, str] | Literal["*"] | None = None,
        target_alias: str = "t",
        source_alias: str = "s",
        time_zone: str | None = None,
    ) -> DmlResult:
        """``MERGE INTO table AS t USING source AS s ON on ...``, one version.

        Args:
            source: the source rows: a Spark DataFrame, a carbonstore Table, a SQL query,
                a pyarrow Table or a pandas DataFrame (the MERGE runs on Spark).
            on: a condition over ``t`` and ``s`` (``"t.id = s.id"``) or key column names.
            when_matched_update: ``{"col": "s.col + t.col"}`` or ``"*"`` (every column from
                the source's column of the same name).
            when_matched_delete: True, or a condition: delete the matched target rows; with
                ``when_matched_update`` too, give a condition: it is checked first, and the
                matched rows it does not take are updated.
            when_not_matched_insert: ``{"col": "s.col"}`` or ``"*"``.
            time_zone: Spark's session time zone the expressions are evaluated in
                (default: a Spark DataFrame source's session's, else as :meth:`delete`).
        """
        from carbonstore.dml import WhenMatched, WhenNotMatched, merge_rows
        from carbonstore.segments.timezones import process_time_zone

        matched: list[WhenMatched] = []
        if when_matched_delete is True and when_matched_update is not None:
            raise UserError("merge: when_matched_delete=True takes every matched row, so "
                            "when_matched_update would never apply; give a delete condition")
        if when_matched_delete:
            cond = when_matched_delete if isinstance(when_matched_delete, str) else None
            matched.append(WhenMatched(action="delete", condition=cond))
        if when_matched_update is not None:
            matched.append(WhenMatched(action="update", assignments=None
                                       if when_matched_update == "*" else when_matched_update))
        not_matched = [] if when_not_matched_insert is None else [WhenNotMatched(
            values=None if when_not_matched_insert == "*" else when_not_matched_insert)]
        on = _merge_on(self, source, on, target_alias, source_alias)
        return merge_rows(self, source, on=on, matched=matched,
                          not_matched=not_matched, target_alias=target_alias,
                          source_alias=source_alias,
                          time_zone=time_zone or process_time_zone(self.store.conf, source=source))

    def set_partition_spec(
        self, partition_by: str | None, *, buckets: int | None = None,
        bucket_columns: str | list[str] | None = None,
    ) -> Table:
        """Change the partition / bucket spec of new loads (old segments keep theirs); see
        docs/partitioning.md. Returns the table with its new schema."""
        from carbonstore.segments.partitions import set_partition_spec

        # the table re-opened through this table's store: a Table of this module
        return cast(Table, set_partition_spec(self, partition_by, buckets=buckets,
                                              bucket_columns=bucket_columns))

    def partitions(self) -> list[PartitionInfo]:
        """The partitions of this table's readable segments (segments.partitions.PartitionInfo)."""
        from carbonstore.segments.partitions import show_partitions

        return show_partitions(self)


class Store(base.StoreRoot):
    """A store whose tables are :class:`Table` objects (with DML and partition specs)."""

    table_class = Table

    def table(self, name: str | TableName) -> Table:
        return cast(Table, super().table(name))

    def create_table(
        self,
        name: str,
        schema: str | list[Column],
        *,
        properties: dict[str, str] | None = None,
        if_not_exists: bool = False,
        sort_columns: str | Sequence[str] | None = None,
        sort_scope: str | None = None,
        dictionary_columns: str | Sequence[str] | None = None,
        bloom_columns: str | Sequence[str] | None = None,
        partition_by: str | Sequence[str] | None = None,
        buckets: int | None = None,
        bucket_columns: str | Sequence[str] | None = None,
    ) -> Table:
        """Create a table from a schema string (``"id long not null, name string"``).

        The keyword options are the table properties of docs/configuration.md
        (``sort_columns`` -> ``sort_columns``, ``dictionary_columns`` ->
        ``dictionary_include``, ``buckets`` -> ``bucket_number`` ...); ``properties`` gives
        any of them by their property name. A property given both ways is refused."""
        props: dict[str, str] = dict(properties or {})
        given: dict[str, str | int | Sequence[str] | None] = {"sort_columns": sort_columns, "sort_scope": sort_scope,
                 "dictionary_include": dictionary_columns, "bloom_columns": bloom_columns,
                 "partition_by": partition_by, "bucket_number": buckets,
                 "bucket_columns": bucket_columns}
        lower = {k.strip().lower() for k in props}
        for key, value in given.items():
            if value is None:
                continue
            if key in lower:
                raise UserError(f"create_table: {key} is given twice (as a keyword and in "
                                "properties)")
            props[key] = str(value) if isinstance(value, (str, int)) else ",".join(value)
        if sort_columns is not None and sort_scope is None and "sort_scope" not in lower:
            props["sort_scope"] = "local_sort"  # sort columns given: the loads sort on them
        return cast(Table, super().create_table(
            name, schema, properties=props,
            if_not_exists=if_not_exists))



def _pair(value: Any, what: str) -> tuple[str, str]:
    if isinstance(value, str) or len(value) != 2:
        raise UserError(f"alter: {what} takes a pair (old, new), got {value!r}")
    return str(value[0]), str(value[1])


def _source_columns(source: Any) -> list[str] | None:
    """The column names of a MERGE source (None for a SQL query: Spark names them)."""
    if isinstance(source, str):
        return None
    if isinstance(source, base.Table):
        return list(source.schema.column_names)
    schema = getattr(source, "schema", None)
    if schema is not None and hasattr(schema, "names"):  # pyarrow
        return list(schema.names)
    return [str(c) for c in source.columns]  # a Spark or pandas DataFrame


def _merge_on(table: Table, source: Any, on: str | Sequence[str], ta: str, sa: str) -> Any:
    """``on`` checked before anything runs: key names (a list, or a string of bare names)
    must be columns of the table and the source; a condition must qualify every column with
    the target or source alias (an unqualified one is ambiguous). One line otherwise."""
    import re

    if isinstance(on, str) and re.fullmatch(r"\s*`?\w+`?(\s*,\s*`?\w+`?)*\s*", on):
        on = [n.strip().strip("`") for n in on.split(",")]
    if not isinstance(on, str):
        names = [str(n).strip().lower() for n in on]
        if not names:
            raise UserError("merge: give on= key column names or a condition")
        mine = set(table.schema.column_names)
        columns = _source_columns(source)
        theirs = None if columns is None else {n.lower() for n in columns}
        for n in names:
            if n not in mine:
                raise UserError(f"merge: on: {n!r} is not a column of table {table.name} "
                                f"(it has {', '.join(table.schema.column_names)})")
            if theirs is not None and n not in theirs:
                raise UserError(f"merge: on: the source has no column {n!r} (it has "
                                f"{', '.join(columns or [])})")
        return names
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    try:
        tree = sqlglot.parse_one(on, read="spark")
    except (ParseError, TokenError) as err:
        raise UserError(f"merge: on: not a SQL condition: {on!r} "
                        f"({str(err).splitlines()[0]})") from None
    aliases = {ta.lower(), sa.lower()}
    for col in tree.find_all(exp.Column):
        if col.table.lower() not in aliases:
            where = f"qualified by {col.table!r}" if col.table else "unqualified"
            raise UserError(
                f"merge: on: column {col.name!r} is {where}: name it as {ta}.{col.name} "
                f"(the table) or {sa}.{col.name} (the source), or give on=[{col.name!r}] "
                "for equal key columns")
    return on
