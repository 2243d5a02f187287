"""Every readable corpus file indexes, and its statistics agree with the file."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from carbonstore.errors import CorruptIndexError, UnsupportedParquetError
from carbonstore.indexfiles._gen.carbonindex.ttypes import ValueKind
from carbonstore.indexfiles.footer import FileIndex, read_file_index
from tests.conftest import CORPUS, corpus_files

ALL_PARQUET = corpus_files("**/*.parquet")
# pyarrow refuses these footers (MANIFEST): compare only with our own reader.
PYARROW_FOOTER_FAILS = {"PARQUET-1481.parquet", "incorrect_map_schema.parquet"}
EXPECTED_REJECTS = {"PARQUET-1481.parquet", "ARROW-GH-41317.parquet"}  # corrupt footers


def _rel(p: Path) -> str:
    return str(p.relative_to(CORPUS))


def _comparable(col: object, kind: int, v: object) -> object:
    """pyarrow's statistics value in our representation (None when not comparable)."""
    lt = col.logical_type or ""  # type: ignore[attr-defined]
    if isinstance(v, decimal.Decimal):
        return int(v.scaleb(col.scale or 0))  # type: ignore[attr-defined]
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, dt.datetime) or lt.startswith("TIME"):
        return None
    if isinstance(v, dt.date):
        return (v - dt.date(1970, 1, 1)).days
    if isinstance(v, str):
        return v.encode()
    if kind == ValueKind.FLOAT64 and isinstance(v, bytes):
        return struct.unpack("<e", v)[0] if len(v) == 2 else None  # pyarrow: FLOAT16 raw
    return v


@pytest.mark.parametrize("path", ALL_PARQUET, ids=_rel)
def test_corpus_file(path: Path, local_fs: pafs.FileSystem) -> None:
    try:
        fi = read_file_index(local_fs, str(path))
    except (CorruptIndexError, UnsupportedParquetError) as err:
        assert str(path) in str(err)
        assert path.name in EXPECTED_REJECTS, f"unexpected rejection: {err}"
        return
    _check_self_consistent(fi)
    if path.name in PYARROW_FOOTER_FAILS:
        return
    md = pq.read_metadata(path)
    assert md.num_rows == fi.num_rows
    assert md.num_row_groups == len(fi.row_groups)
    for gi, rg in enumerate(fi.row_groups):
        prg = md.row_group(gi)
        assert prg.num_rows == rg.num_rows
        for ci, ch in enumerate(rg.chunks):
            pcol = prg.column(ci)
            desc = fi.columns[ci]
            assert pcol.path_in_schema == desc.name
            assert pcol.has_offset_index == (ch.pages is not None) or not pcol.has_offset_index
            st = pcol.statistics
            if st is None:
                assert ch.min is None and ch.max is None
                continue
            if st.has_null_count and ch.null_count >= 0:
                assert st.null_count == ch.null_count
            if ch.min is None or not st.has_min_max or desc.kind == ValueKind.NONE:
                continue
            if (desc.logical_type or "").startswith("TIME"):
                continue  # pyarrow converts these lossy; covered by the written-file tests
            lo = _comparable(desc, desc.kind, st.min)
            hi = _comparable(desc, desc.kind, st.max)
            if lo is None or hi is None:
                continue
            if desc.kind == ValueKind.FLOAT64 and (math.isnan(ch.min) or math.isnan(lo)):  # type: ignore[arg-type]
                continue
            assert ch.min == lo, (desc.name, ch.min, lo)
            assert ch.max == hi, (desc.name, ch.max, hi)


def _check_self_consistent(fi: FileIndex) -> None:
    for rg in fi.row_groups:
        for ch in rg.chunks:
            p = ch.pages
            if p is None:
                continue
            assert sum(p.row_count) == rg.num_rows
            assert p.first_row_index[0] == 0
            if not p.has_column_index or ch.min is None or ch.max is None:
                continue
            for lo, hi in zip(p.min, p.max, strict=True):
                if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
                    continue
                if isinstance(ch.min, float) and math.isnan(ch.min):
                    continue
                assert ch.min <= lo <= hi <= ch.max  # type: ignore[operator]


def _idx(local_fs: pafs.FileSystem, name: str) -> FileIndex:
    return read_file_index(local_fs, str(CORPUS / "data" / name))


def test_null_pages(corpus: Path, local_fs: pafs.FileSystem) -> None:
    p = _idx(local_fs, "int32_with_null_pages.parquet").row_groups[0].chunks[0].pages
    assert p is not None and p.has_column_index
    assert len(p.null_pages) == 10
    assert [i for i, x in enumerate(p.null_pages) if x] == [2]
    assert p.min[2] is None and p.max[2] is None
    assert p.boundary_order == 0


def test_tiny_pages(corpus: Path, local_fs: pafs.FileSystem) -> None:
    fi = _idx(local_fs, "alltypes_tiny_pages.parquet")
    chunks = fi.row_groups[0].chunks
    with_ci = [
        fi.columns[i].name for i, c in enumerate(chunks) if c.pages and c.pages.has_column_index
    ]
    assert len(with_ci) == 12 and "timestamp_col" not in with_ci
    assert all(c.pages is not None for c in chunks)
    orders = {fi.columns[i].name: c.pages.boundary_order for i, c in enumerate(chunks) if c.pages}
    assert orders["id"] == 0 and orders["bool_col"] == 1  # UNORDERED / ASCENDING
    assert orders["timestamp_col"] == -1  # INT96: offset index only
    assert set(orders.values()) <= {-1, 0, 1}
    assert 82 <= min(len(c.pages.offset) for c in chunks if c.pages)


def test_nan_counts(corpus: Path, local_fs: pafs.FileSystem) -> None:
    fi = _idx(local_fs, "floating_orders_nan_count.parquet")
    names = [c.name for c in fi.columns]
    ieee = names.index("double_ieee754")
    typed = names.index("double_typedef")
    mixed, all_nan, zero_min, zero_max = (fi.row_groups[i] for i in (1, 2, 3, 4))
    assert mixed.chunks[ieee].nan_count == 4
    assert (mixed.chunks[ieee].min, mixed.chunks[ieee].max) == (-2.0, 3.0)
    assert mixed.chunks[typed].min is None and mixed.chunks[typed].nan_count == 4
    assert mixed.chunks[typed].pages is not None and not mixed.chunks[typed].pages.has_column_index
    c = all_nan.chunks[ieee]
    assert math.isnan(c.min) and math.isnan(c.max) and c.nan_count == 10  # type: ignore[arg-type]
    assert c.pages is not None and c.pages.nan_counts == [10]
    for col in range(len(names)):
        lo = zero_min.chunks[col].min
        hi = zero_max.chunks[col].max
        assert lo == 0.0 and math.copysign(1, lo) == -1  # type: ignore[arg-type]
        assert hi == 0.0 and math.copysign(1, hi) == 1  # type: ignore[arg-type]


def test_float16_and_legacy(corpus: Path, local_fs: pafs.FileSystem) -> None:
    c = _idx(local_fs, "float16_nonzeros_and_nans.parquet").row_groups[0].chunks[0]
    assert (c.min, c.max, c.null_count) == (-2.0, 2.0, 1)
    z = _idx(local_fs, "float16_zeros_and_nans.parquet").row_groups[0].chunks[0]
    assert math.copysign(1, z.min) == -1 and math.copysign(1, z.max) == 1  # type: ignore[arg-type]
    # legacy-only decimal statistics are not trusted
    assert _idx(local_fs, "int32_decimal.parquet").row_groups[0].chunks[0].min is None
    # legacy min/max are fine for signed ints
    dp = _idx(local_fs, "datapage_v2.snappy.parquet")
    kinds = {
        c.name: (c.kind, ch.min) for c, ch in zip(dp.columns, dp.row_groups[0].chunks, strict=True)
    }
    assert any(k == ValueKind.INT64 and v is not None for k, v in kinds.values())
    # UINT64 without column orders: BIGINT kind, exact
    u = _idx(local_fs, "concatenated_gzip_members.parquet")
    assert u.columns[0].kind == ValueKind.BIGINT
    assert (u.row_groups[0].chunks[0].min, u.row_groups[0].chunks[0].max) == (1, 513)


def test_nested_and_int96_not_prunable(corpus: Path, local_fs: pafs.FileSystem) -> None:
    for name in ["nested_lists.snappy.parquet", "list_columns.parquet", "map_no_value.parquet"]:
        fi = _idx(local_fs, name)
        assert any(c.nested for c in fi.columns)
        for c, ch in zip(fi.columns, fi.row_groups[0].chunks, strict=True):
            if c.nested:
                assert c.kind == ValueKind.NONE and ch.min is None
    fi = _idx(local_fs, "int96_from_spark.parquet")
    assert fi.columns[0].kind == ValueKind.NONE and fi.row_groups[0].chunks[0].min is None
