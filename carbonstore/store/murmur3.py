"""Spark's Murmur3 hash (``hash(c1, c2, ...)``, seed 42) and bucket ids, vectorised.

``bucket_ids(columns, n) == pmod(hash(columns), n)`` row by row: the bucket Spark's
``bucketBy`` and ``repartition(n, cols)`` put a row in. Values are hashed as Spark hashes
them: boolean and 8/16/32-bit integers and dates (days) as ints, longs and timestamps (µs)
as longs, strings and binary by their bytes (``hashUnsafeBytes``: 4-byte little-endian
words, then each tail byte, sign-extended, as one more word), decimals of precision <= 18
by their unscaled long and larger ones by the bytes of the unscaled ``BigInteger``. A null
leaves the running hash unchanged. Floats and doubles are not hashed (not bucket columns).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from carbonstore.errors import SchemaError

__all__ = ["SPARK_SEED", "bucket_ids", "spark_hash"]

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
SPARK_SEED = 42


def _rotl(x: npt.NDArray[np.uint32], r: int) -> npt.NDArray[np.uint32]:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k1(k1: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    return _rotl(k1 * _C1, 15) * _C2


def _mix_h1(h1: npt.NDArray[np.uint32], k1: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    h1 = _rotl(h1 ^ k1, 13)
    return h1 * np.uint32(5) + np.uint32(0xE6546B64)


def _fmix(h1: npt.NDArray[np.uint32], length: Any) -> npt.NDArray[np.uint32]:
    h1 = h1 ^ length
    h1 = h1 ^ (h1 >> np.uint32(16))
    h1 = h1 * np.uint32(0x85EBCA6B)
    h1 = h1 ^ (h1 >> np.uint32(13))
    h1 = h1 * np.uint32(0xC2B2AE35)
    return h1 ^ (h1 >> np.uint32(16))


def _hash_int(v: npt.NDArray[Any], seed: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    with np.errstate(over="ignore"):
        k = v.astype(np.int64).astype(np.uint32)
        return _fmix(_mix_h1(seed, _mix_k1(k)), np.uint32(4))


def _hash_long(v: npt.NDArray[Any], seed: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    with np.errstate(over="ignore"):
        u = v.astype(np.int64).view(np.uint64)
        low = (u & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        high = (u >> np.uint64(32)).astype(np.uint32)
        h1 = _mix_h1(seed, _mix_k1(low))
        h1 = _mix_h1(h1, _mix_k1(high))
        return _fmix(h1, np.uint32(8))


def _hash_bytes(data: bytes, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashUnsafeBytes`` (tail bytes mixed one by one, signed)."""
    with np.errstate(over="ignore"):
        n = len(data)
        aligned = n - n % 4
        h1 = np.array([seed], dtype=np.uint32)
        if aligned:
            words = np.frombuffer(data[:aligned], dtype="<u4")
            for w in words:
                h1 = _mix_h1(h1, _mix_k1(np.array([w], dtype=np.uint32)))
        for b in data[aligned:]:
            signed = b - 256 if b > 127 else b
            h1 = _mix_h1(h1, _mix_k1(np.array([signed], dtype=np.int64).astype(np.uint32)))
        return int(_fmix(h1, np.uint32(n))[0])


def _java_bigint_bytes(v: int) -> bytes:
    """``java.math.BigInteger.toByteArray``: minimal two's complement, big-endian."""
    return v.to_bytes(((v if v >= 0 else ~v).bit_length() + 8) // 8, "big", signed=True)


def _hash_column(arr: pa.Array, seed: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """Spark's Murmur3Hash step over one column: nulls leave the running hash unchanged."""
    import pyarrow.compute as pc  # lazily: a metadata command that only opens a table never hashes
    t = arr.type
    valid = np.ones(len(arr), dtype=bool) if arr.null_count == 0 else \
        np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_boolean(t):
        vals = np.asarray(pc.fill_null(arr, False).cast(pa.int32()).to_numpy(zero_copy_only=False))
        h = _hash_int(vals, seed)
    elif pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_date32(t):
        vals = np.asarray(pc.fill_null(arr.cast(pa.int32()) if not pa.types.is_date32(t)
                                       else arr.view(pa.int32()), 0).to_numpy(zero_copy_only=False))
        h = _hash_int(vals, seed)
    elif pa.types.is_int64(t) or pa.types.is_timestamp(t):
        if pa.types.is_timestamp(t) and t.unit != "us":
            arr = arr.cast(pa.timestamp("us", tz=t.tz))
        ints = arr.view(pa.int64()) if pa.types.is_timestamp(t) else arr
        vals = np.asarray(pc.fill_null(ints, 0).to_numpy(zero_copy_only=False))
        h = _hash_long(vals, seed)
    elif pa.types.is_decimal(t):
        scale = t.scale
        unscaled = [0 if d is None else int(d.scaleb(scale)) for d in arr.to_pylist()]
        if t.precision <= 18:
            h = _hash_long(np.array(unscaled, dtype=np.int64), seed)
        else:
            h = np.array([_hash_bytes(_java_bigint_bytes(u), int(s))
                          for u, s in zip(unscaled, seed.tolist(), strict=True)], dtype=np.uint32)
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t):
        raw = arr.cast(pa.binary()) if not pa.types.is_binary(t) else arr
        h = np.array([_hash_bytes(b or b"", int(s))
                      for b, s in zip(raw.to_pylist(), seed.tolist(), strict=True)], dtype=np.uint32)
    else:
        raise SchemaError(f"cannot hash values of type {t} for bucketing")
    return np.where(valid, h, seed).astype(np.uint32)


def spark_hash(columns: Sequence[pa.Array]) -> npt.NDArray[np.int32]:
    """Spark's ``hash(c1, c2, ...)`` (Murmur3, seed 42) of each row, as signed int32."""
    n = len(columns[0]) if columns else 0
    h = np.full(n, SPARK_SEED, dtype=np.uint32)
    for arr in columns:
        h = _hash_column(arr, h)
    return h.view(np.int32)


def bucket_ids(columns: Sequence[pa.Array], number: int) -> npt.NDArray[np.int64]:
    """``pmod(hash(columns), number)``: the bucket of each row, as Spark's bucketBy computes it."""
    return np.mod(spark_hash(columns).astype(np.int64), number)
