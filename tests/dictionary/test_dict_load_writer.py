"""The load writer with dictionary columns (no Spark): surrogates in files, values back."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from carbonstore import Store, Table
from carbonstore.dictionary import METADATA_KEY, decode_batch, load_dictionary, prepare_dictionaries
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import write_task


def _write(table: Table, seg: str, batches: list[pa.RecordBatch], **opts: str) -> list[str]:
    settings = write_settings(table, seg, parse_load_options(table, opts))
    os.makedirs(settings.segment_dir, exist_ok=True)
    result = write_task(batches, settings, task_id="00000-0")
    return [f"{settings.segment_dir}/{f}" for f in result.files]


def _table(store: Store) -> Table:
    return store.create_table(
        "w", "id long not null, city string, code int, amount double",
        properties={"dictionary_include": "city,code", "sort_columns": "city,id"},
    )


def test_prepared_load_writes_surrogates_and_metadata(store: Store) -> None:
    table = _table(store)
    batch = pa.record_batch({
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "city": pa.array(["Oslo", None, "Bergen", "Oslo"]),
        "code": pa.array([7, 7, None, 3], pa.int32()),
        "amount": pa.array([1.0, 2.0, 3.0, 4.0]),
    })
    prepare_dictionaries(table, {"city": batch.column(1), "code": batch.column(2)}, "0")
    meta_before = open(load_dictionary(table, "city").files.meta_path, "rb").read()
    (path,) = _write(table, "0", [batch], sort_scope="local_sort")
    # Nothing was missing, so the writer committed nothing itself.
    assert open(load_dictionary(table, "city").files.meta_path, "rb").read() == meta_before
    f = pq.ParquetFile(path)
    assert f.schema_arrow.field("city").type == pa.int32()
    assert f.metadata.row_group(0).sorting_columns == ()  # city's surrogates are not sorted by value
    doc = orjson.loads(f.metadata.metadata[METADATA_KEY])
    assert doc["city"]["size"] == 2 and doc["code"]["size"] == 2
    data = f.read()
    assert data.column("city").to_pylist() == [3, 1, 2, 3]
    assert decode_batch(data.to_batches()[0], table).to_pylist() == batch.to_pylist()


def test_unprepared_write_adds_missing_values(store: Store) -> None:
    table = _table(store)
    b1 = pa.record_batch({"id": pa.array([1, 2], pa.int64()), "city": pa.array(["b", "a"])})
    b2 = pa.record_batch({"id": pa.array([3], pa.int64()), "city": pa.array(["c"])})
    (path,) = _write(table, "0", [b1, b2])
    d = load_dictionary(table, "city")
    assert d.values.to_pylist() == ["a", "b", "c"]
    assert [e.segment_id for e in d.meta.entries] == ["0", "0"]
    got = decode_batch(pq.read_table(path).to_batches()[0], table)
    assert got.column("city").to_pylist() == ["b", "a", "c"]
    assert orjson.loads(pq.read_metadata(path).metadata[METADATA_KEY])["city"]["size"] == 3
