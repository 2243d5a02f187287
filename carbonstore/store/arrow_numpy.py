"""Arrow arrays to numpy and back without pyarrow's pandas shim.

``Array.to_numpy`` and ``pa.array(...)`` make pyarrow import pandas the first time they run
in a process (its conversion layer asks whether an object is a pandas one): about a quarter
of a second of a fresh ``carbonstore prune``, which uses no pandas at all. These helpers give
the same arrays as ``to_numpy(zero_copy_only=False)`` / ``pa.array(ndarray)`` for the types a
plan reads (integers, floats, booleans, strings, binaries) straight from and to the
buffers, and fall back to pyarrow for any other type.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["binary_array", "from_numpy", "string_array", "to_numpy"]

_NUMERIC: dict[pa.DataType, np.dtype[Any]] = {
    t: np.dtype(d) for t, d in (
        (pa.int8(), np.int8), (pa.int16(), np.int16), (pa.int32(), np.int32), (pa.int64(), np.int64),
        (pa.uint8(), np.uint8), (pa.uint16(), np.uint16), (pa.uint32(), np.uint32),
        (pa.uint64(), np.uint64), (pa.float32(), np.float32), (pa.float64(), np.float64),
    )
}
_ARROW_OF = {d: t for t, d in _NUMERIC.items()}


def _valid(arr: pa.Array) -> npt.NDArray[np.bool_]:
    raw = np.frombuffer(arr.buffers()[0], dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[arr.offset:arr.offset + len(arr)].astype(bool)


def to_numpy(col: pa.Array | pa.ChunkedArray) -> npt.NDArray[Any]:
    """``col.to_numpy(zero_copy_only=False)``: the same values and dtype."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 0:
            return col.to_numpy()  # type: ignore[no-any-return]
        arr = col.chunk(0) if col.num_chunks == 1 else pa.concat_arrays(col.chunks)
    else:
        arr = col
    t, n = arr.type, len(arr)
    dtype = _NUMERIC.get(t)
    if dtype is not None:
        if n == 0:
            return np.zeros(0, dtype=dtype)
        values = np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset:arr.offset + n]
        if not arr.null_count:
            return values
        # nulls: pyarrow gives floats with NaN for them
        out = values.astype(np.float64 if dtype.itemsize > 4 or dtype.kind != "f" else dtype)
        out[~_valid(arr)] = np.nan
        return out
    if t == pa.bool_() and not arr.null_count:
        if n == 0:
            return np.zeros(0, dtype=bool)
        raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
        return np.unpackbits(raw, bitorder="little")[arr.offset:arr.offset + n].astype(bool)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t):
        out = np.empty(n, dtype=object)
        out[:] = arr.to_pylist()
        return out
    return arr.to_numpy(zero_copy_only=False)  # type: ignore[no-any-return]


def from_numpy(values: npt.NDArray[Any], type: pa.DataType | None = None) -> pa.Array:  # noqa: A002
    """``pa.array(values, type)`` of a numeric or boolean ndarray."""
    arr = np.asarray(values)
    target = type if type is not None else _ARROW_OF.get(arr.dtype)
    if arr.ndim == 1 and target is not None and _NUMERIC.get(target) == arr.dtype:
        data = np.ascontiguousarray(arr)
        return pa.Array.from_buffers(target, len(data), [None, pa.py_buffer(data)])
    if arr.ndim == 1 and arr.dtype == np.bool_ and type in (None, pa.bool_()):
        bits = np.packbits(arr, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(arr), [None, pa.py_buffer(bits)])
    return pa.array(arr, type=type)


def binary_array(items: list[bytes]) -> pa.Array:
    """``pa.array(items, pa.binary())`` of a list of bytes (no nulls)."""
    n = len(items)
    if n and all(type(x) is bytes for x in items):
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, items), dtype=np.int64, count=n), out=offsets[1:])
        if offsets[-1] < 2**31 - 1:
            return pa.Array.from_buffers(pa.binary(), n, [
                None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(items))])
    return pa.array(items, pa.binary())


def string_array(items: list[Any]) -> pa.Array:
    """``pa.array(items, pa.string())`` of a list of str or UTF-8 bytes (no nulls)."""
    try:
        encoded = [s if type(s) is bytes else s.encode("utf-8") for s in items] \
            if items and all(type(s) in (str, bytes) for s in items) else None
    except UnicodeEncodeError:  # a lone surrogate: pyarrow's own error
        encoded = None
    if encoded is not None:
        got = binary_array(encoded)
        if not any(type(s) is bytes for s in items):
            return got.view(pa.string())
        try:
            return got.cast(pa.string())  # checks the bytes are UTF-8
        except pa.ArrowInvalid:
            pass  # pyarrow's own error below
    return pa.array(items, pa.string())
