"""``inspect_path``: a JSON-ready report of a .parquet, .carbonindex or .carbonindexmerge."""

from __future__ import annotations

from typing import Any

import pyarrow.fs as pafs

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.arrays import ColumnArrays, IndexArrays, load_arrays
from carbonstore.indexfiles.bloom import might_contain
from carbonstore.indexfiles.coltypes import physical_name
from carbonstore.indexfiles.footer import read_file_index
from carbonstore.indexfiles.indexfile import MAGIC_MERGE, MAGIC_TASK, load_index
from carbonstore.indexfiles.literals import display_value, hash_literal
from carbonstore.indexfiles.packing import pack

__all__ = ["index_arrays_for", "inspect_path"]

_BOUNDARY = {0: "UNORDERED", 1: "ASCENDING", 2: "DESCENDING"}


def _sniff(fs: pafs.FileSystem, path: str) -> bytes:
    try:
        with fs.open_input_file(path) as f:
            return f.read_at(min(8, f.size()), 0)
    except OSError as err:
        raise CorruptIndexError(f"{path}: cannot open: {err}") from err


def index_arrays_for(fs: pafs.FileSystem, path: str) -> IndexArrays:
    """Arrays for a Parquet file (indexed on the fly) or an index file (by its magic)."""
    head = _sniff(fs, path)
    if head in (MAGIC_TASK, MAGIC_MERGE):
        return load_index(fs, path)
    fi = read_file_index(fs, path)
    header, blooms = pack([fi])
    return load_arrays(header, lambda off, ln: blooms[off : off + ln])


def _column(
    arrs: IndexArrays, ca: ColumnArrays, rg: int, probe: dict[str, Any] | None
) -> dict[str, Any]:
    d = ca.desc
    out: dict[str, Any] = {
        "path": ca.name,
        "physical_type": physical_name(d.physical_type),
        "logical_type": d.logical_type or None,
        "min": display_value(d, ca.min[rg]) if ca.has_min[rg] else None,
        "max": display_value(d, ca.max[rg]) if ca.has_max[rg] else None,
        "min_exact": bool(ca.min_exact[rg]) if ca.has_min[rg] else None,
        "max_exact": bool(ca.max_exact[rg]) if ca.has_max[rg] else None,
        "null_count": int(ca.null_count[rg]) if ca.null_count[rg] >= 0 else None,
        "nan_count": int(ca.nan_count[rg]) if ca.nan_count[rg] >= 0 else None,
        "pages": None,
        "bloom": None,
    }
    if ca.has_pages[rg]:
        pg = ca.pages
        lo, hi = int(pg.rg_start[rg]), int(pg.rg_start[rg + 1])
        has_ci = int(ca.boundary_order[rg]) >= 0
        idx = range(lo, hi)

        def lst(values: Any, flags: Any) -> list[Any]:
            return [display_value(d, values[j]) if flags[j] else None for j in idx]

        out["pages"] = {
            "count": hi - lo,
            "null_pages": [bool(pg.null_page[j]) for j in idx] if has_ci else None,
            "min": lst(pg.min, pg.has_min) if has_ci else None,
            "max": lst(pg.max, pg.has_max) if has_ci else None,
            "null_counts": [int(x) if x >= 0 else None for x in pg.null_count[lo:hi]]
            if has_ci
            else None,
            "nan_counts": [int(x) if x >= 0 else None for x in pg.nan_count[lo:hi]]
            if has_ci
            else None,
            "boundary_order": _BOUNDARY.get(int(ca.boundary_order[rg])) if has_ci else None,
            "first_row_index": [int(x) for x in pg.first_row_index[lo:hi]],
        }
    if ca.bloom_offset[rg] >= 0:
        bloom: dict[str, Any] = {"num_bytes": int(ca.bloom_length[rg])}
        if probe is not None and ca.name in probe:
            bitset = arrs.bloom_bitset(rg, ca.name)
            try:
                h = hash_literal(d, probe[ca.name])
            except (ValueError, ArithmeticError) as err:
                raise CorruptIndexError(
                    f"probe value {probe[ca.name]!r} does not fit column {ca.name}: {err}"
                ) from err
            bloom["might_contain"] = bool(bitset is not None and might_contain(bitset, h))
        out["bloom"] = bloom
    return out


def inspect_path(
    fs: pafs.FileSystem, path: str, probe: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Describe every file, row group, column chunk, page index and bloom of ``path``.

    Args:
        fs: filesystem holding the file.
        path: a .parquet, .carbonindex or .carbonindexmerge file (detected by magic).
        probe: column path -> value (command-line strings are coerced by the column's
            type); each listed column's bloom reports ``might_contain``.

    Raises:
        CorruptIndexError: the file is corrupt (or a probe value does not fit its column).
        UnsupportedParquetError: the Parquet file is encrypted.
    """
    arrs = index_arrays_for(fs, path)
    files: list[dict[str, Any]] = []
    for df in arrs.files:
        first = df.first_row_group or 0
        rgs = []
        for rg in range(first, first + (df.num_row_groups or 0)):
            rgs.append(
                {
                    "index": int(arrs.rg_index[rg]),
                    "num_rows": int(arrs.rg_num_rows[rg]),
                    "columns": [_column(arrs, ca, rg, probe) for ca in arrs.columns],
                }
            )
        files.append(
            {
                "path": df.path,
                "num_rows": df.num_rows,
                "created_by": df.created_by,
                "row_groups": rgs,
            }
        )
    return {"files": files}
