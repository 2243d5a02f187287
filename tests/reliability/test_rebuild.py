"""`carbonstore index rebuild`: lost or damaged index files are rebuilt from the Parquet files."""

from __future__ import annotations

import json
from typing import Any

import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.errors import CorruptIndexError, SegmentNotFoundError
from carbonstore.indexfiles.indexfile import load_index
from carbonstore.pruning.cache import clear_cache
from carbonstore.pruning.plan import prune
from carbonstore.segments.rebuild import rebuild_indexes
from carbonstore.store.table import Table
from tests.reliability.workload import SCHEMA, load, rows, scan

WHERES = [None, "x > 100", "x = 'NaN'", "x < 3", "id between 40 and 60", "x is null",
          "city = 'lima'"]


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA, properties={"bloom_columns": "city"})
    conf = t.store.conf.with_overrides({"carbon.page.rows": "10"})
    t = Store(t.store.location, conf=conf).table("db.t")
    load(t, rows(0, 120), tasks=2)
    load(t, rows(1000, 90), tasks=3)
    return t


def _answers(table: Table) -> dict[str | None, Any]:
    clear_cache()  # a fresh process: nothing cached from before the damage
    out: dict[str | None, Any] = {}
    for w in WHERES:
        plan = prune(table, w).to_json()
        del plan["planning_ms"]
        out[w] = (plan, sorted(scan(table, w).column("id").to_pylist()))
    return out


def _merge_path(table: Table, sid: str) -> str:
    return f"{table.paths.segment_dir(sid)}/{table.status.read().get(sid).segment_file}"


def _nan_counts(table: Table, sid: str) -> tuple[list[int], list[int]]:
    x = load_index(table.store.sfs.fs, _merge_path(table, sid)).column("x")
    return x.nan_count.tolist(), x.pages.nan_count.tolist()


@pytest.mark.parametrize("damage", ["delete", "garbage", "truncate"])
def test_damaged_merge_index_says_rebuild_then_rebuild_restores_answers(
    table: Table, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _answers(table)
    nans = _nan_counts(table, "1")
    path = _merge_path(table, "1")
    sfs = table.store.sfs
    if damage == "delete":
        sfs.delete_file(path)
    elif damage == "garbage":
        sfs.write_bytes(path, b"\x00garbage" * 50)
    else:
        sfs.write_bytes(path, sfs.read_bytes(path)[:-40])
    clear_cache()
    name = path.rsplit("/", 1)[1]
    with pytest.raises(CorruptIndexError, match=rf"{name}.*carbonstore index rebuild db\.t --segments 1"):
        prune(table, "x > 100")
    code = main(["--store", table.store.location, "index", "rebuild", "db.t", "--segments", "1",
                 "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    seg = report["segments"][0]
    assert seg["segment"] == "1" and seg["rows"] == 90 and seg["taskIndexes"] == 3
    assert table.status.read().get("1").segment_file == seg["segmentFile"] != name
    assert not sfs.exists(path)
    assert _answers(table) == before
    assert _nan_counts(table, "1") == nans  # recounted from the data, not left unknown


def test_rebuild_every_segment_keeps_plans_and_replaces_files(table: Table) -> None:
    before = _answers(table)
    old = {sid: _merge_path(table, sid) for sid in ("0", "1")}
    results = rebuild_indexes(table)
    assert [r.segment for r in results] == ["0", "1"]
    assert [r.rows for r in results] == [120, 90]
    # Changed behaviour: the old merge index stays for queries planned on an earlier
    # version; clean files removes it after the retention time.
    for path in old.values():
        assert table.store.sfs.exists(path)
    assert _answers(table) == before
    from carbonstore.segments.clean import clean_files
    from carbonstore.store.tablestatus import now_ms

    assert clean_files(table, dry_run=False).items == ()  # within the retention time
    report = clean_files(table, dry_run=False, now=now_ms() + 2 * 3_600_000)
    assert sorted(i.path for i in report.items if i.kind == "index") == sorted(old.values())
    for sid, path in old.items():
        assert not table.store.sfs.exists(path)
        names = [i.base_name for i in table.store.sfs.list_dir(table.paths.segment_dir(sid))]
        assert sum(n.endswith(".carbonindexmerge") for n in names) == 1
    assert _answers(table) == before


def test_rebuild_refuses_unknown_segment(table: Table) -> None:
    with pytest.raises(SegmentNotFoundError, match="7"):
        rebuild_indexes(table, ["7"])


def test_rebuild_detects_missing_data_file(table: Table) -> None:
    seg_dir = table.paths.segment_dir("0")
    victim = next(i.path for i in table.store.sfs.list_dir(seg_dir) if i.base_name.endswith(".parquet"))
    table.store.sfs.delete_file(victim)
    table.store.sfs.delete_file(_merge_path(table, "0"))
    with pytest.raises(CorruptIndexError, match="hold .* rows but tablestatus records 120"):
        rebuild_indexes(table, ["0"])
