"""The table-level index snapshot format: every covered segment's index, column-oriented.

File layout (format 8; all integers little-endian; snapshot_file.py)::

    magic b"CARBSNAP" | u32 format version (8) | u32 reserved (0) | u64 directory length D
    u64 xxh64 of bytes [0, 24) and the directory
    directory: D bytes of JSON {"length": L, "meta": {...}, "sections": {name: [offset, length, xxh64]}}
    sections: L bytes, each one Arrow IPC file (offsets from the end of the directory)

Each section has its own checksum, verified when the section is first read (ranged reads:
an object store does ranged GETs); the prefix and the directory are verified, and the
file's length checked against them, before anything else is used. A snapshot whose prefix,
directory or core fails, that is truncated, empty, of another format or not a snapshot is
refused (:class:`CorruptIndexError`); a section found damaged later raises
:class:`SnapshotSectionError` and the arrays built over it answer from the merge indexes:
the snapshot is derived data, never a source of truth. Format 7 (the same columns, fewer
sections per chunk) is still read and replaced on the next write; older formats are not read.

The snapshot is one table (snapshot_write.py) with one row per covered segment, in segment
order, cut into sections:

* ``core``, the **summary** (read by every plan; O(segments) small values): ``segment``,
  ``merge`` (merge index name), ``bloom_base`` / ``bloom_len`` (the bloom region in the merge
  index), ``layout`` (the segment's index columns as slot keys, dictionary-encoded),
  ``bounds.*`` (segment bounds, bounds.py: whole segments are pruned on them first),
  ``npages.<slot>`` (pages per segment) and ``blooms.<slot>`` (some row group has a bitset);
* per **chunk** ``k`` of segments (``meta["carbonstore.chunks"]``: the first rows), sections
  ``rows#k`` (list columns ``rg_file``, ``rg_index``, ``rg_rows``), ``rgpos#k`` (``rg_offset``,
  ``rg_length``), ``paths#k`` (``file_path``) and ``files#k`` (``files``: the rest of each
  DataFile), ``<slot>#k`` (row-group statistics of one distinct index column description,
  key ``c`` + hash), ``<slot>:b#k`` (its bloom references), ``<slot>:p#k`` (its page
  statistics, ``p_*``) and ``<slot>:q#k`` (the pages' ``p_offset``, ``p_size``): a plan reads
  the sections of what it evaluates and reports, not the byte ranges a reader needs
  (format 7 held them in ``rows#k``, ``<slot>#k`` and ``<slot>:p#k``).

Every list column's segment offsets follow from the summary (``bounds.num_files``,
``bounds.num_row_groups``, the layouts, ``npages``), so a plan reads the summary and then
only the chunks of the segments it keeps - each chunk's list offsets are checked against
the summary when it is read. A list column flattened over the chunks a plan reads is one
numpy array (decoded once per chunk), and :class:`~carbonstore.indexfiles.snapshot_arrays.SnapshotArrays`
presents any run of segments with one layout as one index (arrays.py's contract) for a
single vectorised planner pass. Bloom bitsets stay in the merge indexes and the bloom pack.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa

from carbonstore.indexfiles._gen.carbonindex.ttypes import ColumnDesc, DataFile, ValueKind
from carbonstore.indexfiles.arrays import BloomSource
from carbonstore.indexfiles.held import HeldBytes
from carbonstore.indexfiles.snapshot_bounds import decode_bounds
from carbonstore.indexfiles.snapshot_checks import pages_in_row_group_order
from carbonstore.indexfiles.snapshot_datafiles import FILE_STRUCT, SnapshotDataFiles
from carbonstore.indexfiles.snapshot_file import (
    CHUNKS_META,
    COL_COLUMNS,
    CORE,
    FILE_PATH,
    PAGE_COLUMNS,
    READ_VERSIONS,
    RG_COLUMNS,
    ROWS,
    SNAPSHOT_MAGIC,
    SNAPSHOT_VERSION,
    VALUE_TYPES,
    SnapshotFile,
    SnapshotSectionError,
    chunk_section,
    declared_type,
    frame_snapshot,
    join_files,
    section_of,
    snapshot_table,
    widen_ints,
)
from carbonstore.store.arrow_numpy import from_numpy, to_numpy

__all__ = ["BOUNDS_TYPES", "COL_COLUMNS", "DESC_FIELDS", "FILE_STRUCT", "FLAG_BITS", "PAGE_COLUMNS", "RG_COLUMNS",
           "SNAPSHOT_MAGIC", "SNAPSHOT_VERSION", "VALUE_TYPES", "Snapshot", "SnapshotFile",
           "SnapshotSectionError", "flat_ranges", "decode_snapshot", "frame_snapshot", "section_of", "slot_key",
           "snapshot_table"]

_NP = npt.NDArray[Any]
DESC_FIELDS = ("column_id", "name", "physical_type", "logical_type", "spark_type", "type_length",
                "precision", "scale", "kind", "nested", "unit")
BOUNDS_TYPES = {"INT64": pa.int64(), "FLOAT64": pa.float64(), "BYTES": pa.binary(), "BIGINT": pa.string()}
FLAG_BITS = (("has_min", 1), ("has_max", 2), ("min_exact", 4), ("max_exact", 8), ("null_page", 16))


#: Snapshot.chunk_ranges decodes the values asked for alone (not the chunk's whole array)
#: when the chunk holds at least _PART_MIN of them, at most 1/_PART_SHARE are asked for, in
#: at most _PART_RUNS ranges
_PART_MIN = 4096
_PART_SHARE = 8
_PART_RUNS = 64


def slot_key(desc: ColumnDesc) -> str:
    """The key of an index column description (equal descriptions share one slot)."""
    import hashlib  # here: loading OpenSSL is not a plan's cost (a writer names slots)
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

class Snapshot(SnapshotDataFiles):
    """An opened snapshot: the per-segment summary (``core``: ids, bounds, layouts, page
    counts, bloom presence) now; each chunk section and flat array on first use.

    Every list column's segment offsets follow from the summary (files and row groups per
    segment, which slots a layout has, pages per slot), so a plan that keeps a few segments
    reads only their chunks; each chunk section's own list offsets must equal them.

    Args:
        file: the opened file (directory verified); its ``core`` section is read now.
        bloom_source: ``(segment id, merge name, bloom base) -> reader`` of bloom bitsets.
        counters: I/O counters; ``snapshot_array_decodes`` counts flat arrays decoded,
            ``snapshot_sections`` sections read and verified.

    Raises:
        CorruptIndexError: the core section fails its checksum.
        ValueError: not a readable snapshot of this version (structure checked throughout;
            a chunk's sections when they are read: :class:`SnapshotSectionError` then).
    """

    def __init__(self, file: SnapshotFile, *, bloom_source: Callable[[str, str, int], BloomSource],
                 counters: Counter[str]) -> None:
        meta = file.meta
        version = getattr(file, "version", SNAPSHOT_VERSION)
        if meta.get("carbonstore.snapshot.version") != version or version not in READ_VERSIONS:
            raise ValueError("unsupported snapshot version")
        #: the file's format: its chunk sections are grouped by section_of of this version
        self.version: str = version
        self.name = file.name
        self.source = file
        self.counters = counters
        #: a section was found damaged after opening: planning must not take it again
        self.damaged = False
        #: called when a section is read or a flat array decoded (the owner recounts nbytes)
        self.on_grow: Callable[[], None] | None = None
        self._bloom_source = bloom_source
        self._sections: dict[str, pa.Table] = HeldBytes()
        core = self.core = self._section(CORE)
        self.size = core.num_rows
        starts = orjson.loads(meta[CHUNKS_META])
        if (not isinstance(starts, list) or not starts or starts[0] != 0
                or any(not isinstance(x, int) for x in starts)
                or any(b <= a for a, b in zip(starts, starts[1:], strict=False)) or (self.size and starts[-1] >= self.size)):
            raise ValueError("snapshot chunks are not increasing first rows")
        #: each chunk's first row, and the size last
        self.chunk_starts = np.array([*starts, self.size], dtype=np.int64)
        self.bounds = decode_bounds(core, orjson.loads(meta["carbonstore.kinds"]))
        self.bloom_base = to_numpy(core.column("bloom_base")).astype(np.int64, copy=False)
        self.bloom_len = to_numpy(core.column("bloom_len")).astype(np.int64, copy=False)
        self.slots = {k: ColumnDesc(**d) for k, d in orjson.loads(meta["carbonstore.slots"]).items()}
        self._kinds = {k: d.kind for k, d in self.slots.items()}
        col = core.column("layout")  # dictionary-encoded by the writer: no string per segment
        layouts = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        if not pa.types.is_dictionary(layouts.type):
            layouts = layouts.dictionary_encode()
        if layouts.null_count or (len(layouts) and (
                to_numpy(layouts.indices).max() >= len(layouts.dictionary))):
            raise ValueError("snapshot column layout holds nulls or unknown layouts")
        self.group = to_numpy(layouts.indices).astype(np.int32, copy=False)
        self.group_slots = [[k for k in lay.split(",") if k] for lay in layouts.dictionary.to_pylist()]
        self._offsets: dict[str, _NP] = HeldBytes()
        self._chunk_arrays: dict[tuple[str, int], pa.Array] = {}
        self._chunk_flat: dict[tuple[str, int], _NP] = HeldBytes()
        self._flat: dict[str, _NP] = HeldBytes()
        self._files: list[DataFile] | None = None
        self._file_cols: dict[int, dict[str, pa.Array]] = {}
        self._file_objs: dict[int, DataFile] = {}
        self._blooms: dict[int, BloomSource | None] = {}
        self._bloom_slots: dict[tuple[int, str], str | None] = {}
        self._check_core()

    # each row's segment id and merge index name (strings: _check_core), built when asked
    segments = functools.cached_property(lambda self: self.core.column("segment").to_pylist())
    merges = functools.cached_property(lambda self: self.core.column("merge").to_pylist())

    @functools.cached_property
    def rows(self) -> dict[tuple[str, str], int]:
        """(segment id, merge index name) -> row."""
        return {(s, m): i for i, (s, m) in enumerate(zip(self.segments, self.merges, strict=True))}

    @property
    def sections_read(self) -> list[str]:
        """The sections read (and verified) so far."""
        return list(self._sections)

    @property
    def chunks(self) -> int:
        return len(self.chunk_starts) - 1

    @property
    def table(self) -> pa.Table:
        """The whole snapshot as one table (every section read; without schema metadata)."""
        self.load_all()
        parts: dict[str, list[pa.Array]] = {}
        for k in range(self.chunks):
            for base in sorted(self._chunk_bases(k)):
                t = self._sections[chunk_section(base, k)]
                for c in t.column_names:
                    parts.setdefault(c, []).append(t.column(c).combine_chunks())
        cols = dict(zip(self.core.column_names, self.core.columns, strict=True))
        lists = widen_ints({c: pa.chunked_array(p) for c, p in parts.items()}, self._kinds)
        return pa.table({**cols, **join_files(lists)})

    @property
    def nbytes(self) -> int:
        """Bytes held now: the sections read and the flat arrays decoded from them so far
        (held.py: kept as they come and go, not summed again)."""
        return sum(d.held for d in (self._sections, self._flat, self._chunk_flat, self._offsets))  # type: ignore[attr-defined]

    # -- sections -------------------------------------------------------------------------
    def _chunk_bases(self, k: int) -> list[str]:
        """The base sections chunk ``k`` has in the file."""
        tail = f"#{k}"
        return [sec[: -len(tail)] for sec in self.source.sections if sec.endswith(tail)]

    def _section(self, section: str) -> pa.Table:
        got = self._sections.get(section)
        if got is not None:
            return got
        try:
            got = self.source.read(section)
            if section == CORE:
                if got.num_rows != getattr(self, "size", got.num_rows):
                    raise ValueError(f"section {section} has {got.num_rows} rows, not {self.size}")
            else:
                base, _, k = section.rpartition("#")
                self._check_chunk(base, int(k), got)
            self._sections[section] = got
        except SnapshotSectionError:
            self._forget(section)
            self._found_damaged()
            raise
        except (ValueError, KeyError, TypeError, IndexError, pa.ArrowException) as err:
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
        """Drop ``section`` and every array decoded from it."""
        self._sections.pop(section, None)
        base, _, k = section.rpartition("#")
        if not base:
            return
        for cache in (getattr(self, "_chunk_arrays", {}), getattr(self, "_chunk_flat", {})):
            for key in [key for key in cache if key[1] == int(k) and section_of(key[0], self.version) == base]:
                del cache[key]

    def _found_damaged(self) -> None:
        if not self.damaged and hasattr(self, "size"):  # (the core section: refused by the caller)
            self.counters["snapshot_errors"] += 1
        self.damaged = True

    def load_all(self) -> None:
        """Every section read and verified."""
        for section in self.source.sections:
            self._section(section)

    # -- structure ------------------------------------------------------------------------
    def _check_core(self) -> None:
        """The summary holds, for every slot a layout names, its description, page counts
        and bloom presence; counts are not negative."""
        names = set(self.core.column_names)
        if not all(pa.types.is_string(self.core.schema.field(c).type) for c in ("segment", "merge")):
            raise ValueError("snapshot segment ids or merge index names are not strings")
        for key in {k for keys in self.group_slots for k in keys}:
            if key not in self.slots or f"npages.{key}" not in names or f"blooms.{key}" not in names:
                raise ValueError(f"snapshot layout names an unknown column slot {key}")
        b = self.bounds
        if (b.num_files < 0).any() or (b.num_row_groups < 0).any():
            raise ValueError("snapshot counts are negative")

    def _lens_key(self, column: str) -> str:
        if column in ("files", FILE_PATH):
            return "files"
        if column in RG_COLUMNS:
            return "rg"
        key, _, suffix = column.partition(":")
        return f"{key}:p" if suffix.startswith("p_") else key

    def offsets(self, column: str) -> _NP:
        """Segment offsets into the flat array of ``column`` (length ``size + 1``), from the
        summary: nothing of a chunk is read."""
        lk = self._lens_key(column)
        got = self._offsets.get(lk)
        if got is None:
            b = self.bounds
            if lk == "files":
                lens = b.num_files
            elif lk == "rg":
                lens = b.num_row_groups
            elif lk.endswith(":p"):
                key = lk[:-2]
                lens = (to_numpy(self.core.column(f"npages.{key}")).astype(np.int64)
                        if f"npages.{key}" in self.core.column_names else np.zeros(self.size, np.int64))
            else:
                groups = [g for g, keys in enumerate(self.group_slots) if lk in keys]
                lens = (b.num_row_groups if len(groups) == len(self.group_slots)  # every layout
                        else np.where(np.isin(self.group, groups), b.num_row_groups, 0))
            if (lens < 0).any():
                raise ValueError(f"snapshot counts of {column} are negative")
            got = self._offsets[lk] = np.concatenate([[0], np.cumsum(lens, dtype=np.int64)])
        return got

    def _check_chunk(self, base: str, k: int, t: pa.Table) -> None:
        """Chunk ``k``'s section ``base`` has the chunk's rows, and every list column's offsets
        equal those of the summary (and row groups point at their segment's files, pages
        are in row-group order)."""
        r0, r1 = int(self.chunk_starts[k]), int(self.chunk_starts[k + 1])
        if t.num_rows != r1 - r0:
            raise ValueError(f"{t.num_rows} rows, not {r1 - r0}")
        wanted: dict[str, bytes | None] = {}  # a section's columns share their counts: made once
        names = t.column_names
        for name, col in zip(names, t.columns, strict=True):
            if section_of(name, self.version) != base:
                raise ValueError(f"column {name} does not belong here")
            arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
            if not pa.types.is_list(arr.type) or arr.null_count:
                raise ValueError(f"snapshot column {name} is not a list column without nulls")
            lk = self._lens_key(name)
            if lk in wanted:
                want = wanted[lk]
            else:  # the summary's offsets as the int32 bytes of a list column
                full = self.offsets(name)[r0:r1 + 1]
                rel = full - full[0]
                want = wanted[lk] = rel.astype(np.int32).tobytes() if int(rel[-1]) < 2**31 else None
            offs = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=4 * arr.offset)
            if want is None or (offs if not offs[0] else offs - offs[0]).tobytes() != want:
                raise ValueError(f"snapshot column {name} does not match the summary's counts")
        if base == ROWS:
            rg_file = to_numpy(self._take_list(t, "rg_file")[0])
            rg = self.offsets("rg_rows")[r0:r1 + 1]
            seg_files = np.repeat(self.bounds.num_files[r0:r1], np.diff(rg))
            if len(rg_file) and (rg_file.min() < 0 or bool((rg_file >= seg_files).any())):
                raise ValueError("snapshot row groups point at files that are not in their segment")
        elif base.endswith(":p") and f"{base[:-2]}:p_rg" in names:
            p_rg = to_numpy(self._take_list(t, f"{base[:-2]}:p_rg")[0])
            pages = self.offsets(f"{base[:-2]}:p_rg")[r0:r1 + 1]
            if not pages_in_row_group_order(p_rg, np.diff(pages), self.offsets("rg_rows")[r0:r1 + 1]):
                raise ValueError(f"snapshot pages of {base} are not in row-group order")

    @staticmethod
    def _take_list(t: pa.Table, column: str) -> tuple[pa.Array, int]:
        """List column ``column`` of section ``t``: its values (from the first offset) and count."""
        arr = _one_chunk(t.column(column))
        offs = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1, offset=4 * arr.offset)
        start, end = int(offs[0]), int(offs[-1])
        values = arr.values
        if start or end != len(values):
            values = values.slice(start, end - start)
        return values, end - start

    def _chunk_list(self, column: str, k: int) -> pa.Array | None:
        """``column``'s values over chunk ``k`` (None: the chunk has none)."""
        key = (column, k)
        got = self._chunk_arrays.get(key)
        if got is None:
            section = chunk_section(section_of(column, self.version), k)
            if section not in self.source.sections or self._section(section).schema.get_field_index(column) < 0:
                offs, r0, r1 = self.offsets(column), self.chunk_starts[k], self.chunk_starts[k + 1]
                if offs[r1] == offs[r0]:
                    return None  # no segment of the chunk has the column: no section written
                self._section(section)  # (raises when the file has no such section)
                self._found_damaged()
                raise SnapshotSectionError(f"{self.source.what}: section {section} has no column {column}")
            got = self._chunk_arrays[key] = self._take_list(self._section(section), column)[0]
        return got

    # -- flat arrays ------------------------------------------------------------------------
    def _decode(self, column: str, arr: pa.Array) -> _NP:
        """``arr``'s values as numpy, integers as stored (format 8 narrows them,
        snapshot_file.narrow_ints: :meth:`widen` gives the declared type)."""
        key, _, suffix = column.partition(":")
        if suffix in ("min", "max", "p_min", "p_max") and (self.slots[key].kind or 0) == ValueKind.BIGINT:
            out = np.empty(len(arr), dtype=object)
            out[:] = [int.from_bytes(b, "big", signed=True) for b in arr.to_pylist()]
            return out
        return to_numpy(arr)  # type: ignore[no-any-return]

    def widen(self, column: str, got: _NP) -> _NP:
        """``column``'s values ``got`` in its declared type (a copy only when narrowed)."""
        if got.dtype.kind == "i":
            want = declared_type(column, self._kinds)
            if want is not None and pa.types.is_integer(want) and got.dtype.itemsize * 8 < want.bit_width:
                return got.astype(want.to_pandas_dtype())
        return got

    def chunk_values(self, column: str, k: int) -> _NP | None:
        """The flat array of ``column`` over chunk ``k``, integers as stored (decoded once;
        None: none there)."""
        got = self._chunk_flat.get((column, k))
        if got is None:
            arr = self._chunk_list(column, k)
            if arr is None:
                return None
            got = self._chunk_flat[(column, k)] = self._decode(column, arr)
            self.counters["snapshot_array_decodes"] += 1
            if self.on_grow is not None:
                self.on_grow()
        return got

    def chunk_ranges(self, column: str, k: int, starts: _NP, ends: _NP) -> _NP | None:
        """``column``'s values at ``starts[i]:ends[i]`` of chunk ``k``'s flat array (ascending,
        not overlapping), concatenated, as stored (None: the chunk has none). A few values of
        a large chunk not decoded yet are decoded alone (a lookup's row groups and pages: not
        the array of the chunk's 10,000 row groups); otherwise from the chunk's array."""
        vals = self._chunk_flat.get((column, k))
        if vals is None and len(starts) <= _PART_RUNS:
            arr = self._chunk_list(column, k)
            if arr is None:
                return None
            want = int(ends[0]) - int(starts[0]) if len(starts) == 1 else int((ends - starts).sum())
            if len(arr) >= _PART_MIN and want * _PART_SHARE <= len(arr):
                got = [self._decode(column, arr.slice(a, b - a))
                       for a, b in zip(starts.tolist(), ends.tolist(), strict=True) if b > a]
                self.counters["snapshot_part_decodes"] += 1
                return (got[0] if len(got) == 1 else np.concatenate(got) if got
                        else self._decode(column, arr.slice(0, 0)))
        if vals is None:
            vals = self.chunk_values(column, k)
            if vals is None:
                return None
        if len(starts) == 1:
            return vals[int(starts[0]):int(ends[0])]
        return vals[flat_ranges(starts, ends)]

    def values(self, column: str) -> _NP:
        """The flat array of ``column`` over all segments (every chunk read; decoded once)."""
        got = self._flat.get(column)
        if got is None:
            parts = [v for k in range(self.chunks) if (v := self.chunk_values(column, k)) is not None and len(v)]
            got = (parts[0] if len(parts) == 1 else np.concatenate(parts) if parts
                   else np.zeros(0, dtype=object if column.endswith("min") or column.endswith("max") else np.int64))
            self._flat[column] = got = self.widen(column, got)
        return got

    def chunk_of(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        """The chunk of each of snapshot ``rows``."""
        return (np.searchsorted(self.chunk_starts, rows, side="right") - 1).astype(np.intp)

    def gather(self, column: str, rows: npt.NDArray[np.intp]) -> _NP:
        """``column``'s values of segments ``rows`` (in that order), concatenated: only the
        chunks of ``rows`` are read (a run of segments in one chunk: a view)."""
        rows = np.asarray(rows, dtype=np.intp)
        offs = self.offsets(column)
        if column in self._flat or not len(rows) or bool((np.diff(rows) < 0).any()):
            vals = self.values(column)
            if len(rows) and int(rows[-1]) - int(rows[0]) == len(rows) - 1 and bool((np.diff(rows) == 1).all()):
                return vals[int(offs[rows[0]]) : int(offs[rows[-1] + 1])]
            return vals[flat_ranges(offs[rows], offs[rows + 1])]
        chunk = self.chunk_of(rows)
        cut = np.flatnonzero(np.diff(chunk)) + 1
        parts = []
        for first, part in zip([0, *cut.tolist()], np.split(rows, cut), strict=True):
            k = int(chunk[first])
            base = int(offs[self.chunk_starts[k]])
            if offs[part[-1] + 1] == offs[part[0]]:
                continue
            if int(part[-1]) - int(part[0]) == len(part) - 1:  # (a run: one range)
                vals = self.chunk_ranges(column, k, offs[part[:1]] - base, offs[part[-1:] + 1] - base)
            elif len(part) <= _PART_RUNS:
                vals = self.chunk_ranges(column, k, offs[part] - base, offs[part + 1] - base)
            else:  # (a scan's many segments of the chunk: its array; their positions kept
                whole = self.chunk_values(column, k)  # per list length: a scan gathers a slot's
                takes = self.__dict__.setdefault("_takes", {})  # statistics over the same ones)
                got = takes.get((lk := self._lens_key(column), k))
                if got is None or not np.array_equal(got[0], part):
                    got = takes[(lk, k)] = (part.copy(), flat_ranges(offs[part] - base, offs[part + 1] - base))
                vals = None if whole is None else whole[got[1]]
            if vals is not None:
                parts.append(vals)
        if len(parts) == 1:
            return self.widen(column, parts[0])
        if not parts:
            return self.values(column)[:0] if column in self._flat else np.zeros(0, dtype=np.int64)
        return self.widen(column, np.concatenate(parts))  # (narrow chunks joined, then widened once)

    # -- writing a newer snapshot ------------------------------------------------------------
    def core_rows(self, r0: int, r1: int) -> pa.Table:
        """Rows ``r0:r1`` of the summary without bounds (layout as strings)."""
        t = self.core.slice(r0, r1 - r0)
        t = t.select([n for n in t.column_names if not n.startswith("bounds.")])
        return t.set_column(t.schema.get_field_index("layout"), "layout",
                            t.column("layout").cast(pa.string()))

    def chunk_raw(self, k: int) -> list[tuple[str, bytes, int]]:
        """Chunk ``k``'s sections as they are in the file: (base name, bytes, checksum), verified."""
        return [(base, *self.source.raw(chunk_section(base, k))) for base in sorted(self._chunk_bases(k))]

    def rows_tables(self, rows: npt.NDArray[np.intp]) -> list[pa.Table]:
        """Snapshot ``rows`` (increasing) as snapshot rows without bounds, one table per
        chunk they lie in (to write a newer snapshot; their sections are read and verified)."""
        out = []
        rows = np.asarray(rows, dtype=np.intp)
        chunk = self.chunk_of(rows)
        for k in np.flatnonzero(np.bincount(chunk)).tolist():  # distinct, sorted (np.unique loads numpy.ma)
            r0 = int(self.chunk_starts[k])
            local = from_numpy((rows[chunk == k] - r0).astype(np.int64))
            core = self.core_rows(r0, int(self.chunk_starts[k + 1]))
            cols = {n: core.column(n) for n in ("segment", "merge", "bloom_base", "bloom_len", "layout")}
            for base in sorted(self._chunk_bases(k)):
                t = self._section(chunk_section(base, k))
                cols.update(zip(t.column_names, t.columns, strict=True))
            out.append(pa.table(join_files(widen_ints(cols, self._kinds))).take(local))  # rows as written
        return out

    # -- blooms -------------------------------------------------------------------------------
    def bloom_source(self, row: int) -> BloomSource | None:
        if row not in self._blooms:
            base = int(self.bloom_base[row])
            self._blooms[row] = (None if base < 0 else
                                 self._bloom_source(*(self.core.column(c)[row].as_py() for c in ("segment", "merge")), base))
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

    def segments_with_bloom(self, key: str) -> _NP:
        """Per segment: does any row group have a bitset in slot ``key`` (the summary's)."""
        return to_numpy(self.core.column(f"blooms.{key}")).astype(bool)

    def bloom_rows(self, rows: npt.NDArray[np.intp], name: str) -> npt.NDArray[np.bool_]:
        """For segments ``rows``: whether :meth:`bloom_dir` finds an entry of column ``name``
        (a bitset of some row group, and a bloom region to read it from)."""
        out = np.zeros(len(rows), dtype=bool)
        keys = {self._bloom_slot(g, name) for g in range(len(self.group_slots))} - {None}
        if not any(self.segments_with_bloom(k).any() for k in keys):  # type: ignore[arg-type]
            return out  # no segment has a bitset of the column (a min/max column): nothing gathered
        groups = self.group[rows]
        for group in np.flatnonzero(np.bincount(groups)).tolist():  # (np.unique loads numpy.ma)
            key = self._bloom_slot(int(group), name)
            if key is not None:
                sel = groups == group
                out[sel] = self.segments_with_bloom(key)[rows[sel]]
        return out & (self.bloom_base[rows] >= 0)

    def bloom_dir(self, row: int, name: str) -> dict[str, Any] | None:
        """Segment ``row``'s bloom directory entry of index column ``name`` (see cache.bloom_directory)."""
        found = self._bloom_slot(int(self.group[row]), name)
        if found is None or not self.segments_with_bloom(found)[row]:
            return None
        one = np.array([row], dtype=np.intp)
        d = self.slots[found]
        return {"kind": d.kind, "column_id": d.column_id, "physical_type": d.physical_type,
                "type_length": d.type_length, "logical_type": d.logical_type, "unit": d.unit,
                "scale": d.scale, "nested": d.nested,
                "offset": self.gather(f"{found}:bloom_off", one).tolist(),
                "length": self.gather(f"{found}:bloom_len", one).tolist()}


def _one_chunk(col: pa.ChunkedArray) -> pa.Array:
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def decode_snapshot(name: str, data: bytes, *, bloom_source: Callable[[str, str, int], BloomSource],
                    counters: Counter[str]) -> Snapshot:
    """Open snapshot file bytes ``data`` (CorruptIndexError when its prefix, directory or core
    section fail; ValueError / ArrowInvalid / KeyError when they are still not a snapshot)."""
    file = SnapshotFile(name, lambda off, n: memoryview(data)[off:off + n], len(data))
    return Snapshot(file, bloom_source=bloom_source, counters=counters)
