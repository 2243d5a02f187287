"""The documented limits of user input (docs/reliability.md, "Limits"), through the real CLI.

Each input that once ended in a traceback (a quoted integer of more than 4,300 digits, a NUL
in a conf value, a sum of 1,000 terms in ``update --set``, a struct nested 200 deep, an
``s3://`` location with ``..`` or a ``file://`` endpoint) runs as a real process: one line on
stderr, exit 2, no traceback, nothing written. The limits themselves are checked in-process
at their boundary (accepted at the limit, refused one past it), and a one-row insert into a
table at the column limit is timed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.errors import UserError
from carbonstore.limits import (
    MAX_COLUMNS,
    MAX_EXPRESSION_DEPTH,
    MAX_LOCATION_LENGTH,
    MAX_NUMBER_LITERAL,
    MAX_SQL_TEXT,
    MAX_TYPE_DEPTH,
)
from carbonstore.segments.dml import insert_rows

ROOT = str(Path(__file__).resolve().parents[2])


def cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    for key in ("CARBON_CONF", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        env.pop(key, None)
    return subprocess.run([sys.executable, "-m", "carbonstore.cli", *argv], capture_output=True,
                          text=True, env=env, timeout=300, cwd=cwd)


def one_line(p: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    # the JVM's own notice about its incubator modules is printed before any Spark code runs
    lines = [ln for ln in p.stderr.splitlines() if "incubator modules" not in ln]
    assert len(lines) == 1, p.stderr[-3000:]
    assert lines[0].startswith("carbonstore"), lines
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def inproc(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as done:
        code = int(done.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path: Path) -> str:
    location = str(tmp_path / "store")
    table = Store(location).create_table("t", "order_id long, v int, name string")
    insert_rows(table, pa.table({"order_id": pa.array([1, 2], pa.int64()),
                                 "v": pa.array([1, 2], pa.int32()), "name": ["a", "b"]}))
    return location


# ---- the reported tracebacks, as real processes -------------------------------------------


@pytest.mark.spark  # the DELETE's condition is not bindable: Spark evaluates it
def test_a_quoted_integer_of_5000_digits_in_where(store: str) -> None:
    digits = "9" * 5000
    one_line(cli("--store", store, "prune", "t", "--where", f"order_id = '{digits}'"),
             "order_id")
    one_line(cli("--store", store, "delete", "t", "--where", f"order_id = '{digits}'"))
    assert Store(store).table("t").status.read().entries[-1].status == "Success"


def test_a_nul_in_a_conf_value(tmp_path: Path, store: str) -> None:
    conf = tmp_path / "c.properties"
    conf.write_bytes(b"carbon.storelocation=/tmp/a\x00b\n")
    one_line(cli("--conf", str(conf), "tables"), "carbon.storelocation", str(conf), "NUL")
    conf.write_bytes(b"carbon.lock.path=/tmp/\x00\n")
    one_line(cli("--store", store, "--conf", str(conf), "describe", "t"), "carbon.lock.path")


def test_update_set_of_1000_terms(store: str) -> None:
    before = Store(store).table("t").status.read().version
    one_line(cli("--store", store, "update", "t", "--set", "v = " + " + ".join(["v"] * 1000)),
             "--set", f"at most {MAX_EXPRESSION_DEPTH}")
    assert Store(store).table("t").status.read().version == before  # nothing committed


def test_a_struct_nested_200_deep(tmp_path: Path) -> None:
    location = str(tmp_path / "s")
    deep = "x " + "struct<a:" * 200 + "int" + ">" * 200
    one_line(cli("--store", location, "create", "d", "--schema", deep),
             f"at most {MAX_TYPE_DEPTH}")
    assert not Store(location).exists("d")


@pytest.mark.parametrize(
    ("location", "said"),
    [
        ("s3://b/../../x?endpoint=http://127.0.0.1:1", "'..'"),
        ("s3://b/x?endpoint=file:///etc", "endpoint"),
    ],
)
def test_odd_s3_locations(location: str, said: str) -> None:
    one_line(cli("--store", location, "tables"), said)


# ---- each limit at its boundary (in-process) ---------------------------------------------


def test_filter_literals_and_text(capsys: pytest.CaptureFixture[str], store: str) -> None:
    long_number = "1" * (MAX_NUMBER_LITERAL + 1)
    code, out, err = inproc(capsys, "--store", store, "prune", "t", "--where",
                            f"order_id = {long_number}")
    assert code == 2 and f"at most {MAX_NUMBER_LITERAL:,}" in err, err
    # a long number inside the limit binds (beyond BIGINT: no row can match)
    code, out, err = inproc(capsys, "--store", store, "prune", "t", "--where",
                            f"order_id = {'9' * 500}", "--json")
    assert code == 0, err
    # leading zeros: a BIGINT still (Spark reads '000...01' as 1)
    code, out, err = inproc(capsys, "--store", store, "prune", "t", "--where",
                            f"order_id = '{'0' * 5000}1'", "--json")
    assert code == 0, err
    for where in (f"order_id = '{'9' * 100_000}'", f"order_id = {'9' * 4301}.5",
                  f"order_id IN ('{'1' * 5000}', 1)", f"v = '-{'1' * 4400}'"):
        code, out, err = inproc(capsys, "--store", store, "prune", "t", "--where", where)
        assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    with pytest.raises(UserError, match=f"at most {MAX_SQL_TEXT:,} characters"):
        from carbonstore.expressions import parse_where
        parse_where("order_id = 1 OR " * (MAX_SQL_TEXT // 16) + "order_id = 2")


def test_a_filter_of_many_negative_numbers_is_not_nesting(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    # unary minus signs one after another count as nesting; a list of negatives does not
    where = "order_id IN (" + ", ".join(str(-i) for i in range(1, 100)) + ")"
    code, out, err = inproc(capsys, "--store", store, "prune", "t", "--where", where, "--json")
    assert code == 0, err
    where = " OR ".join(f"order_id = -{i}" for i in range(1, 100))
    code, out, err = inproc(capsys, "--store", store, "prune", "t", "--where", where, "--json")
    assert code == 0, err
    code, out, err = inproc(capsys, "--store", store, "prune", "t", "--where",
                            "order_id = " + "- " * 40 + "1")
    assert code == 2 and "nests too deeply" in err, err


def test_set_expression_depth_boundary(capsys: pytest.CaptureFixture[str], store: str) -> None:
    from carbonstore.cli.dml import parse_assignments

    ok = "v = " + " + ".join(["v"] * (MAX_EXPRESSION_DEPTH - 2))
    assert parse_assignments([ok]) == {"v": " + ".join(["v"] * (MAX_EXPRESSION_DEPTH - 2))}
    deep = "v = " + "abs(" * MAX_EXPRESSION_DEPTH + "v" + ")" * MAX_EXPRESSION_DEPTH
    with pytest.raises(UserError, match="nests too deeply"):
        parse_assignments([deep])


def test_type_depth_boundary(tmp_path: Path) -> None:
    st = Store(str(tmp_path / "s"))
    inner = "array<" * (MAX_TYPE_DEPTH - 1) + "int" + ">" * (MAX_TYPE_DEPTH - 1)
    table = st.create_table("ok", f"x struct<a:{inner}>")
    assert str(table.schema.columns[0].type).count("<") == MAX_TYPE_DEPTH
    with pytest.raises(UserError, match=f"at most {MAX_TYPE_DEPTH}"):
        st.create_table("no", f"x array<struct<a:{inner}>>")
    with pytest.raises(UserError, match="at most 128 characters"):
        st.create_table("no", f"x struct<{'f' * 129}: int>")


def test_column_count_boundary_and_a_one_row_insert_at_the_limit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    location = str(tmp_path / "s")
    too_many = ", ".join(f"c{i} int" for i in range(MAX_COLUMNS + 1))
    code, out, err = inproc(capsys, "--store", location, "create", "w", "--schema", too_many)
    assert code == 2 and f"at most {MAX_COLUMNS:,} columns" in err, err
    nested = "s struct<" + ", ".join(f"f{i}: int" for i in range(MAX_COLUMNS)) + ">, x int"
    with pytest.raises(UserError, match=f"at most {MAX_COLUMNS:,} columns"):
        Store(location).create_table("w", nested)
    table = Store(location).create_table("w", ", ".join(f"c{i} int" for i in range(MAX_COLUMNS)))
    with pytest.raises(UserError, match=f"at most {MAX_COLUMNS:,} columns"):
        from carbonstore.store.alter import add_columns, alter_table, columns_from_defs
        from carbonstore.store.ddl import parse_column_defs
        alter_table(table, add_columns(columns_from_defs(parse_column_defs("extra int"))),
                    operation="ADD COLUMNS")
    row = pa.table({f"c{i}": pa.array([i], pa.int32()) for i in range(MAX_COLUMNS)})
    started = time.process_time()  # CPU time: a machine shared with other work stays fair
    insert_rows(Store(location).table("w"), row)
    took = time.process_time() - started
    assert took < 20, took  # ~3 s on a quiet machine (67 s at 30,000 columns before the fix)
    code, out, err = inproc(capsys, "--store", location, "prune", "w", "--where", "c9999 = 9999",
                            "--json")
    assert code == 0, err


@pytest.mark.parametrize(
    ("location", "said"),
    [
        ("s3://b/a/../x", "'..'"),
        ("s3://b/x?endpoint=http://h/path", "endpoint"),
        ("s3://b/x?endpoint=http://user:pw@h:9000", "endpoint"),
        ("s3://b/x?endpoint=http://h:99999", "endpoint"),
        ("s3://b/x?endpoint=ftp://h", "endpoint"),
        ("s3://b/x#frag", "fragment"),
        ("s3://b\x00/x", "control"),
        ("gopher://h/x", "scheme"),
        ("file:///tmp/../etc", "'..'"),
        ("/tmp/a\x01b", "control"),
        ("/" + "a" * MAX_LOCATION_LENGTH, f"at most {MAX_LOCATION_LENGTH:,}"),
    ],
)
def test_locations_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], location: str, said: str
) -> None:
    code, out, err = inproc(capsys, "--store", location, "tables")
    assert code == 2, (code, err)
    assert len(err.splitlines()) == 1 and said in err, err


def test_a_conf_endpoint_is_checked_like_a_location_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    conf = tmp_path / "c.properties"
    conf.write_text("carbon.s3.endpoint=file:///etc\n", encoding="utf-8")
    code, out, err = inproc(capsys, "--conf", str(conf), "--store", "s3://b/x", "tables")
    assert code == 2 and "carbon.s3.endpoint" in err and "http" in err, err


def test_the_last_line_of_defence(capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    import carbonstore.cli.tables as tables

    def recurse(*_: object) -> int:
        return recurse()

    for failure, status, said in ((recurse, 2, "nests too deeply"),
                                  (lambda *_: int("x"), 2, "invalid literal"),
                                  (lambda *_: {}["k"], 1, "internal error")):
        monkeypatch.setattr(tables, "_tables", failure)
        code, out, err = inproc(capsys, "--store", store, "tables")
        assert code == status and said in err and len(err.splitlines()) == 1, (code, err)
        assert "Traceback" not in err
