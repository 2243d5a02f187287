"""Damaged metadata of an ``s3://`` table (moto): the same outcomes as on a local disk.

A tablestatus version whose key ``"upserts"`` lost a bit, a statistics file with counts
that are no counts, a schema whose column id is not one: one line, exit 2, and clean files
deletes nothing (every object of a readable segment is still there).
"""

from __future__ import annotations

import json

import pytest
from s3fixtures import BUCKET, S3Store

from carbonstore import Store
from carbonstore.store.tablestatus import forget_decoded
from tests.reliability.workload import SCHEMA, load, rows


def _table(s3: S3Store) -> None:
    t = Store(s3.location, conf=s3.conf()).create_table("db.t", SCHEMA)
    load(t, rows(0, 40), tasks=2)
    load(t, rows(1000, 20), tasks=1)


def _data_keys(s3: S3Store) -> set[str]:
    return {k for k in s3.keys() if k.endswith(".parquet")}


def _edit(s3: S3Store, key: str, change) -> None:  # noqa: ANN001
    client = s3.server.client()
    body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    client.put_object(Bucket=BUCKET, Key=key, Body=change(body))


def _run(s3: S3Store, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    forget_decoded()
    capsys.readouterr()
    code = s3.cli(*argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("damage", ["version key", "statistics count", "schema column id"])
def test_damaged_metadata_on_s3_is_one_line_and_clean_files_deletes_nothing(
    s3_store: S3Store, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    _table(s3_store)
    prefix = s3_store.prefix
    keys = s3_store.keys()
    if damage == "version key":
        key = max(k for k in keys  # the newest version: it committed the last load
                  if "/tablestatus_log/" in k and k.rsplit("/", 1)[1][:1].isdigit())
        _edit(s3_store, key, lambda b: b.replace(b'"upserts":', b'"uxserts":'))
        argv = ("clean-files", "db.t", "--stale-inprogress")
    elif damage == "statistics count":
        key = f"{prefix}/db/t/Metadata/stats/segment_1.stats"
        assert key in keys
        _edit(s3_store, key, lambda b: json.dumps(
            {**json.loads(b), "rowCount": -5}).encode())
        argv = ("stats", "db.t", "--json")
    else:
        key = f"{prefix}/db/t/Metadata/schema"
        obj_edit = lambda o: {**o, "columns": [  # noqa: E731
            {**o["columns"][0], "columnId": "../../x"}, *o["columns"][1:]]}
        _edit(s3_store, key, lambda b: json.dumps(obj_edit(json.loads(b))).encode())
        argv = ("show-segments", "db.t")
    before = _data_keys(s3_store)
    code, err = _run(s3_store, capsys, *argv)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert key.rsplit("/", 1)[1] in err, err
    code, err = _run(s3_store, capsys, "clean-files", "db.t", "--force", "--stale-inprogress")
    assert code in (0, 2) and "Traceback" not in err, err
    assert _data_keys(s3_store) == before
