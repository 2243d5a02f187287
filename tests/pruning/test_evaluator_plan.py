"""The pruning plan on one known file: counters per level, merged page row ranges, blooms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from carbonstore.errors import ExpressionError
from carbonstore.expressions.bind import bind
from carbonstore.expressions.expr import Not
from carbonstore.expressions.parser import parse_where
from carbonstore.indexfiles.arrays import IndexArrays, load_arrays
from carbonstore.indexfiles.footer import read_file_index
from carbonstore.indexfiles.packing import pack
from carbonstore.pruning.planner import prune_row_groups, selections
from carbonstore.store.schema import TableSchema, parse_schema_string

SCHEMA = TableSchema(
    database="db", table="t", columns=tuple(parse_schema_string("i int, d double, s string, n long"))
)


@pytest.fixture(scope="module")
def arrays(tmp_path_factory: pytest.TempPathFactory) -> IndexArrays:
    """1000 rows, row groups of 300, pages of 50, bloom on s; n is null in row group 0."""
    n = 1000
    table = pa.table({
        "i": pa.array(np.arange(n), pa.int32()),
        "d": pa.array(np.arange(n) * 1.0),
        "s": pa.array([f"k{j:05d}" for j in range(n)]),
        "n": pa.array([None if j < 300 else j for j in range(n)], pa.int64()),
    })
    path = str(Path(tmp_path_factory.mktemp("plan")) / "a.parquet")
    pq.write_table(table, path, row_group_size=300, max_rows_per_page=50, write_page_index=True,
                   bloom_filter_options={"s": {"ndv": 1000, "fpp": 0.01}})
    header, region = pack([read_file_index(pafs.LocalFileSystem(), path)])
    return load_arrays(header, lambda off, ln: region[off : off + ln])


def _plan(arrays: IndexArrays, where: str, **kw: Any) -> Any:
    return prune_row_groups(bind(parse_where(where), SCHEMA), [arrays], **kw)


def test_min_max_and_page_ranges(arrays: IndexArrays) -> None:
    plan = _plan(arrays, "i > 650")
    assert plan.kept.tolist() == [False, False, True, True]
    assert plan.row_groups.dropped_by_minmax == 2 and plan.row_groups.kept == 2
    assert plan.row_ranges[2].tolist() == [[50, 300]]  # adjacent pages merged
    assert plan.row_ranges[3].tolist() == [[0, 100]]
    assert (plan.pages.total, plan.pages.kept, plan.pages.dropped_by_minmax) == (400, 350, 50)


def test_two_columns_intersect_page_fragments(arrays: IndexArrays) -> None:
    plan = _plan(arrays, "(i BETWEEN 120 AND 130 OR i >= 990) AND s < 'k00125'")
    assert plan.kept.tolist() == [True, False, False, False]
    assert plan.row_ranges[0].tolist() == [[100, 150]]


def test_bloom_drops_what_min_max_keeps(arrays: IndexArrays) -> None:
    plan = _plan(arrays, "s IN ('k00500x', 'k00501y')")
    assert plan.row_groups.dropped_by_minmax == 3 and plan.row_groups.dropped_by_bloom == 1
    assert not plan.kept.any() and plan.row_ranges == {}
    assert _plan(arrays, "s = 'k00500x'", use_bloom=False).row_groups.kept == 1
    assert _plan(arrays, "s = 'k00500'").kept.tolist() == [False, True, False, False]


def test_null_counts(arrays: IndexArrays) -> None:
    plan = _plan(arrays, "n = 5 OR n > 900")
    assert plan.row_groups.dropped_by_counts == 1  # row group 0 holds only nulls
    assert _plan(arrays, "n IS NULL").kept.tolist() == [True, False, False, False]
    assert _plan(arrays, "NOT (n IS NOT NULL)").kept.tolist() == [True, False, False, False]


def test_float_max_cannot_exclude_nan_without_nan_count(arrays: IndexArrays) -> None:
    # pyarrow writes no nan_count: a NaN may hide in any row group, and NaN > 2000.0
    assert _plan(arrays, "d > 2000.0").kept.all()
    assert not _plan(arrays, "d < -1.0").kept.any()


def test_several_parts_are_one_pass(arrays: IndexArrays) -> None:
    plan = prune_row_groups(bind(parse_where("i = 301"), SCHEMA), [arrays, arrays])
    assert plan.part.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert plan.row_group.tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert np.flatnonzero(plan.kept).tolist() == [1, 5]
    assert plan.row_ranges[5].tolist() == [[0, 50]]


def test_unbound_expression_is_refused(arrays: IndexArrays) -> None:
    with pytest.raises(ExpressionError, match="bound expression"):
        prune_row_groups(Not(parse_where("i = 1")), [arrays])
    with pytest.raises(ExpressionError, match="bind the expression"):
        prune_row_groups(parse_where("i = 1"), [arrays])


def test_selections_name_file_and_row_group(arrays: IndexArrays) -> None:
    plan = _plan(arrays, "i >= 950")
    (sel,) = selections(plan, [arrays])
    assert sel.file.endswith("a.parquet") and sel.row_group == 3 and sel.num_rows == 100
    assert sel.row_ranges.tolist() == [[50, 100]]
