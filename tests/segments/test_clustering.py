"""Clustering compaction in this process (no JVM): what it rewrites, what it records, that
pruning after it keeps every matching row (DuckDB and the pruning oracle), and that it makes
filters on a non-leading column selective."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from carbonstore import Store, Table
from carbonstore.cli import main
from carbonstore.errors import CompactionError, SchemaError
from carbonstore.pruning.plan import prune
from carbonstore.segments.cluster_spec import ClusterSpec, segment_clustering
from carbonstore.segments.clustering import cluster_local, grids_of
from carbonstore.segments.clustering_report import clustering_report
from carbonstore.segments.compaction import (
    SegmentOutput,
    compact,
    maybe_auto_compact,
    segment_data_files,
    write_segment,
)
from carbonstore.segments.curves import curve_keys
from carbonstore.segments.dml import delete_rows
from carbonstore.spark.reader import (
    arrow_read_schema,
    plan_partitions,
    plan_projections,
    read_row_groups,
)
from carbonstore.store import LoadEntry
from carbonstore.store.tablestatus import COMPACTED, SUCCESS

SCHEMA = "a long, b long, c string, d double"


def frame(n: int, seed: int, *, a_offset: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "a": rng.integers(0, 200, n) + a_offset,
        "b": rng.integers(0, 200, n),
        "c": pa.array([f"k{x:03d}" for x in rng.integers(0, 300, n)]),
        "d": rng.normal(size=n),
    })


def load(table: Table, data: pa.Table) -> LoadEntry:
    """Commit one segment as a load does (small batches: the writer cuts row groups)."""
    entry = table.status.allocate()
    out = write_segment(table, entry.load_name, [data.to_batches(max_chunksize=4096)])
    return table.status.set_status(
        entry.load_name, SUCCESS, timestamp=entry.load_start_time + 1, row_count=out.row_count,
        data_size=out.data_size, index_size=out.index_size, segment_file=out.segment_file,
    )


def live(table: Table, where: Any = None) -> pa.Table:
    """The rows a scan planned for ``where`` reads (every row of every kept row range)."""
    plan = prune(table, where)
    slices = [s for p in plan_partitions(plan, projections=plan_projections(table, plan))
              for s in p.slices]
    return pa.Table.from_batches(list(read_row_groups(table, slices)),
                                 schema=arrow_read_schema(table))


def clustered(table: Table) -> dict[str, str | None]:
    return {e.load_name: (None if (s := segment_clustering(e)) is None else s.describe())
            for e in table.status.read().entries if e.readable}


def tasks_merger(n: int) -> Any:
    """The local cluster merger cut into ``n`` units (as Spark tasks would be)."""
    def run(table: Table, sources: Sequence[LoadEntry], output: str,
            spec: ClusterSpec) -> SegmentOutput:
        return cluster_local(table, sources, output, spec, tasks=n)
    return run


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("t", SCHEMA, properties={"page_rows": "500"})
    for s in range(3):
        load(t, frame(3000, s))
    return t


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([(c, "ascending") for c in t.column_names])


@pytest.mark.parametrize("curve", ["zorder", "hilbert"])
def test_cluster_rewrites_along_the_curve_once(table: Table, curve: str) -> None:
    before = _sorted(live(table))
    result = compact(table, "cluster", by=["A", "b"], curve=curve, cluster_merger=tasks_merger(3))
    assert [(m.output, m.sources) for m in result.merged] == [("0.1", ("0", "1", "2"))]
    assert result.to_json()["merged"][0]["clustering"] == f"{curve}(a,b)"
    snap = table.status.read()
    assert {e.load_name: e.status for e in snap.entries} == {
        "0": COMPACTED, "1": COMPACTED, "2": COMPACTED, "0.1": SUCCESS}
    assert snap.get("0.1").extra["clustering"] == {"columns": ["a", "b"], "curve": curve}
    assert _sorted(live(table)).equals(before)
    # the tasks are boxes of (a, b) of about equal rows (the top of the k-d tree), and
    # the files follow the curve through them
    data = pa.concat_tables(pq.read_table(p) for p in segment_data_files(table, "0.1"))
    spec = ClusterSpec(columns=("a", "b"), curve=curve)  # type: ignore[arg-type]
    files = [pq.read_table(p) for p in sorted(segment_data_files(table, "0.1"))]
    assert len(files) == 3
    assert all(abs(f.num_rows - 3000) <= 300 for f in files), [f.num_rows for f in files]
    for f, g in itertools.combinations(files, 2):  # apart on some column: disjoint boxes
        assert any(pc.max(f[c]).as_py() < pc.min(g[c]).as_py()
                   or pc.max(g[c]).as_py() < pc.min(f[c]).as_py() for c in "ab")
    grids = grids_of(data, spec)  # the sample is every row here: the same grid
    middles = [np.median(curve_keys([f["a"], f["b"]], grids, curve)) for f in files]  # type: ignore[arg-type]
    assert middles == sorted(middles)
    # clustered already: nothing to do, nothing written
    version = table.status.read().version
    assert compact(table, "cluster", by=["a", "b"], curve=curve).merged == ()
    assert table.status.read().version == version


def test_incremental_clusters_only_new_or_other_clustering(table: Table) -> None:
    compact(table, "cluster", by=["a", "b"])
    load(table, frame(1000, 7))
    result = compact(table, "cluster", by=["a", "b"])
    assert [(m.output, m.sources) for m in result.merged] == [("3.1", ("3",))]
    assert clustered(table) == {"0.1": "zorder(a,b)", "3.1": "zorder(a,b)"}
    # another curve or other columns: every segment is rewritten, into one
    result = compact(table, "cluster", by=["a", "b"], curve="hilbert")
    assert [(m.output, m.sources) for m in result.merged] == [("0.2", ("0.1", "3.1"))]
    assert clustered(table) == {"0.2": "hilbert(a,b)"}
    assert live(table).num_rows == 10_000


def test_where_chooses_segments_that_may_match(store: Store) -> None:
    t = store.create_table("w", SCHEMA)
    for k in range(3):
        load(t, frame(500, k, a_offset=1000 * k))
    result = compact(t, "cluster", by=["b", "c"], where="a >= 2000")
    assert [m.sources for m in result.merged] == [("2",)]
    assert clustered(t) == {"0": None, "1": None, "2.1": "zorder(b,c)"}


def test_property_is_honoured_by_every_compaction(store: Store) -> None:
    t = store.create_table("p", SCHEMA, properties={
        "clustering.columns": "b,c", "clustering.curve": "Hilbert",
        "auto_load_merge": "true", "compaction_level_threshold": "2,1"})
    load(t, frame(800, 1))
    load(t, frame(800, 2))
    result = maybe_auto_compact(t)
    assert result is not None and [m.output for m in result.merged] == ["0.1"]
    assert clustered(t) == {"0.1": "hilbert(b,c)"}
    load(t, frame(800, 3))
    result = compact(t, "cluster")  # the property's columns and curve
    assert [m.sources for m in result.merged] == [("2",)]
    assert clustered(t) == {"0.1": "hilbert(b,c)", "2.1": "hilbert(b,c)"}
    assert live(t).num_rows == 2400


def test_deleted_rows_are_not_clustered(table: Table) -> None:
    delete_rows(table, "b < 20")
    want = _sorted(live(table))
    result = compact(table, "cluster", by=["c", "d"], cluster_merger=tasks_merger(2))
    assert result.merged[0].row_count == want.num_rows < 9000
    assert _sorted(live(table)).equals(want)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"by": ["nope"]}, "has no column 'nope'"),
    ({"by": ["a", "b", "c", "d", "a"]}, "at most 4 columns"),
    ({"by": ["a", "A"]}, "name a column twice"),
    ({"by": ["a"], "curve": "peano"}, "unknown curve"),
    ({}, "no clustering.columns property"),
])
def test_bad_clustering_is_refused(table: Table, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(CompactionError, match=message):
        compact(table, "cluster", **kwargs)
    assert clustered(table) == {"0": None, "1": None, "2": None}


def test_cluster_options_only_for_cluster(table: Table) -> None:
    with pytest.raises(CompactionError, match="only for --type cluster"):
        compact(table, "major", by=["a"])


def test_property_checked_at_create(store: Store) -> None:
    with pytest.raises(SchemaError, match="unknown column 'x'"):
        store.create_table("bad", SCHEMA, properties={"clustering.columns": "a,x"})
    with pytest.raises(SchemaError, match="zorder or hilbert"):
        store.create_table("bad", SCHEMA, properties={"clustering.columns": "a",
                                                      "clustering.curve": "peano"})


def test_cli_cluster_show_segments_and_describe(table: Table, capsys: Any) -> None:
    args = ["--store", table.store.location]
    assert main(["compact", "t", "--type", "cluster", "--by", "a,b", "--curve", "hilbert",
                 "--engine", "local", "--json", *args]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["merged"][0]["clustering"] == "hilbert(a,b)"
    assert main(["show-segments", "t", "--json", *args]) == 0
    rows = {r["id"]: r["clusteredBy"] for r in json.loads(capsys.readouterr().out)}
    assert rows == {"0": None, "1": None, "2": None, "0.1": "hilbert(a,b)"}
    assert main(["describe", "t", "--clustering", "--json", *args]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["clusteredSegments"] == {"0.1": "hilbert(a,b)"}
    [seg] = info["clustering"]
    assert [f["column"] for f in seg["pointFilters"]] == ["a", "b"]
    assert main(["describe", "t", *args]) == 0
    assert "hilbert(a,b)" in capsys.readouterr().out
    code = main(["compact", "t", "--type", "cluster", "--by", "zz", "--engine", "local", *args])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no column 'zz'" in err


# ---- soundness: every matching row is kept; answers equal DuckDB's -------------------------
_FILTERS = ["a = 17", "b = 17", "a = 17 and b = 33", "b between 40 and 45", "c = 'k123'",
            "c >= 'k290'", "d > 2.5", "a < 3 or b > 197", "b in (1, 2, 199)", "c is null",
            "not (b <> 5)", "d is not null and a = 150"]


@pytest.mark.parametrize("curve", ["zorder", "hilbert"])
def test_answers_equal_duckdb_after_clustering(table: Table, curve: str) -> None:
    full = live(table)
    compact(table, "cluster", by=["a", "b", "c"], curve=curve, cluster_merger=tasks_merger(3))
    con = duckdb.connect()
    con.register("everything", full)
    for where in _FILTERS:
        kept = live(table, where)
        con.register("kept", kept)
        sql = "SELECT count(*), sum(a), sum(b), min(c), sum(d) FROM {} WHERE " + where
        got, want = con.execute(sql.format("kept")).fetchone(), con.execute(
            sql.format("everything")).fetchone()
        assert got[:4] == want[:4] and (got[4] is None) == (want[4] is None), where
        if want[4] is not None:
            assert got[4] == pytest.approx(want[4])


# ---- clustering makes a filter on the second column selective ------------------------------
def _kept(table: Table, where: str) -> tuple[float, float]:
    levels = prune(table, where).levels
    return (levels["row_groups"].kept / levels["row_groups"].total,
            levels["rows"].kept / levels["rows"].total)


@pytest.mark.parametrize("curve", ["zorder", "hilbert"])
def test_point_filter_on_second_column_keeps_far_fewer_row_groups(
    store: Store, curve: str
) -> None:
    t = store.create_table("big", "a long, b long, c long, d long, e string",
                           properties={"blocklet_size_in_mb": "1", "page_rows": "2000"})
    rng = np.random.default_rng(5)
    for _ in range(2):  # loads sorted on a, as SORT_COLUMNS a would leave them
        a = np.sort(rng.integers(0, 1000, 150_000))
        load(t, pa.table({"a": a, "b": rng.integers(0, 1000, len(a)),
                          "c": rng.integers(0, 50, len(a)), "d": rng.integers(0, 10**6, len(a)),
                          "e": np.char.mod("pad-%030d", np.arange(len(a)))}))  # ~1 MB / 20k rows
    filters = [f"b = {v}" for v in (3, 250, 501, 777, 998)]
    before = np.mean([_kept(t, w) for w in filters], axis=0)
    assert before[0] == 1.0  # sorted on a: every row group holds every b
    compact(t, "cluster", by=["a", "b"], curve=curve)
    after = np.mean([_kept(t, w) for w in filters], axis=0)
    rgs = prune(t).levels["row_groups"].total
    assert rgs >= 15
    # measured before the box layout: Z-order kept 40% of row groups and 14% of rows,
    # Hilbert 28% and 8%
    assert after[0] <= 0.45 * before[0] and after[1] <= 0.2 * before[1], (before, after)
    report = {c.column: c for c in clustering_report(t)[0].columns}
    assert report["b"].pages_kept <= 0.2 * report["b"].pages
    # the first column stays selective too
    assert np.mean([_kept(t, f"a = {v}")[1] for v in (3, 500, 998)]) <= 0.2



def test_property_follows_a_rename_and_blocks_a_drop(table: Table) -> None:
    from carbonstore.store.alter import alter_table, drop_columns, rename_column, set_properties

    alter_table(table, set_properties({"clustering.columns": "a,c"}), operation="ALTER")
    t = table.store.table("t")
    compact(t, "cluster")
    alter_table(t, rename_column("c", "code"), operation="ALTER")
    t = table.store.table("t")
    assert t.schema.properties["clustering.columns"] == "a,code"
    with pytest.raises(SchemaError, match="unknown column 'a'"):
        alter_table(t, drop_columns(["a"]), operation="ALTER")
    # segments clustered under the old name are clustered again under the new one
    result = compact(t, "cluster", cluster_merger=tasks_merger(2))
    assert [m.sources for m in result.merged] == [("0.1",)]
    assert clustered(t) == {"0.2": "zorder(a,code)"}
    assert live(t).num_rows == 9000


def test_dictionary_column_clusters_on_surrogates(store: Store) -> None:
    from tests.dml.rows import load as load_values
    from tests.dml.rows import rows as value_rows

    t = store.create_table("dict", "id long not null, name string, score double", properties={
        "dictionary_include": "name", "page_rows": "100"})
    load_values(t, value_rows(range(0, 3000), tag="x"))
    load_values(t, value_rows(range(3000, 6000), tag="y"))
    want = _sorted(live(t))
    compact(t, "cluster", by=["name", "score"], curve="hilbert", cluster_merger=tasks_merger(2))
    assert clustered(t) == {"0.1": "hilbert(name,score)"}
    assert _sorted(live(t)).equals(want)
    kept = live(t, "name = 'y3'")
    assert kept.num_rows < want.num_rows / 3  # the surrogates' min/max prune
    assert kept.filter(pa.compute.equal(kept["name"], "y3")).num_rows == want.filter(
        pa.compute.equal(want["name"], "y3")).num_rows > 0


def test_each_source_file_is_read_once_whatever_the_units(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge is a shuffle: a source file is read by one map task and its rows sent to
    their units (each unit used to read every source file and keep its key range)."""
    from carbonstore.segments import clustering

    reads: list[str] = []
    real = clustering.read_source_rows

    def counted(fs: Any, files: Sequence[str], *args: Any, **kwargs: Any) -> pa.Table:
        reads.extend(files)
        return real(fs, files, *args, **kwargs)

    monkeypatch.setattr(clustering, "read_source_rows", counted)
    sources = [p for e in table.status.read().entries for p in segment_data_files(table, e.load_name)]
    before = _sorted(live(table))
    compact(table, "cluster", by=["a", "b"], cluster_merger=tasks_merger(4))
    assert sorted(reads) == sorted(sources)
    assert _sorted(live(table)).equals(before)
    assert len(segment_data_files(table, "0.1")) == 4  # one task per unit
