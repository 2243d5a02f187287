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

__all__ = ["binary_array", "fixed_bytes", "from_numpy", "same_bytes", "string_array", "strings_bytes", "to_numpy"]

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


#: fixed_bytes gives up (None) when its array would be wider than this many bytes a row and
#: more than _FIXED_SLACK times the values' own bytes (a few long values among short ones)
_FIXED_WIDTH = 64
_FIXED_SLACK = 4


def fixed_bytes(arr: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bytes_] | None:
    """A binary or string array as numpy fixed-width bytes (dtype ``S<w>``, a null as
    ``b""``), or None where that would not be exact or would be large.

    Exact means: numpy compares ``S`` values as if padded with NUL bytes, so two values that
    differ only by trailing NULs would compare equal. None is given when some value holds a
    NUL byte; without one the padded order is the byte order (a shorter prefix sorts first,
    NUL being the least byte), ``astype(object)`` gives back each value's bytes, and a
    comparison with a literal is exact when the literal holds no NUL either
    (see pruning/unit_stats.comparable). Equal-length values without nulls are a view of the
    Arrow data buffer (no copy)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.chunk(0) if arr.num_chunks == 1 else pa.concat_arrays(arr.chunks)
    if not (pa.types.is_binary(arr.type) or pa.types.is_string(arr.type)):
        return None
    s = StringBytes(arr)
    n = s.n
    lengths = np.where(s.valid, s.lengths, 0) if arr.null_count else s.lengths
    width = int(lengths.max()) if n else 0
    if not n or width == 0:
        return np.zeros(n, dtype="S1")
    lo, hi = s.span()
    data = s.data[lo:hi]
    if data.tobytes().find(b"\x00") >= 0:
        return None
    total = int(lengths.sum())
    if width > _FIXED_WIDTH and n * width > _FIXED_SLACK * total:
        return None
    if not arr.null_count and bool((lengths == width).all()) and hi - lo == n * width:
        return data.view(f"S{width}")  # type: ignore[no-any-return]
    out = np.zeros((n, width), dtype=np.uint8)
    keep = lengths > 0
    rows = np.repeat(np.arange(n)[keep], lengths[keep])
    ends = np.cumsum(lengths)
    cols = np.arange(total) - np.repeat(ends[keep] - lengths[keep], lengths[keep])
    out[rows, cols] = s.data[np.repeat(s.starts[keep], lengths[keep]) + cols]
    return out.view(f"S{width}").ravel()


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
        try:  # a view checked in full: the bytes are UTF-8 (cast would load pyarrow.compute)
            out = got.view(pa.string())
            out.validate(full=True)
            return out
        except pa.ArrowInvalid:
            pass  # pyarrow's own error below
    return pa.array(items, pa.string())


# ---- string columns as bytes: checks and vocabularies without pyarrow.compute --------------
# (pyarrow.compute parses the documentation of every kernel on import: a tenth of a second
# of a fresh process; a tablestatus checkpoint's checks need only byte tests)
class StringBytes:
    """A string array's bytes: per row its start, length and validity, and helpers that
    test every row's bytes at once (``rows_with`` ...) without a Python string per row."""

    __slots__ = ("data", "lengths", "n", "starts", "valid")

    def __init__(self, arr: pa.Array) -> None:
        if not (pa.types.is_string(arr.type) or pa.types.is_binary(arr.type)):
            raise TypeError(f"not a string array: {arr.type}")
        n = self.n = len(arr)
        bufs = arr.buffers()
        if n == 0:
            self.starts = self.lengths = np.zeros(0, dtype=np.int32)
            self.data = np.zeros(0, dtype=np.uint8)
            self.valid = np.zeros(0, dtype=bool)
            return
        # the offsets as they lie (int32: a string array's data is under 2 GiB, so a start
        # plus a length never overflows): no copy, and a length per row in half the bytes
        offsets = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset:arr.offset + n + 1]
        self.starts = offsets[:-1]
        self.lengths = offsets[1:] - offsets[:-1]
        self.data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and bufs[2].size \
            else np.zeros(0, dtype=np.uint8)
        self.valid = _valid(arr) if arr.null_count else np.ones(n, dtype=bool)

    def span(self) -> tuple[int, int]:
        """The byte range of ``data`` the rows use."""
        if not self.n:
            return 0, 0
        return int(self.starts[0]), int(self.starts[-1] + self.lengths[-1])

    def rows_of(self, byte_mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """The valid row of each byte ``byte_mask`` marks (a mask over ``data[span]``), in
        byte order: a row appears once per marked byte it holds. Cheap when few bytes are
        marked (no per-byte sum over the whole column)."""
        lo, _ = self.span()
        pos = np.flatnonzero(byte_mask) + lo
        if not len(pos):
            return np.zeros(0, dtype=np.int64)
        row = np.searchsorted(self.starts, pos, side="right") - 1
        # a zero-length row shares its start with the next: the last row starting there
        inside = (row >= 0) & (pos < self.starts[np.maximum(row, 0)] + self.lengths[np.maximum(row, 0)])
        row = row[inside]
        return row[self.valid[row]]  # type: ignore[no-any-return]

    def take_bytes(self, rows: npt.NDArray[np.int64] | slice) -> tuple[npt.NDArray[Any], bytes | memoryview]:
        """(length, bytes) of rows ``rows`` (numbers, or a slice of rows; a null row: empty),
        their bytes back to back: what :func:`strings_bytes` gives of the same strings. A run
        of rows without a null gives a read-only memoryview of the column's data (no copy:
        hash it, or compare it as a buffer); the lengths are a view too (int32)."""
        if isinstance(rows, slice):
            a, b, step = rows.indices(self.n)
            if step != 1:
                raise ValueError("rows: a slice of step 1")
            at: Any = slice(a, max(a, b))
        else:
            at = np.asarray(rows)
            if len(at) and int(at[-1]) - int(at[0]) == len(at) - 1 and bool((np.diff(at) == 1).all()):
                at = slice(int(at[0]), int(at[-1]) + 1)  # a run of rows: views, not gathers
        whole = bool(self.valid.all())
        lengths = (self.lengths if whole else np.where(self.valid, self.lengths, 0))[at]
        starts = self.starts[at]
        if isinstance(at, slice) and whole and len(starts):  # an Arrow array's rows lie back
            lo, hi = int(starts[0]), int(starts[-1]) + int(lengths[-1])  # to back: one view
            return lengths, self.data[lo:hi].data if hi > lo else b""
        total = int(lengths.sum())
        if not total:
            return lengths, b""
        cut = np.flatnonzero(starts[1:] != starts[:-1] + lengths[:-1]) + 1
        if not len(cut):  # back to back: one slice
            return lengths, self.data[int(starts[0]):int(starts[0]) + total].tobytes()
        if len(cut) <= _RUNS_JOINED:  # a few runs of rows back to back (the readable rows of a
            firsts = np.concatenate([[0], cut])  # checkpoint: all but some compacted): slices
            ends_at = np.concatenate([cut - 1, [len(starts) - 1]])
            a, b = starts[firsts].tolist(), (starts[ends_at] + lengths[ends_at]).tolist()
            raw = memoryview(self.data)
            return lengths, b"".join([raw[x:y] for x, y in zip(a, b, strict=True)])
        ends = np.cumsum(lengths)
        return lengths, self.data[np.repeat(starts - (ends - lengths), lengths) + np.arange(total)].tobytes()

    def bytes(self) -> npt.NDArray[np.uint8]:
        lo, hi = self.span()
        return self.data[lo:hi]  # type: ignore[no-any-return]

    def byte_at(self, pos: npt.NDArray[Any]) -> npt.NDArray[np.int16]:
        """Each row's byte at ``pos`` (relative to its start; -1 past its end)."""
        out = np.full(self.n, -1, dtype=np.int16)
        inside = (pos >= 0) & (pos < self.lengths)
        out[inside] = self.data[(self.starts + pos)[inside]]
        return out

    def plain_ints(self) -> npt.NDArray[np.int64] | None:
        """Each row as the number its digits spell, when every row is a plain number (1 to
        18 digits, no leading zero, no null); None otherwise. (A column of load names: their
        order and uniqueness without a Python string per row.)"""
        n = self.n
        if not n:
            return np.zeros(0, dtype=np.int64)
        if not self.valid.all() or int(self.lengths.min()) < 1 or int(self.lengths.max()) > 18:
            return None
        if not _only(self.bytes(), b"0123456789"):
            return None
        out = np.empty(n, dtype=np.int64)
        for length, rows in self._by_length():  # each length's digits as one matrix, its
            digits = self.matrix(rows, length)  # columns summed Horner's way in place (no
            if length > 1 and bool((digits[:, 0] == ord("0")).any()):
                return None  # "07" and "7" would be one number
            acc = out[rows] if isinstance(rows, slice) else np.empty(len(digits), np.int64)
            acc[:] = digits[:, 0]  # matrix of int64 of them; a run of rows: into out itself)
            for j in range(1, length):
                acc *= 10
                acc += digits[:, j]
            acc -= ord("0") * int(_POW10[:length].sum())  # every digit's "0" at once
            if not isinstance(rows, slice):
                out[rows] = acc
        return out

    def _by_length(self) -> list[tuple[int, Any]]:
        """(length, its rows: a slice when they are one run, else indices) per length of a
        valid row (a column of load names has a few lengths, each a run)."""
        if self.n and bool(self.valid.all()):  # no null: each run of one length a slice
            cut = np.flatnonzero(self.lengths[1:] != self.lengths[:-1]) + 1
            if len(cut) < 64:
                edges = [0, *cut.tolist(), self.n]
                lens = self.lengths[edges[:-1]].tolist()
                if len(set(lens)) == len(lens):
                    return [(ln, slice(a, b)) for ln, a, b in zip(lens, edges[:-1], edges[1:], strict=True)]
        rows = np.flatnonzero(self.valid)
        lengths = self.lengths[rows]
        if not len(rows):
            return []
        cut = np.flatnonzero(lengths[1:] != lengths[:-1]) + 1
        runs = np.split(np.arange(len(rows)), cut) if len(cut) < 64 else None
        if runs is not None and len({int(lengths[r[0]]) for r in runs}) == len(runs):
            return [(int(lengths[r[0]]), slice(int(rows[r[0]]), int(rows[r[-1]]) + 1)
                     if int(rows[r[-1]]) - int(rows[r[0]]) == len(r) - 1 else rows[r]) for r in runs]
        return [(ln, rows[lengths == ln]) for ln in np.unique(lengths).tolist()]

    def matrix(self, rows: Any, length: int) -> npt.NDArray[np.uint8]:
        """The bytes of ``rows`` (a slice or indices of rows that are all ``length`` long)
        as a (rows, length) matrix: a view of the data when the rows lie back to back (an
        Arrow array's rows do), else gathered."""
        starts = self.starts[rows]
        if not len(starts):
            return np.zeros((0, length), dtype=np.uint8)
        first = int(starts[0])
        if length and bool((np.diff(starts) == length).all()):
            return self.data[first:first + len(starts) * length].reshape(len(starts), length)
        return self.data[starts[:, None] + np.arange(length)]  # type: ignore[no-any-return]

    def codes(self, words: tuple[str, ...]) -> npt.NDArray[np.int64]:
        """Each row's position in ``words`` (-1: none of them, or null)."""
        out = np.full(self.n, -1, dtype=np.int64)
        wanted: dict[int, list[tuple[int, bytes]]] = {}
        for code, word in enumerate(words):
            wanted.setdefault(len(word.encode()), []).append((code, word.encode()))
        for length, rows in self._by_length():
            got = wanted.get(length)
            if not got:
                continue
            mine = out[rows] if isinstance(rows, slice) else None  # (a run: a view, written in place)
            found: int | None
            if not length:
                found = got[0][0]
            else:
                mat = self.matrix(rows, length)
                found = _one_word(mat, got)
            if found is None:
                # each row's bytes as one fixed-width value: one comparison per word
                keys = np.ascontiguousarray(mat).view(f"V{length}").ravel()
                for code, raw in reversed(got):  # the first word of equal bytes wins
                    hit = keys == np.frombuffer(raw, dtype=f"V{length}")[0]
                    if mine is not None:
                        mine[hit] = code
                    else:
                        out[rows[hit]] = code
            elif mine is not None:
                mine[:] = found
            else:
                out[rows] = found
        return out


#: _one_word compares a run's bytes this many at a time (a temporary reused, not fresh pages)
_WORD_RUN_BYTES = 1 << 16


def _one_word(mat: npt.NDArray[np.uint8], got: list[tuple[int, bytes]]) -> int | None:
    """The code of the word every row of ``mat`` (rows of one length, back to back) is,
    when they are all one word of ``got`` (a column of statuses mostly is): compared as
    bytes, a memcmp per 64 KiB; None otherwise (and for rows not back to back)."""
    if not len(mat) or not mat.flags.c_contiguous:
        return None
    first = mat[0].tobytes()
    code = next((c for c, raw in got if raw == first), None)  # the first word of equal bytes
    if code is None:
        return None
    flat = mat.reshape(-1)
    step = max(1, _WORD_RUN_BYTES // len(first)) * len(first)
    pattern = first * (step // len(first))
    for a in range(0, len(flat), step):
        piece = flat[a:a + step].tobytes()
        if piece != pattern[:len(piece)]:
            return None
    return code


def _only(data: npt.NDArray[np.uint8], allowed: bytes) -> bool:
    """Every byte of ``data`` is one of ``allowed`` (bytes.translate, 64 KiB at a time: a
    temporary reused, not a copy of the whole column)."""
    for a in range(0, len(data), _WORD_RUN_BYTES):
        if data[a:a + _WORD_RUN_BYTES].tobytes().translate(None, allowed):
            return False
    return True


def same_bytes(a: Any, b: Any) -> bool:
    """Two byte arrays (or buffers) are equal: compared 64 KiB at a time as bytes (a memcmp
    each; the temporaries reused, not 3 MB of fresh pages at 100,000 segments)."""
    if len(a) != len(b):
        return False
    for i in range(0, len(a), _WORD_RUN_BYTES):
        if bytes(a[i:i + _WORD_RUN_BYTES]) != bytes(b[i:i + _WORD_RUN_BYTES]):
            return False
    return True


def _holds_any(data: npt.NDArray[np.uint8], needles: tuple[bytes, ...]) -> bool:
    """Some byte of ``data`` is one of ``needles`` (each one byte; searched 64 KiB at a time)."""
    for a in range(0, len(data), _WORD_RUN_BYTES):
        piece = data[a:a + _WORD_RUN_BYTES].tobytes()
        if any(b in piece for b in needles):
            return True
    return False


_POW10 = 10 ** np.arange(19, dtype=np.int64)
_RUNS_JOINED = 4096  # StringBytes.take_bytes joins up to this many runs of rows as slices
_DIGITS = np.zeros(256, dtype=bool)
_DIGITS[ord("0"):ord("9") + 1] = True


def load_names_ok(s: StringBytes) -> bool:
    """Every valid row matches ``^[0-9]+(\\.[0-9]+)?$`` (digits, at most one dot, a digit
    at each end)."""
    data = s.bytes()
    raw = data.tobytes()
    # (bytes.translate / in run at C speed over the column; the per-row work only when needed)
    if raw.translate(None, b"0123456789.") and len(s.rows_of(~(_DIGITS[data] | (data == ord("."))))):
        return False
    if b"." in raw:
        dotted = s.rows_of(data == ord("."))
        if len(dotted) > 1 and bool((dotted[1:] == dotted[:-1]).any()):
            return False  # two dots in one name
    first, last = s.byte_at(np.zeros(s.n, np.int64)), s.byte_at(s.lengths - 1)
    ok = (first >= 0) & _DIGITS[np.maximum(first, 0)] & _DIGITS[np.maximum(last, 0)]
    return bool((ok | ~s.valid).all())


_PATH_BYTES = np.zeros(256, dtype=bool)
for _b in b"/\\:\x00":
    _PATH_BYTES[_b] = True


def plain_file_names_ok(s: StringBytes) -> bool:
    """No valid row is empty, ``.`` or ``..``, or holds ``/``, ``\\``, ``:`` or NUL."""
    data = s.bytes()
    if _holds_any(data, (b"/", b"\\", b":", b"\x00")) and len(s.rows_of(_PATH_BYTES[data])):
        return False
    short = np.flatnonzero((s.lengths <= 2) & s.valid)  # only these can be "", "." or ".."
    if not len(short):
        return True
    starts, lengths, dot = s.starts[short].astype(np.int64), s.lengths[short], ord(".")
    first = np.where(lengths >= 1, s.data[np.minimum(starts, len(s.data) - 1)] if len(s.data) else 0, -1)
    second = np.where(lengths >= 2, s.data[np.minimum(starts + 1, len(s.data) - 1)] if len(s.data) else 0, -1)
    bad = (lengths == 0) | ((lengths == 1) & (first == dot)) | ((lengths == 2) & (first == dot) & (second == dot))
    return not bool(bad.any())


def take_pylist(arr: pa.Array, at: Any) -> list[Any]:
    """``arr.take(at).to_pylist()`` for the types an index reads back (integers, floats,
    strings; any other type value by value), without ``Array.take``, which imports
    pyarrow.compute (a tenth of a second of a fresh process)."""
    idx = np.asarray(at, dtype=np.int64)
    n = len(arr)
    if len(idx) and (int(idx.min()) < -n or int(idx.max()) >= n):
        raise IndexError("index out of bounds")
    idx = np.where(idx < 0, idx + n, idx)
    t = arr.type
    dtype = _NUMERIC.get(t)
    if dtype is not None and n:
        out = np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset + idx].tolist()
    elif pa.types.is_string(t) and n:
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + n + 1]
        data = arr.buffers()[2]
        raw = memoryview(data) if data is not None else memoryview(b"")
        out = [str(raw[a:b], "utf-8") for a, b in zip(offsets[idx].tolist(), offsets[idx + 1].tolist(), strict=True)]
    else:
        return [arr[i].as_py() for i in idx.tolist()]
    if arr.null_count:
        valid = _valid(arr)[idx].tolist()
        out = [v if ok else None for v, ok in zip(out, valid, strict=True)]
    return out  # type: ignore[no-any-return]


def strings_bytes(values: Any) -> tuple[npt.NDArray[np.int64], bytes]:
    """(length, bytes) of each of ``values`` (str) in UTF-8, back to back: equal for two
    sequences exactly when the sequences are equal."""
    joined = "".join(values)
    if joined.isascii():
        return np.fromiter(map(len, values), dtype=np.int64, count=len(values)), joined.encode("ascii")
    encoded = [v.encode("utf-8", "surrogatepass") for v in values]
    return np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), b"".join(encoded)
