"""tablestatus at scale: a table of N segments (tablestatus only) and the metadata commands on it.

``build`` writes the version chain of table ``scale.t`` directly with the product's version
encoder (no index or data files: status commands need none): ``N / per_commit`` LOAD
versions of ``per_commit`` ``Success`` segments each (every entry carrying the keys a real
load leaves: ``writer``, ``schemaVersion``, a partition spec), checkpoints every 50th
version, as ``TableStatus.update`` would have written them. ``--delta`` also writes a Delta
table with the same number of commits (``per_commit`` add actions each, min/max stats, no
data files) and checkpoints it, for delta-rs.

``op`` runs one operation in the current process (the fresh-process figures time whole
processes of it):

* ``open``: the latest version, number of readable segments;
* ``count``: ``count(*)`` from the metadata (readable rows of the latest version);
* ``asof``: time travel to version ``--version`` (default: the middle one) and its count;
* ``commit``: ``--commits`` loads' begin + commit versions, prints p50/p99 ms per version;
* ``compaction``: minor compaction planning (the segments a MINOR compaction would merge);
* ``clean``: clean-files planning (a dry run's removable segments, status only);
  ``--run``: a real run (removes what it finds);
* ``delete``: ``--commits`` DELETE commits of one row each (a new delete delta of one
  file of a segment, committed as ``DELETE`` does: ``apply_changes``), p50/p99 ms.

Usage::

    python bench/scale_status_bench.py build --segments 100000 --out /work/tmp/ss100k [--delta] [--format json]
    python bench/scale_status_bench.py op open --store /work/tmp/ss100k
    python -m carbonstore --store /work/tmp/ss100k show-segments scale.t --limit 20
    python -m carbonstore --store /work/tmp/ss100k history scale.t --limit 20
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from typing import Any

TABLE = "scale.t"
SCHEMA = "id long not null, k string, v double, d date"
SPEC = {"fields": [{"source": "d", "transform": "day", "sourceId": 4}]}


def build(out: str, segments: int, per_commit: int, delta: bool, fmt: str) -> None:
    from carbonstore import Store
    from carbonstore.store.tablestatus import CHECKPOINT_INTERVAL, SUCCESS, LoadEntry, now_ms
    from carbonstore.store.versions import encode_version

    if fmt == "arrow":
        from carbonstore.store.checkpoint_arrow import (
            checkpoint_name,
            encode_checkpoint,
            entries_table,
        )
        from carbonstore.store.versions import encode_record

    t0 = time.perf_counter()
    store = Store(out)
    table = store.create_table(TABLE, SCHEMA)
    status = table.status
    sfs = store.sfs
    base = status.read()
    entries: list[LoadEntry] = []
    start = now_ms() - 10 * segments
    version = base.version
    for first in range(0, segments, per_commit):
        new = []
        for s in range(first, min(segments, first + per_commit)):
            rows = 100_000 + s % 7
            new.append(LoadEntry(
                load_name=str(s), status=SUCCESS, load_start_time=start + 10 * s,
                timestamp=start + 10 * s + 5, row_count=rows, data_size=rows * 24,
                index_size=4096, segment_file=f"{s}_{start + 10 * s}.carbonindexmerge",
                extra={"writer": "bench:1", "schemaVersion": 0, "partitioning": SPEC},
            ))
        version += 1
        stamp = start + 10 * min(segments - 1, first + per_commit)
        if fmt == "arrow":  # every version a delta; an Arrow checkpoint after every 50th
            entries.extend(new)
            data = encode_record(
                version=version, table_id=status.table_id, operation="LOAD", floor=len(entries),
                timestamp=stamp, added=[e.load_name for e in new], removed=[],
                rows=sum(e.row_count for e in entries), checkpoint=None, upserts=tuple(new), removes=())
            assert sfs.put_if_absent(status._version_path(version), data)
            if version % CHECKPOINT_INTERVAL == 0:
                cp, _ = encode_checkpoint(entries_table(entries), table_id=status.table_id, version=version)
                assert sfs.put_if_absent(f"{status.log_dir}/{checkpoint_name(version)}", cp)
            continue
        before = tuple(entries)  # the format before: every 50th version a JSON checkpoint
        entries.extend(new)
        checkpoint = tuple(entries) if version % CHECKPOINT_INTERVAL == 0 else None
        data = encode_version(
            version=version, table_id=status.table_id, operation="LOAD", floor=len(entries),
            checkpoint=checkpoint, upserts=tuple(new), removes=(), base=before,
            timestamp=stamp, new=tuple(entries),
        )
        assert sfs.put_if_absent(status._version_path(version), data)
    status._write_hint(version)
    print(f"tablestatus: {version} versions, {segments} segments, "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if delta:
        build_delta(f"{out}/delta", version, per_commit, segments)


def build_delta(path: str, commits: int, per_commit: int, segments: int) -> None:
    """A Delta table of ``commits`` commits of ``per_commit`` add actions (min/max stats,
    no data files), checkpointed by delta-rs."""
    import deltalake
    import pyarrow as pa

    t0 = time.perf_counter()
    deltalake.write_deltalake(path, pa.table({"id": pa.array([0], pa.int64()),
                                              "v": pa.array([0.0])}))
    log = f"{path}/_delta_log"
    stamp = int(time.time() * 1000) - commits
    for c in range(1, commits + 1):
        lines = [json.dumps({"commitInfo": {"timestamp": stamp + c, "operation": "WRITE",
                                            "operationParameters": {"mode": "Append"}}})]
        for i in range(per_commit):
            s = (c - 1) * per_commit + i
            if s >= segments:
                break
            stats = {"numRecords": 100_000, "minValues": {"id": s * 100_000, "v": 0.0},
                     "maxValues": {"id": s * 100_000 + 99_999, "v": 1.0},
                     "nullCount": {"id": 0, "v": 0}}
            lines.append(json.dumps({"add": {
                "path": f"part-{s:08d}.parquet", "partitionValues": {}, "size": 2_400_000,
                "modificationTime": stamp + c, "dataChange": True, "stats": json.dumps(stats)}}))
        with open(f"{log}/{c:020d}.json", "w") as f:
            f.write("\n".join(lines) + "\n")
    deltalake.DeltaTable(path).create_checkpoint()
    print(f"delta: {commits} commits, {time.perf_counter() - t0:.1f} s", file=sys.stderr)


def op(name: str, store_path: str, version: int | None, commits: int,
       run: bool = False) -> dict[str, Any]:
    from carbonstore import Store

    table = Store(store_path).table(TABLE)
    if name == "open":
        snap = table.status.read()
        return {"version": snap.version, "readable": _readable(snap)[0]}
    if name == "count":
        return {"count": _readable(table.status.read())[1]}
    if name == "asof":
        latest = table.status.read().version if version is None else None
        pinned = table.as_of(version if version is not None else latest // 2)
        snap = pinned.status.read()
        return {"version": snap.version, "count": _readable(snap)[1]}
    if name == "commit":
        return commit_latency(table, commits)
    if name == "compaction":
        from carbonstore.segments.compaction_plan import plan_minor
        from carbonstore.store.tablestatus import forget_decoded

        forget_decoded()  # the read and every entry it builds count too
        t0 = time.perf_counter()
        got = plan_minor(table.status.read(), table.store.conf)
        return {"sources": len(got.sources) if got else 0, "in_process_s": round(time.perf_counter() - t0, 3)}
    if name == "clean":
        from carbonstore.segments.clean import clean_files
        from carbonstore.store.tablestatus import forget_decoded

        forget_decoded()
        t0 = time.perf_counter()
        report = clean_files(table, dry_run=not run)
        return {"items": len(report.items), "in_process_s": round(time.perf_counter() - t0, 3)}
    if name == "delete":
        return delete_latency(table, commits)
    raise SystemExit(f"unknown op {name}")


def _readable(snap: Any) -> tuple[int, int]:
    """(readable segments, rows) - also with a release before ``readable_count``."""
    if hasattr(snap, "readable_count"):
        return snap.readable_count(), snap.readable_rows()
    live = snap.readable
    return len(live), sum(e.row_count - e.deleted_rows for e in live)


def commit_latency(table: Any, commits: int) -> dict[str, Any]:
    """``commits`` loads' two versions each (begin: a new In Progress entry; commit: it
    flips to Success), timed around each ``TableStatus`` commit, as a load commits them."""
    from carbonstore.store import versions
    from carbonstore.store.tablestatus import IN_PROGRESS, SUCCESS, LoadEntry, now_ms

    def change(snap: Any, upserts: tuple[LoadEntry, ...]) -> Any:
        if hasattr(versions, "StatusChange"):
            return versions.StatusChange(upserts=upserts)
        by_name = {e.load_name: e for e in upserts}  # a release before StatusChange: the list
        return [by_name.pop(e.load_name, e) for e in snap.entries] + list(by_name.values())

    import pandas  # noqa: F401  (a load process has it: pyarrow imports it to convert its rows)

    from carbonstore.store.tablestatus import CHECKPOINT_INTERVAL

    first = table.status.read().version
    times: list[float] = []
    holder: list[LoadEntry] = []
    for _ in range(commits):

        def begin(snap: Any) -> Any:
            holder[:] = [LoadEntry(load_name=snap.next_segment_id(), status=IN_PROGRESS,
                                   load_start_time=now_ms(),
                                   extra={"writer": "bench:2", "schemaVersion": 0})]
            return change(snap, tuple(holder))

        def flip(snap: Any) -> Any:
            mine = snap.get(holder[0].load_name)
            done = mine.with_status(SUCCESS, timestamp=now_ms(), row_count=100_000,
                                    segment_file=f"{mine.load_name}_1.carbonindexmerge",
                                    extra={**mine.extra, "partitioning": SPEC})
            return change(snap, (done,))

        for fn, operation in ((begin, "LOAD BEGIN"), (flip, "LOAD")):
            t0 = time.perf_counter()
            table.status.update(fn, operation=operation)
            times.append((time.perf_counter() - t0) * 1000)
    at_checkpoint = [t for i, t in enumerate(times) if (first + i + 1) % CHECKPOINT_INTERVAL == 0]
    times.sort()
    return {"versions": len(times), "p50_ms": round(statistics.median(times), 2),
            "p99_ms": round(times[math.ceil(len(times) * 0.99) - 1], 2),  # nearest rank
            "max_ms": round(times[-1], 2), "checkpoint_commits_ms": [round(t, 1) for t in at_checkpoint]}


def delete_latency(table: Any, commits: int) -> dict[str, Any]:
    """``commits`` DELETE commits of one row each, in segments spread over the table, timed
    around ``apply_changes`` (the delta file's write and the version's commit)."""
    import numpy as np

    from carbonstore.segments.dml_commit import Matches, apply_changes

    snap = table.status.read()
    n = int(snap.next_segment_id())  # segments spread over the table that have a folder
    names = [sid for k in range(commits * 3) if (e := snap.find(sid := str(k * n // (commits * 3))))
             is not None and e.readable and table.paths.sfs.is_dir(table.paths.segment_dir(sid))][:commits]
    times: list[float] = []
    for i, sid in enumerate(names):
        snap = table.status.read()
        matches = Matches(snap, {(sid, f"part-0-{i}.parquet"): np.array([i], dtype=np.uint32)}, None)
        t0 = time.perf_counter()
        apply_changes(table, matches, operation="DELETE")
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"commits": len(times), "p50_ms": round(statistics.median(times), 2),
            "p99_ms": round(times[math.ceil(len(times) * 0.99) - 1], 2),
            "max_ms": round(times[-1], 2)}


def delta_op(name: str, path: str) -> dict[str, Any]:
    import deltalake

    dt = deltalake.DeltaTable(path)
    if name == "open":
        return {"version": dt.version()}
    if name == "history":
        return {"versions": len(dt.history(20))}
    if name == "asof":  # time travel to an old version (the checkpoint is after it)
        old = deltalake.DeltaTable(path, version=20)
        return {"version": old.version(), "files": len(old.file_uris())}
    if name == "vacuum":  # what clean files is to carbonstore: a dry run lists the table
        t0 = time.perf_counter()
        gone = dt.vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False)
        return {"files": len(gone), "in_process_s": round(time.perf_counter() - t0, 3)}
    if name == "commit":  # appends of one small file each, timed around the write + commit
        import pyarrow as pa

        times = []
        for i in range(25):
            data = pa.table({"id": pa.array([i], pa.int64()), "v": pa.array([0.5])})  # its schema
            t0 = time.perf_counter()
            deltalake.write_deltalake(path, data, mode="append")
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        return {"commits": len(times), "p50_ms": round(statistics.median(times), 2),
                "p99_ms": round(times[math.ceil(len(times) * 0.99) - 1], 2)}
    raise SystemExit(f"unknown delta op {name}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--segments", type=int, required=True)
    b.add_argument("--per-commit", type=int, default=100)
    b.add_argument("--out", required=True)
    b.add_argument("--delta", action="store_true")
    b.add_argument("--format", choices=("arrow", "json"), default="arrow",
                   help="json: JSON checkpoints inside the version files (the format before)")
    o = sub.add_parser("op")
    o.add_argument("name")
    o.add_argument("--store", required=True)
    o.add_argument("--version", type=int)
    o.add_argument("--commits", type=int, default=25)
    o.add_argument("--run", action="store_true", help="clean: a real run, not a dry run")
    d = sub.add_parser("delta")
    d.add_argument("name")
    d.add_argument("--path", required=True)
    args = p.parse_args(argv)
    if args.cmd == "build":
        if os.path.exists(os.path.join(args.out, "scale")):
            print(f"{args.out} already holds a table", file=sys.stderr)
            return 2
        build(args.out, args.segments, max(1, args.per_commit), args.delta, args.format)
    elif args.cmd == "op":
        print(json.dumps(op(args.name, args.store, args.version, args.commits, args.run)))
    else:
        print(json.dumps(delta_op(args.name, args.path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
