"""Hostile and mistaken input to the CLI: bad conf values, deep or wide filters, bytes that
are not UTF-8, unusable store locations, huge numbers, values with spaces.

Each case is one line on stderr and exit 2, or the right answer with exit 0; never a
traceback. Run in-process with ``carbonstore.cli.main`` (no Spark); the few cases that need
a load run a real SparkSession.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.cli._common import parse_key_values
from carbonstore.cli.load import infer_format
from carbonstore.errors import UserError
from carbonstore.expressions.expr import MAX_NESTING, or_
from carbonstore.pruning.plan import prune
from carbonstore.segments.addsegment import add_segment
from carbonstore.store.tablestatus import COMPACTED, MARKED_FOR_DELETE


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, out: str, err: str, *fragments: str) -> str:
    assert code == 2, (code, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("carbonstore"), line
    assert "Traceback" not in err and "\x1b" not in err
    for fragment in fragments:
        assert fragment in line, line
    return line


def surrogates(raw: bytes) -> str:
    """A command-line argument holding ``raw`` bytes, as Python receives it."""
    return os.fsdecode(raw)


@pytest.fixture
def st(tmp_path: Path) -> str:
    """A store with table t (order_id long, name string): 3 segments of 10 rows each."""
    location = str(tmp_path / "store")
    table = Store(location).create_table("t", "order_id long, name string")
    for k in range(3):
        folder = tmp_path / f"in{k}"
        folder.mkdir()
        ids = pa.array(range(k * 10, k * 10 + 10), pa.int64())
        pq.write_table(pa.table({"order_id": ids, "name": [f"n{i}" for i in range(10)]}),
                       folder / "a.parquet")
        add_segment(table, str(folder))
    return location


# ---- 5: conf values are range-checked when read ------------------------------------------


def test_page_rows_zero_in_a_conf_file_is_refused_before_compacting(
    capsys: pytest.CaptureFixture[str], st: str, tmp_path: Path
) -> None:
    conf = tmp_path / "c.properties"
    conf.write_text("carbon.page.rows=0\n", encoding="utf-8")
    code, out, err = run(capsys, "--store", st, "--conf", str(conf), "compact", "t",
                         "--type", "custom", "--segments", "0,1,2", "--engine", "local")
    assert_one_line_error(code, out, err, "carbon.page.rows", "'0'", "at least 1", str(conf))
    status = [e.status for e in Store(st).table("t").status.read().entries]
    assert COMPACTED not in status


def test_negative_retention_is_refused_before_clean_files(
    capsys: pytest.CaptureFixture[str], st: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(capsys, "--store", st, "compact", "t", "--type", "custom", "--segments", "0,1",
               "--engine", "local")[0] == 0
    conf = tmp_path / "c.properties"
    conf.write_text("carbon.segment.retention.minutes=-100\n", encoding="utf-8")
    monkeypatch.setenv("CARBON_CONF", str(conf))  # the environment's conf file, too
    code, out, err = run(capsys, "--store", st, "clean-files", "t")
    assert_one_line_error(code, out, err, "carbon.segment.retention.minutes", "'-100'",
                          "at least 1")
    monkeypatch.delenv("CARBON_CONF")
    status = {e.load_name: e.status for e in Store(st).table("t").status.read().entries}
    assert status["0"] == status["1"] == COMPACTED  # still there: nothing was deleted
    assert Path(Store(st).table("t").paths.segment_dir("0")).is_dir()


def test_out_of_range_table_property_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "--store", str(tmp_path / "s"), "create", "x", "--schema",
                         "a int", "--property", "page_rows=99999999999")
    assert_one_line_error(code, out, err, "page_rows", "at most 2147483647")


# ---- 7: deep and wide filters ------------------------------------------------------------


def test_a_filter_nested_60_deep_is_refused_with_its_bound(
    capsys: pytest.CaptureFixture[str], st: str
) -> None:
    where = "(" * 60 + "order_id = 1" + ")" * 60
    code, out, err = run(capsys, "--store", st, "prune", "t", "--where", where)
    assert_one_line_error(code, out, err, "nests too deeply", f"at most {MAX_NESTING}")
    for deep in ("NOT " * 60 + "order_id = 1", "order_id = " + "-(" * 40 + "1" + ")" * 40):
        code, out, err = run(capsys, "--store", st, "prune", "t", "--where", deep)
        assert_one_line_error(code, out, err, "nests too deeply")
    ok = "(" * MAX_NESTING + "order_id = 1" + ")" * MAX_NESTING
    code, out, err = run(capsys, "--store", st, "prune", "t", "--where", ok, "--json")
    assert code == 0, err
    assert orjson.loads(out)["levels"]["rows"]["kept"] == 10


@pytest.mark.parametrize("terms", [500, 3000])
def test_an_or_of_many_terms_prunes_like_an_in_list(
    capsys: pytest.CaptureFixture[str], st: str, terms: int
) -> None:
    wanted = {5, 25}
    where = " OR ".join(f"order_id = {i if i in wanted else 1000 + i}" for i in range(terms))
    code, out, err = run(capsys, "--store", st, "prune", "t", "--where", where, "--json")
    assert code == 0, err
    assert orjson.loads(out)["levels"]["segments"]["kept"] == 2  # segments 0 and 2
    mixed = " OR ".join(f"(order_id = {i} AND name = 'n{i % 10}')" for i in range(terms))
    code, out, err = run(capsys, "--store", st, "prune", "t", "--where", mixed, "--json")
    assert code == 0, err
    assert orjson.loads(out)["levels"]["rows"]["kept"] == 30


def test_python_api_chains_of_thousands_of_terms(st: str) -> None:
    table = Store(st).table("t")
    from carbonstore.expressions.expr import Eq, Or

    left_deep = Eq("order_id", 7)
    for i in range(5000):
        left_deep = Or(left_deep, Eq("order_id", 10_000 + i))
    for expr in (left_deep, or_(*(Eq("order_id", i) for i in range(5000)))):
        plan = prune(table, expr)
        assert plan.to_json()["levels"]["segments"]["kept"] >= 1


# ---- 7: bytes that are not UTF-8, unusable locations, huge numbers -------------------------


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["prune", "t", "--where", surrogates(b"order_id = \xff")], "--where"),
        (["prune", "t", "--where", surrogates(b"name = '\xc3'")], "--where"),
        (["dictionary", "t", "name", "--lookup", surrogates(b"\xfe\xff")], "--lookup"),
        (["describe", surrogates(b"t\xe9")], "table"),
        (["load", "t", "--input", surrogates(b"/tmp/x\xff.csv")], "--input"),
    ],
)
def test_arguments_that_are_not_utf8_are_named(
    capsys: pytest.CaptureFixture[str], st: str, argv: list[str], named: str
) -> None:
    code, out, err = run(capsys, "--store", st, *argv)
    assert_one_line_error(code, out, err, named, "not valid UTF-8")


def test_a_store_path_that_is_not_utf8_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--store", surrogates(b"/tmp/\xff"), "tables")
    assert_one_line_error(code, out, err, "--store", "not valid UTF-8")


def test_a_conf_file_that_is_not_utf8(
    capsys: pytest.CaptureFixture[str], st: str, tmp_path: Path
) -> None:
    conf = tmp_path / "latin1.properties"
    conf.write_bytes("# caf\xe9\ncarbon.page.rows=10\n".encode("latin-1"))
    code, out, err = run(capsys, "--store", st, "--conf", str(conf), "tables")
    assert_one_line_error(code, out, err, str(conf), "not UTF-8", "line 1")


@pytest.mark.parametrize(
    "argv",
    [
        ["--store", "nosuch://x", "tables"],
        ["--store", "file://", "tables"],
        ["--store", "nosuch://x", "describe", "t"],
        ["index", "inspect", "nosuch://x/y"],
    ],
)
def test_unusable_locations_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert_one_line_error(code, out, err, "is not usable")


@pytest.mark.parametrize("limit", ["99999999999999999999999", "-1", "2147483648", "1e3", "x"])
def test_query_limit_out_of_range_is_refused_before_spark(
    capsys: pytest.CaptureFixture[str], st: str, limit: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--store", st, "query", "t", "--limit", limit])
    out, err = capsys.readouterr()
    assert_one_line_error(int(str(info.value.code)), out, err, "--limit",
                          "from 0 to 2147483647")


# ---- 9: messages in the user's words -------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("order_id = ", "'=' is missing what follows it"),
        ("= 3", "'=' is missing what comes before it"),
        ("order_id = 1 AND", "'AND' is missing what follows it"),
        ("order_id IN (1,", "is not closed"),
        ("order_id BETWEEN 1", "'BETWEEN' needs an upper bound"),
        ("order_id = 1)", "unexpected ')'"),
        ("name = 'abc", "a string opened with ' is not closed"),
        ("order_id IS", "unexpected 'IS' after 'order_id'"),
        ("order_id = 1; name = 'x'", "give one condition"),
        ("NOT", "'NOT' is missing what follows it"),
    ],
)
def test_filter_syntax_errors_speak_sql_not_sqlglot(
    capsys: pytest.CaptureFixture[str], st: str, where: str, said: str
) -> None:
    code, out, err = run(capsys, "--store", st, "prune", "t", "--where", where)
    line = assert_one_line_error(code, out, err, said)
    assert not re.search(r"sqlglot|<class|Required keyword|expressions\.", line), line


def test_tables_of_a_store_that_does_not_exist(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "--store", str(tmp_path / "no such store"), "tables")
    assert_one_line_error(code, out, err, "does not exist")
    (tmp_path / "empty").mkdir()
    assert run(capsys, "--store", str(tmp_path / "empty"), "tables", "--json") == (0, "[]\n", "")


def test_show_segments_prints_the_times_delete_segments_reads(
    capsys: pytest.CaptureFixture[str], st: str
) -> None:
    code, out, _ = run(capsys, "--store", st, "show-segments", "t")
    assert code == 0
    rows = [line.split() for line in out.splitlines()[2:]]
    times = {r[0]: f"{r[2]} {r[3]}" for r in rows}
    for shown in times.values():
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", shown), shown
    # --json stays machine-friendly: epoch milliseconds
    code, out, _ = run(capsys, "--store", st, "show-segments", "t", "--json")
    assert all(isinstance(r["loadStartTime"], int) for r in orjson.loads(out))
    # a time copied from show-segments is what delete-segments --before takes
    code, out, err = run(capsys, "--store", st, "delete-segments", "t", "--before", times["2"],
                         "--json")
    assert code == 0, err
    assert sorted(r["id"] for r in orjson.loads(out)) == ["0", "1"]
    status = {e.load_name: e.status for e in Store(st).table("t").status.read().entries}
    assert status == {"0": MARKED_FOR_DELETE, "1": MARKED_FOR_DELETE, "2": "Success"}


# ---- 9: the input format comes from the files ------------------------------------------------


def test_input_format_from_extensions_and_magic_bytes(tmp_path: Path) -> None:
    pq_dir = tmp_path / "pq"
    pq_dir.mkdir()
    pq.write_table(pa.table({"a": [1]}), pq_dir / "part-0.snappy.parquet")
    pq.write_table(pa.table({"a": [2]}), pq_dir / "part-1")  # no extension: magic bytes
    (pq_dir / "_SUCCESS").write_bytes(b"")
    (pq_dir / ".part-0.crc").write_bytes(b"xx")
    assert infer_format([str(pq_dir)], None) == "parquet"
    assert infer_format([str(pq_dir / "*")], None) == "parquet"
    csv = tmp_path / "a.csv.gz"
    csv.write_bytes(b"")
    assert infer_format([str(csv)], None) == "csv"
    assert infer_format(["s3://bucket/x"], None) is None
    assert infer_format([str(tmp_path / "missing")], None) is None
    with pytest.raises(UserError, match="mixes file formats"):
        infer_format([str(pq_dir), str(csv)], None)
    with pytest.raises(UserError, match="is a parquet file, not csv; use --format parquet"):
        infer_format([str(pq_dir)], "csv")
    assert infer_format([str(pq_dir)], "parquet") == "parquet"


# ---- 10: values keep their spaces ----------------------------------------------------------


def test_key_values_keep_their_values_verbatim() -> None:
    assert parse_key_values([" delimiter = ", "nullvalue= ", "k=a=b "], "--option") == {
        "delimiter": " ", "nullvalue": " ", "k": "a=b ",
    }


def test_probe_keeps_a_trailing_space(capsys: pytest.CaptureFixture[str], corpus: Path) -> None:
    path = corpus / "data" / "data_index_bloom_encoding_stats.parquet"
    values = pq.read_table(path).column("String").to_pylist()
    assert "doing " in values and "doing" not in values
    for value, expected in (("doing ", True), ("doing", False)):
        code, out, err = run(capsys, "index", "inspect", str(path), "--probe", f"String={value}",
                             "--json")
        assert code == 0, err
        blooms = [c["bloom"] for f in orjson.loads(out)["files"] for rg in f["row_groups"]
                  for c in rg["columns"] if c["path"] == "String"]
        assert [b["might_contain"] for b in blooms] == [expected]


# ---- 9: Ctrl-C during a load, and loads that need Spark ---------------------------------------


@pytest.mark.slow
@pytest.mark.spark  # the load in the child process starts Spark
def test_ctrl_c_during_a_load_is_one_line_and_exit_130(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    location = str(tmp_path / "store")
    Store(location).create_table("t", "id long, name string")
    csv = tmp_path / "big.csv"
    with csv.open("w", encoding="utf-8") as f:
        f.write("id,name\n")
        f.writelines(f"{i},name{i % 1000}\n" for i in range(3_000_000))
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=root, PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("CARBON_CONF", None)
    # Its own session, as a terminal's foreground job: Ctrl-C reaches the whole group.
    proc = subprocess.Popen(
        [sys.executable, "-m", "carbonstore.cli", "--store", location, "load", "t", "--input",
         str(csv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        start_new_session=True)
    assert proc.stderr is not None
    # Interrupt once the load runs: its In Progress entry is committed (Spark prints no stage
    # bars on a pipe), plus a moment for its Spark job to start.
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if any(e.status == "In Progress" for e in Store(location).table("t").status.read().entries):
            break
        time.sleep(0.05)
    time.sleep(2)
    assert proc.poll() is None, "the load ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    os.set_blocking(proc.stderr.fileno(), True)
    rest = proc.stderr.read()
    proc.wait(timeout=120)
    after = rest.decode("utf-8", "replace")
    assert proc.returncode == 130, after
    assert "Traceback" not in after and "py4j" not in after, after
    ours = [line for line in after.splitlines() if line.startswith("carbonstore")]
    assert ours == ["carbonstore: interrupted"], after


def test_a_folder_of_parquet_files_loads_without_format(
    capsys: pytest.CaptureFixture[str], spark: object, tmp_path: Path
) -> None:
    location = str(tmp_path / "store")
    Store(location).create_table("t", "id long, name string")
    folder = tmp_path / "export"
    folder.mkdir()
    for k in range(2):  # as Spark writes them: part files, a _SUCCESS marker, .crc files
        pq.write_table(pa.table({"id": pa.array([k * 2, k * 2 + 1], pa.int64()),
                                 "name": ["a", "b"]}), folder / f"part-0000{k}.snappy.parquet")
    (folder / "_SUCCESS").write_bytes(b"")
    code, out, err = run(capsys, "--store", location, "load", "t", "--input", str(folder),
                         "--json")
    assert code == 0, err
    assert orjson.loads(out)["rows"] == 4
    code, out, err = run(capsys, "--store", location, "load", "t", "--input", str(folder),
                         "--format", "csv")
    assert_one_line_error(code, out, err, "is a parquet file, not csv", "--format parquet")


def test_csv_options_of_one_space(
    capsys: pytest.CaptureFixture[str], spark: object, tmp_path: Path
) -> None:
    location = str(tmp_path / "store")
    Store(location).create_table("t", "id long, name string")
    spaced = tmp_path / "spaced.csv"
    spaced.write_text("id name\n1 a\n2 b\n", encoding="utf-8")
    code, _, err = run(capsys, "--store", location, "load", "t", "--input", str(spaced),
                       "--option", "delimiter= ")
    assert code == 0, err
    blank = tmp_path / "blank.csv"
    blank.write_text("id,name\n3, \n4,c\n", encoding="utf-8")
    code, _, err = run(capsys, "--store", location, "load", "t", "--input", str(blank),
                       "--option", "nullvalue= ")
    assert code == 0, err
    code, out, err = run(capsys, "--store", location, "query", "t", "--json")
    assert code == 0, err
    rows = sorted((r["id"], r["name"]) for r in orjson.loads(out))
    assert rows == [(1, "a"), (2, "b"), (3, None), (4, "c")]


def test_no_terminal_codes_on_a_pipe(
    capsys: pytest.CaptureFixture[str], st: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sqlglot underlines the offending token with terminal codes; the sql command said them
    for statement in ("SELECT * FROM (", "SELECT order_id FROM t WHERE order_id = ", "SELECT 'x"):
        code, out, err = run(capsys, "--store", st, "sql", statement)
        line = assert_one_line_error(code, out, err, "cannot parse SQL")
        assert not re.search(r"<Token|<class|SENTINEL", line), line
    # progress draws only on a terminal, even when the environment forces colours
    monkeypatch.setenv("FORCE_COLOR", "1")
    code, out, err = run(capsys, "--store", st, "index", "rebuild", "t")
    assert code == 0 and "\x1b" not in out + err
    code, out, err = run(capsys, "--store", st, "compact", "t", "--type", "major",
                         "--engine", "local")
    assert code == 0 and "\x1b" not in out + err


@pytest.mark.parametrize(
    "argv",
    [
        ["add-segment", "t", "--path=--"],
        ["compact", "t", "--type", "custom", "--segments=--", "--engine", "local"],
        ["index", "inspect", "{store}", "--probe=--"],
        ["query", "t", "--limit=--"],
        ["prune", "t", "--where=--"],
    ],
)
def test_an_option_whose_value_is_two_dashes(
    capsys: pytest.CaptureFixture[str], st: str, argv: list[str]
) -> None:
    # Python < 3.12's argparse turned "--opt=--" into an empty list (found by the fuzz suite)
    argv = [a.replace("{store}", st) for a in argv]
    try:
        code = main(["--store", st, *argv])
    except SystemExit as exit_:
        code = int(str(exit_.code))
    out, err = capsys.readouterr()
    assert_one_line_error(code, out, err)
