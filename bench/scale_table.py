"""Synthesize a large, valid carbonstore table fast: N segments x F files x R row groups.

Usage (from the repository root)::

    python bench/scale_table.py --segments 100000 --files-per-segment 10 --out /tmp/scale100k

Creates table ``scale.t`` in the store ``--out``::

    id long not null     sort column: row group g holds ids [g*ROWS, (g+1)*ROWS)
    ts timestamp         increasing with id
    k string             a random 16-hex key per row, a Parquet bloom filter per row group
    cat string           dictionary column (global dictionary of 100 values), a narrow band
                         of surrogates per row group
    v double             a band of width 5 in [0, 1000) per row group, 1 % of row groups
                         also hold a NaN (nan_count 1)
    d date               partitioned by day(d): segment s is in day s * DAYS // N

Everything but the Parquet data is real and made by the product's own writers: the
schema (``Store.create_table``), the global dictionary (``prepare_dictionaries``), one
checksummed ``.carbonindexmerge`` per segment (``packing.pack`` + ``encode_index``) with
chunk min/max, null/NaN counts, a two-page page index per column chunk and the bloom
bitsets of ``k`` (``bloom.bloom_insert``), and the tablestatus version chain with its
checkpoints (``TableStatus.update``: one LOAD commit per ``--segments-per-commit``
segments; default ``--segments / 200``). No data files are written: the table plans, counts and answers from metadata
but cannot be read by Spark.

``STORE/expected.json`` lists the filters checked against ``carbonstore prune --json``
with the files and row groups an exact plan keeps, computed here from the generated
statistics (numpy over the per-row-group bounds, and an independent split-block bloom
probe), not by the planner.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

ROWS = 1000  # rows per row group
KEYS = 16  # distinct bloom keys per row group
BLOOM_BYTES = 128  # 4 SBBF blocks: 16 keys, false positive rate about 4e-8
DAYS = 100
DAY0 = dt.date(2024, 1, 1)
TABLE = "scale.t"
SCHEMA = "id long not null, ts timestamp, k string, cat string, v double, d date"
PROPERTIES = {"dictionary_include": "cat", "bloom_columns": "k", "partition_by": "day(d)",
              "sort_columns": "id"}
CATS = [f"cat_{i:02d}" for i in range(100)]
TS0 = 1_700_000_000_000_000
SALTS = np.array([0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D,
                  0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31], dtype=np.uint64)


class Layout:
    """The generated statistics, one array entry per row group (global order)."""

    def __init__(self, segments: int, files: int, row_groups: int, seed: int) -> None:
        self.n, self.f, self.r = segments, files, row_groups
        n_rg = segments * files * row_groups
        rng = np.random.default_rng(seed)
        self.keys = rng.integers(0, 2**63, size=(n_rg, KEYS), dtype=np.int64)
        self.cat_lo = (np.arange(n_rg, dtype=np.int64) * 37) % 98  # ranks 0..97, band of 3
        self.v_lo = rng.random(n_rg) * 995.0
        self.v_nan = rng.random(n_rg) < 0.01
        self.seg_day = (np.arange(segments, dtype=np.int64) * DAYS) // max(segments, 1)

    @property
    def row_groups(self) -> int:
        return self.n * self.f * self.r

    def seg_of_rg(self) -> np.ndarray:
        return np.arange(self.row_groups) // (self.f * self.r)

    def file_of_rg(self) -> np.ndarray:
        return np.arange(self.row_groups) // self.r


def _key(x: int) -> bytes:
    return b"%016x" % x


def _bloom(keys: np.ndarray) -> bytes:
    from carbonstore.indexfiles.bloom import bloom_insert

    bits = bytearray(BLOOM_BYTES)
    bloom_insert(bits, np.array([xxhash.xxh64_intdigest(_key(int(x))) for x in keys],
                                dtype=np.uint64))
    return bytes(bits)


def _probe(bitsets: np.ndarray, h: int) -> np.ndarray:
    """Independent split-block bloom probe of every row group's bitset for hash ``h``."""
    n_blocks = BLOOM_BYTES // 32
    block = ((h >> 32) * n_blocks) >> 32
    words = bitsets.view("<u4").reshape(len(bitsets), n_blocks, 8)[:, block, :]
    bit = ((np.uint64(h & 0xFFFFFFFF) * SALTS) & np.uint64(0xFFFFFFFF)) >> np.uint64(27)
    mask = (np.uint64(1) << bit).astype(np.uint32)
    return np.all((words & mask) != 0, axis=1)


def _pages(lo: list[Any], hi: list[Any], nulls: list[int], nans: list[int]) -> Any:
    from carbonstore.indexfiles.footer import PageIndex

    half = ROWS // 2
    return PageIndex(offset=[4, 4 + 4 * half], compressed_size=[4 * half, 4 * half],
                     first_row_index=[0, half], row_count=[half, ROWS - half],
                     has_column_index=True, boundary_order=0, null_pages=[False, False],
                     min=lo, max=hi, min_exact=[True, True], max_exact=[True, True],
                     null_counts=nulls, nan_counts=nans)


def _segment_files(lay: Layout, s: int, descs: list[Any], surrogates: np.ndarray,
                   bitsets: np.ndarray) -> list[Any]:
    from carbonstore.indexfiles.footer import ChunkIndex, FileIndex, RowGroupIndex

    day = (DAY0 + dt.timedelta(days=int(lay.seg_day[s]))).isoformat()
    days = (DAY0 - dt.date(1970, 1, 1)).days + int(lay.seg_day[s])
    out = []
    for f in range(lay.f):
        rgs = []
        for r in range(lay.r):
            g = (s * lay.f + f) * lay.r + r
            lo, mid, hi = g * ROWS, g * ROWS + ROWS // 2, g * ROWS + ROWS - 1
            keys = np.sort(lay.keys[g])
            kmin, kmax = _key(int(keys[0])), _key(int(keys[-1]))
            c0 = int(surrogates[lay.cat_lo[g]])
            c1 = int(surrogates[lay.cat_lo[g] + 1])
            c2 = int(surrogates[lay.cat_lo[g] + 2])
            v0 = float(lay.v_lo[g])
            v1, v2 = v0 + 2.5, v0 + 5.0
            nan = 1 if lay.v_nan[g] else 0
            ts = TS0 + lo * 1_000_000, TS0 + mid * 1_000_000, TS0 + hi * 1_000_000
            chunks = [
                ChunkIndex(lo, hi, True, True, 0, -1, _pages([lo, mid], [mid, hi], [0, 0], [-1, -1])),
                ChunkIndex(ts[0], ts[2], True, True, 0, -1,
                           _pages([ts[0], ts[1]], [ts[1], ts[2]], [0, 0], [-1, -1])),
                ChunkIndex(kmin, kmax, True, True, 0, -1,
                           _pages([kmin, kmin], [kmax, kmax], [0, 0], [-1, -1]),
                           bloom=bitsets[g].tobytes()),
                ChunkIndex(min(c0, c2), max(c0, c2), True, True, 0, -1,
                           _pages([min(c0, c1), min(c1, c2)], [max(c0, c1), max(c1, c2)],
                                  [0, 0], [-1, -1])),
                ChunkIndex(v0, v2, True, True, 0, nan, _pages([v0, v1], [v1, v2], [0, 0], [0, nan])),
                ChunkIndex(days, days, True, True, 0, -1,
                           _pages([days, days], [days, days], [0, 0], [-1, -1])),
            ]
            size = 6 * 4 * ROWS
            rgs.append(RowGroupIndex(num_rows=ROWS, offset=4 + r * size, length=size, chunks=chunks))
        out.append(FileIndex(
            path=f"d_day={day}/part-{f:05d}-{s:016x}.parquet", size=4 + lay.r * 6 * 4 * ROWS + 1000,
            num_rows=lay.r * ROWS, footer_offset=4 + lay.r * 6 * 4 * ROWS, footer_length=992,
            created_by="carbonstore scale_table", columns=descs, row_groups=rgs))
    return out


def _template_descs(table: Any) -> list[Any]:
    """The index column descriptions the product's writer gives this schema's columns."""
    import pyarrow as pa

    from carbonstore.indexfiles.footer import read_file_index
    from carbonstore.segments.load import parse_load_options, write_settings
    from carbonstore.segments.writer import write_task

    settings = write_settings(table, "0", parse_load_options(table, None))
    sfs = table.store.sfs
    folder = f"{table.store.location.rstrip('/')}/.scale_template"
    settings = replace(settings, segment_dir=folder, partitioning=None)
    sfs.makedirs(folder)
    data = pa.table({
        "id": pa.array([0], pa.int64()), "ts": pa.array([0], pa.timestamp("us", tz="UTC")),
        "k": ["0"], "cat": pa.array([2], pa.int32()), "v": [0.0],
        "d": pa.array([DAY0], pa.date32()),
    })
    try:
        res = write_task(data.to_batches(), settings, task_id="00000")
        fi = read_file_index(sfs.fs, f"{folder}/{res.files[0]}")
        return list(fi.columns)
    finally:
        sfs.delete_dir(folder)


def expected(lay: Layout, surrogates: np.ndarray, bitsets: np.ndarray) -> list[dict[str, Any]]:
    """The filters and what an exact plan keeps (files, row groups), from the layout."""
    n_rg = lay.row_groups
    g = np.arange(n_rg, dtype=np.int64)
    id_lo, id_hi = g * ROWS, g * ROWS + ROWS - 1
    total = n_rg * ROWS
    files = lay.file_of_rg()
    seg = lay.seg_of_rg()

    def entry(name: str, where: str, keep: np.ndarray) -> dict[str, Any]:
        return {"name": name, "where": where, "files": int(np.unique(files[keep]).size),
                "row_groups": int(keep.sum())}

    out = []
    x = total // 2 + 123
    out.append(entry("key_lookup", f"id = {x}", (id_lo <= x) & (x <= id_hi)))
    a = (total * 2) // 5 + 77
    b = a + max(total // 100, 1)
    out.append(entry("sort_range", f"id >= {a} AND id < {b}", (id_hi >= a) & (id_lo < b)))
    g_star = (n_rg * 3) // 7
    key = int(lay.keys[g_star, 5])
    keys = np.sort(lay.keys, axis=1)
    in_range = (keys[:, 0] <= key) & (key <= keys[:, -1])  # fixed-width hex: order = numeric
    h = xxhash.xxh64_intdigest(_key(key))
    out.append(entry("bloom_lookup", f"k = '{_key(key).decode()}'", in_range & _probe(bitsets, h)))
    rank = 42
    s42 = surrogates[rank]
    band = np.stack([surrogates[lay.cat_lo + i] for i in range(3)])
    out.append(entry("low_cardinality_eq", f"cat = '{CATS_SORTED[rank]}'",
                     (band.min(axis=0) <= s42) & (s42 <= band.max(axis=0))))
    out.append(entry("nan_double_range", "v > 990.0", (lay.v_lo + 5.0 > 990.0) | lay.v_nan))
    d0 = DAYS * 2 // 5
    lo_day, hi_day = DAY0 + dt.timedelta(days=d0), DAY0 + dt.timedelta(days=d0 + 3)
    out.append(entry("partition_day", f"d >= DATE '{lo_day}' AND d < DATE '{hi_day}'",
                     (lay.seg_day[seg] >= d0) & (lay.seg_day[seg] < d0 + 3)))
    return out


CATS_SORTED = sorted(CATS)


def _bitsets(lay: Layout) -> np.ndarray:
    bitsets = np.empty((lay.row_groups, BLOOM_BYTES), dtype=np.uint8)
    for g in range(lay.row_groups):
        bitsets[g] = np.frombuffer(_bloom(lay.keys[g]), dtype=np.uint8)
    return bitsets


def _surrogates(table: Any) -> np.ndarray:
    """The global dictionary's surrogates in value order (rank i: the i-th smallest value)."""
    from carbonstore.dictionary.column import load_dictionary

    dictionary = load_dictionary(table, "cat")
    return np.array([dictionary.surrogate_of(c) for c in CATS_SORTED], dtype=np.int64)


def write_expected(out: str, segments: int, files: int, row_groups: int, seed: int = 7,
                   generate_s: float | None = None) -> dict[str, Any]:
    """(Re)write ``out/expected.json`` of the table generated there with these arguments."""
    from carbonstore import Store

    lay = Layout(segments, files, row_groups, seed)
    filters = expected(lay, _surrogates(Store(out).table(TABLE)), _bitsets(lay))
    result = {"table": TABLE, "segments": segments, "files_per_segment": files,
              "row_groups_per_file": row_groups, "rows": lay.row_groups * ROWS,
              "filters": filters, "generate_s": generate_s}
    Path(out, "expected.json").write_text(json.dumps(result, indent=1))
    return result


def generate(out: str, segments: int, files: int, row_groups: int, *, per_commit: int | None = None,
             seed: int = 7, snapshot: bool = True, quiet: bool = False) -> dict[str, Any]:
    """Create the table under ``out`` and write ``out/expected.json``; returns its content."""
    import pyarrow as pa

    from carbonstore import Store
    from carbonstore.dictionary import prepare_dictionaries
    from carbonstore.indexfiles.indexfile import encode_index
    from carbonstore.indexfiles.packing import pack
    from carbonstore.segments.writer import index_column_ids
    from carbonstore.store.tablestatus import SUCCESS, LoadEntry, TableStatusSnapshot, now_ms

    t0 = time.perf_counter()
    store = Store(out)
    table = store.create_table(TABLE, SCHEMA, properties=PROPERTIES)
    prepare_dictionaries(table, {"cat": pa.array(CATS)}, "0")
    surrogates = _surrogates(table)
    descs = _template_descs(table)
    from carbonstore.segments.load import parse_load_options, write_settings

    settings = write_settings(table, "0", parse_load_options(table, None))
    ids = index_column_ids(settings.columns)
    spec = {"fields": [{"source": "d", "transform": "day",
                        "sourceId": settings.partitioning.fields[0].source_id}]}
    seg_root = settings.segment_dir[: -len("Segment_0")]
    lay = Layout(segments, files, row_groups, seed)
    bitsets = _bitsets(lay)
    if not quiet:
        print(f"  blooms: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    per_commit = per_commit or max(1, segments // 200)
    sfs = store.sfs
    pending: list[LoadEntry] = []
    start = now_ms()

    def add(snap: TableStatusSnapshot) -> list[LoadEntry]:
        return [*snap.entries, *pending]

    for s in range(segments):
        sid = str(s)
        folder = f"{seg_root}Segment_{sid}"
        sfs.makedirs(folder)
        header, blooms = pack(_segment_files(lay, s, descs, surrogates, bitsets),
                              segment_id=sid, column_ids=ids)
        data = encode_index(header, blooms, "merge")
        merge = f"{sid}_{start + s}.carbonindexmerge"
        sfs.write_bytes(f"{folder}/{merge}", data)
        rows = files * row_groups * ROWS
        pending.append(LoadEntry(
            load_name=sid, status=SUCCESS, load_start_time=start + s, timestamp=start + s,
            row_count=rows, data_size=rows * 24, index_size=len(data), segment_file=merge,
            extra={"partitioning": spec},
        ))
        if len(pending) >= per_commit or s == segments - 1:
            table.status.update(add, operation="LOAD")
            pending = []
        if not quiet and s % 10000 == 9999:
            print(f"  {s + 1}/{segments} segments: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    filters = expected(lay, surrogates, bitsets)
    if snapshot:  # what the loads' commits leave: the index snapshot and bloom pack
        from carbonstore.pruning.table_index import refresh_index_snapshot

        refresh_index_snapshot(store.table(TABLE))
    result = {"table": TABLE, "segments": segments, "files_per_segment": files,
              "row_groups_per_file": row_groups, "rows": lay.row_groups * ROWS,
              "filters": filters, "generate_s": round(time.perf_counter() - t0, 1)}
    Path(out, "expected.json").write_text(json.dumps(result, indent=1))
    return result


def compile_package() -> None:
    """Byte-compile carbonstore's modules, as pip does for a regular install. The figures of
    this table are fresh ``prune`` processes: an editable install writes no .pyc where
    PYTHONDONTWRITEBYTECODE is set, and every process would then compile its hundred modules
    from source (0.2-0.3 s of a 0.3 s lookup). A module that changes later is compiled again
    by Python (or, under that variable, read from source)."""
    import compileall

    import carbonstore

    compileall.compile_dir(str(Path(carbonstore.__file__).parent), quiet=2)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--segments", type=int, required=True)
    p.add_argument("--files-per-segment", type=int, default=10)
    p.add_argument("--row-groups-per-file", type=int, default=1)
    p.add_argument("--segments-per-commit", type=int, default=None,
                   help="segments per LOAD commit (default: segments / 200, at least 1)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-snapshot", action="store_true",
                   help="write no index snapshot (planning never writes one)")
    p.add_argument("--out", required=True, help="store folder (created; must not hold scale.t)")
    p.add_argument("--expected-only", action="store_true",
                   help="only (re)write expected.json of the table already generated in --out")
    args = p.parse_args(argv)
    if min(args.segments, args.files_per_segment, args.row_groups_per_file) < 1:
        print("scale_table: --segments, --files-per-segment and --row-groups-per-file must be >= 1",
              file=sys.stderr)
        return 2
    compile_package()
    if args.expected_only:
        res = write_expected(args.out, args.segments, args.files_per_segment, args.row_groups_per_file,
                             seed=args.seed)
        print(json.dumps({k: v for k, v in res.items() if k != "filters"}))
        return 0
    res = generate(args.out, args.segments, args.files_per_segment, args.row_groups_per_file,
                   per_commit=args.segments_per_commit, seed=args.seed,
                   snapshot=not args.no_snapshot)
    print(json.dumps({k: v for k, v in res.items() if k != "filters"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
