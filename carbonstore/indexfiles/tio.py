"""Bounded Thrift compact-protocol decoding and encoding.

All decoding goes through the C accelerated compact protocol with string and container
size limits, so a corrupt length prefix cannot allocate unbounded memory.
"""

from __future__ import annotations

from typing import TypeVar

from thrift.protocol.TCompactProtocol import TCompactProtocol, TCompactProtocolAccelerated
from thrift.protocol.TProtocol import TProtocolException
from thrift.transport.TTransport import TMemoryBuffer, TTransportException

__all__ = ["DECODE_ERRORS", "decode", "decode_prefix", "encode"]

#: What the Thrift runtime (C or Python) raises on malformed input.
DECODE_ERRORS = (
    TProtocolException,
    TTransportException,
    ValueError,
    TypeError,
    EOFError,
    OverflowError,
    MemoryError,
    RecursionError,
    KeyError,
    IndexError,
    AttributeError,
    SystemError,
)

T = TypeVar("T")

#: No single string/binary in a footer or index is larger than this.
STRING_LIMIT = 256 * 1024 * 1024
#: Nor does any list hold more elements than this.
CONTAINER_LIMIT = 64 * 1024 * 1024


def _protocol(buf: TMemoryBuffer, data_len: int) -> TCompactProtocolAccelerated:
    # A container can never hold more elements than there are bytes left.
    limit = max(1, min(CONTAINER_LIMIT, data_len))
    return TCompactProtocolAccelerated(
        buf,
        string_length_limit=min(STRING_LIMIT, max(1, data_len)),
        container_length_limit=limit,
        fallback=False,
    )


def decode_prefix(obj: T, data: bytes | memoryview) -> tuple[T, int]:
    """Decode ``obj`` from the start of ``data``; return it and the bytes consumed.

    Raises whatever the Thrift runtime raises on garbage (callers wrap it).
    """
    raw = bytes(data)
    buf = TMemoryBuffer(raw)
    try:
        obj.read(_protocol(buf, len(raw)))  # type: ignore[attr-defined]
    except DECODE_ERRORS:
        # The C decoder rejects a field whose wire type differs from the IDL; the pure
        # Python decoder skips such a field, as the Thrift rules for unknown data say.
        # Retry with it (same limits) before calling the input corrupt.
        obj = type(obj)()
        buf = TMemoryBuffer(raw)
        limit = max(1, min(CONTAINER_LIMIT, len(raw)))
        proto = TCompactProtocol(
            buf,
            string_length_limit=min(STRING_LIMIT, max(1, len(raw))),
            container_length_limit=limit,
        )
        obj.read(proto)  # type: ignore[attr-defined]
    return obj, buf._buffer.tell()


def decode(obj: T, data: bytes | memoryview) -> T:
    """Decode ``obj`` from ``data`` (trailing bytes are ignored)."""
    return decode_prefix(obj, data)[0]


def encode(obj: object) -> bytes:
    """Serialise a generated Thrift struct with the compact protocol."""
    buf = TMemoryBuffer()
    obj.write(TCompactProtocolAccelerated(buf, fallback=False))  # type: ignore[attr-defined]
    return buf.getvalue()
