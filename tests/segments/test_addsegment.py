"""ADD SEGMENT and `index inspect` end to end (real files, real CLI process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from carbonstore import Store
from carbonstore.errors import SchemaError, UserError
from carbonstore.indexfiles.indexfile import load_index
from carbonstore.segments.addsegment import add_segment
from carbonstore.store.tablestatus import SUCCESS


def _write(path: Path, ids: list[int], names: list[str | None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array(names, pa.string())})
    pq.write_table(table, path, write_page_index=True, max_rows_per_page=2)


def test_add_segment_copies_indexes_and_commits(store: Store, tmp_path: Path) -> None:
    table = store.create_table("t", "id long not null, name string")
    _write(tmp_path / "in" / "a.parquet", [1, 2, 3], ["x", None, "z"])
    _write(tmp_path / "in" / "sub" / "b.parquet", [10, 11], ["p", "q"])
    entry = add_segment(table, str(tmp_path / "in"))
    assert entry.status == SUCCESS and entry.row_count == 5
    seg = Path(table.paths.segment_dir(entry.load_name))
    assert len(list(seg.glob("*.parquet"))) == 2
    arrays = load_index(store.sfs.fs, str(seg / entry.segment_file))
    col = arrays.column("id")
    assert sorted(zip(col.min.tolist(), col.max.tolist(), strict=True)) == [(1, 3), (10, 11)]
    # the copies are plain Parquet with the original rows
    rows = pa.concat_tables(pq.read_table(p) for p in sorted(seg.glob("*.parquet")))
    assert sorted(rows.column("id").to_pylist()) == [1, 2, 3, 10, 11]


@pytest.mark.parametrize(
    ("table_schema", "match"),
    [
        ("id long not null, name string, extra int", "missing columns extra"),
        ("id long not null", "unknown columns name"),
        ("id int not null, name string", "column id is int64 but"),
    ],
)
def test_add_segment_refuses_other_schema(
    store: Store, tmp_path: Path, table_schema: str, match: str
) -> None:
    table = store.create_table("t", table_schema)
    _write(tmp_path / "in" / "a.parquet", [1], ["x"])
    with pytest.raises(SchemaError, match=match):
        add_segment(table, str(tmp_path / "in"))
    assert table.status.read().entries == ()


def test_add_segment_refuses_nulls_in_not_null_column(store: Store, tmp_path: Path) -> None:
    table = store.create_table("t", "id long not null, name string not null")
    _write(tmp_path / "in" / "a.parquet", [1, 2], ["x", None])
    with pytest.raises(SchemaError, match="NOT NULL column name"):
        add_segment(table, str(tmp_path / "in"))


def test_add_segment_empty_folder(store: Store, tmp_path: Path) -> None:
    table = store.create_table("t", "id long")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no .parquet files"):
        add_segment(table, str(tmp_path / "empty"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", *args], capture_output=True, text=True,
        check=False, timeout=120,
    )


def test_cli_add_segment_and_inspect_probe(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    pq.write_table(
        pa.table({"k": ["alpha", "beta", "gamma"]}), tmp_path / "k.parquet",
        bloom_filter_options={"k": {"ndv": 10, "fpp": 0.01}},
    )
    assert _cli("--store", store, "create", "t", "--schema", "k string").returncode == 0
    res = _cli("--store", store, "add-segment", "t", "--path", str(tmp_path / "k.parquet"), "--json")
    assert res.returncode == 0, res.stderr
    seg = json.loads(res.stdout)
    assert seg["id"] == "0" and seg["status"] == "Success" and seg["rows"] == 3
    merge = next((tmp_path / "store" / "default" / "t" / "Fact" / "Part0" / "Segment_0").glob(
        "*.carbonindexmerge"))
    for value, expected in (("beta", True), ("zzz-not-there", False)):
        res = _cli("index", "inspect", str(merge), "--probe", f"k={value}", "--json")
        assert res.returncode == 0, res.stderr
        col = json.loads(res.stdout)["files"][0]["row_groups"][0]["columns"][0]
        assert col["min"] == "alpha" and col["max"] == "gamma"
        assert col["bloom"]["might_contain"] is expected
    res = _cli("index", "inspect", str(tmp_path / "missing.parquet"))
    assert res.returncode == 2 and "does not exist" in res.stderr and "Traceback" not in res.stderr


# ---- a dictionary column: adopted values are encoded (issue 22, item 3) ---------------------

def test_add_segment_encodes_dictionary_columns(store: Store, tmp_path: Path) -> None:
    from carbonstore.dictionary import load_dictionary
    from carbonstore.segments.compaction import compact
    from tests.reliability.workload import load, rows, scan

    table = store.create_table("t", "id long not null, x double, city string",
                               properties={"dictionary_include": "city"})
    load(table, rows(0, 20), tasks=1)  # oslo, lima, ... as surrogates
    path = tmp_path / "in" / "a.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({
        "id": pa.array(range(100, 150), pa.int64()),
        "x": pa.array([1.5] * 50, pa.float64()),
        "city": pa.array([f"x{i}" if i % 5 else "oslo" for i in range(50)] + [], pa.string()),
    }), path)
    entry = add_segment(table, str(path.parent))
    assert entry.row_count == 50
    d = load_dictionary(table, "city")
    assert d.surrogate_of("x1") is not None and d.surrogate_of("x49") is not None
    # the adopted copy holds surrogates like every other segment
    seg = Path(table.paths.segment_dir(entry.load_name))
    for f in seg.glob("*.parquet"):
        assert pq.read_schema(f).field("city").type == pa.int32()
    got = scan(table, "city = 'x1'")
    assert [r for r in got.to_pylist() if r["city"] == "x1"] == [{"id": 101, "x": 1.5, "city": "x1"}]
    oslo = sorted(r["id"] for r in scan(table, "city = 'oslo'").to_pylist() if r["city"] == "oslo")
    assert oslo == [*range(0, 20, 5), *range(100, 150, 5)]
    compact(table, "major")
    every = sorted((r["id"], r["city"]) for r in scan(table).to_pylist())
    assert len(every) == 70
    assert (149, "x49") in every and (100, "oslo") in every and (5, "oslo") in every


# ---- a path inside the store is refused (issue 22, item 6) ----------------------------------

@pytest.mark.parametrize("where", ["store", "table", "segment", "fact", "symlink", "file"])
def test_add_segment_refuses_paths_inside_the_store(store: Store, tmp_path: Path, where: str) -> None:
    table = store.create_table("t", "id long not null, name string")
    _write(tmp_path / "in" / "a.parquet", [1, 2], ["x", "y"])
    first = add_segment(table, str(tmp_path / "in"))
    seg = Path(table.paths.segment_dir(first.load_name))
    target = {
        "store": Path(store.location),
        "table": Path(table.paths.segment_dir(first.load_name)).parents[3],
        "segment": seg,
        "fact": seg.parent,
        "symlink": tmp_path / "link",
        "file": next(seg.glob("*.parquet")),
    }[where]
    if where == "symlink":
        target.symlink_to(seg.parents[1], target_is_directory=True)
    with pytest.raises(UserError, match="inside the store"):
        add_segment(table, str(target))
    assert [e.load_name for e in table.status.read().readable] == [first.load_name]


def test_cli_add_segment_inside_the_store_is_one_line(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert _cli("--store", store, "create", "t", "--schema", "k string").returncode == 0
    pq.write_table(pa.table({"k": ["a", "b"]}), tmp_path / "k.parquet")
    res = _cli("--store", store, "add-segment", "t", "--path", str(tmp_path / "k.parquet"))
    assert res.returncode == 0, res.stderr
    res = _cli("--store", store, "add-segment", "t", "--path", store)
    assert res.returncode == 2 and "inside the store" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_adopted_files_of_other_name_case_and_nullability_take_dml_and_compaction(
    store: Store, tmp_path: Path
) -> None:
    """Ordinary Parquet: ``ID`` (upper case, nullable; the table says ``id ... not null``)
    is read as the table's column by every statement that reads rows of several segments."""
    from carbonstore.pruning.plan import prune
    from carbonstore.segments.compaction import compact
    from carbonstore.segments.dml import delete_rows
    from carbonstore.spark.reader import arrow_read_schema, plan_partitions, read_row_groups

    table = store.create_table("t", "id long not null, name string",
                               properties={"sort_columns": "id"})
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(pa.table({"ID": pa.array([3, 1, 2], pa.int64()),
                             "Name": pa.array(["c", None, "b"])}), folder / "a.parquet")
    entry = add_segment(table, str(folder))
    seg = Path(table.paths.segment_dir(entry.load_name))
    assert [pq.read_schema(p).names for p in seg.glob("*.parquet")] == [["id", "name"]]

    def read(where: str | None = None) -> list[dict[str, object]]:
        plan = prune(table, where)
        got = pa.Table.from_batches(
            list(read_row_groups(table, [s for p in plan_partitions(plan) for s in p.slices],
                                 expr=plan.expr if where else None)),
            schema=arrow_read_schema(table))
        return got.sort_by("id").to_pylist()

    assert read("id = 2") == [{"id": 2, "name": "b"}]
    table.merge(pa.table({"id": pa.array([4], pa.int64()), "name": ["d"]}), on=["id"],
                when_not_matched_insert="*")
    assert table.update({"name": "'B'"}, where="id = 2").deleted == 1
    assert delete_rows(table, "name = 'c'").deleted == 1
    compact(table, "custom", segment_ids=[e.load_name for e in table.status.read().readable])
    table = store.table("t")
    assert [e.load_name for e in table.status.read().readable] == ["0.1"]
    assert read() == [
        {"id": 1, "name": None}, {"id": 2, "name": "B"}, {"id": 4, "name": "d"}]
