"""The located read in Arrow (segments/dml_read.py): every live row with the file and the
position it has there, checked against the data files themselves (no JVM)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from carbonstore import Store, Table
from carbonstore.pruning.plan import prune
from carbonstore.segments.arrow_read import Slice, plan_projections, plan_slices, read_row_groups
from carbonstore.segments.dml import delete_rows
from carbonstore.segments.dml_read import FILE, POS, located_batches, slice_positions
from carbonstore.store.alter import SUB_ACTIONS, alter_table
from tests.dml.rows import SCHEMA, load, rows


def _alter(table: Table, action: str, *args: str) -> Table:
    alter_table(table, SUB_ACTIONS[action][1](list(args)), operation=f"{action} {' '.join(args)}")
    return table.store.table(str(table.name))


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    load(t, rows(range(0, 300)), tasks=2)
    load(t, rows(range(300, 600)))
    gone = ", ".join(str(i) for i in range(0, 600, 9))
    delete_rows(t, f"id IN ({gone}) OR id IN (301, 302)")  # deltas of every file, no JVM
    t = _alter(t, "rename-column", "name", "label")  # the segments above: an old version
    t = _alter(t, "add-column", "flag int")
    t.append(pa.table({"id": pa.array(range(600, 650), pa.int64()), "label": ["x"] * 50,
                      "score": [1.0] * 50, "flag": pa.array([7] * 50, pa.int32())}))
    return t


def _located(table: Table, where: str | None) -> pa.Table:
    plan = prune(table, where)
    slices = [s for p in plan_slices(plan, max_bytes=1, projections=plan_projections(table, plan))
              for s in p]
    return pa.Table.from_batches(list(located_batches(table, slices)))


@pytest.mark.parametrize("where", [None, "id >= 250 AND id < 420"])
def test_each_row_is_at_its_position(table: Table, where: str | None) -> None:
    got = _located(table, where)
    plain = prune(table, where)
    slices = [s for p in plan_slices(plain, projections=plan_projections(table, plain)) for s in p]
    rows_read = pa.Table.from_batches(list(read_row_groups(table, slices)))
    # the same rows as the data source's reader, two columns more
    assert got.drop_columns([FILE, POS]).sort_by("id").to_pylist() \
        == rows_read.sort_by("id").to_pylist()
    deleted = {i for i in range(600) if i % 9 == 0 or i in (301, 302)}
    for path in set(got[FILE].to_pylist()):
        raw = pq.read_table(table.store.sfs.fs.open_input_file(path), columns=["id"])
        mine = got.filter(pa.compute.equal(got[FILE], path))
        ids = raw["id"].to_numpy()
        assert (ids[mine[POS].to_numpy()] == mine["id"].to_numpy()).all()  # the row is there
        assert len(set(mine[POS].to_pylist())) == mine.num_rows
        if where is None:  # every live row of the file, none deleted
            assert sorted(mine["id"].to_pylist()) == sorted(i for i in ids.tolist()
                                                             if i not in deleted)
    assert not deleted & set(got["id"].to_pylist())
    assert set(got["flag"].to_pylist()) <= {None, 7}  # projected by column id


def test_slice_positions_equal_a_model() -> None:
    rnd = random.Random(7)
    for _ in range(200):
        counts = [rnd.randint(1, 30) for _ in range(rnd.randint(1, 4))]
        starts = np.concatenate([[0], np.cumsum(counts)])
        groups = []
        for rg in sorted(rnd.sample(range(len(counts)), rnd.randint(1, len(counts)))):
            n = counts[rg]
            if rnd.random() < 0.5:
                groups.append((rg, None))
                continue
            cuts = sorted(rnd.sample(range(n + 1), 2 * rnd.randint(1, (n + 1) // 2)))
            ranges = tuple((a, b) for a, b in zip(cuts[::2], cuts[1::2], strict=True) if b > a)
            groups.append((rg, ranges or ((0, n),)))
        deleted = None
        if rnd.random() < 0.6:
            deleted = np.array(sorted(rnd.sample(range(int(starts[-1])),
                                                 rnd.randint(0, int(starts[-1])))), np.int64)
        want = []
        for rg, ranges in groups:
            for p in range(int(starts[rg]), int(starts[rg + 1])):
                inside = ranges is None or any(a <= p - starts[rg] < b for a, b in ranges)
                if inside and (deleted is None or p not in set(deleted.tolist())):
                    want.append(p)
        got = slice_positions(counts, Slice("f", tuple(groups)), deleted)
        assert got.tolist() == want
