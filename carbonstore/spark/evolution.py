"""The native read path over segments of several schema versions (store/evolution.py).

Files of one schema version are read with that version's storage schema (the names and
types they were written with), projected by column id to the read schema (renamed, added
columns as their default, widened types cast) and the groups are unioned by name. Segments
written with the read schema are read as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from carbonstore.pruning.plan import FilePlan, TablePlan
from carbonstore.spark.dml import drop_deleted, name_groups
from carbonstore.store.ddl import quote_name
from carbonstore.store.evolution import Projection, column_default
from carbonstore.store.table import Table

__all__ = ["evolved_frame"]


def _storage_type(table: Table, name: str, type_text: str) -> str:
    return "int" if name in set(table.schema.dictionary_columns) else type_text


def evolved_frame(
    spark: Any, table: Table, plan: TablePlan, projections: dict[str, Projection],
    current_ddl: str, uri: Callable[[str], str],
) -> Any:
    """The storage-typed DataFrame (read names) over the plan's files, by schema version;
    rows the plan's delete deltas remove are left out (spark/dml.py)."""
    from pyspark.sql import functions as F


    def scan(ddl: str | None, files: list[FilePlan], deltas: bool) -> Any:
        reader = spark.read.schema(ddl) if ddl else spark.read
        if not deltas:
            return reader.parquet(*[uri(plan.absolute(f.path)) for f in files])
        out = None
        for group in name_groups(files):
            raw = reader.parquet(*[uri(plan.absolute(f.path)) for f in group])
            part = drop_deleted(spark, table, plan, raw, group)
            out = part if out is None else out.unionByName(part)
        return out

    # (schema version, has deltas) -> files: files with delete deltas are read apart
    groups: dict[tuple[int, bool], tuple[Projection | None, list[FilePlan]]] = {}
    for f in plan.files:
        proj = projections.get(f.segment)
        key = (0 if proj is None else id(proj), f.delete_delta is not None)
        groups.setdefault(key, (proj, []))[1].append(f)
    frames = []
    for (_, deltas), (proj, files) in groups.items():
        if proj is None:
            frames.append(scan(current_ddl, files, deltas))
            continue
        read = [s for s in proj if s.physical is not None and s.written is not None]
        dictionary = set(table.schema.dictionary_columns)
        ddl = ", ".join(
            f"{quote_name(s.physical)} "
            f"{'int' if s.name in dictionary else s.written.type}"  # type: ignore[union-attr]
            for s in read if s.physical is not None
        )
        cols = []
        for s in proj:
            want = _storage_type(table, s.name, str(s.column.type))
            if s.physical is None:
                default = column_default(s.column)
                value = None if default is None else default.as_py()
                cols.append(F.lit(value).cast(want).alias(s.name))
            else:
                cols.append(F.col(quote_name(s.physical)).cast(want).alias(s.name))
        # with no stored column left (only columns added later): one row per stored row
        frames.append(scan(ddl or None, files, deltas).select(*cols))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out
