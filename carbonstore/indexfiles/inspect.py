"""``inspect_path``: a JSON-ready report of a .parquet, .carbonindex or .carbonindexmerge."""

from __future__ import annotations

import struct
from typing import Any

from carbonstore.errors import CorruptIndexError, UserError
from carbonstore.indexfiles.arrays import ColumnArrays, IndexArrays, load_arrays
from carbonstore.indexfiles.bloom import might_contain
from carbonstore.indexfiles.coltypes import physical_name
from carbonstore.indexfiles.footer import read_file_index
from carbonstore.indexfiles.indexfile import MAGIC_MERGE, MAGIC_TASK, TRAILER_MAGIC, load_index
from carbonstore.indexfiles.literals import display_value, hash_literal
from carbonstore.indexfiles.packing import pack
from carbonstore.store.fs import AnyFS, as_store_fs

__all__ = ["index_arrays_for", "inspect_path"]

_BOUNDARY = {0: "UNORDERED", 1: "ASCENDING", 2: "DESCENDING"}


_PARQUET_MAGICS = (b"PAR1", b"PARE")
_NAMES = (".parquet", ".carbonindex", ".carbonindexmerge")
_WHAT = "a .parquet, .carbonindex or .carbonindexmerge file"


def _sniff(fs: AnyFS, path: str) -> tuple[bytes, bytes]:
    """The first 8 and last 4 bytes of ``path`` (fewer for a tiny file)."""
    try:
        with as_store_fs(fs).open_input_file(path) as f:
            size = f.size()
            return f.read_at(min(8, size), 0), f.read_at(min(4, size), max(0, size - 4))
    except OSError as err:
        raise CorruptIndexError(f"{path}: cannot open: {err}") from err


def _check_input(fs: AnyFS, path: str) -> tuple[bytes, bytes]:
    """Refuse, as a user mistake, a path that is no file or a file of another kind.

    A file is taken for a Parquet or index file (and its damage reported as corruption)
    when it starts or ends with one of their magic bytes, or when its name says so.
    """
    sfs = as_store_fs(fs)
    if sfs.is_dir(path):
        raise UserError(f"{path} is a folder; give {_WHAT} (e.g. one of its segment files)")
    if not sfs.exists(path):
        raise UserError(f"{path} does not exist")
    head, tail = _sniff(fs, path)
    known = (
        head in (MAGIC_TASK, MAGIC_MERGE)
        or head[:4] in _PARQUET_MAGICS
        or tail in (*_PARQUET_MAGICS, TRAILER_MAGIC)
    )
    if not known and not path.lower().endswith(_NAMES):
        raise UserError(
            f"{path} is not {_WHAT}: it has neither Parquet nor carbonindex magic bytes"
        )
    return head, tail


def index_arrays_for(fs: AnyFS, path: str) -> IndexArrays:
    """Arrays for a Parquet file (indexed on the fly) or an index file (by its magic).

    Raises:
        UserError: ``path`` is a folder, or a file that is neither Parquet nor an index file.
        CorruptIndexError: the Parquet or index file is damaged.
    """
    head, tail = _check_input(fs, path)
    by_name = path.lower().endswith((".carbonindex", ".carbonindexmerge"))
    if head in (MAGIC_TASK, MAGIC_MERGE) or (
        head[:4] not in _PARQUET_MAGICS and (tail == TRAILER_MAGIC or by_name)
    ):
        return load_index(fs, path)
    fi = read_file_index(fs, path)
    header, blooms = pack([fi])
    return load_arrays(header, lambda off, ln: blooms[off : off + ln])


def _probe_hashes(arrs: IndexArrays, path: str, probe: dict[str, Any]) -> dict[str, int]:
    """The bloom hash of each probe value, checked against its column's type.

    Raises:
        UserError: a probe names no column of the file, or its value does not fit the column.
    """
    by_name = {ca.name: ca for ca in arrs.columns}
    out: dict[str, int] = {}
    for name, value in probe.items():
        ca = by_name.get(name)
        if ca is None:
            raise UserError(
                f"--probe {name}={value}: {path} has no column {name!r}; "
                f"its columns are {', '.join(by_name) or '(none)'}"
            )
        d = ca.desc
        try:
            out[name] = hash_literal(d, value)
        except (ValueError, ArithmeticError, TypeError, struct.error) as err:
            kind = physical_name(d.physical_type)
            if d.logical_type:
                kind += f" {d.logical_type}"
            raise UserError(
                f"--probe {name}={value}: the value does not fit column {name} ({kind}): {err}"
            ) from err
    return out


def _column(
    arrs: IndexArrays, ca: ColumnArrays, rg: int, probe: dict[str, int] | None
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
            h = probe[ca.name]
            bloom["might_contain"] = bool(bitset is not None and might_contain(bitset, h))
        out["bloom"] = bloom
    return out


def inspect_path(
    fs: AnyFS, path: str, probe: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Describe every file, row group, column chunk, page index and bloom of ``path``.

    Args:
        fs: filesystem holding the file.
        path: a .parquet, .carbonindex or .carbonindexmerge file (detected by magic).
        probe: column path -> value (command-line strings are coerced by the column's
            type); each listed column's bloom reports ``might_contain``.

    Raises:
        UserError: ``path`` is a folder or neither a Parquet nor an index file, or a probe
            names no column of the file or has a value that does not fit the column's type.
        CorruptIndexError: the Parquet or index file is damaged.
        UnsupportedParquetError: the Parquet file is encrypted.
    """
    arrs = index_arrays_for(fs, path)
    hashes = _probe_hashes(arrs, path, probe) if probe else None
    files: list[dict[str, Any]] = []
    for df in arrs.files:
        first = df.first_row_group or 0
        rgs = []
        for rg in range(first, first + (df.num_row_groups or 0)):
            rgs.append(
                {
                    "index": int(arrs.rg_index[rg]),
                    "num_rows": int(arrs.rg_num_rows[rg]),
                    "columns": [_column(arrs, ca, rg, hashes) for ca in arrs.columns],
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
