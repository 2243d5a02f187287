"""Compaction on real files (driver-side pyarrow merge, no Spark).

``add_segment`` writes a committed segment (Parquet + .carbonindex + .carbonindexmerge)
through the same segment writer compaction uses; other segment tests import it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from carbonstore import Store, Table
from carbonstore.errors import CompactionError
from carbonstore.segments.compaction import (
    compact,
    maybe_auto_compact,
    merge_local,
    segment_data_files,
    write_segment,
)
from carbonstore.store import LoadEntry
from carbonstore.store.tablestatus import COMPACTED, FAILURE, SUCCESS, segment_sort_key

SCHEMA = "id long not null, name string, score double"


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids[::-1], pa.int64()),  # reversed: compaction must sort again
            "name": pa.array([f"n{i % 7}" if i % 5 else None for i in ids[::-1]], pa.string()),
            "score": pa.array([float(i) / 3 for i in ids[::-1]], pa.float64()),
        }
    )


def add_segment(table: Table, data: pa.Table, *, tasks: int = 1) -> LoadEntry:
    """Write and commit one segment the way a load does (no Spark)."""
    entry = table.status.allocate()
    step = max(1, -(-data.num_rows // tasks))
    parts = [data.slice(i, step).to_batches() for i in range(0, data.num_rows, step)]
    out = write_segment(table, entry.load_name, parts)
    return table.status.set_status(
        entry.load_name, SUCCESS, timestamp=entry.load_start_time + 1, row_count=out.row_count,
        data_size=out.data_size, index_size=out.index_size, segment_file=out.segment_file,
    )


def read_segments(table: Table, ids: Sequence[str] | None = None) -> pa.Table:
    """Rows of the readable segments (or the chosen ids), read from their indexed files."""
    from carbonstore.segments.manage import resolve_read_segments

    chosen = resolve_read_segments(table.status.read(), ids)
    parts = [pq.read_table(p) for e in chosen for p in segment_data_files(table, e.load_name)]
    if not parts:
        return rows(0, 0).slice(0, 0)
    return pa.concat_tables(parts).sort_by("id")


def statuses(table: Table) -> dict[str, str]:
    return {e.load_name: e.status for e in table.status.read().entries}


@pytest.fixture
def table(store: Store) -> Table:
    return store.create_table("t", SCHEMA, properties={"sort_columns": "id"})


def test_custom_1_2_3_of_5(table: Table) -> None:
    for i in range(5):
        add_segment(table, rows(i * 10, 10))
    before = read_segments(table)
    result = compact(table, "custom", segment_ids=["1", "2", "3"])
    assert [m.output for m in result.merged] == ["1.1"]
    assert statuses(table) == {
        "0": SUCCESS, "1": COMPACTED, "2": COMPACTED, "3": COMPACTED, "4": SUCCESS, "1.1": SUCCESS,
    }
    snap = table.status.read()
    assert all(snap.get(s).merged_load_name == "1.1" for s in ("1", "2", "3"))
    out = snap.get("1.1")
    assert out.row_count == 30 and not out.major_compacted and out.data_size > 0
    assert read_segments(table).equals(before)
    merged = pa.concat_tables(pq.read_table(p) for p in segment_data_files(table, "1.1"))
    assert merged["id"].to_pylist() == list(range(10, 40))  # sorted again on SORT_COLUMNS
    # The output has its own task index and merge index.
    names = [i.base_name for i in table.store.sfs.list_dir(table.paths.segment_dir("1.1"))]
    assert sum(n.endswith(".carbonindexmerge") for n in names) == 1
    assert sum(n.endswith(".carbonindex") for n in names) == 1
    # Compacted sources keep their files until clean files.
    assert table.store.sfs.exists(table.paths.segment_dir("2"))


def test_custom_refuses_compacted_source(table: Table) -> None:
    for i in range(3):
        add_segment(table, rows(i * 10, 10))
    compact(table, "custom", segment_ids=["0", "1"])
    with pytest.raises(CompactionError, match="already compacted into 0.1"):
        compact(table, "custom", segment_ids=["1", "2"])


def test_auto_compaction_2_1_after_4_loads(store: Store) -> None:
    table = store.create_table(
        "auto", SCHEMA, properties={"auto_load_merge": "true", "compaction_level_threshold": "2,1"}
    )
    for i in range(4):
        add_segment(table, rows(i * 10, 10))
        maybe_auto_compact(table)
    st = statuses(table)
    assert st["0.1"] == SUCCESS and st["2.1"] == SUCCESS
    assert [k for k, v in st.items() if v == COMPACTED] == ["0", "1", "2", "3"]
    assert read_segments(table)["id"].to_pylist() == list(range(40))


def test_auto_compaction_off_by_default_and_never_raises(table: Table) -> None:
    for i in range(5):
        add_segment(table, rows(i * 10, 10))
    assert maybe_auto_compact(table) is None
    assert COMPACTED not in statuses(table).values()
    on = table.store.create_table("on", SCHEMA, properties={"auto_load_merge": "true"})
    for i in range(4):
        add_segment(on, rows(i * 10, 10))
    with on.locks.hold("compaction.lock"):
        assert maybe_auto_compact(on) is None  # lock held: skipped with a warning, no raise
    assert COMPACTED not in statuses(on).values()


def test_minor_runs_levels_until_done(store: Store) -> None:
    table = store.create_table("lv", SCHEMA, properties={"compaction_level_threshold": "2,2"})
    for i in range(4):
        add_segment(table, rows(i * 5, 5))
    result = compact(table, "minor")
    assert [m.output for m in result.merged] == ["0.1", "2.1", "0.2"]
    readable = [e.load_name for e in table.status.read().readable]
    assert readable == ["0.2"]
    assert read_segments(table)["id"].to_pylist() == list(range(20))


def test_major_then_load_counts_and_chosen_segment(table: Table) -> None:
    add_segment(table, rows(0, 10))
    add_segment(table, rows(10, 10))
    result = compact(table, "major")
    assert [m.output for m in result.merged] == ["0.1"]
    assert table.status.read().get("0.1").major_compacted
    add_segment(table, rows(20, 10))
    assert read_segments(table).num_rows == 30
    assert read_segments(table, ["0.1"]).num_rows == 20
    assert read_segments(table, ["0"]).num_rows == 0  # naming a compacted segment reads nothing
    # Minor leaves a major-compacted segment alone.
    assert compact(table, "minor").merged == ()


def test_compaction_lock_held_fails_fast_without_output(table: Table) -> None:
    for i in range(2):
        add_segment(table, rows(i * 10, 10))
    before = table.status.read()
    with table.locks.hold("compaction.lock"):
        with pytest.raises(CompactionError, match="another compaction is running"):
            compact(table, "custom", segment_ids=["0", "1"])
    assert table.status.read().entries == before.entries
    assert not table.store.sfs.exists(table.paths.segment_dir("0.1"))


def test_commit_aborts_when_a_source_changes(table: Table) -> None:
    for i in range(2):
        add_segment(table, rows(i * 10, 10))

    def deleting_merger(t: Table, sources: Sequence[LoadEntry], out: str):  # type: ignore[no-untyped-def]
        result = merge_local(t, sources, out)
        t.status.set_status("1", "Marked for Delete")  # a delete lands mid-compaction
        return result

    with pytest.raises(CompactionError, match="segment 1 changed from Success to Marked for Delete"):
        compact(table, "custom", segment_ids=["0", "1"], merger=deleting_merger)
    assert statuses(table) == {"0": SUCCESS, "1": "Marked for Delete"}
    assert not table.store.sfs.exists(table.paths.segment_dir("0.1"))


def test_load_during_compaction_is_kept(table: Table) -> None:
    for i in range(2):
        add_segment(table, rows(i * 10, 10))
    started = threading.Event()

    def slow_merger(t: Table, sources: Sequence[LoadEntry], out: str):  # type: ignore[no-untyped-def]
        result = merge_local(t, sources, out)
        started.set()
        add_segment(t, rows(100, 10))  # a load commits while the merge is unfinished
        return result

    compact(table, "custom", segment_ids=["0", "1"], merger=slow_merger)
    assert started.is_set()
    st = statuses(table)
    assert st == {"0": COMPACTED, "1": COMPACTED, "2": SUCCESS, "0.1": SUCCESS}
    ids = read_segments(table)["id"].to_pylist()
    assert ids == list(range(20)) + list(range(100, 110))


def test_leftover_output_folder_is_replaced(table: Table) -> None:
    for i in range(2):
        add_segment(table, rows(i * 10, 10))
    # A killed compaction left a half-written output folder that no entry names.
    leftover = table.paths.segment_dir("0.1")
    table.store.sfs.makedirs(leftover)
    pq.write_table(rows(0, 10), f"{leftover}/part-9-stale.parquet")
    compact(table, "custom", segment_ids=["0", "1"])
    names = [i.base_name for i in table.store.sfs.list_dir(leftover)]
    assert "part-9-stale.parquet" not in names
    assert read_segments(table).num_rows == 20


def test_query_answers_identical_after_compaction(table: Table) -> None:
    for i in range(4):
        add_segment(table, rows(i * 25, 25), tasks=2)

    def answers(t: pa.Table) -> tuple[object, ...]:
        return (
            t.num_rows,
            pc.sum(t["score"]).as_py(),
            t.filter(pc.greater(t["id"], 42)).num_rows,
            t.filter(pc.equal(t["name"], "n3")).num_rows,
            t["name"].null_count,
        )

    before = read_segments(table)
    compact(table, "minor")
    after = read_segments(table)
    assert [e.load_name for e in table.status.read().readable] == ["0.1"]
    assert after.equals(before)
    assert answers(after) == answers(before)


def test_segment_ids_sort_numerically() -> None:
    assert sorted(["10", "2", "1.1", "1"], key=segment_sort_key) == ["1", "1.1", "2", "10"]


def test_output_statistics_merged_from_sources(table: Table) -> None:
    st = pytest.importorskip("carbonstore.statistics.store")
    sk = pytest.importorskip("carbonstore.segments.analyze")
    for i in range(3):
        add_segment(table, rows(i * 10, 10))
    for sid in ("0", "1"):
        st.update_segment_statistics(table, sk.compute_segment_statistics(table, sid))
    compact(table, "custom", segment_ids=["1", "2"])  # segment 2 has no statistics
    written = st.get_segment_statistics(table, "1.1")  # computed while writing instead
    assert written is not None and written.source == "compaction" and written.row_count == 20
    assert written.column("id").low_value == 10 and written.column("id").high_value == 29
    t2 = table.store.create_table("t2", SCHEMA, properties={"sort_columns": "id"})
    for i in range(3):
        add_segment(t2, rows(i * 10, 10))
        st.update_segment_statistics(t2, sk.compute_segment_statistics(t2, str(i)))
    compact(t2, "custom", segment_ids=["0", "1", "2"])
    merged = st.get_segment_statistics(t2, "0.1")
    rescanned = sk.compute_segment_statistics(t2, "0.1")
    assert merged is not None and merged.source == "compaction" and merged.row_count == 30
    for col in ("id", "name", "score"):
        a, b = merged.column(col), rescanned.column(col)
        assert a.num_nulls == b.num_nulls
        assert getattr(a, "num_dvs", None) == getattr(b, "num_dvs", None)
    assert merged.column("id").low_value == 0 and merged.column("id").high_value == 29


def test_load_commit_runs_auto_compaction(store: Store) -> None:
    """The load's own commit (segments/commit.LoadTransaction) runs maybe_auto_compact."""
    from carbonstore.segments.commit import LoadTransaction

    table = store.create_table(
        "viaload", SCHEMA,
        properties={"sort_columns": "id", "auto_load_merge": "true",
                    "compaction_level_threshold": "2,1"},
    )
    for i in range(4):
        txn = LoadTransaction.begin(table)
        try:
            result = write_segment_task(table, txn.segment_id, rows(i * 10, 10))
            txn.commit([result])
        finally:
            txn.release()
    st = statuses(table)
    assert st["0.1"] == SUCCESS and st["2.1"] == SUCCESS
    assert [e.load_name for e in table.status.read().readable] == ["0.1", "2.1"]
    assert read_segments(table)["id"].to_pylist() == list(range(40))


def test_load_transaction_without_auto_compaction_and_resumed(store: Store) -> None:
    """``auto_compact=False`` leaves the loads alone; a resumed transaction commits and aborts
    a segment another transaction began (as the data source's driver-side commit does)."""
    from carbonstore.segments.commit import LoadTransaction

    table = store.create_table(
        "manual", SCHEMA,
        properties={"auto_load_merge": "true", "compaction_level_threshold": "2,1"},
    )
    for i in range(2):
        txn = LoadTransaction.begin(table, hold_lock=False)
        assert txn.keeper is None
        result = write_segment_task(table, txn.segment_id, rows(i * 10, 10))
        entry = LoadTransaction.resume(table, txn.segment_id).commit([result], auto_compact=False)
        assert entry.load_name == txn.segment_id and entry.status == SUCCESS
    assert statuses(table) == {"0": SUCCESS, "1": SUCCESS}
    txn = LoadTransaction.begin(table)
    try:
        LoadTransaction.resume(table, txn.segment_id).abort(reason="boom")
    finally:
        txn.release()
    assert table.status.read().get(txn.segment_id).status == FAILURE
    assert not table.store.sfs.exists(table.paths.segment_dir(txn.segment_id))
    assert read_segments(table)["id"].to_pylist() == list(range(20))


def write_segment_task(table: Table, segment_id: str, data: pa.Table):  # type: ignore[no-untyped-def]
    from carbonstore.segments.compaction import write_settings
    from carbonstore.segments.writer import write_task

    return write_task(data.to_batches(), write_settings(table, segment_id), task_id="00000")
