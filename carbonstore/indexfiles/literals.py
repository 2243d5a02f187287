"""Literals for one column: PLAIN bytes for bloom hashing and display values for reports."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct

from carbonstore.indexfiles._gen.carbonindex.ttypes import ColumnDesc, ValueKind
from carbonstore.indexfiles._gen.parquet.ttypes import Type
from carbonstore.indexfiles.bloom import hash_plain
from carbonstore.indexfiles.coltypes import physical_name

__all__ = ["display_value", "hash_literal", "plain_literal"]

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_UNIT_PER_SEC = {"MILLIS": 1000, "MICROS": 1_000_000, "NANOS": 1_000_000_000}


def _time_unit(desc: ColumnDesc) -> str | None:
    lt = desc.logical_type or ""
    for u in _UNIT_PER_SEC:
        if lt.startswith(("TIMESTAMP(" + u, "TIME(" + u)):
            return u
    return None


def _to_int(desc: ColumnDesc, value: object) -> int:
    lt = desc.logical_type or ""
    if lt.startswith("DECIMAL"):
        dec = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        unscaled = dec.scaleb(desc.scale or 0)
        if unscaled != unscaled.to_integral_value():
            raise ValueError(f"{value!r} has more digits than scale {desc.scale}")
        return int(unscaled)
    if lt == "DATE":
        d = value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))
        return (d - _EPOCH_DATE).days
    unit = _time_unit(desc)
    if unit is not None and lt.startswith("TIMESTAMP"):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
        ts = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=dt.UTC)
        delta = ts - _EPOCH
        micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        return micros * _UNIT_PER_SEC[unit] // 1_000_000
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "false"):
            return 1 if v == "true" else 0
        return int(value)
    return int(value)  # type: ignore[call-overload]


def plain_literal(desc: ColumnDesc, value: object) -> bytes:
    """PLAIN-encode ``value`` (Python value or command-line string) for column ``desc``.

    Raises:
        ValueError: the value cannot be represented in the column's type.
    """
    phys = desc.physical_type
    lt = desc.logical_type or ""
    if phys == Type.BOOLEAN:
        return b"\x01" if _to_int(desc, value) else b"\x00"
    if phys == Type.INT32:
        iv = _to_int(desc, value)
        return struct.pack("<I" if iv >= 2**31 else "<i", iv)
    if phys == Type.INT64:
        iv = _to_int(desc, value)
        return struct.pack("<Q" if iv >= 2**63 else "<q", iv)
    if phys == Type.FLOAT:
        return struct.pack("<f", float(value))  # type: ignore[arg-type]
    if phys == Type.DOUBLE:
        return struct.pack("<d", float(value))  # type: ignore[arg-type]
    if phys in (Type.BYTE_ARRAY, Type.FIXED_LEN_BYTE_ARRAY):
        if lt.startswith("DECIMAL"):
            iv = _to_int(desc, value)
            n = (
                desc.type_length
                if phys == Type.FIXED_LEN_BYTE_ARRAY and desc.type_length
                else max(1, (iv.bit_length() + 8) // 8)
            )
            return iv.to_bytes(n, "big", signed=True)
        if lt == "FLOAT16":
            return struct.pack("<e", float(value))  # type: ignore[arg-type]
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        return str(value).encode("utf-8")
    raise ValueError(
        f"column {desc.name} of type {physical_name(phys)} has no bloom-comparable values"
    )


def hash_literal(desc: ColumnDesc, value: object) -> int:
    """xxHash64 of ``value`` PLAIN-encoded as column ``desc`` stores it (for bloom checks)."""
    return hash_plain(plain_literal(desc, value))


def display_value(desc: ColumnDesc, v: object) -> object:
    """A JSON-ready rendering of one bound in the kind's representation (see arrays.py)."""
    if v is None:
        return None
    kind = desc.kind
    lt = desc.logical_type or ""
    if kind == ValueKind.FLOAT64:
        f = float(v)  # type: ignore[arg-type]
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return f
    if kind == ValueKind.BYTES:
        b = bytes(v)  # type: ignore[call-overload]
        if lt in ("STRING", "ENUM", "JSON"):
            try:
                return b.decode("utf-8")
            except UnicodeDecodeError:
                pass
        return {"hex": b.hex()}
    if kind in (ValueKind.INT64, ValueKind.BIGINT):
        iv = int(v)  # type: ignore[call-overload]
        if lt.startswith("DECIMAL"):
            return str(decimal.Decimal(iv).scaleb(-(desc.scale or 0)))
        if desc.physical_type == Type.BOOLEAN:
            return bool(iv)
        try:
            if lt == "DATE":
                return (_EPOCH_DATE + dt.timedelta(days=iv)).isoformat()
            if lt.startswith("TIMESTAMP"):
                ts = _EPOCH + dt.timedelta(microseconds=iv)
                return ts.isoformat() if ",UTC" in lt else ts.replace(tzinfo=None).isoformat()
            if lt.startswith("TIME("):
                return (dt.datetime.min + dt.timedelta(microseconds=iv)).time().isoformat()
        except (OverflowError, ValueError):
            return iv  # outside Python's calendar: the raw number is still exact
        return iv
    return None
