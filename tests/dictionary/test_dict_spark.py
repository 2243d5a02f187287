"""Loads through Spark with dictionary columns; read back with pyarrow + decode."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from carbonstore import Store, Table  # noqa: E402
from carbonstore.dictionary import decode_batch, load_dictionary  # noqa: E402
from carbonstore.errors import UserError  # noqa: E402
from carbonstore.spark.load_job import load  # noqa: E402

pytestmark = pytest.mark.spark


def _rows(table: Table) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for e in table.status.read().readable:
        for info in table.store.sfs.list_dir(table.paths.segment_dir(e.load_name)):
            if info.path.endswith(".parquet"):
                raw = pq.read_table(info.path)
                assert raw.schema.field("city").type == pa.int32()
                for b in raw.to_batches():
                    out.extend(decode_batch(b, table).to_pylist())
    return sorted(out, key=lambda r: r["id"])  # type: ignore[arg-type, return-value]


def test_two_loads_with_overlapping_values(spark, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    table = store.create_table(
        "d", "id long not null, city string, code int",
        properties={"dictionary_include": "city,code", "sort_columns": "city"},
    )
    csv = tmp_path / "one.csv"
    csv.write_text("id,city,code\n1,Zürich,10\n2,Bern,\n3,,10\n4,日本,7\n", encoding="utf-8")
    load(table, str(csv), spark=spark)
    df = spark.createDataFrame(
        [(5, "Bern", 7), (6, "Genève", 99), (7, None, None), (8, "Zürich", 10)],
        "id long, city string, code int",
    )
    load(table, df)
    expected = [
        (1, "Zürich", 10), (2, "Bern", None), (3, None, 10), (4, "日本", 7),
        (5, "Bern", 7), (6, "Genève", 99), (7, None, None), (8, "Zürich", 10),
    ]
    assert [(r["id"], r["city"], r["code"]) for r in _rows(table)] == expected
    city = load_dictionary(table, "city")
    assert city.values.to_pylist() == ["Bern", "Zürich", "日本", "Genève"]
    assert [(e.segment_id, e.min_surrogate, e.max_surrogate) for e in city.meta.entries] == [
        ("0", 2, 4), ("1", 5, 5)]
    assert load_dictionary(table, "code").values.to_pylist() == [7, 10, 99]


def test_prebuilt_dictionary_option(spark, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    table = store.create_table("p", "id long, city string", properties={"dictionary_include": "city"})
    values = tmp_path / "cities.txt"
    values.write_text("Oslo\nBergen\n", encoding="utf-8")
    df = spark.createDataFrame([(1, "Oslo"), (2, None)], "id long, city string")
    load(table, df, options={"dictionary_files": f"city:{values}"})
    assert load_dictionary(table, "city").values.to_pylist() == ["Bergen", "Oslo"]
    assert [(r["id"], r["city"]) for r in _rows(table)] == [(1, "Oslo"), (2, None)]
    with pytest.raises(UserError, match="column:path"):
        load(table, df, options={"dictionary_files": "city"})


def test_sql_on_a_table_whose_dictionary_is_gone(  # type: ignore[no-untyped-def]
    spark, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 22 item 2: sql answered 0 rows with exit 0 once the dictionary files were deleted.
    import shutil

    from carbonstore.cli import main
    from carbonstore.dictionary import clear_cache
    from tests.reliability.workload import SCHEMA, rows
    from tests.reliability.workload import load as local_load

    # Two tables with the same rows: Spark's Python workers cache dictionaries they read
    # (rightly: committed values never change), so the damaged one is never read before.
    intact = store.create_table("g", SCHEMA, properties={"dictionary_include": "city"})
    damaged = store.create_table("h", SCHEMA, properties={"dictionary_include": "city"})
    for table in (intact, damaged):
        local_load(table, rows(0, 100), tasks=1)
    statement = "select count(*) as n from {} where city = 'oslo'"
    assert main(["--store", store.location, "sql", statement.format("g"), "--json"]) == 0
    assert '"n": 20' in capsys.readouterr().out
    shutil.rmtree(damaged.paths.dictionary_dir)
    clear_cache()
    rc = main(["--store", store.location, "sql", statement.format("h"), "--json"])
    captured = capsys.readouterr()
    assert rc != 0, captured.out  # never 0 rows with exit 0
    # One line; it names the dictionary once data source errors lead with our message
    # (issue 22 item 9), not the worker's traceback.
    assert len(captured.err.strip().splitlines()) == 1
