"""Time travel through Spark: data source options versionAsOf / timestampAsOf, query/sql --as-of."""

from __future__ import annotations

from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.segments.compaction import compact
from carbonstore.spark.api import to_spark
from tests.reliability.workload import SCHEMA, load, rows


def test_as_of_through_the_data_source_and_the_cli(
    spark: object, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = store.create_table("db.tt", SCHEMA)
    load(table, rows(0, 20), tasks=1)
    v1 = table.status.read()
    load(table, rows(100, 20), tasks=1)
    compact(table, "custom", segment_ids=["0", "1"])
    load(table, rows(200, 5), tasks=1)
    assert to_spark(table, spark).count() == 45

    def read(**opts: object) -> list[int]:
        r = spark.read.format("carbonstore").option("store", store.location)  # type: ignore[attr-defined]
        for k, v in opts.items():
            r = r.option(k, v)
        return sorted(x.id for x in r.load("db.tt").select("id").collect())

    assert read(versionAsOf=v1.version) == list(range(20))
    assert read(timestampAsOf=v1.timestamp) == list(range(20))
    assert len(read()) == 45
    assert sorted(x.id for x in to_spark(table.as_of(v1.version), spark)
                  .where("id >= 10").collect()) == list(range(10, 20))
    loc = store.location
    assert main(["--store", loc, "query", "db.tt", "--as-of", str(v1.version), "--json",
                 "--select", "id"]) == 0
    out = capsys.readouterr().out
    assert out.count('"id"') == 20
    assert main(["--store", loc, "sql", "SELECT count(*) AS n FROM db.tt a JOIN db.tt b "
                 "ON a.id = b.id", "--as-of", str(v1.version), "--json"]) == 0
    assert '"n": 20' in capsys.readouterr().out
