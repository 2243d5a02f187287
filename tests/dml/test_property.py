"""Random sequences of load / delete / update / merge / compaction / time travel: the table's
answers equal DuckDB's over the same logical rows (hypothesis, CI-sized)."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.pruning.plan import prune
from carbonstore.segments.compaction import compact
from carbonstore.segments.dml import delete_rows
from tests.dml.rows import SCHEMA, load, read_live

IDS = st.integers(min_value=0, max_value=40)
LEAF = st.one_of(
    st.builds(lambda op, v: f"id {op} {v}", st.sampled_from(["<", "<=", ">", ">=", "=", "<>"]), IDS),
    st.builds(lambda v: f"name = 'n{v}'", st.integers(0, 6)),
    st.just("name IS NULL"),
    st.builds(lambda v: f"score > {v}", st.integers(0, 10)),
)
WHERE = st.one_of(LEAF, st.builds(lambda a, b, op: f"({a}) {op} ({b})", LEAF, LEAF,
                                  st.sampled_from(["AND", "OR"])))


def _rows(ids: list[int], salt: int) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([None if (i + salt) % 5 == 0 else f"n{(i + salt) % 7}" for i in ids],
                         pa.string()),
        "score": pa.array([float((i * 7 + salt) % 13) for i in ids], pa.float64()),
    })


OPS = st.lists(st.one_of(
    st.tuples(st.just("load"), st.lists(IDS, min_size=1, max_size=25), st.integers(0, 9)),
    st.tuples(st.just("delete"), WHERE),
    st.tuples(st.just("update"), WHERE, st.integers(-3, 3)),
    st.tuples(st.just("merge"), st.lists(IDS, min_size=1, max_size=12, unique=True),
              st.integers(0, 9), st.booleans()),
    st.tuples(st.just("compact")),
    st.tuples(st.just("travel"), st.integers(0, 1000)),
), min_size=2, max_size=9)


def _oracle(con: Any) -> list[tuple[Any, ...]]:
    return sorted(con.execute("SELECT id, name, score FROM t").fetchall(), key=repr)


def _table_rows(table: Any) -> list[tuple[Any, ...]]:
    got = read_live(table)
    return sorted(zip(got["id"].to_pylist(), got["name"].to_pylist(), got["score"].to_pylist(),
                      strict=True), key=repr)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(ops=OPS)
@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_dml_matches_duckdb(tmp_path_factory: pytest.TempPathFactory, ops: list[Any]) -> None:
    store = Store(str(tmp_path_factory.mktemp("prop") / "store"))
    table = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id BIGINT, name VARCHAR, score DOUBLE)")
    history: list[tuple[int, list[tuple[Any, ...]]]] = [(table.status.read().version, [])]
    for op in ops:
        kind = op[0]
        if kind == "load":
            data = _rows(op[1], op[2])
            load(table, data)
            con.execute("INSERT INTO t SELECT * FROM data")
        elif kind == "delete":
            delete_rows(table, op[1])
            con.execute(f"DELETE FROM t WHERE {op[1]}")
        elif kind == "update":
            table.update({"score": f"score + {op[2]}", "name": "concat(name, 'u')"}, where=op[1])
            con.execute(f"UPDATE t SET score = score + {op[2]}, name = name || 'u' "  # Spark's concat: NULL in, NULL out
                        f"WHERE {op[1]}")
        elif kind == "merge":
            src = _rows(op[1], op[2])
            if op[3]:  # upsert
                table.merge(src, on=["id"], when_matched_update={"score": "s.score",
                                                                 "name": "s.name"},
                            when_not_matched_insert="*")
                con.execute("MERGE INTO t USING src AS s ON t.id = s.id WHEN MATCHED THEN "
                            "UPDATE SET score = s.score, name = s.name WHEN NOT MATCHED THEN "
                            "INSERT VALUES (s.id, s.name, s.score)")
            else:  # delete the matched rows whose source score is odd
                table.merge(src, on="t.id = s.id", when_matched_delete="s.score % 2 = 1")
                con.execute("MERGE INTO t USING src AS s ON t.id = s.id "
                            "WHEN MATCHED AND s.score % 2 = 1 THEN DELETE")
        elif kind == "compact":
            ids = [e.load_name for e in table.status.read().readable]
            if len(ids) >= 2:
                compact(table, "custom", segment_ids=ids)
        else:  # time travel to an earlier version: the rows of then
            version, want = history[op[1] % len(history)]
            assert _table_rows(table.as_of(version)) == want
            continue
        want = _oracle(con)
        assert _table_rows(table) == want, op
        plan = prune(table)
        assert plan.levels["rows"].total - plan.deleted_rows == len(want)
        history.append((table.status.read().version, want))
    for version, want in history[-3:]:
        assert _table_rows(table.as_of(version)) == want
