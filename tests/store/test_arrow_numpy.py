"""store/arrow_numpy.py gives what pyarrow's own conversions give (same values, same dtype,
nulls as pyarrow shows them), without importing pandas."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.store import arrow_numpy
from carbonstore.store.arrow_numpy import (
    StringBytes,
    binary_array,
    from_numpy,
    load_names_ok,
    plain_file_names_ok,
    same_bytes,
    string_array,
    strings_bytes,
    take_pylist,
    to_numpy,
)

_TYPES = {
    pa.int8(): st.integers(-128, 127), pa.int32(): st.integers(-2**31, 2**31 - 1),
    pa.int64(): st.integers(-2**63, 2**63 - 1), pa.uint16(): st.integers(0, 2**16 - 1),
    pa.float32(): st.floats(width=32), pa.float64(): st.floats(), pa.bool_(): st.booleans(),
    pa.string(): st.text(), pa.binary(): st.binary(), pa.date32(): st.dates(),
}


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype
    assert len(got) == len(want)
    if got.dtype.kind == "f":
        assert np.array_equal(got, want, equal_nan=True)
    else:
        assert got.tolist() == want.tolist()


@settings(max_examples=200, deadline=None)
@given(data=st.data(), type_=st.sampled_from(list(_TYPES)), nulls=st.booleans(),
       offset=st.integers(0, 3), chunks=st.integers(0, 3))
def test_to_numpy_is_pyarrows(data: st.DataObject, type_: pa.DataType, nulls: bool, offset: int,
                              chunks: int) -> None:
    values = _TYPES[type_] | st.none() if nulls else _TYPES[type_]
    pieces = [pa.array(data.draw(st.lists(values, max_size=20)), type_) for _ in range(max(chunks, 1))]
    arr = pieces[0].slice(min(offset, len(pieces[0])))  # an offset into the buffers
    _same(to_numpy(arr), arr.to_numpy(zero_copy_only=False))
    col = pa.chunked_array(pieces[:chunks], type_)
    _same(to_numpy(col), col.to_numpy())


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([np.int8, np.int32, np.int64, np.uint64, np.float32, np.float64, np.bool_]),
       st.lists(st.integers(-100, 100), max_size=30), st.integers(1, 3))
def test_from_numpy_is_pa_array(dtype: type, ints: list[int], step: int) -> None:
    values = np.array(ints, dtype=np.int64).astype(dtype)[::step]  # not contiguous for step > 1
    assert from_numpy(values).equals(pa.array(values))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=12), max_size=20), st.lists(st.text(max_size=6), max_size=20))
def test_binary_and_string_arrays_are_pa_arrays(blobs: list[bytes], texts: list[str]) -> None:
    assert binary_array(blobs).equals(pa.array(blobs, pa.binary()))
    assert string_array(texts).equals(pa.array(texts, pa.string()))
    encoded = [t.encode() for t in texts]
    assert string_array(encoded).equals(pa.array(encoded, pa.string()))


def test_bad_strings_fail_as_pyarrow_fails() -> None:
    with pytest.raises(pa.ArrowInvalid):
        string_array([b"\xff"])
    with pytest.raises((pa.ArrowInvalid, UnicodeEncodeError)):
        string_array(["\ud800"])


def test_the_helpers_import_no_pandas() -> None:
    code = ("import sys, numpy as np; from carbonstore.store.arrow_numpy import *; "
            "import pyarrow.compute as pc; a = from_numpy(np.arange(5)); to_numpy(a); "
            "to_numpy(pc.greater(a, a)); string_array(['x']); binary_array([b'y']); "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"


# ---- byte checks of string columns: the same verdicts as the regex kernels they replace -----
_NAMEISH = st.text(alphabet="0123456789.a/\\:\x00 ١", max_size=6)


def _arrow(values: list[str | None], offset: int) -> pa.Array:
    return pa.array(["x"] * offset + values, pa.string()).slice(offset)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), _NAMEISH), max_size=8), st.integers(0, 2))
def test_byte_checks_are_the_regex_kernels(values: list[str | None], offset: int) -> None:
    import pyarrow.compute as pc

    arr = _arrow(values, offset)

    def kernel_all(mask: pa.Array) -> bool:
        return pc.all(mask).as_py() in (True, None)

    names = kernel_all(pc.match_substring_regex(arr, r"^[0-9]+(\.[0-9]+)?$"))
    plain = kernel_all(pc.invert(pc.or_(pc.match_substring_regex(arr, r"^\.{0,2}$"),
                                        pc.match_substring_regex(arr, r"[/\\:\x00]"))))
    assert load_names_ok(StringBytes(arr)) == names
    assert plain_file_names_ok(StringBytes(arr)) == plain


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(["Success", "Failure", "Succes", "", "Compacted",
                                                        "Marked for Delete", "In Progress x"])),
                max_size=10), st.integers(0, 2))
def test_status_codes_are_positions_in_the_vocabulary(values: list[str | None], offset: int) -> None:
    words = ("Success", "Failure", "Compacted", "Marked for Delete")
    got = StringBytes(_arrow(values, offset)).codes(words).tolist()
    assert got == [words.index(v) if v in words else -1 for v in values]


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from([pa.int32(), pa.int64(), pa.string(), pa.float64(), pa.bool_()]),
       st.booleans(), st.integers(0, 3))
def test_take_pylist_is_take(data: st.DataObject, type_: pa.DataType, nulls: bool, offset: int) -> None:
    values = data.draw(st.lists(_TYPES.get(type_, st.booleans()) if type_ != pa.string() else st.text(),
                                min_size=offset, max_size=offset + 8))
    if nulls and len(values) > offset:
        values[data.draw(st.integers(offset, len(values) - 1))] = None
    arr = pa.array(values, type_).slice(offset)
    at = data.draw(st.lists(st.integers(-len(arr), len(arr) - 1), max_size=6)) if len(arr) else []
    want = [arr[a].as_py() for a in at]  # (negative positions count from the end)
    if all(a >= 0 for a in at):
        assert want == arr.take(pa.array(at, pa.int64())).to_pylist() or repr(want) == repr(
            arr.take(pa.array(at, pa.int64())).to_pylist())
    assert repr(take_pylist(arr, at)) == repr(want)  # repr: NaN equals NaN


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet="0123456789.a", max_size=20)), max_size=8),
       st.integers(0, 2))
def test_plain_ints_are_the_numbers_or_none(values: list[str | None], offset: int) -> None:
    got = StringBytes(_arrow(values, offset)).plain_ints()
    plain = all(v is not None and v.isdigit() and 1 <= len(v) <= 18 and (v == "0" or v[0] != "0")
                for v in values)
    if plain:
        assert got is not None and got.tolist() == [int(v) for v in values]  # type: ignore[arg-type]
    else:
        assert got is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(["7", "42", "100", "99", "Success", "Failure", "0"])),
                min_size=60, max_size=300), st.integers(0, 2))
def test_long_columns_take_the_same_codes_and_numbers(values: list[str | None], offset: int) -> None:
    """Columns long enough to have many runs of one length (the rows grouped by length, as
    one matrix per length, either viewed in place or gathered)."""
    s = StringBytes(_arrow(values, offset))
    words = ("Success", "42", "Failure", "7")
    assert s.codes(words).tolist() == [words.index(v) if v in words else -1 for v in values]
    digits = [v for v in values if v is not None and v.isdigit() and v != "0"]
    assert StringBytes(pa.array(digits, pa.string())).plain_ints().tolist() == [int(v) for v in digits]  # type: ignore[union-attr]


_WORDS = ["", "a", "ab", "b", "a\x00", "\x00", "é", "0_x.merge"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(_WORDS)), max_size=8), st.integers(0, 2), st.data())
def test_taken_bytes_are_equal_exactly_for_equal_strings(values: list[str | None], offset: int,
                                                         data: st.DataObject) -> None:
    """Rows taken as (lengths, bytes) equal strings_bytes of a list exactly when the rows
    (a null as "") equal the list: how a view is matched to the index snapshot's rows."""
    arr = _arrow(values, offset)
    rows = data.draw(st.lists(st.integers(0, len(values) - 1), max_size=8)) if values and data.draw(
        st.booleans()) else list(range(len(values)))
    want = [values[r] or "" for r in rows]
    other = data.draw(st.one_of(st.just(want), st.lists(st.sampled_from(_WORDS), max_size=8)))
    got = StringBytes(arr).take_bytes(np.array(rows, dtype=np.int64))
    mine = strings_bytes(other)
    assert (np.array_equal(got[0], mine[0]) and got[1] == mine[1]) == (want == other)


@pytest.mark.parametrize("runs_joined", [0, 2, 4096])
def test_rows_taken_in_runs_or_gathered_give_the_same_bytes(monkeypatch: pytest.MonkeyPatch, runs_joined: int) -> None:
    """The readable rows of a checkpoint are runs of rows (all but some compacted entries):
    joined as slices of the data up to _RUNS_JOINED runs, gathered byte by byte beyond."""
    monkeypatch.setattr(arrow_numpy, "_RUNS_JOINED", runs_joined)
    values = [None if i % 37 == 0 else "x" * (i % 5) + str(i) for i in range(1000)]
    arr = pa.array(values, pa.string()).slice(3)
    values = values[3:]
    for rows in (np.flatnonzero(np.arange(len(values)) % 100 != 7), np.array([1, 2, 3, 7, 8, 100, 101, 996]),
                 np.array([5, 3, 3, 9]), np.arange(10, 20), np.array([0])):
        got = StringBytes(arr).take_bytes(rows)
        want = strings_bytes([values[r] or "" for r in rows.tolist()])
        assert np.array_equal(got[0], want[0]) and got[1] == want[1]
    for a, b in ((0, len(values)), (10, 20), (5, 5), (990, 2000)):  # a slice of rows: a view when no null
        for column in (values, [v or "" for v in values]):
            got = StringBytes(pa.array(["x", *column], pa.string()).slice(1)).take_bytes(slice(a, b))
            want = strings_bytes([v or "" for v in column[a:b]])
            assert np.array_equal(got[0], want[0]) and bytes(got[1]) == want[1]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), st.sampled_from(["Success", "Failure", "Compacted", "Succes\x00", "7", "42",
                                                        "107", "/x", "0_1.merge", ":"])),
                min_size=1, max_size=120),
       st.integers(0, 2), st.sampled_from([1, 3, 7, 16, 64]), st.integers(0, 119), st.integers(1, 200))
def test_byte_runs_compared_a_piece_at_a_time_give_the_same_answers(
        values: list[str | None], offset: int, piece: int, at: int, copies: int) -> None:
    """The status codes, plain numbers, file-name checks and byte comparisons take a column's bytes a piece
    at a time (64 KiB; here a few bytes, so that every boundary is crossed): a column that is
    one word but for a row anywhere (after many pieces that matched) gets the same answers
    as the row-by-row oracles."""
    uniform = [values[0]] * copies  # one word repeated (the fast path) ...
    uniform[at % copies] = values[at % len(values)]  # ... but for one row, maybe
    words = ("Success", "42", "Failure", "7", "Compacted")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(arrow_numpy, "_WORD_RUN_BYTES", piece)
        for column in (values, uniform):
            s = StringBytes(_arrow(column, offset))
            assert s.codes(words).tolist() == [words.index(v) if v in words else -1 for v in column]
            plain = all(v is not None and v.isdigit() and (v == "0" or v[0] != "0") for v in column)
            got = s.plain_ints()
            assert (got.tolist() if got is not None else None) == ([int(v) for v in column] if plain else None)  # type: ignore[arg-type]
            bad = any(v is not None and (v in ("", ".", "..") or any(c in v for c in "/\\:\x00")) for v in column)
            assert plain_file_names_ok(s) == (not bad)
        # a column's bytes against a copy, and against a copy with one byte changed anywhere
        data = StringBytes(_arrow(uniform, offset)).bytes()
        if len(data):
            flipped = data.copy()
            flipped[at % len(data)] ^= 1
            assert same_bytes(data, data.copy()) and same_bytes(data.tobytes(), data)
            assert not same_bytes(data, flipped) and not same_bytes(data.tobytes(), flipped)
