from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.fs as pafs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.bloom import (
    bloom_insert,
    build_bloom,
    hash_plain,
    hash_value,
    might_contain,
    might_contain_many,
    read_bloom_blob,
)
from carbonstore.indexfiles.footer import read_file_index

# (value, physical type, xxh64, block for 32 blocks, block for 64 blocks) from
# XXH64_SBBF_VECTORS.md
VECTORS = [
    ("hello", "BYTE_ARRAY", 0x26C7827D889F6DA3, 4, 9),
    ("parquet", "BYTE_ARRAY", 0x3C9D29275C52E429, 7, 15),
    ("bloom", "BYTE_ARRAY", 0x50C8FB9E62DBC53C, 10, 20),
    ("filter", "BYTE_ARRAY", 0x2A5736CDFCD7A9A1, 5, 10),
    ("Hello", "BYTE_ARRAY", 0x0A75A91375B27D44, 1, 2),
    ("", "BYTE_ARRAY", 0xEF46DB3751D8E999, 29, 59),
    (0, "INT32", 0x3AEFA6FD5CF2DEB4, 7, 14),
    (1, "INT32", 0xF42F94001FCB5351, 30, 61),
    (-1, "INT32", 0x7F78E4BDA3ADDF93, 15, 31),
    (42, "INT32", 0xD756D7B62FC50BF1, 26, 53),
    (0, "INT64", 0x34C96ACDCADB1BBB, 6, 13),
    (1, "INT64", 0x9F29CB17A2A49995, 19, 39),
    (-1, "INT64", 0x85D136ADB773C6C9, 16, 33),
    (1.0, "FLOAT", 0x7B54265D12BF1CCD, 15, 30),
    (1.0, "DOUBLE", 0x949522F153A1A395, 18, 37),
    (0.0, "DOUBLE", 0x34C96ACDCADB1BBB, 6, 13),
    (-0.0, "DOUBLE", 0x3F425EACF01544E0, 7, 15),
]
WORDS = [
    "Hello", "This is", "a", "test", "How", "are you", "doing ", "today",
    "the quick", "brown fox", "jumps", "over", "the lazy", "dog",
]  # fmt: skip


@pytest.mark.parametrize(("value", "ptype", "h", "b32", "b64"), VECTORS)
def test_hash_vectors(value: object, ptype: str, h: int, b32: int, b64: int) -> None:
    got = hash_value(value, ptype)
    assert got == h
    assert ((got >> 32) * 32) >> 32 == b32
    assert ((got >> 32) * 64) >> 32 == b64


def test_reference_bitset(corpus: Path) -> None:
    data = (corpus / "data" / "bloom_filter.xxhash.bin").read_bytes()
    bitset = read_bloom_blob(data)
    assert len(bitset) == 1024
    for w in ["hello", "parquet", "bloom", "filter"]:
        assert might_contain(bitset, hash_value(w, "BYTE_ARRAY"))
    assert (
        build_bloom([w.encode() for w in ["hello", "parquet", "bloom", "filter"]], num_bytes=1024)
        == bitset
    )
    assert not might_contain(bitset, hash_value("Hello", "BYTE_ARRAY"))


def test_deprecated_bloom_format_rejected(corpus: Path) -> None:
    with pytest.raises(CorruptIndexError, match="bloom_filter.bin"):
        read_bloom_blob(
            (corpus / "data" / "bloom_filter.bin").read_bytes(), name="bloom_filter.bin"
        )


@pytest.mark.parametrize(
    "name",
    ["data_index_bloom_encoding_stats.parquet", "data_index_bloom_encoding_with_length.parquet"],
)
def test_corpus_blooms(corpus: Path, local_fs: pafs.FileSystem, name: str) -> None:
    fi = read_file_index(local_fs, str(corpus / "data" / name))
    bitset = fi.row_groups[0].chunks[0].bloom
    assert bitset is not None
    assert all(might_contain(bitset, hash_value(w, "BYTE_ARRAY")) for w in WORDS)
    absent = [f"absent-{i}" for i in range(200)]
    false_pos = sum(might_contain(bitset, hash_value(w, "BYTE_ARRAY")) for w in absent)
    assert false_pos < 20


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.binary(max_size=20), min_size=1, max_size=200),
    st.lists(st.binary(max_size=20), max_size=50),
    st.sampled_from([32, 64, 1024]),
)
def test_build_then_check(inserted: list[bytes], probes: list[bytes], size: int) -> None:
    bitset = build_bloom(inserted, num_bytes=size)
    assert all(might_contain(bitset, hash_plain(v)) for v in inserted)
    hashes = np.array([hash_plain(v) for v in inserted + probes], dtype=np.uint64)
    many = might_contain_many(bitset, hashes)
    assert many.tolist() == [might_contain(bitset, int(h)) for h in hashes]
    grown = bytearray(bitset)
    bloom_insert(grown, hashes)
    assert all(might_contain_many(bytes(grown), hashes))


def test_bad_bitset_size() -> None:
    with pytest.raises(CorruptIndexError, match="32-byte blocks"):
        might_contain(b"\x00" * 33, 1)
