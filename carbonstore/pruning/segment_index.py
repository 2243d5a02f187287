"""One segment's index: its merge index (or task indexes) loaded, checked, and bounded.

:func:`load_segment` reads a readable segment's merge index (blooms stay on disk, read
lazily through the cache), checks that it describes exactly the segment's rows, and
computes its :class:`SegmentBounds` - per column the min of its row-group minimums, the
max of its maximums and the summed null / NaN counts - so whole segments drop with one
vectorised comparison over all segments. A lost or damaged index is a CorruptIndexError
that names the rebuild command.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.arrays import IndexArrays, load_arrays
from carbonstore.indexfiles.indexfile import REBUILD_HINT, load_indexes, read_index
from carbonstore.indexfiles.segment_bounds import SegmentBounds
from carbonstore.pruning.bounds import segment_bounds
from carbonstore.pruning.cache import COUNTERS, bloom_source
from carbonstore.store.entries import check_plain_file_name
from carbonstore.store.evolution import written_schema
from carbonstore.store.records import Record
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import LoadEntry

__all__ = ["SegmentIndex", "bloom_directory", "load_segment", "merge_index_names"]

#: a column id as the schema assigns them (an index of nested leaves adds "/<path>")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _estimate_bytes(arrays: IndexArrays, header_len: int) -> int:
    """Rough resident size: the header bytes the arrays view plus decoded min/max values."""
    per_rg = 40 + 64 * len(arrays.columns)
    return 1024 + 2 * header_len + per_rg * arrays.num_row_groups


def bloom_directory(arrays: IndexArrays) -> dict[str, dict[str, Any]]:
    """Per bloom column: what hashing a literal needs, and each row group's bitset location.

    Kept in the index snapshot so a fresh process can drop whole segments on their blooms
    (every row group's bitset excludes the value) without decoding their index headers.
    """
    out: dict[str, dict[str, Any]] = {}
    for c in arrays.columns:
        if not len(c.bloom_offset) or not bool((c.bloom_offset >= 0).any()):
            continue
        d = c.desc
        out[c.name] = {
            "kind": c.kind, "column_id": d.column_id, "physical_type": d.physical_type,
            "type_length": d.type_length, "logical_type": d.logical_type, "unit": d.unit,
            "scale": d.scale, "nested": d.nested,
            "offset": c.bloom_offset.tolist(), "length": c.bloom_length.tolist(),
        }
    return out


class SegmentIndex(Record, kw_only=True):
    """A segment's index: arrays (blooms lazy) and its bounds."""

    segment_id: str
    merge_name: str
    arrays: IndexArrays
    bounds: SegmentBounds
    bloom_base: int
    nbytes: int


def merge_index_names(table: Table, load_name: str, segment_file: str | None) -> list[str]:
    sfs = table.store.sfs
    seg_dir = table.paths.segment_dir(load_name)
    if segment_file:
        return [f"{seg_dir}/{check_plain_file_name(segment_file)}"]  # never leaves the folder
    names = sorted(i.base_name for i in sfs.list_dir(seg_dir) if i.is_file)
    merged = [n for n in names if n.endswith(".carbonindexmerge")]
    picked = merged[-1:] or [n for n in names if n.endswith(".carbonindex")]
    if not picked:
        raise CorruptIndexError(
            f"segment {load_name} of {table.name} has no index file; rebuild it with "
            f"'carbonstore index rebuild {table.name} --segments {load_name}'"
        )
    return [f"{seg_dir}/{n}" for n in picked]


def _check_accounts_for(arrays: IndexArrays, entry: LoadEntry, paths: Sequence[str]) -> None:
    """The index must describe exactly the segment's rows: its files' row counts, its row
    groups' row counts and the tablestatus entry agree (a checksum proves a file whole, not
    that it is this segment's - e.g. another segment's index copied over it)."""
    owner = arrays.header.segment_id or ""
    if owner and owner != entry.load_name:
        raise CorruptIndexError(
            f"{' '.join(paths)}: holds the index of segment {owner}, not of segment "
            f"{entry.load_name} (a file of another segment was put in its place)"
        )
    file_rows = sum(int(f.num_rows or 0) for f in arrays.files)
    rg_rows = int(arrays.rg_num_rows.sum()) if arrays.num_row_groups else 0
    if file_rows != rg_rows or (entry.row_count and file_rows != entry.row_count):
        raise CorruptIndexError(
            f"{' '.join(paths)}: the index describes {file_rows} rows in its files and {rg_rows} "
            f"in its row groups, but tablestatus records {entry.row_count} for segment "
            f"{entry.load_name} (an index of other data)"
        )


def _written_names(table: Table, entry: LoadEntry) -> dict[str, str]:
    """Column id -> the name of that column in the segment's files (its schema version)."""

    return {c.column_id: c.name for c in written_schema(table, entry).columns}


def load_segment(table: Table, entry: LoadEntry) -> SegmentIndex:
    fs = table.store.sfs
    paths = merge_index_names(table, entry.load_name, entry.segment_file)
    COUNTERS["merge_index_reads"] += len(paths)
    try:
        if len(paths) == 1:
            loaded = read_index(fs, paths[0])
            arrays = load_arrays(loaded.header, bloom_source(fs, paths[0], loaded.bloom_region_offset))
            base, hlen = loaded.bloom_region_offset, loaded.bloom_region_offset
        else:  # a segment without a merge index: its task indexes merged in memory
            arrays = load_indexes(fs, paths)
            base, hlen = -1, 64 * 1024 * len(paths)
        _check_accounts_for(arrays, entry, paths)
        names = _written_names(table, entry)
        foreign = sorted({top for c in arrays.header.columns or ()
                          if _UUID.fullmatch(top := (c.column_id or "").split("/")[0])
                          and top not in names})
        if foreign:  # column ids are uuids per table: another table's index in its place
            raise CorruptIndexError(
                f"{' '.join(paths)}: indexes column ids {', '.join(foreign[:3])} that "
                f"{table.name} does not have (another table's index file in its place)")
    except CorruptIndexError as err:
        msg = str(err).removesuffix(REBUILD_HINT)
        if not any(p.rsplit("/", 1)[-1] in msg for p in paths):
            msg = f"{' '.join(paths)}: {msg}"
        raise CorruptIndexError(
            f"{msg}; the index of segment {entry.load_name} of {table.name} is lost or damaged "
            f"(nothing was planned from it): rebuild it from the data files with "
            f"'carbonstore index rebuild {table.name} --segments {entry.load_name}'"
        ) from err
    return SegmentIndex(
        segment_id=entry.load_name, merge_name=entry.segment_file or "", arrays=arrays,
        bounds=segment_bounds(arrays, table.schema, names=names),
        bloom_base=base,
        nbytes=_estimate_bytes(arrays, hlen),
    )
