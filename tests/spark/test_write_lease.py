"""A bare df.write keeps its lease for as long as it runs (carbonstore/store/renewer.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from carbonstore import Store  # noqa: E402
from carbonstore.segments.clean import clean_files  # noqa: E402
from carbonstore.store import load_conf  # noqa: E402
from carbonstore.store.tablestatus import FAILURE, SUCCESS  # noqa: E402

LEASE = "2"  # seconds
TASK_SECONDS = 6.0  # each write task outlives the first lease three times


def test_a_long_bare_write_is_not_judged_dead_by_clean_files(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    conf = load_conf(None).with_overrides({"carbon.segment.lease.seconds": LEASE})
    store = Store(str(tmp_path / "store"), conf=conf)
    table = store.create_table("db.slow", "id long")
    seconds = TASK_SECONDS

    def slow(ids: Iterator[int]) -> Iterator[tuple[int]]:  # pickled by value for the tasks
        import time

        time.sleep(seconds)
        for i in ids:
            yield (i,)

    rdd = spark.sparkContext.parallelize(range(40), 2).mapPartitions(slow)
    df = spark.createDataFrame(rdd, "id long")
    done = threading.Event()
    cleans: list[int] = []

    def clean() -> None:  # what an operator's cron job might do, as often as it likes
        while not done.is_set():
            clean_files(table, dry_run=False, stale_inprogress=True)
            cleans.append(1)
            done.wait(0.3)

    cleaner = threading.Thread(target=clean)
    cleaner.start()
    try:  # in this thread: the data source is registered in this thread's active session
        df.write.format("carbonstore").mode("append").option("store", store.location) \
            .option("carbon.segment.lease.seconds", LEASE).save("db.slow")
    finally:
        done.set()
        cleaner.join()
    assert len(cleans) > 10
    entries = table.status.read().entries
    assert [(e.status, e.row_count) for e in entries] == [(SUCCESS, 40)]
    assert FAILURE not in {e.status for e in entries}
    got = spark.read.format("carbonstore").option("store", store.location).load("db.slow")
    assert sorted(r.id for r in got.collect()) == list(range(40))
    # The renewer stopped with the commit: no heartbeat comes back.
    time.sleep(1.5)
    assert table.status.leases.read_lease(entries[0].load_name) is None
