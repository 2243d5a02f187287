"""Build many small segments fast, without Spark: Parquet + merge index + one tablestatus write."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from carbonstore.indexfiles.footer import read_file_index
from carbonstore.indexfiles.indexfile import write_index
from carbonstore.indexfiles.packing import pack
from carbonstore.segments.writer import arrow_type
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import SUCCESS, LoadEntry, TableStatusSnapshot, now_ms


def conform(table: Table, data: pa.Table) -> pa.Table:
    """Cast ``data`` to the table's exact Arrow schema."""
    fields = [pa.field(c.name, arrow_type(c.type), nullable=c.nullable) for c in table.schema.columns]
    return data.select([f.name for f in fields]).cast(pa.schema(fields))


def add_segments(
    table: Table,
    datasets: Sequence[pa.Table | Sequence[pa.Table]],
    *,
    row_group_size: int = 1000,
    page_rows: int = 100,
    bloom_columns: Sequence[str] = (),
    bloom_fpp: float = 0.01,
    with_column_ids: bool = True,
) -> list[str]:
    """Write each dataset as one new Success segment (a list of tables: one file each).

    ``with_column_ids=False`` leaves the column ids out of the index (another column layout,
    like an index written by an older writer).
    """
    fs = table.store.sfs.fs
    column_ids = {c.name: c.column_id for c in table.schema.columns} if with_column_ids else None
    first = int(table.status.read().next_segment_id())
    entries: list[LoadEntry] = []
    for k, data in enumerate(datasets):
        sid = str(first + k)
        seg_dir = table.paths.segment_dir(sid)
        table.store.sfs.makedirs(seg_dir)
        files = []
        parts = [data] if isinstance(data, pa.Table) else list(data)
        for j, part in enumerate(parts):
            name = f"part-{j:05d}-{sid}.parquet"
            bloom = {c: {"ndv": max(1024, part.num_rows), "fpp": bloom_fpp} for c in bloom_columns}
            pq.write_table(
                conform(table, part), f"{seg_dir}/{name}", filesystem=fs,
                row_group_size=row_group_size, max_rows_per_page=page_rows,
                write_page_index=True, store_schema=False,
                bloom_filter_options=bloom or None,
            )
            files.append(read_file_index(fs, f"{seg_dir}/{name}", rel_path=name))
        header, blooms = pack(files, segment_id=sid, column_ids=column_ids)
        merge = f"{sid}_{now_ms()}.carbonindexmerge"
        size = write_index(fs, f"{seg_dir}/{merge}", header, blooms, kind="merge")
        entries.append(LoadEntry(
            load_name=sid, status=SUCCESS, load_start_time=now_ms(), timestamp=now_ms(),
            row_count=sum(p.num_rows for p in parts), index_size=size, segment_file=merge,
        ))

    def add(snap: TableStatusSnapshot) -> list[LoadEntry]:
        return [*snap.entries, *entries]

    table.status.update(add)
    return [e.load_name for e in entries]
