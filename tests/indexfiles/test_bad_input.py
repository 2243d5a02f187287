"""Bad input never crashes or hangs: it raises CorruptIndexError / UnsupportedParquetError."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore.errors import CorruptIndexError, UnsupportedParquetError
from carbonstore.indexfiles.footer import read_file_index
from carbonstore.indexfiles.indexfile import decode_index_bytes, encode_index, read_index
from carbonstore.indexfiles.packing import pack
from tests.conftest import corpus_files

BAD = corpus_files("bad_data/*.parquet")
ENCRYPTED = corpus_files("data/*.encrypted")
ERRORS = (CorruptIndexError, UnsupportedParquetError)


def _index_bytes(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    with fs.open_output_stream(path) as out:
        out.write(data)
    read_file_index(fs, path)


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_data_never_crashes(path: Path, local_fs: pafs.FileSystem) -> None:
    # Most bad_data files have a valid footer and corrupt pages (not our concern);
    # those with a corrupt footer must be rejected with the file named.
    try:
        fi = read_file_index(local_fs, str(path))
    except ERRORS as err:
        assert str(path) in str(err)
        assert path.name in {"PARQUET-1481.parquet", "ARROW-GH-41317.parquet"}
    else:
        assert fi.row_groups


@pytest.mark.parametrize("path", ENCRYPTED, ids=lambda p: p.name)
def test_encrypted_rejected(path: Path, local_fs: pafs.FileSystem) -> None:
    with pytest.raises(UnsupportedParquetError, match=path.name):
        read_file_index(local_fs, str(path))


@pytest.fixture
def good_file(tmp_path: Path) -> bytes:
    t = pa.table({"a": list(range(100)), "s": [str(i) for i in range(100)]})
    p = tmp_path / "good.parquet"
    pq.write_table(
        t, p, write_page_index=True, max_rows_per_page=10, bloom_filter_options={"s": True}
    )
    return p.read_bytes()


def test_truncated_file(tmp_path: Path, local_fs: pafs.FileSystem, good_file: bytes) -> None:
    for cut in (0, 3, 11, len(good_file) // 2, len(good_file) - 1):
        with pytest.raises(CorruptIndexError, match="cut.parquet"):
            _index_bytes(local_fs, str(tmp_path / "cut.parquet"), good_file[:cut])


def test_not_parquet(corpus: Path, local_fs: pafs.FileSystem) -> None:
    with pytest.raises(CorruptIndexError, match="README.md"):
        read_file_index(local_fs, str(corpus / "README.md"))


def test_footer_longer_than_file(
    tmp_path: Path, local_fs: pafs.FileSystem, good_file: bytes
) -> None:
    bad = good_file[:-8] + struct.pack("<I", len(good_file) + 100) + b"PAR1"
    with pytest.raises(CorruptIndexError, match="footer length"):
        _index_bytes(local_fs, str(tmp_path / "long.parquet"), bad)


def test_missing_file(tmp_path: Path, local_fs: pafs.FileSystem) -> None:
    with pytest.raises(CorruptIndexError, match="nope.parquet"):
        read_file_index(local_fs, str(tmp_path / "nope.parquet"))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_fuzzed_parquet(
    tmp_path: Path, local_fs: pafs.FileSystem, good_file: bytes, data: st.DataObject
) -> None:
    buf = bytearray(good_file)
    flen = struct.unpack("<I", buf[-8:-4])[0]
    footer_start = len(buf) - 8 - flen
    # mutate mostly the metadata region (page indexes, blooms and footer sit at the end)
    n = data.draw(st.integers(1, 8))
    for _ in range(n):
        pos = data.draw(st.integers(max(0, footer_start - 600), len(buf) - 9))
        buf[pos] = data.draw(st.integers(0, 255))
    path = str(tmp_path / "fuzz.parquet")
    try:
        _index_bytes(local_fs, path, bytes(buf))
    except ERRORS as err:
        assert "fuzz.parquet" in str(err)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.binary(max_size=300))
def test_random_bytes_with_magic(tmp_path: Path, local_fs: pafs.FileSystem, body: bytes) -> None:
    data = b"PAR1" + body + struct.pack("<I", len(body)) + b"PAR1"
    try:
        _index_bytes(local_fs, str(tmp_path / "rand.parquet"), data)
    except ERRORS as err:
        assert "rand.parquet" in str(err)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_fuzzed_index_file(
    tmp_path: Path, local_fs: pafs.FileSystem, good_file: bytes, data: st.DataObject
) -> None:
    src = tmp_path / "src.parquet"
    src.write_bytes(good_file)
    header, blooms = pack([read_file_index(local_fs, str(src))])
    buf = bytearray(encode_index(header, blooms, "task"))
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    from carbonstore.indexfiles.arrays import load_arrays

    try:
        li = decode_index_bytes(bytes(buf[:cut]), "fuzz.carbonindex")
        load_arrays(li.header)
    except CorruptIndexError as err:
        assert "fuzz.carbonindex" in str(err) or "index" in str(err)


def test_index_file_not_an_index(corpus: Path, local_fs: pafs.FileSystem) -> None:
    with pytest.raises(CorruptIndexError, match="bad magic"):
        read_index(local_fs, str(corpus / "data" / "alltypes_plain.parquet"))
