"""DELETE / UPDATE / MERGE as Spark jobs (carbonstore/dml): mixed segments, Spark's own
functions, task-built deltas, WHEN NOT MATCHED BY SOURCE, every source kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from carbonstore import Store, Table
from carbonstore.errors import UserError
from carbonstore.segments.addsegment import add_segment
from tests.dml.rows import SCHEMA, load, read_live, rows

pytestmark = pytest.mark.usefixtures("spark")


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    load(t, rows(range(0, 50)))
    return t


def _by_id(table: Table) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in read_live(table).to_pylist()}


def _adopt_nullable(table: Table, tmp_path: Path, ids: range) -> None:
    """A segment adopted from ordinary Parquet: its ``id`` is nullable."""
    folder = tmp_path / f"adopt{ids.start}"
    folder.mkdir()
    data = rows(ids)  # pyarrow fields are nullable
    assert data.schema.field("id").nullable
    pq.write_table(data, folder / "part-0.parquet")
    add_segment(table, str(folder))


def test_update_and_merge_over_nullable_adopted_segment(table: Table, tmp_path: Path) -> None:
    """The issue's ``ArrowInvalid: Schema at index .. was different``: an adopted nullable
    segment next to rows an UPDATE wrote into the NOT NULL table."""
    table.update({"score": "score + 1"}, where="id < 5")  # rows written by an UPDATE
    _adopt_nullable(table, tmp_path, range(100, 110))
    r = table.update({"score": "score * 2"}, where="id % 2 = 0")
    assert r.deleted == 25 + 5
    got = _by_id(table)
    assert got[2]["score"] == (0.5 + 1) * 2 and got[102]["score"] == 51.0
    src = pa.table({"id": pa.array([3, 104, 999], pa.int64()), "name": ["x", "y", "z"],
                    "score": [1.0, 2.0, 3.0]})
    m = table.merge(src, on=["id"], when_matched_update="*", when_not_matched_insert="*")
    assert (m.deleted, m.inserted) == (2, 3)
    got = _by_id(table)
    assert got[104]["name"] == "y" and got[999]["score"] == 3.0 and len(got) == 61


def test_update_with_spark_functions(store: Store) -> None:
    """Any Spark function: try_cast (refused by the old translator), string functions."""
    t = store.create_table("db.c", "id long not null, name string, score double")
    load(t, pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["12", "x", None],
                      "score": [0.0, 0.0, 0.0]}))
    r = t.update({"score": "try_cast(name AS int)", "name": "concat_ws('-', name, 'u')"},
                 where="score = 0 AND length(coalesce(name, '')) < 5")
    assert r.deleted == 3
    got = {x["id"]: (x["name"], x["score"]) for x in read_live(t).to_pylist()}
    assert got == {1: ("12-u", 12.0), 2: ("x-u", None), 3: ("u", None)}


def test_delete_residual_on_spark_and_no_second_delta(table: Table) -> None:
    r = table.delete("id % 7 = 0 AND upper(coalesce(name, 'z')) <> 'Q'")
    assert r.deleted == 8
    entry = table.status.read().get("0")
    assert len(entry.delete_deltas) == 1  # one delta named per file
    assert sorted(_by_id(table)) == [i for i in range(50) if i % 7]


def test_merge_duplicate_source_rows_refused(table: Table) -> None:
    src = pa.table({"id": pa.array([1, 1], pa.int64()), "name": ["a", "b"],
                    "score": [0.0, 0.0]})
    with pytest.raises(UserError, match="more than one source row"):
        table.merge(src, on=["id"], when_matched_update="*")
    assert len(_by_id(table)) == 50


def test_merge_not_matched_by_source_and_sources(table: Table, spark: Any) -> None:
    from carbonstore.dml import WhenMatched, WhenNotMatchedBySource, merge_rows

    src = spark.createDataFrame([(i, f"s{i}", 1.0) for i in range(40, 60)],
                                "id long, name string, score double")
    r = merge_rows(table, src, on="t.id = s.id",
                   matched=[WhenMatched(action="update", assignments={"name": "s.name"})],
                   not_matched_by_source=[WhenNotMatchedBySource(action="delete",
                                                                 condition="t.id < 10")])
    assert r.deleted == 10 + 10
    got = _by_id(table)
    assert sorted(got) == list(range(10, 50)) and got[45]["name"] == "s45"
    # a SQL query source
    r = merge_rows(table, "SELECT CAST(45 AS BIGINT) AS id", on=["id"],
                   matched=[WhenMatched(action="delete")])
    assert r.deleted == 1 and 45 not in _by_id(table)
