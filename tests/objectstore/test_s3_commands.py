"""Every command on an s3:// store, through the CLI (in this process) and a real S3 server.

Loads and queries run on the session's SparkSession: its tasks reach the store from the
location alone (the endpoint travels in it), and queries take the Python read path (the
JVM has no S3 connector).
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from s3fixtures import BUCKET, S3Store

from carbonstore import Store

CSV = "id,city,amount\n1,oslo,1.5\n2,lima,2.5\n3,pune,3.5\n4,oslo,4.5\n"


def _json(capsys: pytest.CaptureFixture[str], s3: S3Store, *args: str) -> object:
    capsys.readouterr()
    assert s3.cli(*args, "--json") == 0, capsys.readouterr().err
    return orjson.loads(capsys.readouterr().out)


def _ids(capsys: pytest.CaptureFixture[str], s3: S3Store, *args: str) -> list[int]:
    rows = _json(capsys, s3, "query", "db.t", "--select", "id", *args)
    return sorted(r["id"] for r in rows)  # type: ignore[union-attr, index]


@pytest.mark.spark
def test_table_lifecycle_on_s3(spark: object, s3_store: S3Store, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    s3 = s3_store
    csv = tmp_path / "a.csv"
    csv.write_text(CSV, encoding="utf-8")
    parquet = tmp_path / "b.parquet"
    pq.write_table(pa.table({"id": pa.array([10, 11], pa.int64()), "city": ["rome", "oslo"],
                             "amount": [10.5, 11.5]}), parquet)

    assert s3.cli("create", "db.t", "--schema", "id long, city string, amount double",
                  "--dictionary", "city") == 0
    assert s3.cli("load", "db.t", "--input", str(csv)) == 0
    assert s3.cli("load", "db.t", "--input", str(parquet), "--format", "parquet") == 0
    assert _ids(capsys, s3) == [1, 2, 3, 4, 10, 11]
    assert _ids(capsys, s3, "--where", "city = 'oslo'") == [1, 4, 11]

    # inputs in a bucket: CSV parsed by the load tasks, Parquet read on the driver
    client = s3.server.client()
    client.upload_file(str(csv), BUCKET, f"in-{s3.prefix}/csv/a.csv")
    client.upload_file(str(parquet), BUCKET, f"in-{s3.prefix}/b.parquet")
    client.put_object(Bucket=BUCKET, Key=f"in-{s3.prefix}/c.csv.gz", Body=b"x")
    assert s3.cli("load", "db.t", "--input", f"s3://{BUCKET}/in-{s3.prefix}/csv") == 0
    assert s3.cli("load", "db.t", "--input", f"s3://{BUCKET}/in-{s3.prefix}/b.parquet") == 0
    capsys.readouterr()
    assert s3.cli("load", "db.t", "--input", f"s3://{BUCKET}/in-{s3.prefix}/c.csv.gz") == 2
    assert "no S3 connector" in capsys.readouterr().err
    assert _ids(capsys, s3) == [1, 1, 2, 2, 3, 3, 4, 4, 10, 10, 11, 11]
    assert s3.cli("delete-segments", "db.t", "--ids", "2,3") == 0

    plan = _json(capsys, s3, "prune", "db.t", "--where", "id >= 10")
    assert plan["levels"]["segments"]["total"] == 2 and plan["levels"]["segments"]["kept"] == 1  # type: ignore[index]

    dictionary = _json(capsys, s3, "dictionary", "db.t", "city")
    assert dictionary["size"] == 4  # type: ignore[index]  # oslo lima pune rome

    stats = _json(capsys, s3, "stats", "db.t")
    assert stats  # loads computed statistics on s3:// too

    assert s3.cli("compact", "db.t", "--type", "major") == 0
    segments = _json(capsys, s3, "show-segments", "db.t")
    assert {s["id"]: s["status"] for s in segments} == {  # type: ignore[union-attr, index]
        "0": "Compacted", "1": "Compacted", "0.1": "Success", "2": "Marked for Delete",
        "3": "Marked for Delete"}
    assert _ids(capsys, s3) == [1, 2, 3, 4, 10, 11]

    history = _json(capsys, s3, "history", "db.t")
    before_compaction = max(h["version"] for h in history if h["operation"] == "LOAD")  # type: ignore[union-attr, index]

    assert s3.cli("delete-segments", "db.t", "--ids", "0.1") == 0
    assert _ids(capsys, s3) == []
    assert s3.cli("clean-files", "db.t", "--force") == 0
    assert not any("Segment_0/" in k or "Segment_0.1/" in k for k in s3.keys())
    assert _ids(capsys, s3) == []
    # time travel: the version before the compaction still names segments 0 and 1, whose
    # files clean-files --force removed; the history is kept whole
    assert len(_json(capsys, s3, "history", "db.t")) > len(history)  # type: ignore[arg-type]
    assert before_compaction >= 2

    assert s3.cli("load", "db.t", "--input", str(csv)) == 0
    version = max(h["version"] for h in _json(capsys, s3, "history", "db.t"))  # type: ignore[union-attr, index]
    assert s3.cli("load", "db.t", "--input", str(csv)) == 0
    assert len(_ids(capsys, s3)) == 8
    assert _ids(capsys, s3, "--as-of", str(version)) == [1, 2, 3, 4]

    # every tablestatus version and dictionary record was written exactly once
    puts = s3.puts()
    commits = [k for k in puts if re.search(r"/tablestatus_log/[^/]+/[0-9]+\.json$", k)]
    assert commits and all(puts[k] == 1 for k in commits)


def test_add_segment_analyze_and_drop_on_s3(s3_store: S3Store, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    s3 = s3_store
    folder = tmp_path / "files"
    folder.mkdir()
    pq.write_table(pa.table({"id": pa.array(range(100), pa.int64()),
                             "x": pa.array([i * 0.5 for i in range(100)])}), folder / "p.parquet")
    assert s3.cli("create", "db.a", "--schema", "id long, x double") == 0
    assert s3.cli("add-segment", "db.a", "--path", str(folder)) == 0
    table = Store(s3.location, conf=s3.conf()).table("db.a")
    assert sum(e.row_count for e in table.status.read().readable) == 100
    # Parquet files already in a bucket (outside the store) are adopted from there too
    s3.server.client().upload_file(str(folder / "p.parquet"), BUCKET, f"in-{s3.prefix}/p.parquet")
    assert s3.cli("add-segment", "db.a", "--path", f"s3://{BUCKET}/in-{s3.prefix}") == 0
    assert sum(e.row_count for e in table.status.read().readable) == 200
    assert s3.cli("add-segment", "db.a", "--path", f"{s3.location}/db/a") == 2  # inside the store
    described = _json(capsys, s3, "describe", "db.a")
    assert described["location"] == f"{s3.location}/db/a"  # type: ignore[index]
    merge = next(k for k in s3.keys() if "/Segment_0/" in k and k.endswith(".carbonindexmerge"))
    inspected = _json(capsys, s3, "index", "inspect", f"s3://{BUCKET}/{merge}")
    assert sum(f["num_rows"] for f in inspected["files"]) == 100  # type: ignore[index]
    assert s3.cli("analyze", "db.a", "--engine", "local") == 0
    stats = _json(capsys, s3, "stats", "db.a", "--column", "id")
    assert "200" in orjson.dumps(stats).decode()
    plan = _json(capsys, s3, "prune", "db.a", "--where", "id > 1000")
    assert plan["levels"]["rows"]["kept"] == 0  # type: ignore[index]
    assert s3.cli("drop", "db.a") == 0
    assert not any("/db/a/" in k for k in s3.keys())
    capsys.readouterr()
    assert s3.cli("tables") == 0
    assert "db.a" not in capsys.readouterr().out


@pytest.mark.spark
def test_data_source_writes_and_reads_s3(spark: object, s3_store: S3Store) -> None:
    from carbonstore.spark.session import register_data_source

    s3 = s3_store
    assert s3.cli("create", "db.w", "--schema", "id long, name string") == 0
    register_data_source(spark)
    endpoint = s3.server.endpoint
    df = spark.createDataFrame([(i, f"n{i % 3}") for i in range(50)], "id long, name string")  # type: ignore[attr-defined]
    (df.write.format("carbonstore").mode("append").option("store", s3.location)
       .option("carbon.s3.endpoint", endpoint).save("db.w"))
    back = (spark.read.format("carbonstore").option("store", s3.location)  # type: ignore[attr-defined]
            .option("carbon.s3.endpoint", endpoint).load("db.w"))
    assert sorted(r.id for r in back.where("name = 'n1'").collect()) == list(range(1, 50, 3))
