"""Segments of several nullabilities on an s3:// store: add-segment of ordinary Parquet from a
bucket (through the store's own endpoint), Spark compaction merging them with the store's
segments, and the one-line error (and ONE abort version) of a compaction that meets a null in
a NOT NULL column."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from s3fixtures import BUCKET, S3Store

from carbonstore import Store
from carbonstore.segments.compaction import compact
from carbonstore.segments.dml import delete_rows
from carbonstore.store.table import Table
from tests.dml.rows import read_live


def _parquet(ids: list[int | None]) -> bytes:
    """Ordinary Parquet: ``id`` nullable (the table says NOT NULL)."""
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                             "name": pa.array([f"p{i}" for i in range(len(ids))]),
                             "score": pa.array([float(i or 0) for i in ids])}), buf)
    return buf.getvalue()


def _upload(s3: S3Store, key: str, data: bytes) -> str:
    s3.server.client().put_object(Bucket=BUCKET, Key=f"in-{s3.prefix}/{key}", Body=data)
    return f"s3://{BUCKET}/in-{s3.prefix}/"


def test_add_segment_from_a_bucket_uses_the_store_uri_endpoint(s3_store: S3Store,
                                                               tmp_path: Path) -> None:
    """The endpoint is given in the store's URI only (no carbon.s3.endpoint in the conf):
    an s3:// source of add-segment is read through the same endpoint."""
    s3 = s3_store
    conf = tmp_path / "bare.properties"
    conf.write_text("carbon.s3.region=us-east-1\ncarbon.lock.retry.timeout.sec=5\n",
                    encoding="utf-8")
    location = f"{s3.location}?endpoint={s3.server.endpoint}"
    src = _upload(s3, "a.parquet", _parquet([1, 2, 3]))
    from carbonstore.cli import main

    base = ["--store", location, "--conf", str(conf)]
    assert main([*base, "create", "db.a", "--schema", "id long not null, name string, "
                 "score double"]) == 0
    assert main([*base, "add-segment", "db.a", "--path", src]) == 0
    table = Store(s3.location, conf=s3.conf()).table("db.a")
    assert read_live(table)["id"].to_pylist() == [1, 2, 3]


@pytest.fixture
def mixed(s3_store: S3Store) -> Table:
    """``id long not null``: segment 0 adopted from nullable Parquet, segment 1 written by
    the store (NOT NULL fields), a delete delta on each."""
    s3 = s3_store
    assert s3.cli("create", "db.m", "--schema", "id long not null, name string, score double",
                  "--sort-columns", "id") == 0
    assert s3.cli("add-segment", "db.m", "--path",
                  _upload(s3, "a.parquet", _parquet([5, 1, 3, 7]))) == 0
    table = Store(s3.location, conf=s3.conf()).table("db.m")
    table.append(pa.table({"id": pa.array([2, 4, 6], pa.int64()), "name": ["x", "y", "z"],
                           "score": [0.5, 1.5, 2.5]}))
    delete_rows(table, "id IN (3, 4)")
    return table


@pytest.mark.spark
def test_spark_compaction_of_mixed_nullability_on_s3(spark: object, mixed: Table) -> None:
    from carbonstore.spark.compact_job import spark_merger

    before = read_live(mixed)
    result = compact(mixed, "custom", segment_ids=["0", "1"], merger=spark_merger(spark, tasks=2))
    assert [m.output for m in result.merged] == ["0.1"]
    after = read_live(mixed.store.table("db.m"))
    assert after.to_pylist() == before.to_pylist()
    assert after["id"].to_pylist() == [1, 2, 5, 6, 7]


@pytest.mark.spark
def test_spark_compaction_meeting_a_null_is_one_line_and_one_abort(
    spark: object, mixed: Table, s3_store: S3Store, capsys: pytest.CaptureFixture[str],
) -> None:
    s3 = s3_store
    key = next(k for k in s3.keys() if "/Segment_0/" in k and k.endswith(".parquet"))
    # the adopted file replaced behind the store's back: same row count, one null id
    s3.server.client().put_object(Bucket=BUCKET, Key=key, Body=_parquet([5, None, 3, 7]))
    latest = mixed.status.read().version
    capsys.readouterr()
    assert s3.cli("compact", "db.m", "--type", "custom", "--segments", "0,1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NOT NULL column id holds 1 null" in err[0], err
    ops = [v.operation for v in mixed.status.log() if v.version > latest]
    assert sorted(ops) == ["COMPACTION ABORT", "COMPACTION BEGIN"], ops
    assert [e.load_name for e in mixed.status.read().readable] == ["0", "1"]
