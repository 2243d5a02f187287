"""The user's ``Store`` and ``Table``: the store layer's classes (carbonstore.store.table)
plus the operations that run code of the layers above the store: row-level DML
(``delete``, ``update``, ``merge``; docs/dml.md) and the partition spec
(``set_partition_spec``, ``partitions``; docs/partitioning.md).

The store layer cannot import segments/ (it sits below it), so these methods live in this
top-level module, above segments/, on subclasses: ``Store.table_class`` is the hook that
makes a ``carbonstore.Store`` open and create ``carbonstore.Table`` objects.
``import carbonstore`` and ``from carbonstore import Store`` give these classes.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from carbonstore.errors import UserError
from carbonstore.store import table as base
from carbonstore.store.paths import TableName
from carbonstore.store.schema import Column

__all__ = ["Store", "Table"]


class Table(base.Table):
    """A table of the user's API: :class:`carbonstore.store.table.Table` (schema, paths,
    tablestatus, time travel) plus row-level DML and the partition spec."""

    __slots__ = ()

    # ---- row-level DML (carbonstore.segments.dml, docs/dml.md) -----------------------------
    def delete(self, where: str, *, time_zone: str | None = None) -> Any:
        """``DELETE FROM table WHERE where``: delete deltas, one version. The condition is
        required (``"true"`` deletes every row). ``time_zone``: Spark's session time zone
        (default: the active Spark session's, else ``spark.sql.session.timeZone`` of
        carbon.properties; docs/dml.md).

        Returns a ``DmlResult`` (rows deleted, version committed, ...)."""
        from carbonstore.dml import delete_rows
        from carbonstore.segments.timezones import process_time_zone

        if not isinstance(where, str) or not where.strip():
            raise UserError("delete: give a condition (where=\"true\" deletes every row)")
        return delete_rows(self, where, time_zone=time_zone or process_time_zone(self.store.conf))

    def update(
        self, set: dict[str, str], *, where: str | None = None,  # noqa: A002
        time_zone: str | None = None,
    ) -> Any:
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
    ) -> Any:
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

    def partitions(self) -> list[Any]:
        """The partitions of this table's readable segments (segments.partitions.PartitionInfo)."""
        from carbonstore.segments.partitions import show_partitions

        return show_partitions(self)


class Store(base.Store):
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
    ) -> Table:
        return cast(Table, super().create_table(
            name, schema, properties=properties, if_not_exists=if_not_exists))
