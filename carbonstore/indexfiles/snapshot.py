"""The table-level index snapshot format: every covered segment's index, column-oriented.

File layout (format 6; all integers little-endian)::

    magic b"CARBSNAP" | u32 format version (6) | u32 reserved (0) | u64 directory length D
    u64 xxh64 of bytes [0, 24) and the directory
    directory: D bytes of JSON {"length": L, "meta": {...}, "sections": {name: [offset, length, xxh64]}}
    sections: L bytes, each one Arrow IPC file (offsets from the end of the directory)

Each section has its own checksum, verified when the section is first read - a plan reads
and verifies only the sections its filter touches (ranged reads: an object store does
ranged GETs). The prefix and the directory are verified, and the file's length checked
against them, before anything else is used. A snapshot whose prefix, directory or a
section it reads fails its checksum, that is truncated, empty, of another format or not a
snapshot at all is refused (:class:`CorruptIndexError`; a section found damaged after the
snapshot was opened raises :class:`SnapshotSectionError`, and the arrays built over it
answer from the merge indexes instead): planning then plans from the merge indexes and
writes a new snapshot - the snapshot is a cache of derived data, never a source of truth.
Snapshots of older formats (4, 5: one checksum over the whole file) are not read; they are
replaced by the next snapshot written.

Sections: ``core`` (per segment: the columns below that are not per slot, and the segment
bounds), and per slot ``<slot>`` (row-group statistics) and ``<slot>:p`` (page statistics).

The sections together are one table (written by snapshot_write.py) with one row per covered
segment, in segment order:

* ``bounds.*`` - the segment bounds (bounds.py), for whole-segment pruning;
* ``segment``, ``merge`` (merge index file name), ``bloom_base`` / ``bloom_len`` (where the
  segment's bloom region lies in its merge index), ``layout`` (the segment's index columns
  as slot keys, in order), ``files`` (its DataFiles);
* the segment's row-group arrays as list columns ``rg_file``, ``rg_index``, ``rg_rows``,
  ``rg_offset``, ``rg_length``;
* per *slot* (one distinct index column description: name, kind, column id, physical and
  logical type, ...; key ``c`` + hash) list columns ``<slot>:<array>`` of its row-group
  statistics, bloom references and page statistics (``p_*``). Segments without the slot
  hold empty lists.

A list column flattened is that array concatenated over all segments and its list offsets
are the segment offsets. A fresh process therefore decodes a constant number of arrays -
those a filter touches, each once for all segments - instead of one index header per
segment, and :class:`~carbonstore.indexfiles.snapshot_arrays.SnapshotArrays` presents any run of segments with one layout as one
index (the duck-typed IndexArrays contract of arrays.py) for a single vectorised planner
pass. Bloom bitsets stay in the merge indexes and are read lazily for = / IN candidates.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa

from carbonstore.indexfiles._gen.carbonindex.ttypes import ColumnDesc, DataFile, ValueKind
from carbonstore.indexfiles.arrays import BloomSource
from carbonstore.indexfiles.segment_bounds import ColumnBounds, SegmentBounds
from carbonstore.indexfiles.snapshot_file import (
    CORE,
    SNAPSHOT_MAGIC,
    SNAPSHOT_VERSION,
    SnapshotFile,
    SnapshotSectionError,
    frame_snapshot,
    section_of,
    snapshot_table,
)

__all__ = ["BOUNDS_TYPES", "COL_COLUMNS", "DESC_FIELDS", "FILE_STRUCT", "FLAG_BITS", "PAGE_COLUMNS", "RG_COLUMNS",
           "SNAPSHOT_MAGIC", "SNAPSHOT_VERSION", "VALUE_TYPES", "Snapshot", "SnapshotFile",
           "SnapshotSectionError", "flat_ranges", "decode_snapshot", "frame_snapshot", "section_of", "slot_key",
           "snapshot_table"]

_NP = npt.NDArray[Any]
DESC_FIELDS = ("column_id", "name", "physical_type", "logical_type", "spark_type", "type_length",
                "precision", "scale", "kind", "nested", "unit")
FILE_STRUCT = pa.struct([
    ("path", pa.string()), ("size", pa.int64()), ("num_rows", pa.int64()),
    ("footer_offset", pa.int64()), ("footer_length", pa.int32()), ("created_by", pa.string()),
    ("first_row_group", pa.int32()), ("num_row_groups", pa.int32()),
])
# per segment: column -> (array attribute of IndexArrays, arrow type)
RG_COLUMNS = {"rg_file": ("rg_file", pa.int32()), "rg_index": ("rg_index", pa.int32()),
       "rg_rows": ("rg_num_rows", pa.int64()), "rg_offset": ("rg_offset", pa.int64()),
       "rg_length": ("rg_length", pa.int64())}
# per slot, row-group level and page level: suffix -> (attribute, arrow type); None = by kind
COL_COLUMNS = {"flags": ("flags", pa.uint8()), "nulls": ("null_count", pa.int64()), "nans": ("nan_count", pa.int64()),
        "has_pages": ("has_pages", pa.uint8()), "boundary": ("boundary_order", pa.int8()),
        "bloom_off": ("bloom_offset", pa.int64()), "bloom_len": ("bloom_length", pa.int32()),
        "min": ("min", None), "max": ("max", None)}
PAGE_COLUMNS = {"p_rg": ("row_group", pa.int32()), "p_first": ("first_row_index", pa.int64()),
         "p_rows": ("row_count", pa.int64()), "p_offset": ("offset", pa.int64()),
         "p_size": ("compressed_size", pa.int32()), "p_flags": ("flags", pa.uint8()),
         "p_nulls": ("null_count", pa.int64()), "p_nans": ("nan_count", pa.int64()),
         "p_min": ("min", None), "p_max": ("max", None)}
VALUE_TYPES = {ValueKind.INT64: pa.int64(), ValueKind.FLOAT64: pa.float64(), ValueKind.BYTES: pa.binary(),
           ValueKind.BIGINT: pa.binary()}
BOUNDS_TYPES = {"INT64": pa.int64(), "FLOAT64": pa.float64(), "BYTES": pa.binary(), "BIGINT": pa.string()}
FLAG_BITS = (("has_min", 1), ("has_max", 2), ("min_exact", 4), ("max_exact", 8), ("null_page", 16))


def slot_key(desc: ColumnDesc) -> str:
    """The key of an index column description (equal descriptions share one slot)."""
    return "c" + hashlib.sha1(orjson.dumps([getattr(desc, f) for f in DESC_FIELDS])).hexdigest()[:12]


def flat_ranges(starts: _NP, ends: _NP) -> npt.NDArray[np.intp]:
    """Indices ``starts[0]:ends[0]``, ``starts[1]:ends[1]``, ... concatenated (vectorised)."""
    if len(starts) == 1 and ends[0] >= starts[0]:  # one range (a lookup's one surviving
        return np.arange(int(starts[0]), int(ends[0]), dtype=np.intp)  # segment): no repeat
    lens = (ends - starts).astype(np.int64)
    total = int(lens.sum())
    before = np.cumsum(lens) - lens
    return (np.repeat(starts - before, lens) + np.arange(total, dtype=np.int64)).astype(np.intp)


# ---- reading ----------------------------------------------------------------------------------
_BOUNDS_ARRAYS = ("lo", "hi", "lo_ok", "hi_ok", "nulls", "nans")


def _numpy(col: pa.ChunkedArray) -> _NP:
    """``col.to_numpy()``, the same values, from its one chunk when it has one (a section is
    one IPC batch): the chunked array's first ``to_numpy`` in a process costs ~0.2 ms more."""
    return col.chunk(0).to_numpy(zero_copy_only=False) if col.num_chunks == 1 else col.to_numpy()


def _column_bounds(t: pa.Table, c: str, kind: str) -> ColumnBounds:
    def arr(suffix: str) -> _NP:
        return _numpy(t.column(f"bounds.{suffix}:{c}"))

    lo, hi = arr("lo"), arr("hi")
    if kind == "BIGINT":
        lo = np.array([None if v is None else int(v) for v in lo], dtype=object)
        hi = np.array([None if v is None else int(v) for v in hi], dtype=object)
    elif kind == "BYTES":
        lo, hi = lo.astype(object), hi.astype(object)
    return ColumnBounds(
        kind=kind, lo=lo, hi=hi, lo_ok=arr("lo_ok").astype(bool), hi_ok=arr("hi_ok").astype(bool),
        null_count=arr("nulls").astype(np.int64), nan_count=arr("nans").astype(np.int64),
    )


class _LazyBounds(Mapping[str, ColumnBounds]):
    """Segment bounds by column id, each column decoded on first use (a plan needs the
    columns it filters on). Every column's arrays are looked up now (KeyError: not a
    snapshot)."""

    def __init__(self, t: pa.Table, kinds: dict[str, str]) -> None:
        names = set(t.column_names)
        for c in kinds:
            for suffix in _BOUNDS_ARRAYS:
                if f"bounds.{suffix}:{c}" not in names:
                    raise KeyError(f"snapshot column bounds.{suffix}:{c} is missing")
        self._t = t
        self._kinds = kinds
        self._done: dict[str, ColumnBounds] = {}

    def __getitem__(self, c: str) -> ColumnBounds:
        got = self._done.get(c)
        if got is None:
            got = self._done[c] = _column_bounds(self._t, c, self._kinds[c])
        return got

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds)

    def __len__(self) -> int:
        return len(self._kinds)


def _decode_bounds(t: pa.Table, kinds: dict[str, str]) -> SegmentBounds:
    return SegmentBounds(
        num_rows=_numpy(t.column("bounds.num_rows")).astype(np.int64),
        num_files=_numpy(t.column("bounds.num_files")).astype(np.int64),
        num_row_groups=_numpy(t.column("bounds.num_row_groups")).astype(np.int64),
        columns=_LazyBounds(t, kinds),  # type: ignore[arg-type]
    )


class Snapshot:
    """An opened snapshot: bounds and segment offsets now, each section and flat array on
    first use.

    Args:
        file: the opened file (directory verified); its ``core`` section is read now.
        bloom_source: ``(segment id, merge name, bloom base) -> reader`` of bloom bitsets.
        counters: I/O counters; ``snapshot_array_decodes`` counts flat arrays decoded,
            ``snapshot_sections`` sections read and verified.

    Raises:
        CorruptIndexError: the core section fails its checksum.
        ValueError: not a readable snapshot of this version (structure checked throughout;
            a slot's sections when they are read: :class:`SnapshotSectionError` then).
    """

    def __init__(self, file: SnapshotFile, *, bloom_source: Callable[[str, str, int], BloomSource],
                 counters: Counter[str]) -> None:
        meta = file.meta
        if meta.get("carbonstore.snapshot.version") != SNAPSHOT_VERSION:
            raise ValueError("unsupported snapshot version")
        self.name = file.name
        self.source = file
        self.counters = counters
        #: a section was found damaged after opening: planning must not take it again
        self.damaged = False
        #: called when a section is read or a flat array decoded (the owner recounts nbytes)
        self.on_grow: Callable[[], None] | None = None
        self._bloom_source = bloom_source
        self._sections: dict[str, pa.Table] = {}
        core = self._section(CORE)
        self.size = core.num_rows
        self.segments: list[str] = core.column("segment").to_pylist()
        self.merges: list[str] = core.column("merge").to_pylist()
        self.bounds = _decode_bounds(core, orjson.loads(meta["carbonstore.kinds"]))
        self.bloom_base = _numpy(core.column("bloom_base")).astype(np.int64)
        self.bloom_len = _numpy(core.column("bloom_len")).astype(np.int64)
        self.slots = {k: ColumnDesc(**d) for k, d in orjson.loads(meta["carbonstore.slots"]).items()}
        # one group per distinct layout, numbered in order of first use; the writer stores
        # the column dictionary-encoded, so no Python string per segment is made here
        col = core.column("layout")  # one chunk (an IPC section is one batch): taken as it is,
        # combine_chunks of a dictionary column costs 0.3-0.5 ms in a fresh process
        layouts = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        if not pa.types.is_dictionary(layouts.type):
            layouts = layouts.dictionary_encode()
        if layouts.null_count or (len(layouts) and (
                layouts.indices.to_numpy(zero_copy_only=False).max() >= len(layouts.dictionary))):
            raise ValueError("snapshot column layout holds nulls or unknown layouts")
        self.group = layouts.indices.to_numpy(zero_copy_only=False).astype(np.int32)
        self.group_slots = [[k for k in lay.split(",") if k] for lay in layouts.dictionary.to_pylist()]
        self._arrays: dict[str, pa.Array] = {}
        self._offsets: dict[str, _NP] = {}
        self._flat: dict[str, _NP] = {}
        self._files: list[DataFile] | None = None
        self._file_cols: dict[str, pa.Array] | None = None
        self._file_objs: dict[int, DataFile] = {}
        self._blooms: dict[int, BloomSource | None] = {}
        self._bloom_slots: dict[tuple[int, str], str | None] = {}
        self._any_bloom: dict[str, _NP] = {}
        self._check_core()

    @functools.cached_property
    def rows(self) -> dict[tuple[str, str], int]:
        """(segment id, merge index name) -> row."""
        return {(s, m): i for i, (s, m) in enumerate(zip(self.segments, self.merges, strict=True))}

    @property
    def table(self) -> pa.Table:
        """Every section read so far, as one table (without schema metadata)."""
        cols: dict[str, pa.ChunkedArray] = {}
        for t in self._sections.values():
            cols.update(zip(t.column_names, t.columns, strict=True))
        return pa.table(cols)

    @property
    def nbytes(self) -> int:
        """Bytes held now: the sections read and the flat arrays decoded from them so far
        (object arrays of big integers counted at 32 bytes a value)."""
        flat = sum(a.nbytes if a.dtype != object else 32 * len(a) for a in self._flat.values())
        # the sections' buffers (not Table.nbytes: that walks every array to count slices)
        held = sum(int(t.get_total_buffer_size()) for t in self._sections.values())
        return held + flat + sum(o.nbytes for o in self._offsets.values())

    # -- sections -------------------------------------------------------------------------
    def _section(self, section: str) -> pa.Table:
        got = self._sections.get(section)
        if got is not None:
            return got
        try:
            got = self.source.read(section)
            if got.num_rows != getattr(self, "size", got.num_rows):
                raise ValueError(f"section {section} has {got.num_rows} rows, not {self.size}")
            self._sections[section] = got
            if section != CORE:
                self._check_slot(section.partition(":")[0], page=section.endswith(":p"))
        except SnapshotSectionError:
            self._forget(section)
            self._found_damaged()
            raise
        except (ValueError, KeyError, TypeError, pa.ArrowException) as err:
            self._forget(section)
            if section == CORE:
                raise
            self._found_damaged()
            raise SnapshotSectionError(f"{self.source.what}: section {section}: {err}") from None
        self.counters["snapshot_sections"] += 1
        if self.on_grow is not None:
            self.on_grow()
        return got

    def _forget(self, section: str) -> None:
        """Drop ``section`` and every array decoded from it (its checks decode some before
        they fail): a later read of any of its columns reads it again, and fails again."""
        self._sections.pop(section, None)
        for cache in (getattr(self, "_arrays", {}), getattr(self, "_offsets", {}), getattr(self, "_flat", {})):
            for column in [c for c in cache if section_of(c) == section]:
                del cache[column]

    def _found_damaged(self) -> None:
        if not self.damaged and hasattr(self, "size"):  # (the core section: refused by the caller)
            self.counters["snapshot_errors"] += 1
        self.damaged = True

    def _column(self, column: str) -> pa.ChunkedArray:
        return self._section(section_of(column)).column(column)

    def load_all(self) -> pa.Table:
        """Every section read and verified; the whole snapshot as one table."""
        for section in self.source.sections:
            self._section(section)
        return self.table

    # -- structure ------------------------------------------------------------------------
    def _list(self, column: str) -> tuple[pa.Array, _NP]:
        if column not in self._offsets:
            col = self._column(column)
            arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
            if not pa.types.is_list(arr.type) or arr.null_count:
                raise ValueError(f"snapshot column {column} is not a list column without nulls")
            # from the offsets buffer and the child array as they are (no copy, no slice
            # unless the list array is itself a slice)
            offs = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1,
                                 offset=4 * arr.offset).astype(np.int64)
            start, end = int(offs[0]), int(offs[-1])
            values = arr.values
            if start or end != len(values):
                values = values.slice(start, end - start)
            self._arrays[column] = values
            self._offsets[column] = offs - start if start else offs
        return self._arrays[column], self._offsets[column]

    def offsets(self, column: str) -> _NP:
        """Segment offsets into the flat array of ``column`` (length ``size + 1``)."""
        return self._list(column)[1]

    def _bounds_of(self, column: str) -> _NP:
        """``column``'s list offsets from zero (equal offsets: equal lengths per segment),
        read from its offsets buffer - nothing is flattened or copied."""
        col = self._section(section_of(column)).column(column)
        if col.num_chunks != 1:
            return self.offsets(column)
        arr = col.chunk(0)
        if not pa.types.is_list(arr.type) or arr.null_count:
            raise ValueError(f"snapshot column {column} is not a list column without nulls")
        offs = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=4 * arr.offset)
        return offs - offs[0] if offs[0] else offs

    def _same_bounds(self, column: str, like: str, want: _NP) -> bool:
        """``_bounds_of(column)`` equals ``want``, which is ``_bounds_of(like)``: the two list
        columns' offsets buffers compared as bytes when both are one unsliced chunk (as the
        writer lays them out: a memcmp instead of a numpy decode per column), else as arrays."""
        a, b = self._section(section_of(column)).column(column), self._section(section_of(like)).column(like)
        if a.num_chunks == 1 and b.num_chunks == 1:
            x, y = a.chunk(0), b.chunk(0)
            if (pa.types.is_list(x.type) and pa.types.is_list(y.type) and not x.null_count and len(x) == len(y)
                    and x.offset == 0
                    and y.offset == 0):
                bx, by = x.buffers()[1], y.buffers()[1]
                n = 4 * (len(x) + 1)
                if bx is not None and by is not None and bx.size >= n and by.size >= n and (
                        bx.slice(0, n).equals(by.slice(0, n))):
                    return True
        return bool(np.array_equal(self._bounds_of(column), want))

    def _check_core(self) -> None:
        """Every row-group list agrees with the segment's row groups, files in range, and
        every layout names known slots with their sections."""
        rg = self.offsets("rg_rows")
        rg_lens = np.diff(rg)
        for name in RG_COLUMNS:
            if not self._same_bounds(name, "rg_rows", rg):
                raise ValueError(f"snapshot column {name} does not match the row groups")
        file_lens = np.diff(self.offsets("files"))
        rg_file = self.values("rg_file")
        seg_files = np.repeat(file_lens, rg_lens)
        if len(rg_file) and (rg_file.min() < 0 or bool((rg_file >= seg_files).any())):
            raise ValueError("snapshot row groups point at files that are not in their segment")
        for key in {k for keys in self.group_slots for k in keys}:
            if key not in self.slots or key not in self.source.sections or f"{key}:p" not in self.source.sections:
                raise ValueError(f"snapshot layout names an unknown column slot {key}")

    def _check_slot(self, key: str, *, page: bool) -> None:
        """Slot ``key``'s row-group (or page) lists agree with the row groups (pages), pages in
        row-group order (run when the section is read)."""
        desc = self.slots[key]
        rg = self.offsets("rg_rows")
        rg_lens = np.diff(rg)
        if not page:
            groups = [g for g, keys in enumerate(self.group_slots) if key in keys]
            everywhere = len(groups) == len(self.group_slots)
            has = None if everywhere else np.isin(self.group, groups)
            want = rg if has is None else (np.zeros_like(rg) if not has.any() else np.concatenate(
                [[0], np.cumsum(np.where(has, rg_lens, 0))]))
            for suffix in COL_COLUMNS:
                if suffix in ("min", "max") and (desc.kind or 0) not in VALUE_TYPES:
                    continue
                if not (self._same_bounds(f"{key}:{suffix}", "rg_rows", want) if has is None
                        else np.array_equal(self._bounds_of(f"{key}:{suffix}"), want)):
                    raise ValueError(f"snapshot column {key}:{suffix} does not match the row groups")
            return
        pages = self._bounds_of(f"{key}:p_rg")
        for suffix in PAGE_COLUMNS:
            if suffix in ("p_min", "p_max") and (desc.kind or 0) not in VALUE_TYPES:
                continue
            if not self._same_bounds(f"{key}:{suffix}", f"{key}:p_rg", pages):
                raise ValueError(f"snapshot column {key}:{suffix} does not match the pages")
        page_lens = np.diff(pages)
        p_rg = self.values(f"{key}:p_rg").astype(np.int64)
        if len(p_rg):
            seg_rgs = np.repeat(rg_lens, page_lens)
            first = np.zeros(len(p_rg), dtype=bool)
            first[(np.cumsum(page_lens) - page_lens)[page_lens > 0]] = True
            if (p_rg.min() < 0 or bool((p_rg >= seg_rgs).any())
                    or bool((np.diff(p_rg) < 0)[~first[1:]].any())):
                raise ValueError(f"snapshot pages of {key} are not in row-group order")

    # -- flat arrays ------------------------------------------------------------------------
    def values(self, column: str) -> _NP:
        """The flat array of ``column`` over all segments (decoded once)."""
        got = self._flat.get(column)
        if got is not None:
            return got
        arr, _ = self._list(column)
        key, _, suffix = column.partition(":")
        if suffix in ("min", "max", "p_min", "p_max"):
            kind = self.slots[key].kind or 0
            if kind == ValueKind.BIGINT:
                out = np.empty(len(arr), dtype=object)
                out[:] = [int.from_bytes(b, "big", signed=True) for b in arr.to_pylist()]
            else:
                out = arr.to_numpy(zero_copy_only=False)
        else:
            out = arr.to_numpy(zero_copy_only=False)
        self.counters["snapshot_array_decodes"] += 1
        self._flat[column] = out
        if self.on_grow is not None:
            self.on_grow()
        return out

    def gather(self, column: str, rows: npt.NDArray[np.intp]) -> _NP:
        """``column``'s values of segments ``rows`` (in that order), concatenated."""
        vals = self.values(column)
        offs = self.offsets(column)
        if len(rows) and int(rows[-1]) - int(rows[0]) == len(rows) - 1 and bool((np.diff(rows) == 1).all()):
            return vals[int(offs[rows[0]]) : int(offs[rows[-1] + 1])]  # a run of segments: a view
        return vals[flat_ranges(offs[rows], offs[rows + 1])]

    def files(self) -> list[DataFile]:
        """Every segment's DataFiles, concatenated (built once)."""
        if self._files is None:
            everything = range(len(self._list("files")[0]))
            self.prefetch_files(everything)
            self._files = [self.file(i) for i in everything]
        return self._files

    def file(self, i: int) -> DataFile:
        """DataFile ``i`` of :meth:`files` (built on first use: a plan needs few of them)."""
        got = self._file_objs.get(i)
        if got is None:
            self.prefetch_files([i])
            got = self._file_objs[i]
        return got

    def _file_fields(self) -> dict[str, pa.Array]:
        if self._file_cols is None:
            arr, _ = self._list("files")
            self._file_cols = {f: arr.field(f) for f in FILE_STRUCT.names}
        return self._file_cols

    def prefetch_files(self, indices: Sequence[int]) -> None:
        """Build DataFiles ``indices`` of :meth:`files` now, in one batch: a plan builds only
        the files it keeps (never a Python object per file of the table)."""
        todo = [i for i in indices if i not in self._file_objs]
        if not todo:
            return
        take = pa.array(todo, pa.int64())
        cols = {f: a.take(take).to_pylist() for f, a in self._file_fields().items()}
        names = FILE_STRUCT.names
        for k, i in enumerate(todo):
            self._file_objs[i] = DataFile(**{f: cols[f][k] for f in names})

    def file_paths(self, indices: Sequence[int]) -> list[str]:
        """The paths of DataFiles ``indices`` (no DataFile built)."""
        return self._file_fields()["path"].take(pa.array(indices, pa.int64())).to_pylist()

    def rows_table(self, rows: npt.NDArray[np.intp]) -> pa.Table:
        """Segments ``rows`` as snapshot rows without bounds (to write a newer snapshot;
        every section is read and verified first)."""
        t = self.load_all()
        t = t.select([n for n in t.column_names if not n.startswith("bounds.")]).take(pa.array(rows, pa.int64()))
        layout = t.column("layout")
        if pa.types.is_dictionary(layout.type):
            t = t.set_column(t.schema.get_field_index("layout"), "layout", layout.cast(pa.string()))
        return t

    # -- blooms -------------------------------------------------------------------------------
    def bloom_source(self, row: int) -> BloomSource | None:
        if row not in self._blooms:
            base = int(self.bloom_base[row])
            self._blooms[row] = (None if base < 0 else
                                 self._bloom_source(self.segments[row], self.merges[row], base))
        return self._blooms[row]

    def _bloom_slot(self, group: int, name: str) -> str | None:
        """The slot of index column ``name`` in layout ``group`` (None: no such column)."""
        found = self._bloom_slots.get((group, name), "")
        if found == "":
            found = None
            for key in self.group_slots[group]:
                if self.slots[key].name == name:
                    found = key
            self._bloom_slots[(group, name)] = found
        return found

    def _segments_with_bloom(self, key: str) -> _NP:
        """Per segment: does any row group have a bitset in slot ``key`` (all at once)."""
        any_bloom = self._any_bloom.get(key)
        if any_bloom is None:
            column = f"{key}:bloom_off"
            offs = self.offsets(column)
            seen = np.concatenate([[0], np.cumsum(self.values(column) >= 0)])
            any_bloom = seen[offs[1:]] > seen[offs[:-1]]
            self._any_bloom[key] = any_bloom
        return any_bloom

    def bloom_rows(self, rows: npt.NDArray[np.intp], name: str) -> npt.NDArray[np.bool_]:
        """For segments ``rows``: whether :meth:`bloom_dir` finds an entry of column ``name``
        (a bitset of some row group, and a bloom region to read it from)."""
        out = np.zeros(len(rows), dtype=bool)
        groups = self.group[rows]
        for group in np.unique(groups).tolist():
            key = self._bloom_slot(int(group), name)
            if key is not None:
                sel = groups == group
                out[sel] = self._segments_with_bloom(key)[rows[sel]]
        return out & (self.bloom_base[rows] >= 0)

    def bloom_dir(self, row: int, name: str) -> dict[str, Any] | None:
        """Segment ``row``'s bloom directory entry of index column ``name`` (see cache.bloom_directory)."""
        found = self._bloom_slot(int(self.group[row]), name)
        if found is None:
            return None
        column = f"{found}:bloom_off"
        offs = self.offsets(column)
        if not self._segments_with_bloom(found)[row]:
            return None
        a, b = int(offs[row]), int(offs[row + 1])
        d = self.slots[found]
        return {"kind": d.kind, "column_id": d.column_id, "physical_type": d.physical_type,
                "type_length": d.type_length, "logical_type": d.logical_type, "unit": d.unit,
                "scale": d.scale, "nested": d.nested, "offset": self.values(column)[a:b].tolist(),
                "length": self.values(f"{found}:bloom_len")[a:b].tolist()}


def decode_snapshot(name: str, data: bytes, *, bloom_source: Callable[[str, str, int], BloomSource],
                    counters: Counter[str]) -> Snapshot:
    """Open snapshot file bytes ``data`` (CorruptIndexError when its prefix, directory or core
    section fail; ValueError / ArrowInvalid / KeyError when they are still not a snapshot)."""
    file = SnapshotFile(name, lambda off, n: memoryview(data)[off:off + n], len(data))
    return Snapshot(file, bloom_source=bloom_source, counters=counters)
