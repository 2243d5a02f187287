"""A command given bad input says so in one line, exit 2, before it starts a JVM: the table,
its columns, segments and versions, the filter and the options are all checked in Python
first (a JVM that boots for nothing costs the user 20 s and more on a loaded machine)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from carbonstore import Store

ROOT = Path(__file__).resolve().parents[2]

# Every way to a JVM is replaced by a sentinel that says so: carbonstore's session start
# (also the background one of query and sql) and pyspark's own launch of the gateway.
_RUN = """
import runpy, sys
def sentinel(*args, **kwargs):
    print("JVM-START", file=sys.stderr, flush=True)
    raise SystemExit(99)
import carbonstore.spark.session as session
import pyspark.context
session.get_spark = session.start_spark = pyspark.context.launch_gateway = sentinel
sys.argv = ["carbonstore", *sys.argv[1:]]
runpy.run_module("carbonstore", run_name="__main__")
"""


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path]:
    import pyarrow as pa

    root = tmp_path_factory.mktemp("jvm")
    store = Store(str(root / "store"))
    table = store.create_table("db.t", "id long not null, name string")
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}))
    (root / "in.csv").write_text("id,name\n3,c\n")
    return store, root


CASES = [
    (("load", "db.t", "--input", "{root}/nope.csv"), "input {root}/nope.csv does not exist"),
    (("load", "db.nosuch", "--input", "{root}/in.csv"), "table db.nosuch does not exist"),
    (("load", "db.t", "--input", "{root}/in.csv", "--option", "bad_option=1"),
     "unknown load option 'bad_option'"),
    (("query", "db.t", "--where", "nosuch = 1"), "filter names unknown column 'nosuch'"),
    (("query", "db.t", "--where", "id = "), "cannot parse filter 'id = '"),
    (("query", "db.t", "--select", "nosuch"), "--select: unknown column(s) nosuch"),
    (("query", "db.t", "--as-of", "99"), "table db.t has no tablestatus version 99"),
    (("sql", "SELECT * FROM db.nosuch"), "table db.nosuch does not exist"),
    (("sql", "SELECT * FROM db.t VERSION AS OF 99"), "table db.t has no tablestatus version 99"),
    (("sql", "SELEC 1"), "cannot parse SQL"),
    (("delete", "db.t", "--where", "nosuch = 1"), "unknown column nosuch"),
    (("update", "db.t", "--set", "nosuch = 1", "--where", "id = 1"), "unknown column(s) nosuch"),
    (("analyze", "db.t", "--columns", "nosuch"), "unknown column(s) for statistics: nosuch"),
    (("analyze", "db.t", "--segments", "9"), "segment 9 of db.t does not exist"),
    (("compact", "db.nosuch", "--type", "major"), "table db.nosuch does not exist"),
]


@pytest.mark.parametrize(("argv", "said"), CASES, ids=[" ".join(a[:2]) + f" {i}"
                                                      for i, (a, _) in enumerate(CASES)])
def test_bad_input_fails_before_the_jvm(where: tuple[Store, Path], argv: tuple[str, ...],
                                         said: str) -> None:
    store, root = where
    argv = tuple(a.format(root=root) for a in argv)
    out = subprocess.run([sys.executable, "-c", _RUN, "--store", store.location, *argv],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "JVM-START" not in out.stderr, (argv, out.stderr)
    assert out.returncode == 2, (argv, out.returncode, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("carbonstore: error: "), lines
    assert said.format(root=root) in lines[0], lines[0]
