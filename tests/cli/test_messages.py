"""User-facing behaviour of the CLI, run in-process with ``carbonstore.cli.main``.

A user mistake is one line on stderr and exit 2; damage to a real file keeps its own error
name (``carbonstore: CorruptIndexError: ...``), also with exit 2.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.indexfiles.indexfile import build_task_index
from carbonstore.store.records import replace
from carbonstore.store.tablestatus import FAILURE, PARTIAL_SUCCESS


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_user_error(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("carbonstore: error: "), lines[0]
    assert "CorruptIndexError" not in lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# ---- index inspect --------------------------------------------------------------------------


@pytest.fixture
def parquet_file(tmp_path: Path) -> Path:
    t = pa.table(
        {
            "id": pa.array(range(20), pa.int64()),
            "s": pa.array([f"s{i}" for i in range(20)], pa.string()),
        }
    )
    path = tmp_path / "data" / "w.parquet"
    path.parent.mkdir()
    pq.write_table(t, path, row_group_size=10, write_page_index=True,
                   bloom_filter_options={"id": True, "s": True})
    return path


def test_inspect_folder_is_a_user_error(parquet_file: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "index", "inspect", str(parquet_file.parent))
    assert_user_error(code, out, err, str(parquet_file.parent), "is a folder")


@pytest.mark.parametrize(
    ("name", "content"),
    [("rows.csv", b"id,s\n1,a\n2,b\n"), ("notes.txt", b"x" * 100_000), ("empty", b"")],
)
def test_inspect_file_of_another_kind_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    code, out, err = run(capsys, "index", "inspect", str(path))
    assert_user_error(code, out, err, str(path), "is not a .parquet, .carbonindex or "
                      ".carbonindexmerge file")


def test_inspect_damaged_files_stay_corruption(parquet_file: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    data = parquet_file.read_bytes()
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(data[: len(data) // 2])
    idx = tmp_path / "0-x.carbonindex"
    build_task_index(pafs.LocalFileSystem(), str(parquet_file.parent), ["w.parquet"], str(idx))
    raw = idx.read_bytes()
    damaged_idx = tmp_path / "1-x.carbonindex"
    damaged_idx.write_bytes(raw[: len(raw) - 10])
    named_parquet = tmp_path / "csv.parquet"
    named_parquet.write_bytes(b"id,s\n1,a\n" * 10)
    for path in (truncated, damaged_idx, named_parquet):
        code, out, err = run(capsys, "index", "inspect", str(path))
        assert code == 2, err
        assert out == "" and "Traceback" not in err and len(err.splitlines()) == 1
        assert err.startswith("carbonstore: CorruptIndexError: "), err
        assert str(path) in err
    # the intact index file still inspects
    code, out, err = run(capsys, "index", "inspect", str(idx), "--json")
    assert code == 0 and err == ""
    assert orjson.loads(out)["files"][0]["num_rows"] == 20


@pytest.mark.parametrize(
    ("probe", "fragments"),
    [
        ("id=abc", ("--probe id=abc", "does not fit column id", "INT64")),
        ("id=99999999999999999999999", ("does not fit column id",)),
        ("nope=1", ("has no column 'nope'", "its columns are id, s")),
    ],
)
def test_inspect_bad_probe_is_a_user_error(
    parquet_file: Path, capsys: pytest.CaptureFixture[str], probe: str,
    fragments: tuple[str, ...],
) -> None:
    code, out, err = run(capsys, "index", "inspect", str(parquet_file), "--probe", probe)
    assert_user_error(code, out, err, *fragments)


def test_inspect_probe_same_column_twice_is_refused(
    parquet_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "index", "inspect", str(parquet_file),
                         "--probe", "id=3", "--probe", "s=s4", "--probe", "id=15")
    assert_user_error(code, out, err, "column id twice", "id=3", "id=15")


def test_inspect_probes_several_columns(parquet_file: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "index", "inspect", str(parquet_file),
                         "--probe", "id=3", "--probe", "s=s15", "--json")
    assert (code, err) == (0, "")
    got = {
        (rg["index"], c["path"]): c["bloom"]["might_contain"]
        for rg in orjson.loads(out)["files"][0]["row_groups"]
        for c in rg["columns"]
    }
    # bloom filters have no false negatives: the row group holding the value says True
    assert got[(0, "id")] is True and got[(1, "s")] is True
    # a 20-row bloom at the default false-positive rate rejects the other row group's value
    assert got[(1, "id")] is False and got[(0, "s")] is False


# ---- create --if-not-exists -----------------------------------------------------------------


def test_create_if_not_exists_says_the_table_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = str(tmp_path / "store")
    schema = "id long not null, name string"
    code, out, err = run(capsys, "--store", st, "create", "db.t", "--schema", schema,
                         "--sort-columns", "id", "--json")
    assert (code, err) == (0, "")
    first = orjson.loads(out)
    assert first["created"] is True and first["differences"] == []

    # the same definition (names and lists in another case and spacing): exists, no warning
    code, out, err = run(capsys, "--store", st, "create", "DB.T", "--schema",
                         "ID long not null, Name string", "--sort-columns", " ID ",
                         "--if-not-exists")
    assert (code, err) == (0, "")
    assert out.strip() == f"table db.t already exists at {first['location']}; not created"
    assert "created table" not in out

    code, out, err = run(capsys, "--store", st, "create", "db.t", "--schema", schema,
                         "--sort-columns", "id", "--if-not-exists", "--json")
    assert (code, err) == (0, "")
    again = orjson.loads(out)
    assert again["created"] is False and again["differences"] == []
    assert again["columns"] == first["columns"]  # same column ids: nothing was rewritten


def test_create_if_not_exists_warns_when_the_definition_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = str(tmp_path / "store")
    assert run(capsys, "--store", st, "create", "db.t", "--schema", "a int",
               "--sort-columns", "a")[0] == 0
    schema_file = tmp_path / "store" / "db" / "t" / "Metadata" / "schema"
    before = schema_file.read_bytes()

    code, out, err = run(capsys, "--store", st, "create", "db.t", "--schema",
                         "b long not null", "--bloom", "b", "--if-not-exists")
    assert code == 0
    assert out.strip().startswith("table db.t already exists at ")
    assert "created table" not in out
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("carbonstore: warning: "), err
    assert "table db.t already exists with a different definition" in lines[0]
    assert "columns: existing 'a int', given 'b long not null'" in lines[0]
    assert "property sort_columns: existing 'a', not given" in lines[0]
    assert "property bloom_columns: not set, given 'b'" in lines[0]
    assert schema_file.read_bytes() == before

    code, out, err = run(capsys, "--store", st, "create", "db.t", "--schema", "a int",
                         "--sort-columns", "a", "--property", "page_rows=500",
                         "--if-not-exists", "--json")
    assert code == 0 and "property page_rows: not set, given '500'" in err
    info = orjson.loads(out)
    assert info["created"] is False
    assert info["differences"] == ["property page_rows: not set, given '500'"]
    assert [c["name"] for c in info["columns"]] == ["a"]
    assert schema_file.read_bytes() == before


# ---- compact --type custom ------------------------------------------------------------------


@pytest.fixture
def two_segments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A store whose table default.t has segments 0 and 1 (adopted Parquet files)."""
    st = str(tmp_path / "store")
    folder = tmp_path / "parquet"
    folder.mkdir()
    pq.write_table(pa.table({"id": pa.array(range(5), pa.int64())}), folder / "a.parquet")
    assert run(capsys, "--store", st, "create", "t", "--schema", "id long")[0] == 0
    for _ in range(2):
        assert run(capsys, "--store", st, "add-segment", "t", "--path", str(folder))[0] == 0
    return st


def _segments(capsys: pytest.CaptureFixture[str], st: str) -> list[tuple[str, str]]:
    code, out, _ = run(capsys, "--store", st, "show-segments", "t", "--json")
    assert code == 0
    return [(r["id"], r["status"]) for r in orjson.loads(out)]


def test_custom_compaction_of_one_segment_is_refused(
    two_segments: str, capsys: pytest.CaptureFixture[str]
) -> None:
    st = two_segments
    for ids in ("0", "1,"):
        code, out, err = run(capsys, "--store", st, "compact", "t", "--type", "custom",
                             "--segments", ids, "--engine", "local")
        assert_user_error(code, out, err, "at least two segments", "got only")
    assert _segments(capsys, st) == [("0", "Success"), ("1", "Success")]
    assert sorted(p.name for p in (Path(st) / "default" / "t" / "Fact" / "Part0").iterdir()) == [
        "Segment_0", "Segment_1"
    ]
    # two segments still merge
    code, out, err = run(capsys, "--store", st, "compact", "t", "--type", "custom",
                         "--segments", "0,1", "--engine", "local", "--json")
    assert (code, err) == (0, "")
    assert [m["output"] for m in orjson.loads(out)["merged"]] == ["0.1"]


def _rewrite_entry(st: str, load_name: str, **changes: object) -> None:
    """Change one tablestatus entry in place (a state a load or a crash can leave)."""
    table = Store(st).table("t")
    table.status.update(
        lambda snap: [replace(e, **changes) if e.load_name == load_name else e
                      for e in snap.entries]
    )


def test_custom_compaction_status_message_matches_what_is_accepted(
    two_segments: str, capsys: pytest.CaptureFixture[str]
) -> None:
    st = two_segments
    table = Store(st).table("t")
    failed = table.status.allocate()
    table.status.set_status(failed.load_name, FAILURE)
    code, out, err = run(capsys, "--store", st, "compact", "t", "--type", "custom",
                         "--segments", f"0,{failed.load_name}", "--engine", "local")
    assert_user_error(code, out, err, f"segment {failed.load_name} has status 'Failure'",
                      "only Success or Partial Success segments can be compacted")

    # an invisible Success segment is refused for what it is, not for its status
    _rewrite_entry(st, "1", visibility=False)
    code, out, err = run(capsys, "--store", st, "compact", "t", "--type", "custom",
                         "--segments", "0,1", "--engine", "local")
    assert_user_error(code, out, err, "segment 1 is invisible")
    assert "has status" not in err

    # what the message promises: a Partial Success segment is compacted
    _rewrite_entry(st, "1", visibility=True, status=PARTIAL_SUCCESS)
    code, out, err = run(capsys, "--store", st, "compact", "t", "--type", "custom",
                         "--segments", "0,1", "--engine", "local", "--json")
    assert (code, err) == (0, "")
    merged = orjson.loads(out)["merged"]
    assert [(m["output"], m["sources"], m["rows"]) for m in merged] == [("0.1", ["0", "1"], 10)]
    assert dict(_segments(capsys, st)) == {
        "0": "Compacted", "1": "Compacted", failed.load_name: "Failure", "0.1": "Success"
    }
