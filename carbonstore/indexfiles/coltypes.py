"""Column types: from Parquet schema elements to index columns, and statistics decoding.

Each leaf column gets a :class:`ColumnDesc` (generated from carbonindex.thrift) whose
``kind`` says how its min/max are represented (see arrays.py). ``decode_bound`` turns a
PLAIN-encoded statistics value into that representation.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from carbonstore.indexfiles._gen.carbonindex.ttypes import ColumnDesc, ValueKind
from carbonstore.indexfiles._gen.parquet.ttypes import (
    ConvertedType,
    FieldRepetitionType,
    LogicalType,
    SchemaElement,
    TimeUnit,
    Type,
)
from carbonstore.indexfiles.physical import physical_name  # (re-exported)

__all__ = ["Leaf", "decode_bound", "leaves_from_schema", "physical_name"]

_UNSIGNED_CT = {
    ConvertedType.UINT_8,
    ConvertedType.UINT_16,
    ConvertedType.UINT_32,
    ConvertedType.UINT_64,
}


@dataclass(slots=True)
class Leaf:
    """A leaf column of a Parquet schema with what the statistics reader needs."""

    desc: ColumnDesc
    max_def: int
    unsigned: bool
    decimal: bool
    legacy_ok: bool  # legacy min/max (fields 1/2) follow the type order
    scale_to_micros: int  # temporal: 1000 for millis, 1 for micros, -1000 for nanos, 0 other


def _unit(u: TimeUnit | None) -> str:
    if u is None:
        return "?"
    if u.MILLIS is not None:
        return "MILLIS"
    if u.MICROS is not None:
        return "MICROS"
    if u.NANOS is not None:
        return "NANOS"
    return "?"


_UNIT_SCALE = {"MILLIS": 1000, "MICROS": 1, "NANOS": -1000}


def _describe(el: SchemaElement, nested: bool) -> Leaf:
    phys = el.type
    lt: LogicalType | None = el.logicalType
    ct = el.converted_type
    kind = ValueKind.NONE
    logical = ""
    spark = ""
    unsigned = decimal = False
    scale = 0
    unit = ""
    precision = el.precision
    dscale = el.scale
    known_logical = True
    if lt is not None:
        if lt.STRING is not None or lt.ENUM is not None or lt.JSON is not None:
            logical = (
                "STRING" if lt.STRING is not None else ("ENUM" if lt.ENUM is not None else "JSON")
            )
        elif lt.DECIMAL is not None:
            decimal = True
            precision, dscale = lt.DECIMAL.precision, lt.DECIMAL.scale
        elif lt.DATE is not None:
            logical, unit = "DATE", "days"
        elif lt.TIME is not None:
            u = _unit(lt.TIME.unit)
            logical, unit, scale = f"TIME({u})", "micros", _UNIT_SCALE.get(u, 0)
        elif lt.TIMESTAMP is not None:
            u = _unit(lt.TIMESTAMP.unit)
            utc = ",UTC" if lt.TIMESTAMP.isAdjustedToUTC else ""
            logical, unit, scale = f"TIMESTAMP({u}{utc})", "micros", _UNIT_SCALE.get(u, 0)
        elif lt.INTEGER is not None:
            unsigned = lt.INTEGER.isSigned is False
            logical = f"INT({lt.INTEGER.bitWidth},{'false' if unsigned else 'true'})"
        elif lt.FLOAT16 is not None:
            logical = "FLOAT16"
        elif lt.UUID is not None:
            logical = "UUID"
        elif lt.BSON is not None:
            logical = "BSON"
        elif lt.UNKNOWN is not None:
            logical = "UNKNOWN"
        else:
            known_logical = False  # a union member we do not know, or GEOMETRY/VARIANT/...
            logical = "OTHER"
    elif ct is not None:
        if ct in (ConvertedType.UTF8, ConvertedType.ENUM, ConvertedType.JSON):
            logical = ConvertedType._VALUES_TO_NAMES[ct] if ct != ConvertedType.UTF8 else "STRING"
        elif ct == ConvertedType.DECIMAL:
            decimal = True
        elif ct == ConvertedType.DATE:
            logical, unit = "DATE", "days"
        elif ct in (ConvertedType.TIME_MILLIS, ConvertedType.TIME_MICROS):
            u = "MILLIS" if ct == ConvertedType.TIME_MILLIS else "MICROS"
            logical, unit, scale = f"TIME({u})", "micros", _UNIT_SCALE[u]
        elif ct in (ConvertedType.TIMESTAMP_MILLIS, ConvertedType.TIMESTAMP_MICROS):
            u = "MILLIS" if ct == ConvertedType.TIMESTAMP_MILLIS else "MICROS"
            logical, unit, scale = f"TIMESTAMP({u},UTC)", "micros", _UNIT_SCALE[u]
        elif ct in _UNSIGNED_CT:
            unsigned = True
            logical = ConvertedType._VALUES_TO_NAMES[ct]
        elif ct == ConvertedType.INTERVAL:
            known_logical = False
            logical = "INTERVAL"
        else:
            logical = ConvertedType._VALUES_TO_NAMES.get(ct, "")
    if decimal:
        logical = f"DECIMAL({precision},{dscale})"
        if precision is None or dscale is None or precision <= 0:
            known_logical = False
    legacy_ok = False
    if not known_logical or phys is None:
        kind = ValueKind.NONE
    elif phys == Type.BOOLEAN:
        kind, spark, legacy_ok = ValueKind.INT64, "boolean", True
    elif phys in (Type.INT32, Type.INT64):
        big_unsigned = unsigned and phys == Type.INT64
        kind = ValueKind.BIGINT if big_unsigned else ValueKind.INT64
        legacy_ok = not unsigned and not decimal
        spark = "int" if phys == Type.INT32 else "bigint"
        if unit == "days":
            spark = "date"
        elif logical.startswith("TIMESTAMP"):
            spark = "timestamp"
    elif phys in (Type.FLOAT, Type.DOUBLE):
        kind, spark = ValueKind.FLOAT64, "float" if phys == Type.FLOAT else "double"
    elif phys in (Type.BYTE_ARRAY, Type.FIXED_LEN_BYTE_ARRAY):
        if decimal:
            kind = ValueKind.INT64 if (precision or 99) <= 18 else ValueKind.BIGINT
        elif logical == "FLOAT16" and el.type_length == 2:
            kind, spark = ValueKind.FLOAT64, "float"
        elif logical in ("", "STRING", "ENUM", "JSON", "UUID", "BSON"):
            kind = ValueKind.BYTES
            spark = "string" if logical in ("STRING", "ENUM", "JSON") else "binary"
    if decimal:
        spark = f"decimal({precision},{dscale})"
    if nested:
        kind = ValueKind.NONE
    desc = ColumnDesc(
        physical_type=phys,
        logical_type=logical,
        spark_type=spark,
        type_length=el.type_length,
        precision=precision if decimal else None,
        scale=dscale if decimal else None,
        kind=kind,
        nested=nested,
        unit=unit,
    )
    return Leaf(
        desc=desc,
        max_def=0,
        unsigned=unsigned,
        decimal=decimal,
        legacy_ok=legacy_ok,
        scale_to_micros=scale,
    )


def leaves_from_schema(schema: list[SchemaElement]) -> list[Leaf]:
    """Flatten a Parquet schema (depth-first list) into its leaf columns.

    Raises:
        ValueError: the tree is malformed (children counts do not add up).
    """
    leaves: list[Leaf] = []
    pos = 1
    budget = len(schema)

    def walk(count: int, path: list[str], max_def: int, max_rep: int, depth: int) -> None:
        nonlocal pos
        if depth > 64:
            raise ValueError("schema nests deeper than 64 levels")
        for _ in range(count):
            if pos >= budget:
                raise ValueError("schema children count exceeds the schema list")
            el = schema[pos]
            pos += 1
            rep = el.repetition_type
            d = max_def + (
                1 if rep in (FieldRepetitionType.OPTIONAL, FieldRepetitionType.REPEATED) else 0
            )
            r = max_rep + (1 if rep == FieldRepetitionType.REPEATED else 0)
            name = el.name if el.name is not None else ""
            if el.num_children:
                if el.num_children < 0:
                    raise ValueError("negative num_children")
                walk(el.num_children, [*path, name], d, r, depth + 1)
            else:
                leaf = _describe(el, nested=r > 0)
                leaf.desc.name = ".".join([*path, name])
                leaf.desc.column_id = leaf.desc.name
                leaf.max_def = d
                leaves.append(leaf)

    if not schema:
        raise ValueError("empty schema")
    walk(schema[0].num_children or 0, [], 0, 0, 0)
    return leaves


def _signed_be(b: bytes) -> int:
    return int.from_bytes(b, "big", signed=True) if b else 0


def decode_bound(leaf: Leaf, raw: bytes, *, is_max: bool) -> tuple[object, bool] | None:
    """Decode one PLAIN-encoded min (or max) into the kind's representation.

    Returns ``(value, lossless)`` or None when the bytes do not fit the type.
    """
    d = leaf.desc
    phys = d.physical_type
    kind = d.kind
    if kind == ValueKind.NONE:
        return None
    if kind == ValueKind.BYTES:
        return raw, True
    if kind == ValueKind.FLOAT64:
        if phys == Type.FLOAT and len(raw) == 4:
            v = struct.unpack("<f", raw)[0]
        elif phys == Type.DOUBLE and len(raw) == 8:
            v = struct.unpack("<d", raw)[0]
        elif phys == Type.FIXED_LEN_BYTE_ARRAY and len(raw) == 2:
            v = struct.unpack("<e", raw)[0]
        else:
            return None
        if v == 0.0 and not math.isnan(v):
            v = 0.0 if is_max else -0.0  # a zero bound may hide the other zero
        return v, True
    iv: int
    if phys == Type.BOOLEAN:
        if len(raw) != 1:
            return None
        iv = raw[0] & 1
    elif phys == Type.INT32:
        if len(raw) != 4:
            return None
        iv = struct.unpack("<I" if leaf.unsigned else "<i", raw)[0]
    elif phys == Type.INT64:
        if len(raw) != 8:
            return None
        iv = struct.unpack("<Q" if leaf.unsigned else "<q", raw)[0]
    elif phys in (Type.BYTE_ARRAY, Type.FIXED_LEN_BYTE_ARRAY) and leaf.decimal:
        if (
            phys == Type.FIXED_LEN_BYTE_ARRAY
            and d.type_length is not None
            and len(raw) != d.type_length
        ):
            return None
        if len(raw) > 64:
            return None
        iv = _signed_be(raw)
    else:
        return None
    lossless = True
    s = leaf.scale_to_micros
    if s > 1:
        iv *= s
    elif s < 0:
        q, r = divmod(iv, -s)
        if r:
            lossless = False
            iv = q + 1 if is_max else q  # round outwards so the bound stays a bound
        else:
            iv = q
    if kind == ValueKind.INT64 and not (-(2**63) <= iv < 2**63):
        return None
    return iv, lossless
