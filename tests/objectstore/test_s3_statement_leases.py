"""Statement leases on an s3:// table (tests/reliability/test_statement_leases.py, against a
real S3 server): a DELETE stalled past its lease while clean files runs fails with
``CommitConflictError`` and commits nothing; one whose lease is renewed keeps its delta
from a forced clean. Either way no committed version names a missing delta."""

from __future__ import annotations

import time

import pytest
from s3fixtures import S3Store

from carbonstore import Store, Table
from carbonstore.errors import CommitConflictError
from carbonstore.segments.clean import clean_files
from carbonstore.segments.dml import delete_rows
from carbonstore.store.faults import on_point
from carbonstore.store.tablestatus import now_ms
from tests.dml.rows import SCHEMA, load, read_live, rows


@pytest.fixture
def table(s3_store: S3Store) -> Table:
    store = Store(s3_store.location, conf=s3_store.conf(**{"carbon.segment.lease.seconds": "1"}))
    t = store.create_table("db.t", SCHEMA)
    load(t, rows(range(0, 40)))
    return t


def _named_deltas_exist(table: Table) -> None:
    sfs = table.store.sfs
    for e in table.status.read().readable:
        for d in e.delete_deltas:
            assert sfs.exists(f"{table.paths.segment_dir(e.load_name)}/{d.delta_file}"), d


def test_a_stalled_delete_on_s3_fails_cleanly(table: Table) -> None:
    version = table.status.read().version
    later = now_ms() + 3 * 3_600_000
    with on_point("tablestatus.before_write",
                  lambda: clean_files(table, dry_run=False, now=later) and None):
        with pytest.raises(CommitConflictError, match="marked it dead"):
            delete_rows(table, "id < 5")
    _named_deltas_exist(table)
    assert sorted(read_live(table)["id"].to_pylist()) == list(range(40))
    # clean's versions only: the statement marked dead, the delta recorded before its delete
    assert [v.operation for v in table.history()[version + 1:]] == [
        "CLEAN FILES (mark statements dead)", "CLEAN FILES"]
    assert delete_rows(table, "id < 5").deleted == 5
    assert sorted(read_live(table)["id"].to_pylist()) == list(range(5, 40))


def test_a_renewed_delete_on_s3_keeps_its_delta(table: Table) -> None:
    def stall_then_clean() -> None:
        time.sleep(1.5)  # longer than the 1 s lease, renewed meanwhile
        report = clean_files(table, dry_run=False, force=True)
        assert not [i for i in report.items if i.kind == "delta"], report

    with on_point("tablestatus.before_write", stall_then_clean):
        delete_rows(table, "id < 5")
    _named_deltas_exist(table)
    assert sorted(read_live(table)["id"].to_pylist()) == list(range(5, 40))
