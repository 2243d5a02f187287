"""Compaction on Spark executors and through the CLI (few tests: each costs seconds)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from test_compaction import SCHEMA, add_segment, read_segments, rows, statuses

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.segments.compaction import compact, segment_data_files

pytestmark = pytest.mark.spark


def test_major_on_spark_then_load_reads_30_and_20(spark, store: Store, capsys) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.spark.compact_job import spark_merger

    table = store.create_table("t", SCHEMA, properties={"sort_columns": "id"})
    add_segment(table, rows(0, 10), tasks=2)
    add_segment(table, rows(10, 10), tasks=2)
    before = read_segments(table)
    result = compact(table, "major", merger=spark_merger(spark, tasks=2))
    assert [m.output for m in result.merged] == ["0.1"]
    add_segment(table, rows(20, 10))
    assert read_segments(table).num_rows == 30
    assert read_segments(table, ["0.1"]).equals(before)
    out = table.status.read().get("0.1")
    assert out.major_compacted and out.row_count == 20
    # Range-partitioned output: each file holds one sorted range of ids.
    ranges = [pq.read_table(p)["id"].to_pylist() for p in segment_data_files(table, "0.1")]
    assert all(r == sorted(r) for r in ranges)
    assert sorted(x for r in ranges for x in r) == list(range(20))

    # The CLI runs the same job (default engine: spark, on the active session).
    store_args = ["--store", store.location]
    assert main(["compact", "t", "--type", "custom", "--segments", "0.1,2", "--json", *store_args]) == 0
    assert '"output": "0.2"' in capsys.readouterr().out
    assert statuses(table)["0.2"] == "Success"
    assert read_segments(table)["id"].to_pylist() == list(range(30))


def test_spark_merge_without_sort_columns(spark, store: Store) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.spark.compact_job import spark_merger

    table = store.create_table("nosort", SCHEMA)
    for i in range(3):
        add_segment(table, rows(i * 10, 10), tasks=2)
    before = read_segments(table)
    result = compact(table, "custom", segment_ids=["0", "1", "2"], merger=spark_merger(spark, tasks=2))
    assert [m.output for m in result.merged] == ["0.1"] and result.merged[0].row_count == 30
    assert len(segment_data_files(table, "0.1")) == 2  # six source files dealt to two tasks
    assert read_segments(table).equals(before)


def test_end_to_end_with_spark_loads_and_reader(spark, store: Store) -> None:  # type: ignore[no-untyped-def]
    """Real load jobs, real data source reader: the ported CarbonData scenarios."""
    from carbonstore.spark.compact_job import spark_merger
    from carbonstore.spark.load_job import load

    def frame(start: int):  # type: ignore[no-untyped-def]
        return spark.createDataFrame([
            (i, f"n{i % 7}", i / 3) for i in range(start, start + 10)
        ], "id long, name string, score double")

    def count(name: str, segments: str | None = None) -> int:
        reader = spark.read.format("carbonstore").option("store", store.location)
        if segments is not None:
            reader = reader.option("segments", segments)
        return reader.load(name).count()

    # Auto compaction "2,1" runs in the Spark load's commit (the 4-load scenario giving 0.1
    # and 2.1 runs without Spark in test_compaction.py).
    auto = store.create_table("auto", SCHEMA, properties={
        "sort_columns": "id", "auto_load_merge": "true", "compaction_level_threshold": "2,1"})
    for i in range(2):
        load(auto, frame(i * 10), spark=spark)
    assert statuses(auto) == {"0": "Compacted", "1": "Compacted", "0.1": "Success"}
    assert count("default.auto") == 20

    # 2 loads + MAJOR + 1 load -> count 30, reading only segment 0.1 -> 20.
    table = store.create_table("major", SCHEMA, properties={"sort_columns": "id"})
    load(table, frame(0), spark=spark)
    load(table, frame(10), spark=spark)
    compact(table, "major", merger=spark_merger(spark))
    load(table, frame(20), spark=spark)
    assert count("default.major") == 30
    assert count("default.major", "0.1") == 20
    with pytest.raises(Exception, match=r"segment 0 of default.major is Compacted"):
        count("default.major", "0")  # compacted: its rows are read through 0.1
