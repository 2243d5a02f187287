"""Value types of dictionary columns: canonical Arrow types, chunk encoding, value order.

Every dictionary column has one canonical Arrow type (``arrow_type``); values are cast to
it before they are compared, stored or looked up. On disk a chunk holds PLAIN-encoded
values (see dictionary.thrift). The order of values is the type's natural order: numbers
and temporal values numerically, strings and binaries by their raw (UTF-8) bytes, which
is also Arrow's and Python's order for valid strings.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa
from thrift.protocol.TCompactProtocol import TCompactProtocol, TCompactProtocolAccelerated
from thrift.protocol.TProtocol import TProtocolException
from thrift.transport.TTransport import TMemoryBuffer, TTransportException

from carbonstore.dictionary._gen.carbonstore_dictionary.ttypes import (
    DictionaryChunk,
    ValueEncoding,
)
from carbonstore.errors import DictionaryError, SchemaError, UserError
from carbonstore.store.arrow_numpy import binary_array
from carbonstore.store.schema import DataType

__all__ = [
    "arrow_type",
    "decode_chunk",
    "decode_struct",
    "encode_chunk",
    "encode_struct",
    "encoding_of",
    "parse_text_value",
    "parse_text_values",
    "sort_key",
    "to_canonical",
]

_INT_TYPES: dict[str, pa.DataType] = {
    "byte": pa.int8(),
    "short": pa.int16(),
    "int": pa.int32(),
    "long": pa.int64(),
}

#: Frame header of a chunk in a .dict file: little-endian uint32 length.
FRAME = struct.Struct("<I")
#: Upper bound of one encoded chunk or sort index (a corrupt length cannot allocate more).
MAX_STRUCT_BYTES = 1 << 30


def arrow_type(t: DataType) -> pa.DataType:
    """The canonical Arrow type of a dictionary column of Spark type ``t``."""
    if t.name == "string":
        return pa.string()
    if t.name == "binary":
        return pa.binary()
    if t.name in _INT_TYPES:
        return _INT_TYPES[t.name]
    if t.name == "date":
        return pa.date32()
    if t.name == "timestamp":
        return pa.timestamp("us", tz="UTC")
    if t.name == "decimal":
        return pa.decimal128(t.precision, t.scale)
    raise SchemaError(
        f"a {t} column cannot have a global dictionary; "
        "dictionaries suit strings, integers, dates and decimals"
    )


def encoding_of(t: DataType) -> int:
    """The ``ValueEncoding`` used for chunks of type ``t``."""
    if t.name in ("string", "binary"):
        return ValueEncoding.BYTE_ARRAY
    if t.name == "decimal":
        return ValueEncoding.DECIMAL128
    arrow_type(t)  # raises for unsupported types
    return ValueEncoding.INT64


def to_canonical(values: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    """``values`` as one Array of ``target`` (cast when the type differs)."""
    if isinstance(values, pa.ChunkedArray):
        values = (
            pa.concat_arrays(values.chunks) if values.num_chunks else pa.array([], values.type)
        )
    if values.type == target:
        return values
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if pa.types.is_large_string(values.type) or pa.types.is_string_view(values.type):
        values = values.cast(pa.string())
    try:
        return values.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise UserError(f"cannot store {values.type} values in a {target} dictionary: {err}") from err


def _as_int64(values: pa.Array) -> np.ndarray:
    t = values.type
    if pa.types.is_date32(t):
        values = values.view(pa.int32())
    elif pa.types.is_timestamp(t):
        values = values.view(pa.int64())
    return np.asarray(values.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype="<i8")


def _from_int64(raw: np.ndarray, target: pa.DataType) -> pa.Array:
    arr = pa.array(raw, pa.int64())
    if pa.types.is_date32(target):
        return arr.cast(pa.int32()).view(pa.date32())
    if pa.types.is_timestamp(target):
        return arr.view(target)
    return arr.cast(target)


def encode_chunk(values: pa.Array, encoding: int) -> bytes:
    """One frame (length + compact Thrift ``DictionaryChunk``) holding ``values`` (no nulls)."""
    chunk = DictionaryChunk(encoding=encoding, num_values=len(values))
    if encoding == ValueEncoding.BYTE_ARRAY:
        chunk.byte_arrays = values.cast(pa.binary()).to_pylist()
    elif encoding == ValueEncoding.INT64:
        chunk.fixed = _as_int64(values).tobytes()
    else:
        buf = values.buffers()[1]
        chunk.fixed = buf.to_pybytes()[values.offset * 16 : (values.offset + len(values)) * 16]
    body = encode_struct(chunk)
    return FRAME.pack(len(body)) + body


def decode_chunk(chunk: DictionaryChunk, target: pa.DataType) -> pa.Array:
    """The values of a decoded chunk as an Array of ``target``."""
    n = chunk.num_values
    if n is None or n < 0:
        raise DictionaryError("dictionary chunk without a value count")
    if chunk.encoding == ValueEncoding.BYTE_ARRAY:
        items = chunk.byte_arrays or []
        if len(items) != n:
            raise DictionaryError(f"dictionary chunk says {n} values but holds {len(items)}")
        arr = binary_array(items)  # (pa.array would import pandas)
        if pa.types.is_string(target):
            try:  # (a view and a full validation: cast would load pyarrow.compute)
                out = arr.view(pa.string())
                out.validate(full=True)
                return out
            except pa.ArrowInvalid as err:
                raise DictionaryError(f"dictionary chunk holds invalid UTF-8: {err}") from err
        return arr
    fixed = chunk.fixed or b""
    width = 8 if chunk.encoding == ValueEncoding.INT64 else 16
    if len(fixed) != n * width:
        raise DictionaryError(f"dictionary chunk says {n} values but holds {len(fixed)} bytes")
    if chunk.encoding == ValueEncoding.INT64:
        return _from_int64(np.frombuffer(fixed, dtype="<i8"), target)
    if chunk.encoding == ValueEncoding.DECIMAL128 and pa.types.is_decimal(target):
        return pa.Array.from_buffers(target, n, [None, pa.py_buffer(fixed)])
    raise DictionaryError(f"dictionary chunk encoding {chunk.encoding} does not fit {target}")


def encode_struct(obj: Any) -> bytes:
    buf = TMemoryBuffer()
    obj.write(TCompactProtocolAccelerated(buf, fallback=True))
    return bytes(buf.getvalue())


#: What the Thrift runtime (C or Python) raises on malformed input.
_DECODE_ERRORS = (
    TProtocolException, TTransportException, ValueError, TypeError, EOFError, OverflowError,
    MemoryError, RecursionError, KeyError, IndexError, AttributeError, SystemError,
)


def decode_struct(obj: Any, data: bytes) -> Any:
    """Decode a compact-protocol struct with size limits bounded by ``len(data)``.

    Raises:
        DictionaryError: the bytes are not a valid struct.
    """
    limit = max(1, len(data))
    proto = TCompactProtocolAccelerated(
        TMemoryBuffer(data), string_length_limit=limit, container_length_limit=limit,
        fallback=False,
    )
    try:
        obj.read(proto)
        return obj
    except _DECODE_ERRORS:
        pass  # the C decoder is stricter about unknown fields: retry with the Python one
    obj = type(obj)()
    try:
        obj.read(TCompactProtocol(TMemoryBuffer(data), string_length_limit=limit,
                                  container_length_limit=limit))
    except _DECODE_ERRORS as err:
        raise DictionaryError(f"corrupt dictionary structure: {err}") from err
    return obj


def sort_key(value: Any) -> Any:
    """The key that orders Python values like the dictionary does (strings by UTF-8 bytes)."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return value


def parse_text_value(text: str, t: DataType) -> Any:
    """One textual value as the Python value of type ``t`` (ISO dates, naive times as UTC)."""
    if t.name == "string":
        return text
    if t.name == "binary":
        return text.encode("utf-8")
    s = text.strip()
    try:
        if t.name in _INT_TYPES:
            return int(s)
        if t.name == "decimal":
            return Decimal(s)
        if t.name == "date":
            return dt.date.fromisoformat(s)
        if t.name == "timestamp":
            ts = dt.datetime.fromisoformat(s)
            return ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC)
    except (ValueError, InvalidOperation) as err:
        raise UserError(f"{text!r} is not a valid {t} value: {err}") from err
    arrow_type(t)  # raises for unsupported types
    raise UserError(f"cannot parse {t} values")


def parse_text_values(lines: Sequence[str | None], t: DataType) -> pa.Array:
    """Parse textual values (a pre-built dictionary file, a CLI lookup) as type ``t``.

    None stays null. A blank line is the empty string for string and binary columns and is
    skipped for the others.
    """
    keep = t.name in ("string", "binary")
    out = [
        None if s is None else parse_text_value(s, t)
        for s in lines
        if s is None or keep or s.strip()
    ]
    try:
        return pa.array(out, arrow_type(t))
    except (pa.ArrowInvalid, OverflowError) as err:
        raise UserError(f"value out of range for {t}: {err}") from err
