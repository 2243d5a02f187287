"""Parquet split-block bloom filters (SBBF), exactly as the Parquet spec defines them.

A value is hashed with xxHash64 (seed 0) over its PLAIN encoding (little-endian ints and
IEEE floats, raw bytes for BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY, no length prefix). The
upper 32 bits of the hash pick a 32-byte block, the lower 32 bits set one bit in each of
the block's eight 32-bit words using the eight spec salts.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
import xxhash

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles import tio

__all__ = [
    "BLOCK_BYTES",
    "SALTS",
    "bloom_insert",
    "build_bloom",
    "parse_bloom_header",
    "read_bloom_blob",
    "hash_plain",
    "hash_value",
    "might_contain",
    "might_contain_many",
    "optimal_num_bytes",
    "plain_encode",
]

BLOCK_BYTES = 32
SALTS = np.array(
    [
        0x47B6137B,
        0x44974D91,
        0x8824AD5B,
        0xA2B7289D,
        0x705495C7,
        0x2DF1424B,
        0x9EFC4947,
        0x5C6BFB31,
    ],
    dtype=np.uint32,
)
_SALTS_PY = [int(s) for s in SALTS]
_MIN_BYTES = 32
_MAX_BYTES = 128 * 1024 * 1024


def hash_plain(plain: bytes) -> int:
    """xxHash64 (seed 0) of already PLAIN-encoded bytes."""
    return xxhash.xxh64_intdigest(plain, seed=0)


def plain_encode(value: object, physical_type: str) -> bytes:
    """PLAIN-encode one Python value for the given Parquet physical type name.

    ``physical_type`` is one of BOOLEAN, INT32, INT64, FLOAT, DOUBLE, BYTE_ARRAY,
    FIXED_LEN_BYTE_ARRAY. Strings are encoded as UTF-8.
    """
    if physical_type == "INT32":
        iv32 = int(value)  # type: ignore[call-overload]
        return struct.pack("<i", iv32) if iv32 < 2**31 else struct.pack("<I", iv32)
    if physical_type == "INT64":
        iv = int(value)  # type: ignore[call-overload]
        return struct.pack("<q", iv) if iv < 2**63 else struct.pack("<Q", iv)
    if physical_type == "FLOAT":
        return struct.pack("<f", float(value))  # type: ignore[arg-type]
    if physical_type == "DOUBLE":
        return struct.pack("<d", float(value))  # type: ignore[arg-type]
    if physical_type == "BOOLEAN":
        return b"\x01" if value else b"\x00"
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"cannot PLAIN-encode {value!r} as {physical_type}")


def hash_value(value: object, physical_type: str) -> int:
    """The bloom hash of a literal: xxHash64 of its PLAIN encoding."""
    return hash_plain(plain_encode(value, physical_type))


def _check(bitset: bytes | bytearray | memoryview) -> int:
    n = len(bitset)
    if n < BLOCK_BYTES or n % BLOCK_BYTES:
        raise CorruptIndexError(
            f"bloom bitset of {n} bytes is not a whole number of 32-byte blocks"
        )
    return n // BLOCK_BYTES


def might_contain(bitset: bytes | memoryview, h: int) -> bool:
    """True unless the bitset proves the value with hash ``h`` absent."""
    num_blocks = _check(bitset)
    block = ((h >> 32) * num_blocks) >> 32
    key = h & 0xFFFFFFFF
    words = struct.unpack_from("<8I", bitset, block * BLOCK_BYTES)
    for i in range(8):
        bit = ((key * _SALTS_PY[i]) & 0xFFFFFFFF) >> 27
        if not (words[i] >> bit) & 1:
            return False
    return True


def might_contain_many(bitset: bytes | memoryview, hashes: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Vectorised :func:`might_contain` for an array of uint64 hashes."""
    num_blocks = _check(bitset)
    h = np.asarray(hashes, dtype=np.uint64)
    words = np.frombuffer(bitset, dtype="<u4").reshape(num_blocks, 8)
    block = ((h >> np.uint64(32)) * np.uint64(num_blocks)) >> np.uint64(32)
    key = (h & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    bits = (key[:, None] * SALTS[None, :]) >> np.uint32(27)  # uint32 multiply wraps mod 2^32
    selected = words[block.astype(np.intp)]
    return np.all((selected >> bits) & np.uint32(1), axis=1)


def optimal_num_bytes(ndv: int, fpp: float = 0.01) -> int:
    """Bitset size for ``ndv`` distinct values at false-positive rate ``fpp`` (power of two)."""
    if ndv <= 0:
        return _MIN_BYTES
    import math

    bits = -8.0 * ndv / math.log(1 - fpp ** (1.0 / 8))
    n = 1 << max(5, math.ceil(math.log2(bits / 8)))
    return min(n, _MAX_BYTES)


def bloom_insert(bitset: bytearray, hashes: npt.ArrayLike) -> None:
    """Set the bits of every hash in ``hashes`` in the mutable ``bitset``."""
    num_blocks = _check(bitset)
    h = np.asarray(hashes, dtype=np.uint64).reshape(-1)
    if h.size == 0:
        return
    words = np.frombuffer(bitset, dtype="<u4").reshape(num_blocks, 8)
    block = (((h >> np.uint64(32)) * np.uint64(num_blocks)) >> np.uint64(32)).astype(np.intp)
    key = (h & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    masks = np.uint32(1) << ((key[:, None] * SALTS[None, :]) >> np.uint32(27))
    for i in range(8):
        np.bitwise_or.at(words[:, i], block, masks[:, i])


def build_bloom(
    plain_values: Iterable[bytes], *, num_bytes: int | None = None, fpp: float = 0.01
) -> bytes:
    """Build a bitset from PLAIN-encoded values (size from the distinct count if not given)."""
    values = list(dict.fromkeys(plain_values))
    size = num_bytes if num_bytes is not None else optimal_num_bytes(len(values), fpp)
    bitset = bytearray(size)
    bloom_insert(bitset, np.array([hash_plain(v) for v in values], dtype=np.uint64))
    return bytes(bitset)


def parse_bloom_header(head: bytes, *, name: str, where: str = "") -> tuple[int, int] | None:
    """Decode the Thrift BloomFilterHeader at the start of ``head`` (the one header parser).

    Returns:
        (header length, bitset length in bytes; None when the header has none), or None when
        the header describes another algorithm, hash or compression than split-block /
        xxHash / uncompressed.

    Raises:
        CorruptIndexError: the header does not decode.
    """
    from carbonstore.indexfiles._gen.parquet.ttypes import BloomFilterHeader

    try:
        hdr, used = tio.decode_prefix(BloomFilterHeader(), head)
    except tio.DECODE_ERRORS as err:
        raise CorruptIndexError(f"{name}: cannot decode bloom filter header{where}: {err}") from err
    if (
        hdr.algorithm is None
        or hdr.algorithm.BLOCK is None
        or hdr.hash is None
        or hdr.hash.XXHASH is None
        or hdr.compression is None
        or hdr.compression.UNCOMPRESSED is None
    ):
        return None
    return used, hdr.numBytes


def read_bloom_blob(data: bytes, *, name: str = "bloom filter") -> bytes:
    """Parse a Thrift BloomFilterHeader followed by its bitset; return the bitset.

    Raises:
        CorruptIndexError: the header is not a valid split-block / xxHash / uncompressed
            header or the bitset is short.
    """
    parsed = parse_bloom_header(data[:64], name=name)
    if parsed is None:
        raise CorruptIndexError(f"{name}: not a split-block xxHash uncompressed bloom filter")
    used, n = parsed
    if n is None or n < BLOCK_BYTES or n % BLOCK_BYTES or used + n > len(data):
        raise CorruptIndexError(f"{name}: bloom filter size {n} is invalid or exceeds the data")
    return data[used : used + n]
