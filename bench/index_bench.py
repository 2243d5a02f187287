"""Index-file benchmark: build time vs pyarrow footer reads, merge-index load time, size.

Run: ``python bench/index_bench.py [--files 20] [--rows 200000] [--rg 10000]``. Prints one
table; numbers are from a single run on the local filesystem.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from carbonstore.indexfiles.footer import read_file_index
from carbonstore.indexfiles.indexfile import (
    build_task_index,
    load_index,
    merge_indexes,
    write_index,
)
from carbonstore.indexfiles.packing import pack


def _write_files(folder: Path, files: int, rows: int) -> list[str]:
    rng = np.random.default_rng(7)
    names = []
    for i in range(files):
        ids = np.arange(i * rows, (i + 1) * rows)
        t = pa.table(
            {
                "id": ids,
                "x": rng.normal(size=rows),
                "cat": pa.array([f"c{v:05d}" for v in rng.integers(0, 50_000, rows)]),
                "day": pa.array(rng.integers(18000, 19000, rows).astype("int32"), pa.int32()).cast(
                    pa.date32()
                ),
                "qty": pa.array(rng.integers(0, 1000, rows).astype("int32")),
                "price": pa.array(rng.integers(0, 10**6, rows), pa.int64()),
            }
        )
        name = f"part-{i:05d}.parquet"
        pq.write_table(
            t, folder / name, row_group_size=rows // 8, write_page_index=True, max_rows_per_page=32000,
            bloom_filter_options={"cat": {"ndv": rows // 8, "fpp": 0.05}},
        )  # fmt: skip
        names.append(name)
    return names


def _best(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument(
        "--rg", type=int, default=10_000, help="row groups in the synthetic merge index"
    )
    args = ap.parse_args()
    fs = pafs.LocalFileSystem()
    with tempfile.TemporaryDirectory() as tmp:
        seg = Path(tmp) / "Segment_0"
        seg.mkdir()
        names = _write_files(seg, args.files, args.rows)
        paths = [str(seg / n) for n in names]
        data_bytes = sum((seg / n).stat().st_size for n in names)

        t_ours = _best(lambda: [read_file_index(fs, p) for p in paths]) / len(paths)
        t_ours_nb = _best(lambda: [read_file_index(fs, p, with_blooms=False) for p in paths]) / len(
            paths
        )
        t_pa = _best(lambda: [pq.read_metadata(p) for p in paths]) / len(paths)

        tasks = []
        half = len(names) // 2 or 1
        for ti, chunk in enumerate([names[:half], names[half:]]):
            if chunk:
                out = str(seg / f"{ti}-bench.carbonindex")
                build_task_index(fs, str(seg), chunk, out, segment_id="0", task_id=str(ti))
                tasks.append(out)
        merged = str(seg / "0_1.carbonindexmerge")
        t_merge = _best(lambda: merge_indexes(fs, tasks, merged, segment_id="0"), repeat=1)
        task_bytes = sum(Path(t).stat().st_size for t in tasks)
        merge_bytes = Path(merged).stat().st_size
        merge_bloom_pct = blooms_pct(merged, fs)

        # synthetic merge index with args.rg row groups: replicate the real file indexes
        proto = read_file_index(fs, paths[0], rel_path=names[0])
        per_file = len(proto.row_groups)
        copies = -(-args.rg // per_file)
        many = [dataclasses.replace(proto, path=f"part-{i:06d}.parquet") for i in range(copies)]
        header, blooms = pack(many)
        big = str(seg / "big.carbonindexmerge")
        big_size = write_index(fs, big, header, blooms, kind="merge")
        n_rg = copies * per_file

        def load_all() -> None:
            arrs = load_index(fs, big)
            for c in arrs.columns:
                _ = c.min, c.max, c.pages.min, c.pages.max  # force variable-width decoding too

        def load_numeric() -> None:
            arrs = load_index(fs, big)
            _ = arrs.column("id").min, arrs.column("price").max

        t_load = _best(load_all)
        t_load_num = _best(load_numeric)
        arrs = load_index(fs, big)
        t_prune = _best(lambda: np.flatnonzero(arrs.column("id").max >= 123_456), repeat=5)

    print(
        f"data files: {len(paths)} x {args.rows} rows, {data_bytes / 1e6:.1f} MB, 8 row groups each"
    )
    print(f"index build per file (footer+page index+bloom): {t_ours * 1e3:.2f} ms")
    print(f"index build per file without blooms:           {t_ours_nb * 1e3:.2f} ms")
    print(f"pyarrow.parquet.read_metadata per file:         {t_pa * 1e3:.2f} ms")
    print(f"ratio ours/pyarrow (with blooms):               {t_ours / t_pa:.2f}x")
    print(f"merge of {len(tasks)} task indexes:                     {t_merge * 1e3:.1f} ms")
    print(
        f"task index size: {task_bytes / 1e3:.1f} KB = {100 * task_bytes / data_bytes:.3f}% of data"
    )
    print(f"merge index size: {merge_bytes / 1e3:.1f} KB = {100 * merge_bytes / data_bytes:.3f}% of data"
          f" (blooms {merge_bloom_pct:.0f}% of it)")  # fmt: skip
    print(f"merge index of {n_rg} row groups x 6 columns: {big_size / 1e6:.1f} MB on disk")
    print(f"  load into arrays, numeric columns only:  {t_load_num * 1e3:.1f} ms")
    print(f"  load into arrays, all columns + pages:   {t_load * 1e3:.1f} ms")
    print(f"  one vectorised comparison over {n_rg} row groups: {t_prune * 1e6:.0f} us")


def blooms_pct(path: str, fs: pafs.FileSystem) -> float:
    from carbonstore.indexfiles.indexfile import read_index

    li = read_index(fs, path)
    size = fs.get_file_info(path).size or 1
    return 100 * (li.header.bloom_region_length or 0) / size


if __name__ == "__main__":
    main()
