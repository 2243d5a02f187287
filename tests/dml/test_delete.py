"""DELETE with delete deltas: reads, counts, time travel, compaction, clean files, conflicts."""

from __future__ import annotations

import pyarrow as pa
import pytest

from carbonstore import Store, Table
from carbonstore.dml import delete_rows
from carbonstore.errors import CorruptMetadataError, ExpressionError, UserError
from carbonstore.expressions.expr import AlwaysTrue
from carbonstore.pruning.plan import bind_where, prune
from carbonstore.segments.clean import clean_files
from carbonstore.segments.compaction import compact, merge_local
from carbonstore.segments.deltas import DELTA_SUFFIX, read_delta
from carbonstore.segments.dml import Replan, apply_changes, scan_rows
from tests.dml.rows import SCHEMA, ids, load, read_live, rows


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    load(t, rows(range(0, 500)), tasks=2)
    load(t, rows(range(500, 1000)))
    return t


def _files(table: Table, suffix: str) -> dict[str, int]:
    sfs = table.store.sfs
    out = {}
    for e in table.status.read().entries:
        for info in sfs.list_dir(table.paths.segment_dir(e.load_name)):
            if info.base_name.endswith(suffix):
                out[info.path] = int(info.mtime_ns or 0)
    return out


def test_delete_rewrites_no_data_file(table: Table) -> None:
    data_before = _files(table, ".parquet")
    r = delete_rows(table, "id < 10 OR id = 700 OR name = 'n3'")
    want = [i for i in range(1000) if not (i < 10 or i == 700 or (i % 11 and i % 7 == 3))]
    assert ids(table) == want
    assert r.deleted == 1000 - len(want) and r.segments == ("0", "1") and r.files == 3
    assert _files(table, ".parquet") == data_before  # same files, untouched
    assert len(_files(table, DELTA_SUFFIX)) == 3  # one per touched data file
    plan = prune(table)
    assert plan.levels["rows"].total - plan.deleted_rows == len(want)
    assert table.describe()["rows"] == len(want)
    assert table.history()[-1].operation == "DELETE"


def test_deltas_are_cumulative_one_live_per_file(table: Table) -> None:
    delete_rows(table, "id < 5")
    delete_rows(table, "id >= 5 AND id < 8")
    e = table.status.read().get("0")
    assert len(e.delete_deltas) == 1  # id < 8 are all in one file of segment 0
    d = e.delete_deltas[0]
    assert d.deleted_rows == 8
    assert len(read_delta(table.store.sfs, table.paths.segment_dir("0"), d)) == 8
    assert ids(table)[:2] == [8, 9]


def test_nothing_matched_commits_nothing(table: Table) -> None:
    v = table.status.read().version
    r = delete_rows(table, "id > 5000")
    assert r.deleted == 0 and r.version is None and table.status.read().version == v
    delete_rows(table, "id = 3")
    assert delete_rows(table, "id = 3").deleted == 0  # a deleted row is not matched again


def test_delete_everything_and_filters(table: Table) -> None:
    assert ids(table, "id >= 990") == list(range(990, 1000))
    delete_rows(table, None)
    assert ids(table) == [] and ids(table, "id >= 990") == []
    assert table.describe()["rows"] == 0


def test_time_travel_sees_the_rows_of_its_version(table: Table) -> None:
    before = table.status.read().version
    delete_rows(table, "id < 100")
    old = table.as_of(before)
    assert ids(old) == list(range(1000))
    assert ids(table) == list(range(100, 1000))
    with pytest.raises(UserError, match="read-only"):
        delete_rows(old, "id = 1")


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_bad_filter_is_a_user_error(table: Table) -> None:
    with pytest.raises(ExpressionError):
        delete_rows(table, "nosuch = 1")
    with pytest.raises(UserError, match="SYNTAX"):  # Spark's parser reads what the index cannot
        delete_rows(table, "id = = 1")


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_dictionary_column(store: Store) -> None:
    t = store.create_table("db.d", SCHEMA, properties={"dictionary_include": "name"})
    from carbonstore.dml import WhenNotMatched, merge_rows

    merge_rows(t, rows(range(100)), on=["id"], not_matched=[WhenNotMatched()])
    delete_rows(t, "name = 'n2' OR name IS NULL")
    want = [i for i in range(100) if i % 11 and i % 7 != 2]
    assert ids(t) == want


def test_damaged_delta_fails_reads(table: Table) -> None:
    delete_rows(table, "id = 1")
    (path,) = _files(table, DELTA_SUFFIX)
    table.store.sfs.write_atomic(path, b"CSDD garbage that is no delta")
    with pytest.raises(CorruptMetadataError, match="delete delta"):
        read_live(table)
    table.store.sfs.delete_file(path)
    with pytest.raises(CorruptMetadataError, match="missing"):
        read_live(table)


def test_compaction_applies_deltas(table: Table) -> None:
    delete_rows(table, "id < 50 OR id > 900")
    want = ids(table)
    res = compact(table, "custom", segment_ids=["0", "1"])
    (m,) = res.merged
    assert m.row_count == len(want)
    out = table.status.read().get(m.output)
    assert out.delete_deltas == () and out.row_count == len(want)
    assert ids(table) == want
    assert prune(table).deleted_rows == 0


def test_one_segment_with_deleted_rows_can_be_rewritten(table: Table) -> None:
    with pytest.raises(Exception, match="at least two"):
        compact(table, "custom", segment_ids=["1"])
    delete_rows(table, "id >= 990")
    compact(table, "custom", segment_ids=["1"])
    assert table.status.read().get("1").status == "Compacted"
    assert ids(table) == list(range(990))


def test_compaction_that_loses_to_a_delete_merges_again(table: Table) -> None:
    calls: list[int] = []

    def merger(t, sources, output):  # type: ignore[no-untyped-def]
        out = merge_local(t, sources, output)
        if not calls:  # a DELETE commits while the first merge runs
            delete_rows(t, "id = 7 OR id = 777")
        calls.append(1)
        return out

    res = compact(table, "custom", segment_ids=["0", "1"], merger=merger)
    assert len(calls) == 2 and len(res.merged) == 1
    assert 7 not in ids(table) and 777 not in ids(table)  # nothing resurrected
    assert len(ids(table)) == 998


def test_delete_planned_before_a_compaction_replans(table: Table) -> None:
    expr = bind_where(table, "id = 5")
    matches = scan_rows(table, expr)
    compact(table, "custom", segment_ids=["0", "1"])
    with pytest.raises(Replan):
        apply_changes(table, matches, operation="DELETE")
    assert 5 in ids(table)  # nothing committed
    delete_rows(table, "id = 5")  # re-planned on the compacted segment
    assert 5 not in ids(table)


def test_two_deletes_of_one_file_union(table: Table) -> None:
    first = scan_rows(table, bind_where(table, "id = 1"))
    second = scan_rows(table, bind_where(table, "id = 2"))
    apply_changes(table, first, operation="DELETE")
    apply_changes(table, second, operation="DELETE")  # planned before the first committed
    assert ids(table)[:3] == [0, 3, 4]
    (d,) = table.status.read().get("0").delete_deltas
    assert d.deleted_rows == 2


def test_overlapping_update_replans(table: Table) -> None:
    first = scan_rows(table, bind_where(table, "id = 1"))
    apply_changes(table, first, operation="DELETE")
    stale = scan_rows(table, AlwaysTrue(), snapshot=first.snapshot)
    with pytest.raises(Replan):  # an UPDATE must not re-insert a row deleted meanwhile
        apply_changes(table, stale, operation="UPDATE", insert=rows([1]))
    assert 1 not in ids(table)
    # no insert segment stayed behind
    assert all(e.readable or e.status in ("Failure", "Marked for Delete")
               for e in table.status.read().entries)


def test_appends_do_not_conflict(table: Table) -> None:
    from tests.reliability.workload import load as blind_load  # the product's LOAD commit

    matches = scan_rows(table, bind_where(table, "id < 3"))
    blind_load(table, rows(range(1000, 1010)), tasks=1)
    apply_changes(table, matches, operation="DELETE")
    assert ids(table) == list(range(3, 1010))


def test_clean_files_removes_superseded_deltas(table: Table) -> None:
    delete_rows(table, "id = 1")
    v1 = table.status.read().version
    delete_rows(table, "id = 2")
    assert len(_files(table, DELTA_SUFFIX)) == 2
    report = clean_files(table, dry_run=False)
    assert not [i for i in report.items if i.kind == "delta"]  # within the retention
    assert ids(table.as_of(v1))[:3] == [0, 2, 3]
    later = table.status.read().get("0").modification_or_deletion_timestamp + 10 * 86_400_000
    report = clean_files(table, dry_run=False, now=later)
    gone = [i for i in report.items if i.kind == "delta"]
    assert len(gone) == 1 and len(_files(table, DELTA_SUFFIX)) == 1
    assert ids(table)[:2] == [0, 3]


def test_statistics_become_stale_and_analyze_skips_deleted_rows(table: Table) -> None:
    from carbonstore.segments.analyze import analyze_local, compute_segment_statistics
    from carbonstore.statistics.store import get_segment_statistics

    analyze_local(table)
    assert get_segment_statistics(table, "1") is not None
    delete_rows(table, "id >= 900")
    assert get_segment_statistics(table, "1") is None  # stale: dropped
    stats = compute_segment_statistics(table, "1")
    assert stats.row_count == 400
    score = stats.find("score")
    assert score is not None and score.high_value == 899 / 4


def test_merge_source_rows_are_live_rows(store: Store) -> None:
    t = store.create_table("db.t2", SCHEMA)
    load(t, rows(range(10)))
    delete_rows(t, "id < 5")
    got = scan_rows(t, AlwaysTrue(), with_rows=True).rows
    assert got is not None and sorted(got["id"].to_pylist()) == [5, 6, 7, 8, 9]
    assert pa.types.is_int64(got.schema.field("__carbon_pos").type)


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_conditions_the_index_cannot_use(table: Table) -> None:
    r = delete_rows(table, "id % 3 = 0 AND id < 30 AND upper(name) <> 'N0'")
    want = [i for i in range(1000)
            if not (i % 3 == 0 and i < 30 and i % 11 and i % 7 != 0)]
    assert ids(table) == want and r.deleted == 1000 - len(want)
    assert r.segments == ("0",)  # id < 30 pruned segment 1
    with pytest.raises(UserError, match="nosuch"):
        delete_rows(table, "id % 2 = nosuch")
    table.update({"score": "-score"}, where="id + 1 = 500")
    assert read_live(table, "id = 499")["score"].to_pylist() == [-499 / 4]


def test_versions_whose_deltas_were_cleaned_are_refused(table: Table) -> None:
    from carbonstore.errors import VersionNotFoundError

    delete_rows(table, "id = 1")
    v1 = table.status.read().version
    delete_rows(table, "id = 2")
    table.restore(v1)  # within the retention: row 2 is back
    assert ids(table)[:3] == [0, 2, 3]
    delete_rows(table, "id = 4")
    later = table.status.read().get("0").modification_or_deletion_timestamp + 10 * 86_400_000
    clean_files(table, dry_run=False, now=later)
    with pytest.raises(VersionNotFoundError, match="delete delta"):
        table.as_of(v1)
    with pytest.raises(VersionNotFoundError, match="delete delta"):
        table.restore(v1)
    assert ids(table)[:3] == [0, 2, 3]


def test_api_delete_needs_a_condition(table: Table) -> None:
    with pytest.raises(UserError, match="give a condition"):
        table.delete("  ")
    assert table.delete("true").deleted == 1000
    assert ids(table) == []


def test_delete_planned_before_a_restore_replans(table: Table) -> None:
    v0 = table.status.read().version
    delete_rows(table, "id = 1")
    stale = scan_rows(table, bind_where(table, "id < 3"))  # id 1 is deleted: not matched
    table.restore(v0)  # id 1 is back
    with pytest.raises(Replan):
        apply_changes(table, stale, operation="DELETE")
    delete_rows(table, "id < 3")
    assert ids(table)[:2] == [3, 4]
