"""UPDATE and MERGE: one commit, the insert delta, clause order, errors."""

from __future__ import annotations

import pyarrow as pa
import pytest

from carbonstore import Store, Table
from carbonstore.dml import WhenMatched, WhenNotMatched, merge_rows
from carbonstore.errors import UserError
from tests.dml.rows import SCHEMA, load, read_live, rows


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    load(t, rows(range(0, 100)))
    load(t, rows(range(100, 200)))
    return t


def _by_id(table: Table) -> dict[int, dict[str, object]]:
    return {r["id"]: r for r in read_live(table).to_pylist()}


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_update_one_commit(table: Table) -> None:
    v = table.status.read().version
    r = table.update({"score": "score * 100", "name": "upper(name)"}, where="id < 3 OR id = 150")
    assert r.deleted == 4 and r.inserted == 4 and r.inserted_segment == "2"
    got = _by_id(table)
    assert len(got) == 200
    assert got[1] == {"id": 1, "name": "N1", "score": 25.0}
    assert got[0]["name"] is None and got[150]["score"] == 3750.0
    assert got[3] == {"id": 3, "name": "n3", "score": 0.75}
    # visible in one version: the insert segment's begin is not readable
    ops = [h.operation for h in table.history()[v + 1:]]
    assert ops == ["LOAD BEGIN", "UPDATE"]
    assert sorted(_by_id(table.as_of(v + 1))) == list(range(200))  # before the UPDATE commit


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_update_without_match_and_errors(table: Table) -> None:
    assert table.update({"score": "0"}, where="id > 1000").version is None
    with pytest.raises(UserError, match="unknown column"):
        table.update({"nosuch": "1"}, where="id = 1")
    with pytest.raises(UserError, match="cannot be stored"):
        table.update({"id": "'not a number'"}, where="id = 1")
    with pytest.raises(UserError):
        table.update({"id": "NULL"}, where="id = 1")  # NOT NULL column
    assert len(_by_id(table)) == 200  # nothing changed by the failures
    assert all(e.readable or e.status in ("Failure", "Marked for Delete")
               for e in table.status.read().entries)


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_merge_upsert(table: Table) -> None:
    src = pa.table({"id": pa.array([5, 6, 500, 150], pa.int64()), "name": ["a", "b", "c", "d"],
                    "score": [1.0, 2.0, 3.0, 4.0]})
    r = table.merge(src, on=["id"], when_matched_update="*", when_not_matched_insert="*")
    assert (r.deleted, r.inserted) == (3, 4)
    got = _by_id(table)
    assert len(got) == 201
    assert got[5] == {"id": 5, "name": "a", "score": 1.0} and got[500]["name"] == "c"


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_merge_clauses_in_order(table: Table) -> None:
    src = pa.table({"id": pa.array([1, 2, 3, 300, 301], pa.int64()),
                    "v": pa.array([10, 20, 30, 40, 50], pa.int64())})
    r = merge_rows(
        table, src, on="t.id = s.id",
        matched=[WhenMatched(action="delete", condition="s.v = 20"),
                 WhenMatched(action="update", condition="s.v > 5",
                             assignments={"score": "t.score + s.v"}),
                 WhenMatched(action="delete")],
        not_matched=[WhenNotMatched(condition="s.v = 40",
                                    values={"id": "s.id", "name": "'new'"})],
    )
    got = _by_id(table)
    assert 2 not in got
    assert got[1]["score"] == 10.25 and got[3]["score"] == 30.75
    assert got[300] == {"id": 300, "name": "new", "score": None}
    assert 301 not in got
    assert (r.deleted, r.inserted) == (3, 3)


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_merge_duplicate_source_match_is_an_error(table: Table) -> None:
    src = pa.table({"id": pa.array([7, 7], pa.int64()), "name": ["a", "b"],
                    "score": [1.0, 2.0]})
    with pytest.raises(UserError, match="more than one source row"):
        table.merge(src, on=["id"], when_matched_update="*")
    assert len(_by_id(table)) == 200
    # only inserts: duplicates of an unmatched key are inserted as given
    table.merge(pa.table({"id": pa.array([900, 900], pa.int64())}), on=["id"],
                when_not_matched_insert="*")
    assert len(read_live(table, "id = 900")) == 2


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_merge_keys_outside_the_target_prune_it(table: Table) -> None:
    r = table.merge(pa.table({"id": pa.array([120, 130], pa.int64()), "name": ["x", "y"],
                              "score": [0.0, 0.0]}), on=["id"], when_matched_delete=True)
    assert r.segments == ("1",) and r.deleted == 2


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_merge_errors(table: Table) -> None:
    src = pa.table({"id": pa.array([1], pa.int64())})
    with pytest.raises(UserError, match="WHEN"):
        merge_rows(table, src, on=["id"])
    with pytest.raises(UserError, match="never apply"):
        table.merge(src, on=["id"], when_matched_delete=True, when_matched_update="*")
    with pytest.raises(UserError, match="unknown column"):
        table.merge(src, on=["id"], when_matched_update={"nosuch": "1"})
    with pytest.raises(UserError):
        table.merge(src, on="t.nosuch = s.id", when_matched_delete=True)


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_sql_statements(table: Table) -> None:
    from carbonstore.sql.dml_parse import parse_dml
    from carbonstore.sql.dml_run import run_dml

    store = table.store
    assert parse_dml("SELECT 1") is None
    assert parse_dml("DELETE FROM TABLE db.t WHERE SEGMENT.ID IN (1)") is None
    assert parse_dml("DELETE FROM TABLE db.t WHERE id = 1").verb == "DELETE"  # type: ignore[union-attr]
    run_dml(store, parse_dml("DELETE FROM db.t WHERE t.id < 10"))  # type: ignore[arg-type]
    run_dml(store, parse_dml("UPDATE db.t SET score = -1 WHERE id = 10"))  # type: ignore[arg-type]
    src = store.create_table("db.src", SCHEMA)
    load(src, rows([11, 12, 1000], tag="s"))
    run_dml(store, parse_dml(  # type: ignore[arg-type]
        "MERGE INTO db.t AS t USING db.src AS s ON t.id = s.id "
        "WHEN MATCHED AND s.id = 11 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET name = s.name "
        "WHEN NOT MATCHED THEN INSERT (id, score) VALUES (s.id, 0.5)"))
    got = _by_id(table)
    assert min(got) == 10 and got[10]["score"] == -1.0 and 11 not in got
    assert got[12]["name"] == "s5" and got[1000] == {"id": 1000, "name": None, "score": 0.5}
    with pytest.raises(UserError, match="the source must be a table"):
        run_dml(store, parse_dml(  # type: ignore[arg-type]
            "MERGE INTO db.t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE"))
