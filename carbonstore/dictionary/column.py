"""``ColumnDictionary``: one committed dictionary in memory, and the cached reader.

A ``ColumnDictionary`` is immutable: surrogate ``s >= 2`` maps to ``values[s - 2]``,
surrogate 1 is null. Encoding, decoding and lookups are vectorised through
pyarrow.compute; the sort index (value order) is loaded or computed on first use. A filter's
translation (one value's surrogate, a range of ranks) needs no compute kernel: a plan that
translates ``cat = 'x'`` does not load pyarrow.compute (about 60 ms of a fresh process).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import pyarrow as pa

from carbonstore.dictionary.codec import arrow_type, parse_text_values, sort_key, to_canonical
from carbonstore.dictionary.files import (
    ColumnFiles,
    DictMeta,
    DictState,
    read_chunks,
    read_sort_index,
    read_state,
    write_sort_index,
)
from carbonstore.errors import DictionaryError, SchemaError, UserError
from carbonstore.store.arrow_numpy import from_numpy, string_array, take_pylist, to_numpy
from carbonstore.store.schema import Column

__all__ = [
    "NULL_SURROGATE",
    "ColumnDictionary",
    "MissingDictionaryValueError",
    "check_covers",
    "column_files",
    "max_surrogate",
    "dictionary_column",
    "load_dictionary",
]

#: The surrogate of null in every dictionary; real values start at 2.
NULL_SURROGATE = 1
FIRST_SURROGATE = 2


class MissingDictionaryValueError(UserError):
    """A value to encode is not in the dictionary (e.g. missing from a pre-built file)."""


class ColumnDictionary:
    """The committed dictionary of one column at one point in time."""

    __slots__ = (
        "_lock", "_lookup", "_sort", "_sort_file_ok", "_sorted_values", "column", "files", "meta",
        "unusable", "values",
    )

    def __init__(
        self, column: Column, files: ColumnFiles, meta: DictMeta, values: pa.Array,
        sort: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        if len(values) != meta.dict_size:
            raise DictionaryError(
                f"dictionary of {column.name!r} has {len(values)} values, meta says {meta.dict_size}"
            )
        self.column = column
        self.files = files
        self.meta = meta
        self.values = values
        self._sort = sort
        self._sorted_values: pa.Array | None = None
        self._lookup: dict[Any, int] | None = None
        self._lock = threading.Lock()
        #: Versions whose .dict bytes failed their check (read from the commit records).
        self.unusable: tuple[int, ...] = ()
        self._sort_file_ok = False  # this size's .sortindex was read and passed its checks

    # ---- pickling (snapshots travel to executors): drop caches -------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"column": self.column, "files": self.files, "meta": self.meta, "values": self.values}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["column"], state["files"], state["meta"], state["values"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"ColumnDictionary({self.column.name!r}, size={self.size})"

    # ---- facts -------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of values (null not counted)."""
        return len(self.values)

    @property
    def max_surrogate(self) -> int:
        return self.size + 1

    @property
    def arrow_type(self) -> pa.DataType:
        return self.values.type

    # ---- sort index --------------------------------------------------------------------------
    def sort_index(self) -> tuple[np.ndarray, np.ndarray]:
        """(surrogates in value order, rank of surrogate ``s`` at index ``s - 2``).

        The ``.sortindex`` file is derived data: one that is missing, fails its checks or
        does not order the values is not used; the order is computed from the values.
        """
        with self._lock:
            if self._sort is None:
                self._sort = self._stored_sort_index() or compute_sort_index(self.values)
            return self._sort

    def _stored_sort_index(self) -> tuple[np.ndarray, np.ndarray] | None:
        try:
            stored = read_sort_index(self.files, self.size)
        except DictionaryError:
            return None
        if stored is None:
            return None
        sv = _in_order(self.values, stored[0] - FIRST_SURROGATE)
        if not ascending(sv):
            return None
        self._sorted_values = sv  # checked in value order: sorted_values() reuses it
        self._sort_file_ok = True
        return stored

    def has_valid_sort_index(self) -> bool:
        """True when the ``.sortindex`` file of this size exists and is right."""
        return self.size == 0 or self._sort_file_ok or self._stored_sort_index() is not None

    def write_sort_index(self) -> None:
        """Write this size's ``.sortindex`` (derived data: replaced when wrong)."""
        if self.size:
            order, ranks = self.sort_index()
            write_sort_index(self.files, self.size, order, ranks)
            self._sort_file_ok = True

    def sorted_values(self) -> pa.Array:
        """The values in value order (rank ``r`` at index ``r``)."""
        order, _ = self.sort_index()
        with self._lock:
            if self._sorted_values is None:
                self._sorted_values = _in_order(self.values, order - FIRST_SURROGATE)
            return self._sorted_values

    def rank_bound(self, value: Any, *, right: bool) -> int:
        """Number of values ordered before ``value`` (``right``: before or equal to it).

        ``value`` is a Python value of the column type, or ``bytes`` for a string column
        (compared as raw UTF-8, e.g. an exclusive prefix bound that is not valid UTF-8).
        """
        sv = self.sorted_values()
        if not (isinstance(value, bytes) and pa.types.is_string(self.arrow_type)):
            value = self.canonical([value])[0].as_py()  # e.g. naive datetimes -> UTC
        key = sort_key(value)
        lo, hi = 0, len(sv)
        while lo < hi:
            mid = (lo + hi) // 2
            k = sort_key(sv[mid].as_py())
            if k < key or (right and k == key):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def surrogates_in_rank_range(self, lo_rank: int, hi_rank: int) -> np.ndarray:
        """Surrogates whose value ranks in ``[lo_rank, hi_rank)``, sorted ascending."""
        order, _ = self.sort_index()
        lo_rank, hi_rank = max(0, lo_rank), min(len(order), hi_rank)
        if lo_rank >= hi_rank:
            return np.empty(0, dtype=np.int32)
        return np.sort(order[lo_rank:hi_rank]).astype(np.int32)

    def value_bounds(self, surrogates: np.ndarray | pa.Array) -> tuple[Any, Any]:
        """(smallest, largest) value among ``surrogates`` in value order; nulls ignored.

        For statistics over a dictionary column: surrogate order is not value order, so
        the bounds come from the ranks of the sort index. (None, None) when no value.
        """
        arr = np.asarray(
            surrogates.to_numpy(zero_copy_only=False) if isinstance(surrogates, pa.Array)
            else surrogates
        )
        arr = arr[arr >= FIRST_SURROGATE]
        if len(arr) == 0:
            return None, None
        if arr.max() > self.max_surrogate:
            raise DictionaryError(
                f"surrogate {int(arr.max())} is outside the dictionary of {self.column.name!r}"
            )
        order, ranks = self.sort_index()
        r = ranks[arr - FIRST_SURROGATE]
        lo, hi = int(order[r.min()]), int(order[r.max()])
        return self.value_of(lo), self.value_of(hi)

    # ---- lookups -----------------------------------------------------------------------------
    def canonical(self, values: Any) -> pa.Array:
        """``values`` (Array, ChunkedArray or a Python list) as an Array of the column type."""
        if not isinstance(values, pa.Array | pa.ChunkedArray):
            items = list(values)
            if items and all(v is None or isinstance(v, str) for v in items):
                if not pa.types.is_string(self.arrow_type):
                    return parse_text_values(items, self.column.type)
            try:  # (a string list without pa.array, which would import pandas)
                values = (string_array(items) if pa.types.is_string(self.arrow_type)
                          else pa.array(items, self.arrow_type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as err:
                raise UserError(
                    f"cannot use {values!r} as {self.arrow_type} values of {self.column.name!r}: {err}"
                ) from err
        return to_canonical(values, self.arrow_type)

    def lookup_many(self, values: Any) -> np.ndarray:
        """Surrogates of ``values`` (int32): 1 for null, 0 for a value not in the dictionary."""
        import pyarrow.compute as pc  # lazily: a filter's translation computes nothing

        arr = self.canonical(values)
        if len(arr) == 0:
            return np.empty(0, dtype=np.int32)
        idx = pc.index_in(arr, value_set=self.values)
        out = idx.fill_null(-2).to_numpy(zero_copy_only=False).astype(np.int32) + FIRST_SURROGATE
        out[arr.is_null().to_numpy(zero_copy_only=False)] = NULL_SURROGATE
        return out

    def surrogate_of(self, value: Any) -> int | None:
        """The surrogate of one value (1 for None), None when the value is not present.

        A binary search through the sort index: no hashing of the whole dictionary.
        """
        if value is None:
            return NULL_SURROGATE
        if self.size == 0:
            return None
        rank = self.rank_bound(value, right=False)
        if rank >= self.size:
            return None
        probe = self.canonical([value])[0].as_py()
        if sort_key(self.sorted_values()[rank].as_py()) != sort_key(probe):
            return None
        return int(self.sort_index()[0][rank])

    def value_of(self, surrogate: int) -> Any:
        """The Python value of a surrogate (None for 1)."""
        if surrogate == NULL_SURROGATE:
            return None
        if not FIRST_SURROGATE <= surrogate <= self.max_surrogate:
            raise UserError(
                f"surrogate {surrogate} is not in the dictionary of {self.column.name!r} "
                f"(1..{self.max_surrogate})"
            )
        return self.values[surrogate - FIRST_SURROGATE].as_py()

    # ---- encode / decode ---------------------------------------------------------------------
    def _uniques_to_surrogates(self, uniques: pa.Array) -> np.ndarray:
        if self.size > 50_000 and len(uniques) * 100 < self.size:
            # Few distinct values against a big dictionary: a hash map built once beats
            # hashing the whole dictionary for every batch.
            with self._lock:
                if self._lookup is None:
                    self._lookup = {
                        v: i + FIRST_SURROGATE for i, v in enumerate(self.values.to_pylist())
                    }
                lookup = self._lookup
            return np.fromiter(
                (lookup.get(v, 0) for v in uniques.to_pylist()), dtype=np.int32, count=len(uniques)
            )
        import pyarrow.compute as pc  # lazily: a filter's translation computes nothing

        idx = pc.index_in(uniques, value_set=self.values)
        return idx.fill_null(-2).to_numpy(zero_copy_only=False).astype(np.int32) + FIRST_SURROGATE

    def encode(self, values: pa.Array | pa.ChunkedArray) -> pa.Int32Array:
        """INT32 surrogates of ``values``: nulls become 1.

        Raises:
            MissingDictionaryValueError: a non-null value is not in the dictionary.
        """
        import pyarrow.compute as pc  # lazily: a filter's translation computes nothing

        arr = self.canonical(values)
        if len(arr) == 0:
            return pa.array([], pa.int32())
        if arr.null_count == len(arr):
            return pa.array(np.full(len(arr), NULL_SURROGATE, dtype=np.int32))
        enc = pc.dictionary_encode(arr)
        surr = self._uniques_to_surrogates(enc.dictionary)
        missing = np.flatnonzero(surr == 0)
        if len(missing):
            sample = enc.dictionary.take(pa.array(missing[:3])).to_pylist()
            raise MissingDictionaryValueError(
                f"{len(missing)} value(s) of column {self.column.name!r} are not in its "
                f"dictionary, e.g. {sample!r}; add them to the pre-built dictionary file or "
                "let the load compute the distinct values"
            )
        indices = enc.indices
        if indices.null_count:
            pos = indices.fill_null(0).to_numpy(zero_copy_only=False)
            out = surr[pos]
            out[indices.is_null().to_numpy(zero_copy_only=False)] = NULL_SURROGATE
        else:
            out = surr[indices.to_numpy(zero_copy_only=False)]
        return pa.array(out, pa.int32())

    def decode(self, surrogates: pa.Array | pa.ChunkedArray | np.ndarray) -> pa.Array:
        """Values of INT32 ``surrogates`` (1 decodes to null)."""
        import pyarrow.compute as pc  # lazily: a filter's translation computes nothing

        if isinstance(surrogates, np.ndarray):
            surrogates = pa.array(surrogates, pa.int32())
        elif isinstance(surrogates, pa.ChunkedArray):
            surrogates = (
                pa.concat_arrays(surrogates.chunks) if surrogates.num_chunks
                else pa.array([], pa.int32())
            )
        if len(surrogates) == 0:
            return pa.array([], self.arrow_type)
        mm = pc.min_max(surrogates).as_py()
        if mm["min"] is None:  # all null (a plain Parquet column written as null)
            return pa.nulls(len(surrogates), self.arrow_type)
        if mm["min"] < NULL_SURROGATE or mm["max"] > self.max_surrogate:
            raise DictionaryError(
                f"surrogates {mm['min']}..{mm['max']} of column {self.column.name!r} are outside "
                f"its dictionary (1..{self.max_surrogate}) committed in {self.files.directory}/"
                f"{self.column.column_id}.*"
                f"{RESTORE_HINT}"
            )
        table = pa.concat_arrays([pa.nulls(FIRST_SURROGATE, self.arrow_type), self.values])
        return table.take(surrogates)


_SMALL = 4096  # strings checked in Python up to this many (no compute kernel loaded)


def ascending(sv: pa.Array) -> bool:
    """True when ``sv`` is strictly ascending (dictionary values are distinct), so a sort
    index that orders the values this way is the only right one. numpy's and Python's
    orders of these types are Arrow's: numbers and times as numbers (NaN is less than
    nothing in each), strings by code points, which is the order of their UTF-8 bytes."""
    if len(sv) < 2:
        return True
    t = sv.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t):
        a = sv.to_numpy(zero_copy_only=False)  # no nulls: a dictionary holds values only
        return bool(np.all(a[:-1] < a[1:]))
    if (pa.types.is_string(t) or pa.types.is_binary(t)) and len(sv) <= _SMALL:
        vals = sv.to_pylist()
        return all(a < b for a, b in zip(vals, vals[1:]))  # noqa: B905 (one shorter)
    import pyarrow.compute as pc  # lazily: see the module docstring

    return bool(pc.all(pc.less(sv.slice(0, len(sv) - 1), sv.slice(1))).as_py())


def _in_order(values: pa.Array, positions: np.ndarray) -> pa.Array:
    """``values.take(positions)``; a small dictionary of strings or integers is gathered
    without Array.take, which loads pyarrow.compute (see the module docstring)."""
    t = values.type
    if len(values) <= _SMALL and pa.types.is_string(t):
        return string_array(take_pylist(values, positions))
    if pa.types.is_integer(t):
        return from_numpy(to_numpy(values)[positions], t)
    return values.take(from_numpy(positions))


def compute_sort_index(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(surrogates in value order, ranks by surrogate) computed from ``values``."""
    import pyarrow.compute as pc  # lazily: a filter's translation computes nothing

    n = len(values)
    order = pc.sort_indices(values).to_numpy(zero_copy_only=False).astype(np.int32)
    ranks = np.empty(n, dtype=np.int32)
    ranks[order] = np.arange(n, dtype=np.int32)
    return order + FIRST_SURROGATE, ranks


# ---- reader with cache -----------------------------------------------------------------------

_CACHE_LIMIT = 64
_cache: OrderedDict[str, tuple[DictState, ColumnDictionary]] = OrderedDict()
_cache_lock = threading.Lock()


#: Recovery advice appended to errors about damaged dictionary files.
RESTORE_HINT = (
    "; the dictionary is damaged: restore this column's dictionary files (<column id>.dict, "
    ".dictmeta and the .dictlog folder in Metadata/dictionary/) from a backup - they cannot "
    "be rebuilt from the data files, which hold surrogates only"
)


def dictionary_column(table: Any, column: str) -> Column:
    """The schema column ``column`` of ``table``, checked to be a dictionary column."""
    col = table.schema.column(column)
    if col.name not in table.schema.dictionary_columns:
        raise SchemaError(
            f"column {col.name!r} of {table.name} has no global dictionary; "
            f"dictionary columns: {', '.join(table.schema.dictionary_columns) or 'none'}"
        )
    return col


def column_files(table: Any, column: Column) -> ColumnFiles:
    return ColumnFiles(table.store.sfs, table.paths.dictionary_dir, column.column_id)


def _empty(column: Column, files: ColumnFiles) -> ColumnDictionary:
    meta = DictMeta(column_id=column.column_id, column_type=str(column.type))
    return ColumnDictionary(column, files, meta, pa.array([], arrow_type(column.type)))


def build_dictionary(
    column: Column, files: ColumnFiles, state: DictState, base: ColumnDictionary | None
) -> tuple[ColumnDictionary, list[int]]:
    """The dictionary of ``state``; reads only the versions ``base`` lacks when it can.

    Returns it and the versions whose ``.dict`` bytes failed their check (read from the
    commit records instead; a writer rewrites them).
    """
    meta = state.meta
    target = arrow_type(column.type)
    old = base.meta.entries if base is not None else ()
    if base is not None and len(old) <= len(meta.entries) and meta.entries[: len(old)] == old:
        # The log only grows: read just the versions committed since ``base``.
        new, bad = read_chunks(files, meta.entries[len(old):], target, first_version=len(old) + 1,
                               column_type=str(column.type))
        values = pa.concat_arrays([base.values, *new]) if new else base.values
        sort = base._sort if not new else None
        out = ColumnDictionary(column, files, meta, values, sort)
        out.unusable = (*base.unusable, *bad)
        return out, bad
    chunks, bad = read_chunks(files, meta.entries, target, column_type=str(column.type))
    values = pa.concat_arrays(chunks) if chunks else pa.array([], target)
    legacy = any(e.crc32 is None for e in meta.entries)  # no checksum: check the values
    if legacy and len(values) and _has_duplicates(values):
        raise DictionaryError(f"{files.dict_path}: the committed values are not distinct")
    out = ColumnDictionary(column, files, meta, values)
    out.unusable = tuple(bad)
    return out, bad


def _has_duplicates(values: pa.Array) -> bool:
    import pyarrow.compute as pc  # lazily: only a dictionary written without checksums

    return bool(pc.count_distinct(values).as_py() != len(values))


def load_dictionary(table: Any, column: str | Column) -> ColumnDictionary:
    """The committed dictionary of ``column``, cached until a new version is committed.

    A column without any dictionary file gives an empty dictionary; whether that is right
    depends on the data (``check_covers``).

    Raises:
        DictionaryError: the dictionary files are damaged or contradict each other.
    """
    col = column if isinstance(column, Column) else dictionary_column(table, column)
    files = column_files(table, col)
    return load_column(col, files)[0]


def load_column(col: Column, files: ColumnFiles) -> tuple[ColumnDictionary, DictState]:
    key = files.meta_path
    with _cache_lock:
        hit = _cache.get(key)
    try:
        state = read_state(files, str(col.type), known=hit[0] if hit is not None else None)
        if hit is not None and state is hit[0]:
            return hit[1], state
        if not state.meta.entries:
            return _empty(col, files), state
        built, _ = build_dictionary(col, files, state, hit[1] if hit is not None else None)
    except DictionaryError as err:
        raise DictionaryError(f"{err}{RESTORE_HINT}") from err
    remember(files, state, built)
    return built, state


def remember(files: ColumnFiles, state: DictState, d: ColumnDictionary) -> None:
    if not state.meta.entries:
        return
    with _cache_lock:
        _cache[files.meta_path] = (state, d)
        _cache.move_to_end(files.meta_path)
        while len(_cache) > _CACHE_LIMIT:
            _cache.popitem(last=False)


def max_surrogate(bounds: Any, name: str) -> int | None:
    """The largest surrogate of a column in segment bounds (keyed by column id; None:
    unknown or none)."""
    cb = None if bounds is None else bounds.columns.get(name)
    if cb is None or cb.kind != "INT64" or not np.asarray(cb.hi_ok).any():
        return None
    return int(np.asarray(cb.hi)[np.asarray(cb.hi_ok)].max())


def check_covers(d: ColumnDictionary, max_surrogate: int | None, *, what: str) -> None:
    """Refuse a dictionary that lacks surrogates the data holds (``max_surrogate``).

    A dictionary column whose segments hold surrogates and whose dictionary is missing
    (deleted files, a schema whose column id changed) or shorter is damage, never an
    empty or smaller dictionary: answering from it would drop rows.

    Raises:
        DictionaryError: ``max_surrogate`` is beyond the dictionary.
    """
    if max_surrogate is None or max_surrogate <= d.max_surrogate:
        return
    have = (
        f"commits only surrogates 1..{d.max_surrogate}" if d.size
        else "has no committed value (no dictionary file)"
    )
    raise DictionaryError(
        f"{what} hold surrogates up to {max_surrogate} of column {d.column.name!r}, but its "
        f"dictionary {d.files.directory}/{d.column.column_id}.* {have}{RESTORE_HINT}"
    )


def clear_cache() -> None:
    """Forget every cached dictionary (tests, long-running drivers after a drop)."""
    with _cache_lock:
        _cache.clear()
