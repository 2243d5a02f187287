"""carbonindex / carbonindexmerge: write -> read -> equal, merging, arrays, lazy blooms."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles._gen.carbonindex.ttypes import ColumnDesc, ValueKind
from carbonstore.indexfiles._gen.parquet.ttypes import Type
from carbonstore.indexfiles.bloom import build_bloom, hash_value, might_contain
from carbonstore.indexfiles.footer import ChunkIndex, FileIndex, PageIndex, RowGroupIndex
from carbonstore.indexfiles.indexfile import (
    build_task_index,
    decode_index_bytes,
    encode_index,
    load_index,
    load_indexes,
    merge_indexes,
    read_index,
)
from carbonstore.indexfiles.packing import pack, unpack


def norm(x: Any) -> Any:
    """Comparable form: NaN as a marker, -0.0 kept apart from +0.0."""
    if isinstance(x, float):
        return "NaN" if math.isnan(x) else (x, math.copysign(1, x))
    if isinstance(x, list):
        return [norm(y) for y in x]
    if hasattr(x, "__slots__") and not isinstance(x, (bytes, str)):
        return {k: norm(getattr(x, k)) for k in x.__slots__}
    return x


KINDS = {
    ValueKind.INT64: (Type.INT64, st.integers(-(2**63), 2**63 - 1)),
    ValueKind.FLOAT64: (Type.DOUBLE, st.floats(allow_nan=True, allow_infinity=True)),
    ValueKind.BYTES: (Type.BYTE_ARRAY, st.binary(max_size=12)),
    ValueKind.BIGINT: (Type.FIXED_LEN_BYTE_ARRAY, st.integers(-(2**100), 2**100)),
    ValueKind.NONE: (Type.INT96, st.none()),
}


@st.composite
def file_indexes(draw: st.DrawFn) -> list[FileIndex]:
    kinds = draw(st.lists(st.sampled_from(list(KINDS)), min_size=1, max_size=4))
    cols = [
        ColumnDesc(column_id=f"id{i}", name=f"c{i}", physical_type=KINDS[k][0], logical_type="",
                   spark_type="", kind=k, nested=False, unit="")
        for i, k in enumerate(kinds)
    ]  # fmt: skip
    opt = st.one_of(st.none(), st.integers(0, 10**6))

    def chunk(k: int) -> ChunkIndex:
        vals = KINDS[k][1]
        c = ChunkIndex(
            min=draw(vals) if k != ValueKind.NONE and draw(st.booleans()) else None,
            max=draw(vals) if k != ValueKind.NONE and draw(st.booleans()) else None,
            null_count=draw(opt) or -1,
            nan_count=draw(opt) or -1,
            bloom=build_bloom([draw(st.binary(max_size=4))], num_bytes=32)
            if draw(st.booleans())
            else None,
        )
        c.min_exact = c.min is not None and draw(st.booleans())
        c.max_exact = c.max is not None and draw(st.booleans())
        if draw(st.booleans()):
            n = draw(st.integers(1, 4))
            has_ci = draw(st.booleans()) and k != ValueKind.NONE
            nulls = [draw(st.booleans()) for _ in range(n)]
            c.pages = PageIndex(
                offset=list(range(n)), compressed_size=[7] * n,
                first_row_index=[i * 10 for i in range(n)], row_count=[10] * n,
            )  # fmt: skip
            if has_ci:
                c.pages.has_column_index = True
                c.pages.boundary_order = draw(st.integers(0, 2))
                c.pages.null_pages = nulls
                c.pages.min = [None if z else draw(vals) for z in nulls]
                c.pages.max = [None if z else draw(vals) for z in nulls]
                c.pages.min_exact = [v is not None for v in c.pages.min]
                c.pages.max_exact = [False] * n
                c.pages.null_counts = [draw(st.integers(-1, 5)) for _ in range(n)]
                c.pages.nan_counts = [draw(st.integers(-1, 5)) for _ in range(n)]
        return c

    files = []
    for fi in range(draw(st.integers(1, 3))):
        rgs = [
            RowGroupIndex(num_rows=draw(st.integers(0, 10**6)), offset=4, length=draw(st.integers(0, 10**9)),
                          chunks=[chunk(k) for k in kinds])
            for _ in range(draw(st.integers(0, 3)))
        ]  # fmt: skip
        files.append(
            FileIndex(path=f"part-{fi}.parquet", size=draw(st.integers(12, 2**40)), num_rows=7,
                      footer_offset=5, footer_length=6, created_by=draw(st.one_of(st.none(), st.text())),
                      columns=cols, row_groups=rgs)
        )  # fmt: skip
    return files


@settings(max_examples=60, deadline=None)
@given(file_indexes())
def test_round_trip_property(files: list[FileIndex]) -> None:
    header, blooms = pack(files, segment_id="3", task_id="t1")
    data = encode_index(header, blooms, "task")
    loaded = decode_index_bytes(data, "mem")
    assert loaded.kind == "task" and loaded.header.segment_id == "3"
    assert norm(unpack(loaded.header, loaded.bloom_region)) == norm(files)


@pytest.fixture
def segment(tmp_path: Path) -> tuple[pafs.FileSystem, str, list[str]]:
    fs = pafs.LocalFileSystem()
    seg = tmp_path / "Segment_0"
    seg.mkdir()
    names = []
    for i in range(3):
        t = pa.table(
            {
                "k": np.arange(i * 1000, (i + 1) * 1000),
                "s": [f"v{j}" for j in range(i * 1000, (i + 1) * 1000)],
            }
        )
        name = f"part-{i}.parquet"
        pq.write_table(t, seg / name, row_group_size=250, write_page_index=True, max_rows_per_page=100,
                       bloom_filter_options={"s": {"ndv": 1000, "fpp": 0.01}})  # fmt: skip
        names.append(name)
    return fs, str(seg), names


def test_task_merge_and_arrays(segment: tuple[pafs.FileSystem, str, list[str]]) -> None:
    fs, seg, names = segment
    t1, t2 = f"{seg}/0-a.carbonindex", f"{seg}/1-b.carbonindex"
    build_task_index(
        fs, seg, names[:2], t1, segment_id="0", task_id="0", column_ids={"k": "uuid-k"}
    )
    build_task_index(
        fs, seg, names[2:], t2, segment_id="0", task_id="1", column_ids={"k": "uuid-k"}
    )
    assert read_index(fs, t1).kind == "task"
    merged = f"{seg}/0_1.carbonindexmerge"
    merge_indexes(fs, [t1, t2], merged, segment_id="0")
    li = read_index(fs, merged)
    assert li.kind == "merge"
    arrs = load_index(fs, merged)
    assert arrs.num_row_groups == 12
    assert [f.path for f in arrs.files] == names
    assert arrs.rg_file.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    k = arrs.column("k")
    assert k.desc.column_id == "uuid-k"
    assert k.min.dtype == np.int64 and k.max.dtype == np.int64
    assert k.min.tolist() == list(range(0, 3000, 250))
    assert k.max.tolist() == list(range(249, 3000, 250))
    assert k.has_min.all() and k.min_exact.all() and (k.null_count == 0).all()
    assert (k.nan_count == -1).all()
    assert k.pages.rg_start.tolist() == [3 * i for i in range(13)]
    assert k.pages.row_count.tolist() == [100, 100, 50] * 12
    s = arrs.column("s")
    assert s.min.dtype == object and s.min[0] == b"v0"
    assert (s.bloom_offset >= 0).all()
    bitset = arrs.bloom_bitset(5, "s")
    assert bitset is not None
    assert might_contain(bitset, hash_value("v1300", "BYTE_ARRAY"))
    assert arrs.bloom_bitset(5, "k") is None
    # a list of task indexes loads to the same arrays
    both = load_indexes(fs, [t1, t2])
    assert both.column("k").max.tolist() == k.max.tolist()
    assert both.bloom_bitset(5, "s") == bitset


def test_truncated_index_file(segment: tuple[pafs.FileSystem, str, list[str]]) -> None:
    fs, seg, names = segment
    path = f"{seg}/t.carbonindex"
    build_task_index(fs, seg, names, path)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:-5])
    with pytest.raises(CorruptIndexError, match="t.carbonindex"):
        read_index(fs, path)
