"""Property: add-segment of ordinary (nullable) Parquet, store-written inserts, ADD COLUMN
with defaults, RENAME, WIDEN, then UPDATE / MERGE / DELETE / compaction in any order; after
every step the table's rows equal DuckDB's over the same logical rows (the same statements
run on a DuckDB table).

The table has ``id long not null``: the adopted files store it as a nullable field, the
store's own as a NOT NULL one, so every statement that reads rows of several segments
together reads files of both nullabilities and of several schema versions.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from schema_helpers import read, reopen

from carbonstore import Store, Table
from carbonstore.segments.addsegment import add_segment
from carbonstore.segments.compaction import compact
from carbonstore.segments.dml import delete_rows
from carbonstore.store.alter import SUB_ACTIONS, alter_table
from carbonstore.store.schema import arrow_type

RENAMES = ("w", "x", "y")

OPS = st.one_of(
    st.tuples(st.just("adopt"), st.integers(1, 5)),
    st.tuples(st.just("insert"), st.integers(1, 4)),
    st.tuples(st.just("add"), st.integers(1, 9)),
    st.tuples(st.just("rename"), st.sampled_from(RENAMES)),
    st.tuples(st.just("widen")),
    st.tuples(st.just("update"), st.integers(2, 4), st.integers(0, 3)),
    st.tuples(st.just("merge"), st.integers(2, 4)),
    st.tuples(st.just("delete"), st.integers(3, 5), st.integers(0, 4)),
    st.tuples(st.just("compact")),
)


class World:
    """The store's table and the DuckDB table the same statements run on."""

    def __init__(self, tmp: str) -> None:
        self.tmp = Path(tmp)
        self.store = Store(f"{tmp}/s")
        self.t: Table = self.store.create_table("db.m", "id long not null, v long, n int, s string")
        self.db = duckdb.connect()
        self.db.execute("CREATE TABLE t (id BIGINT NOT NULL, v BIGINT, n INTEGER, s VARCHAR)")
        self.next_id = 0
        self.files = 0
        self.added = 0

    def rows(self, count: int, *, nullable: bool) -> pa.Table:
        """``count`` new rows of the current columns (nulls in the nullable ones)."""
        cols: dict[str, pa.Array] = {}
        ids = list(range(self.next_id, self.next_id + count))
        self.next_id += count
        for c in self.t.schema.columns:
            t = arrow_type(c.type)
            if c.name == "id":
                values: list[Any] = ids
            elif pa.types.is_integer(t):
                values = [None if i % 4 == 1 else i * 3 for i in ids]
            else:
                values = [None if i % 5 == 2 else f"s{i % 3}" for i in ids]
            cols[c.name] = pa.array(values, t)
        schema = pa.schema([pa.field(n, a.type, nullable=nullable or n != "id")
                            for n, a in cols.items()])
        return pa.Table.from_arrays(list(cols.values()), schema=schema)

    def mirror(self, data: pa.Table) -> None:
        self.db.register("src", data)
        self.db.execute(f"INSERT INTO t ({', '.join(data.column_names)}) SELECT * FROM src")
        self.db.unregister("src")

    def apply(self, op: tuple[Any, ...]) -> None:  # noqa: C901 - one branch per statement
        kind = op[0]
        names = self.t.schema.column_names
        if kind == "adopt":
            data = self.rows(op[1], nullable=True)
            folder = self.tmp / f"in{self.files}"
            folder.mkdir()
            self.files += 1
            pq.write_table(data, folder / "part.parquet")
            add_segment(self.t, str(folder))
            self.mirror(data)
        elif kind == "insert":
            data = self.rows(op[1], nullable=False)
            self.t.merge(data, on=["id"], when_not_matched_insert="*")
            self.mirror(data)
        elif kind == "add":
            self.added += 1
            name = f"c{self.added}"
            alter_table(self.t, SUB_ACTIONS["add-column"][1]([f"{name} long default {op[1]}"]),
                        operation="add")
            self.db.execute(f"ALTER TABLE t ADD COLUMN {name} BIGINT DEFAULT {op[1]}")
        elif kind == "rename":
            old = next(n for n in names if n not in ("id", "v", "n") and not n.startswith("c"))
            if op[1] in names:
                return
            alter_table(self.t, SUB_ACTIONS["rename-column"][1]([old, op[1]]), operation="rename")
            self.db.execute(f"ALTER TABLE t RENAME COLUMN {old} TO {op[1]}")
        elif kind == "widen":
            if str(self.t.schema.column("n").type) != "int":
                return
            alter_table(self.t, SUB_ACTIONS["widen"][1](["n", "long"]), operation="widen")
            self.db.execute("ALTER TABLE t ALTER COLUMN n TYPE BIGINT")
        elif kind == "update":
            _, k, r = op
            where = f"id % {k} = {r % k}"
            self.t.update({"v": "v + 1", "n": "n * 2"}, where=where)
            self.db.execute(f"UPDATE t SET v = v + 1, n = n * 2 WHERE {where}")
        elif kind == "merge":
            live = [r[0] for r in self.db.execute("SELECT id FROM t ORDER BY id").fetchall()]
            fresh = self.rows(2, nullable=False)
            hit = live[:: op[1]][:3]
            old = self.db.execute(f"SELECT * FROM t WHERE id IN ({', '.join(map(str, hit))})"
                                  ).to_arrow_table() if hit else None
            source = fresh if old is None else pa.concat_tables(
                [old.select(fresh.column_names).cast(fresh.schema), fresh])
            self.t.merge(source, on=["id"], when_matched_update={"v": "t.v + 100"},
                         when_not_matched_insert="*")
            if hit:
                self.db.execute(f"UPDATE t SET v = v + 100 WHERE id IN "
                                f"({', '.join(map(str, hit))})")
            self.mirror(fresh)
        elif kind == "delete":
            _, k, r = op
            where = f"id % {k} = {r % k}"
            hit = [row[0] for row in self.db.execute(f"SELECT id FROM t WHERE {where}").fetchall()]
            # the same rows by a condition the index binds (no Spark)
            delete_rows(self.t, f"id IN ({', '.join(map(str, hit or [-1]))})")
            self.db.execute(f"DELETE FROM t WHERE {where}")
        elif kind == "compact":
            readable = [e.load_name for e in self.t.status.read().readable]
            if len(readable) < 2:
                return
            compact(self.t, "custom", segment_ids=readable)
        self.t = reopen(self.t)

    def check(self) -> None:
        got, _ = read(self.t)
        want = self.db.execute("SELECT * FROM t ORDER BY id").to_arrow_table()
        assert got.column_names == want.column_names
        assert got.sort_by("id").to_pylist() == want.to_pylist()


def _run(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = World(tmp)
        for op in ops:
            world.apply(op)
            world.check()


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=3, max_size=9))
@example([("adopt", 3), ("add", 3), ("update", 2, 1), ("update", 2, 1), ("merge", 2),
          ("compact",)])
@example([("adopt", 4), ("insert", 2), ("rename", "w"), ("widen",), ("delete", 3, 1),
          ("add", 5), ("adopt", 3), ("merge", 3), ("update", 3, 2), ("compact",),
          ("delete", 4, 0)])
def test_mixed_segments_answer_like_duckdb(ops: list[tuple[Any, ...]]) -> None:
    _run(ops)


@pytest.mark.long
@pytest.mark.usefixtures("spark")  # its DML statements run on Spark (the session's one)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=3, max_size=16))
def test_mixed_segments_answer_like_duckdb_long(ops: list[tuple[Any, ...]]) -> None:
    _run(ops)
