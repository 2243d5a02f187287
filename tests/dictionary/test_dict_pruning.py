"""Filters on dictionary columns prune through their surrogates, and never lose a row."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from carbonstore import Store, Table
from carbonstore.dictionary import prepare_dictionaries
from carbonstore.pruning.plan import prune
from carbonstore.segments.commit import begin_segment, commit_segment
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import write_task
from carbonstore.spark.reader import plan_partitions, read_row_groups


def _load(table: Table, data: pa.Table) -> None:
    entry, _ = begin_segment(table, overwrite=False, hold_lock=False)
    prepare_dictionaries(table, {"city": data.column("city")}, entry.load_name)
    settings = write_settings(table, entry.load_name, parse_load_options(table, {}))
    res = write_task(data.to_batches(max_chunksize=100), settings, task_id="00000-0")
    commit_segment(table, entry.load_name, [res])


@pytest.fixture
def cities(store: Store) -> tuple[Table, pa.Table]:
    """Four segments of 400 rows; each adds its own cities, 0 and 3 also hold 'shared'."""
    t = store.create_table(
        "db.c", "id long not null, city string",
        properties={"dictionary_include": "city", "bloom_columns": "city",
                    "blocklet_size_in_mb": "1", "page_rows": "50"})
    parts = []
    for k in range(4):
        ids = list(range(k * 400, (k + 1) * 400))
        city = [f"c{k}_{i % 7}" if i % 11 else None for i in range(400)]
        if k in (0, 3):
            city = [c if i % 13 else "shared" for i, c in enumerate(city)]
        part = pa.table({"id": pa.array(ids, pa.int64()), "city": city})
        _load(t, part)
        parts.append(part)
    return t, pa.concat_tables(parts)


@pytest.mark.parametrize(("where", "segments"), [
    ("city = 'c2_1'", 1),
    ("city = 'shared'", 2),
    ("city = 'nope'", 0),
    ("city IN ('c1_0', 'c3_2', 'nope')", 2),
    ("city IN ('nope', 'other')", 0),
    ("city = 'c1_3' OR id = 5", 2),
    ("city = 'c0_4' AND id > 1000", 0),
    ("city <> 'c1_0'", 4),  # not translated: widened
    ("city > 'c2'", 4),
    ("city IS NULL", 4),
])
def test_dictionary_filters_prune_by_surrogates(
    cities: tuple[Table, pa.Table], where: str, segments: int
) -> None:
    table, data = cities
    plan = prune(table, where)
    assert plan.levels["segments"].kept == segments
    read = [b for p in plan_partitions(plan) for b in read_row_groups(table, p.slices)]
    got = set(pa.Table.from_batches(read).column("id").to_pylist()) if read else set()
    want = _matching_ids(data, where)
    assert want <= got  # inclusive: every matching row is in the plan


def test_in_with_many_values_prunes_as_an_interval(cities: tuple[Table, pa.Table]) -> None:
    table, _ = cities
    many = ", ".join(f"'c2_{i}'" for i in range(7)) + ", " + ", ".join(
        f"'x{i}'" for i in range(70))
    plan = prune(table, f"city IN ({many})")
    assert plan.levels["segments"].kept == 1  # segment 2's surrogates only


def _matching_ids(data: pa.Table, where: str) -> set[int]:
    city, ids = data.column("city"), data.column("id")
    masks = {
        "city = 'c2_1'": pc.equal(city, "c2_1"),
        "city = 'shared'": pc.equal(city, "shared"),
        "city = 'nope'": pc.equal(city, "nope"),
        "city IN ('c1_0', 'c3_2', 'nope')": pc.is_in(city, pa.array(["c1_0", "c3_2", "nope"])),
        "city IN ('nope', 'other')": pc.is_in(city, pa.array(["nope", "other"])),
        "city = 'c1_3' OR id = 5": pc.or_(pc.equal(city, "c1_3"), pc.equal(ids, 5)),
        "city = 'c0_4' AND id > 1000": pc.and_(pc.equal(city, "c0_4"), pc.greater(ids, 1000)),
        "city <> 'c1_0'": pc.not_equal(city, "c1_0"),
        "city > 'c2'": pc.greater(city, "c2"),
        "city IS NULL": pc.is_null(city),
    }
    return set(pc.filter(ids, pc.fill_null(masks[where], False)).to_pylist())
