"""Row-level DML on a table whose schema changed: deltas and schema versions together.

Segments written before an ALTER are read by column id (renamed, added, widened columns);
DELETE/UPDATE find their rows through the same mapping, and every read path drops the
deleted rows of old-schema segments.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from carbonstore import Store, Table
from carbonstore.pruning.plan import prune
from carbonstore.segments.analyze import compute_segment_statistics
from carbonstore.segments.compaction import compact
from carbonstore.segments.dml import delete_rows
from carbonstore.spark.reader import (
    arrow_read_schema,
    plan_partitions,
    plan_projections,
    read_row_groups,
)
from carbonstore.store.alter import SUB_ACTIONS, alter_table
from tests.dml.rows import SCHEMA, load, rows


def _alter(table: Table, action: str, *args: str) -> Table:
    alter_table(table, SUB_ACTIONS[action][1](list(args)), operation=f"{action} {' '.join(args)}")
    return table.store.table(str(table.name))


def _read(table: Table, where: str | None = None) -> pa.Table:
    plan = prune(table, where)
    slices = [s for p in plan_partitions(plan, projections=plan_projections(table, plan))
              for s in p.slices]
    got = pa.Table.from_batches(list(read_row_groups(table, slices)),
                                schema=arrow_read_schema(table))
    return got.sort_by("id")


def _model() -> dict[int, dict[str, object]]:
    data = rows(range(0, 600))
    return {r["id"]: {"id": r["id"], "label": r["name"], "score": r["score"], "flag": None}
            for r in data.to_pylist()}


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    load(t, rows(range(0, 300)), tasks=2)
    load(t, rows(range(300, 600)))
    t = _alter(t, "rename-column", "name", "label")
    return _alter(t, "add-column", "flag int")


def _check(table: Table, model: dict[int, dict[str, object]]) -> None:
    got = _read(table).to_pylist()
    assert got == [model[i] for i in sorted(model)]
    assert prune(table).levels["rows"].total - prune(table).deleted_rows == len(model)


def test_delete_by_a_renamed_column_of_old_segments(table: Table) -> None:
    model = _model()
    r = delete_rows(table, "label = 'n3' OR id < 5")
    gone = {i for i, row in model.items() if row["label"] == "n3" or i < 5}
    assert r.deleted == len(gone)
    for i in gone:
        del model[i]
    _check(table, model)
    kept = _read(table, "label = 'n3'")  # the row groups the plan keeps for the filter
    assert "n3" not in kept["label"].to_pylist()


def test_update_of_old_segment_rows_writes_current_schema(table: Table) -> None:
    model = _model()
    table.update({"flag": "7", "score": "score * 2"}, where="label = 'n2' AND id >= 250")
    for row in model.values():
        if row["label"] == "n2" and row["id"] >= 250:  # type: ignore[operator]
            row["flag"], row["score"] = 7, row["score"] * 2  # type: ignore[operator]
    _check(table, model)


def test_compaction_and_statistics_drop_deleted_rows_of_old_segments(table: Table) -> None:
    model = _model()
    delete_rows(table, "id % 3 = 0")
    for i in [i for i in model if i % 3 == 0]:
        del model[i]
    stats = compute_segment_statistics(table, "1", source="test")
    assert stats.row_count == len([i for i in model if i >= 300])
    compact(table, "custom", segment_ids=["0", "1"])
    table = table.store.table(str(table.name))
    _check(table, model)
    assert not any(e.delete_deltas for e in table.status.read().entries
                   if e.status == "Success")


@pytest.mark.spark
def test_native_read_of_old_segments_with_deltas(spark, table: Table) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.spark.api import to_spark

    model = _model()
    delete_rows(table, "label = 'n1' OR id BETWEEN 100 AND 110")
    for i in [i for i, r in model.items() if r["label"] == "n1" or 100 <= i <= 110]:
        del model[i]
    table.store.conf.values["carbon.read.local.rows"] = "0"  # the native path, not the local read
    df = to_spark(table, spark)
    got = sorted((r.id, r.label, r.flag) for r in df.collect())
    assert got == [(i, model[i]["label"], None) for i in sorted(model)]
    sub = to_spark(table, spark, where="label = 'n2'")
    assert sorted(r.id for r in sub.collect()) == sorted(
        i for i, r in model.items() if r["label"] == "n2")
