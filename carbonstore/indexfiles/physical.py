"""The names of Parquet's physical types, by their number in the format (parquet.thrift's
``Type``), without the generated Parquet thrift module: a plan names a column's type
(``pruning/units.py``) and loads no Parquet footer type (tests/indexfiles hold the names
equal to the generated enum)."""

from __future__ import annotations

__all__ = ["PHYSICAL_NAMES", "physical_name"]

#: parquet.thrift ``enum Type``, in number order (the format fixes them: new types are
#: added at the end)
PHYSICAL_NAMES = ("BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
                  "FIXED_LEN_BYTE_ARRAY")


def physical_name(t: int | None) -> str:
    """The Parquet physical type name of an enum value ("UNKNOWN" if out of range)."""
    return PHYSICAL_NAMES[t] if t is not None and 0 <= t < len(PHYSICAL_NAMES) else "UNKNOWN"
