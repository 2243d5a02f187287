"""Workloads for the reliability suites: loads, compaction, clean files, scans, without Spark.

A load here is the product's commit protocol run in one process: ``begin_segment``
(In Progress entry + segment lock), ``write_task`` (the executor writer, Parquet + task
index) and ``commit_segment`` (merge index + the final tablestatus write), i.e. the driver
and executor code a Spark load runs, minus the JVM. Run as a script it is one OS process
per operation, so a test can SIGKILL it anywhere::

    python workload.py STORE load TABLE FIRST_ID COUNT [--tasks N] [--slow]
    python workload.py STORE compact TABLE [IDS] [--wait N]
    python workload.py STORE clean TABLE [--force]
    python workload.py STORE query TABLE SECONDS [ROWS_PER_LOAD]

and loops that run for a bounded time with no delay of their own (the concurrency suites of
the versioned tablestatus), each printing one line per operation::

    python workload.py STORE loadloop TABLE FIRST SECONDS ROWS [--stall-every N]
        # "ok SEG FIRST" / "dead FIRST ..." (clean files marked it dead) / "fail FIRST ..."
    python workload.py STORE cleanloop TABLE SECONDS [--retention-minutes M]
    python workload.py STORE compactloop TABLE SECONDS
    python workload.py STORE deleteloop TABLE SECONDS            # "deleted SEG"
    python workload.py STORE rowdeleteloop TABLE SECONDS [--stall-every N]
        # DELETE of one row id after the other: "ok ID" / "conflict ..." (every n-th
        # statement stalls past its lease between its delta and its commit, lease renewed)

``--force`` makes cleanloop a forced clean; ``--lease S`` sets carbon.segment.lease.seconds for any of them; ``--own-locks`` gives the
process courtesy locks no other process sees (as on an object store, where there are none).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterator

import pyarrow as pa

from carbonstore import Store
from carbonstore.errors import CarbonStoreError
from carbonstore.pruning.plan import prune
from carbonstore.segments.commit import (
    abort_segment,
    begin_segment,
    commit_segment,
    dead_load_error,
)
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import write_task
from carbonstore.store import load_conf
from carbonstore.store.table import Table

SCHEMA = "id long not null, x double, city string"
CITIES = ("oslo", "lima", "pune", "kyiv", "nice")


def rows(first: int, count: int) -> pa.Table:
    """Deterministic rows ``first .. first+count-1``; every 7th x is NaN, every 11th null."""
    ids = list(range(first, first + count))
    xs = [None if i % 11 == 0 else (math.nan if i % 7 == 0 else i * 0.5) for i in ids]
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "x": pa.array(xs, pa.float64()),
        "city": pa.array([CITIES[i % len(CITIES)] for i in ids]),
    })


def _batches(data: pa.Table, slow: bool) -> Iterator[pa.RecordBatch]:
    for b in data.to_batches(max_chunksize=max(1, data.num_rows // 8)):
        if slow:
            time.sleep(0.5)  # a long-running task: the test kills it mid-write
        yield b


def load(
    table: Table, data: pa.Table, *, tasks: int = 2, slow: bool = False, stall: str | None = None
) -> str:
    """Load ``data`` as one segment through the commit protocol; returns the segment id.

    A task that fails fails the load as the product's driver does (``spark/load_job.py``):
    the segment is aborted, and when clean files had marked it dead (and removed its folder
    under the task) the error is that one. ``stall`` ("begin": before the tasks, "written":
    before the commit) stops the lease renewal there and waits until clean files marked the
    load dead, as for a process that stalled longer than its lease; then the load goes on.
    """
    opts = parse_load_options(table, None)
    entry, lock = begin_segment(table)
    try:
        seg = entry.load_name
        if stall == "begin":
            _stall_until_dead(table, seg, lock)
        try:
            if table.schema.dictionary_columns:
                from carbonstore.dictionary import prepare_dictionaries

                prepare_dictionaries(
                    table, {c: data.column(c) for c in table.schema.dictionary_columns}, seg
                )
            settings = write_settings(table, seg, opts)
            step = math.ceil(data.num_rows / tasks)
            results = [
                write_task(_batches(data.slice(t * step, step), slow), settings,
                           task_id=f"{t:05d}")
                for t in range(tasks)
            ]
        except (OSError, CarbonStoreError) as err:
            dead = dead_load_error(table, seg)
            abort_segment(table, seg, reason=str(err))
            if dead is not None:
                raise dead from err
            raise
        if stall == "written":
            _stall_until_dead(table, seg, lock)
        commit_segment(table, seg, results)
        return seg
    finally:
        if lock is not None:
            lock.release()


def _stall_until_dead(table: Table, seg: str, keeper: object, limit: float = 60) -> None:
    """Stop renewing ``seg``'s lease and wait (at most ``limit`` seconds) until its entry
    is no longer running: clean files judged the load dead."""
    keeper.release()  # type: ignore[attr-defined]
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        e = table.status.read().find(seg)
        if e is None or not e.running:
            return
        time.sleep(0.05)


def scan(table: Table, where: str | None = None, *, segments: str | None = None) -> pa.Table:
    """Every row a query reads: the pruning plan, then the read path's row-group reader.

    This is what the ``carbonstore`` data source's ``partitions()`` and ``read()`` do, without
    the JVM: segments written with older schema versions are read through their projections
    (store/evolution.py). No filter is applied after pruning: the result is what the plan must
    read.
    """
    from carbonstore.spark.reader import (
        arrow_read_schema,
        plan_partitions,
        plan_projections,
        read_row_groups,
    )

    plan = prune(table, where, segments=segments)
    parts = plan_partitions(plan, projections=plan_projections(table, plan))
    batches = [b for part in parts for b in read_row_groups(table, part.slices)]
    return pa.Table.from_batches(batches, schema=arrow_read_schema(table))


def committed_ids(table: Table) -> list[int]:
    """Sorted ids of a full scan (duplicates kept, so a double count shows)."""
    return sorted(scan(table).column("id").to_pylist())


def main(argv: list[str]) -> int:
    store_dir, op, name, *rest = argv
    overrides = {
        "carbon.clean.files.force.allowed": "true",
        "carbon.lock.retry.timeout.sec": "30",
        "carbon.lock.retries": "20",
    }
    if "--slow" in rest:  # a row group per batch: the data file exists from the first batch
        overrides["carbon.blocklet.size.in.mb"] = "0.0001"
    if "--lease" in rest:
        overrides["carbon.segment.lease.seconds"] = rest.pop(rest.index("--lease") + 1)
        rest.remove("--lease")
    if "--own-locks" in rest:  # courtesy locks no other process sees, as on object stores
        import os

        rest.remove("--own-locks")
        overrides["carbon.lock.path"] = os.path.join(
            f"{store_dir.rstrip('/')}-locks", str(os.getpid()))
    if "--retention-minutes" in rest:
        value = rest.pop(rest.index("--retention-minutes") + 1)
        rest.remove("--retention-minutes")
        overrides["carbon.segment.retention.minutes"] = value
    conf = load_conf(None).with_overrides(overrides)
    table = Store(store_dir, conf=conf).table(name)
    if op == "load":
        first, count = int(rest[0]), int(rest[1])
        tasks = int(rest[rest.index("--tasks") + 1]) if "--tasks" in rest else 2
        seg = load(table, rows(first, count), tasks=tasks, slow="--slow" in rest)
        print(seg)
    elif op == "compact":
        from carbonstore.segments.compaction import compact

        if "--wait" in rest:  # until that many segments are readable
            want = int(rest.pop(rest.index("--wait") + 1))
            rest.remove("--wait")
            deadline = time.monotonic() + 120
            while len(table.status.read().readable) < want and time.monotonic() < deadline:
                time.sleep(0.1)
        ids = rest[0].split(",") if rest else None
        result = compact(table, "custom" if ids else "minor", segment_ids=ids)
        print(",".join(m.output for m in result.merged))
    elif op == "clean":
        from carbonstore.segments.clean import clean_files

        clean_files(table, dry_run=False, force="--force" in rest, stale_inprogress=True)
    elif op == "query":
        # Scan until the given seconds pass; every scan must be whole loads, each once.
        block = int(rest[1]) if len(rest) > 1 else 0
        deadline = time.monotonic() + float(rest[0])
        scans = 0
        while time.monotonic() < deadline or scans == 0:
            ids = scan(table).column("id").to_pylist()
            if len(ids) != len(set(ids)):
                raise SystemExit(f"scan {scans}: duplicate rows")
            starts = {i - i % 1000 for i in ids}
            if block and len(ids) != block * len(starts):
                raise SystemExit(f"scan {scans}: partial load seen ({len(ids)} rows)")
            scans += 1
        print(scans)
    elif op in ("loadloop", "cleanloop", "compactloop", "deleteloop", "rowdeleteloop"):
        _loop(table, op, rest)
    else:
        raise SystemExit(f"unknown operation {op}")
    return 0


def _loop(table: Table, op: str, rest: list[str]) -> None:
    """Repeat one operation until the time is up (see the module docstring)."""
    import random

    stall_every = 0  # loadloop: every n-th load (from the first) stalls past its lease
    if "--stall-every" in rest:
        stall_every = int(rest.pop(rest.index("--stall-every") + 1))
        rest.remove("--stall-every")
    if op == "loadloop":
        first, seconds, count = int(rest[0]), float(rest[1]), int(rest[2])
    else:
        first, seconds, count = 0, float(rest[0]), 0
    deadline = time.monotonic() + seconds
    k = 0
    while time.monotonic() < deadline:
        try:
            if op == "loadloop":
                start = first + k * 1000
                stall = None
                if stall_every and k % stall_every == 0:
                    stall = ("begin", "written")[(k // stall_every) % 2]
                k += 1
                try:
                    seg = load(table, rows(start, count), tasks=1, stall=stall)
                except CarbonStoreError as err:
                    dead = "marked the load dead" in str(err)
                    print(f"{'dead' if dead else 'fail'} {start} {type(err).__name__} {stall}",
                          flush=True)
                    continue
                print(f"ok {seg} {start}", flush=True)
            elif op == "cleanloop":
                from carbonstore.segments.clean import clean_files

                clean_files(table, dry_run=False, stale_inprogress=True, force="--force" in rest)
            elif op == "rowdeleteloop":
                _delete_one_row(table, k, stall_every)
                k += 1
            elif op == "compactloop":
                from carbonstore.segments.compaction import compact

                snap = table.status.read()
                ids = [e.load_name for e in snap.readable]
                if len(ids) >= 2:
                    pick = random.sample(ids, 2)
                    compact(table, "custom", segment_ids=pick)
            elif op == "deleteloop":
                from carbonstore.segments.manage import delete_segments

                ids = [e.load_name for e in table.status.read().readable if "." not in e.load_name]
                if ids:
                    victim = random.choice(ids)
                    delete_segments(table, [victim])
                    print(f"deleted {victim}", flush=True)
                time.sleep(0.5)
        except CarbonStoreError as err:  # a conflict or a held courtesy lock: try again
            print(f"conflict {type(err).__name__}", flush=True)


def _delete_one_row(table: Table, k: int, stall_every: int) -> None:
    """DELETE the row ``id = 7 * k``; the n-th statements stall (lease renewed) between
    writing the delta and committing it, longer than the lease."""
    from carbonstore.segments.dml import delete_rows
    from carbonstore.store.faults import on_point

    victim = 7 * k
    lease = table.store.conf.get_float("carbon.segment.lease.seconds")
    stall = bool(stall_every) and k % stall_every == 0
    hook = (lambda: time.sleep(lease * 2.5)) if stall else (lambda: None)
    try:
        with on_point("tablestatus.before_write", hook):
            result = delete_rows(table, f"id = {victim}")
    except CarbonStoreError as err:
        print(f"conflict {victim} {type(err).__name__}: {err}", flush=True)
        return
    print(f"ok {victim} {result.deleted}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
