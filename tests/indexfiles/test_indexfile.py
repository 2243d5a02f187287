"""carbonindex / carbonindexmerge: write -> read -> equal, merging, arrays, lazy blooms."""

from __future__ import annotations

import math
import tempfile
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
from carbonstore.indexfiles.footer import (
    ChunkIndex,
    FileIndex,
    PageIndex,
    RowGroupIndex,
    read_file_index,
)
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


# ---- format 2: checksums ------------------------------------------------------------------
def _small_index(segment: tuple[pafs.FileSystem, str, list[str]]) -> bytes:
    fs, seg, names = segment
    path = f"{seg}/small.carbonindex"
    build_task_index(fs, seg, names[:1], path, segment_id="0", task_id="0")
    return Path(path).read_bytes()


def test_every_single_bit_flip_is_refused(segment: tuple[pafs.FileSystem, str, list[str]]) -> None:
    """Exhaustive: whatever byte and bit flips, a full decode refuses the file."""
    data = _small_index(segment)
    decode_index_bytes(data, "ok.carbonindex")
    for pos in range(len(data)):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[pos] ^= 1 << bit
            with pytest.raises(CorruptIndexError, match="x.carbonindex"):
                decode_index_bytes(bytes(flipped), "x.carbonindex")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_truncated_or_spliced_files_are_refused(data: st.DataObject) -> None:
    """Cut anywhere, or a run of random bytes written over the file: always refused."""
    raw = _CACHED["raw"] if "raw" in _CACHED else _CACHED.setdefault("raw", _cached_small())
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(CorruptIndexError, match="x.carbonindex"):
        decode_index_bytes(raw[:cut], "x.carbonindex")
    start = data.draw(st.integers(0, len(raw) - 1))
    junk = data.draw(st.binary(min_size=1, max_size=16))
    spliced = raw[:start] + junk + raw[start + len(junk):]
    if spliced != raw:
        with pytest.raises(CorruptIndexError, match="x.carbonindex"):
            decode_index_bytes(spliced, "x.carbonindex")


_CACHED: dict[str, bytes] = {}


def _cached_small() -> bytes:
    """A small task index with a bloom region, built in memory."""
    t = pa.table({"k": np.arange(300), "s": [f"v{j}" for j in range(300)]})
    with tempfile.TemporaryDirectory() as folder:
        pq.write_table(t, f"{folder}/p.parquet", row_group_size=100, write_page_index=True,
                       bloom_filter_options={"s": {"ndv": 100, "fpp": 0.05}})
        fi = read_file_index(pafs.LocalFileSystem(), f"{folder}/p.parquet", rel_path="p.parquet")
    header, blooms = pack([fi], segment_id="0")
    assert blooms
    return encode_index(header, blooms, "task")


def test_bloom_bitsets_are_verified_when_read(segment: tuple[pafs.FileSystem, str, list[str]]) -> None:
    fs, seg, names = segment
    path = f"{seg}/b.carbonindex"
    build_task_index(fs, seg, names, path)
    arrs = load_index(fs, path)
    s = arrs.column("s")
    off = int(s.bloom_offset[3])
    data = bytearray(Path(path).read_bytes())
    data[read_index(fs, path).bloom_region_offset + off + 5] ^= 0x10
    Path(path).write_bytes(bytes(data))
    arrs = load_index(fs, path)  # the header is intact: loading for min/max works
    assert arrs.bloom_bitset(2, "s") is not None
    with pytest.raises(CorruptIndexError, match=r"b\.carbonindex: bloom bitset fails its checksum"):
        arrs.bloom_bitset(3, "s")
    with pytest.raises(CorruptIndexError, match=r"b\.carbonindex: bloom region fails its checksum"):
        read_index(fs, path, with_blooms=True)


@pytest.mark.parametrize(("name", "kind"), [("m.carbonindexmerge", "task"), ("t.carbonindex", "merge")])
def test_a_file_of_the_other_kind_is_refused(
    segment: tuple[pafs.FileSystem, str, list[str]], name: str, kind: str
) -> None:
    fs, seg, names = segment
    header, blooms = pack([read_file_index(fs, f"{seg}/{names[0]}", rel_path=names[0])])
    path = f"{seg}/{name}"
    Path(path).write_bytes(encode_index(header, blooms, kind))  # type: ignore[arg-type]
    with pytest.raises(CorruptIndexError, match=rf"holds a {kind} index"):
        read_index(fs, path)


def test_empty_file_is_refused(segment: tuple[pafs.FileSystem, str, list[str]]) -> None:
    fs, seg, _ = segment
    Path(f"{seg}/e.carbonindexmerge").write_bytes(b"")
    with pytest.raises(CorruptIndexError, match=r"e\.carbonindexmerge: index file is empty"):
        read_index(fs, f"{seg}/e.carbonindexmerge")


def test_the_physical_type_names_are_parquets() -> None:
    """A plan names physical types without the generated Parquet thrift module: the names
    are those of its ``Type`` enum, by number."""
    from carbonstore.indexfiles._gen.parquet.ttypes import Type
    from carbonstore.indexfiles.coltypes import physical_name as coltypes_name
    from carbonstore.indexfiles.physical import PHYSICAL_NAMES, physical_name

    assert dict(enumerate(PHYSICAL_NAMES)) == Type._VALUES_TO_NAMES
    assert coltypes_name is physical_name
    assert [physical_name(t) for t in (None, -1, 8, 2)] == ["UNKNOWN"] * 3 + ["INT64"]
