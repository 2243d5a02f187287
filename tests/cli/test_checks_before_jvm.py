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
from carbonstore.errors import SegmentNotFoundError
from carbonstore.pruning.plan import prune
from carbonstore.segments.manage import delete_segments

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
    table.append(pa.table({"id": pa.array([3], pa.int64()), "name": ["c"]}))
    table.append(pa.table({"id": pa.array([4], pa.int64()), "name": ["d"]}))
    delete_segments(table, "1")  # segment 1 exists and is not readable
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
    # a segment id that is no readable segment is an input error for every command taking one
    (("prune", "db.t", "--segments", "99"), "segment 99 of db.t does not exist"),
    (("prune", "db.t", "--segments", "0,1"), "segment 1 of db.t is Marked for Delete"),
    (("prune", "db.t", "--segments", "a/b"), "invalid segment id 'a/b'"),
    (("query", "db.t", "--segments", "99"), "segment 99 of db.t does not exist"),
    (("query", "db.t", "--segments", "1", "--count"), "segment 1 of db.t is Marked for Delete"),
    (("query", "db.t", "--segments", "0,99", "--where", "id = 1"),
     "segment 99 of db.t does not exist"),
    (("query", "db.t", "--segments", "a/b"), "invalid segment id 'a/b'"),
    (("analyze", "db.t", "--segments", "1"), "segment 1 of db.t is Marked for Delete"),
    (("stats", "db.t", "--segment", "99"), "segment 99 of db.t does not exist"),
    (("compact", "db.t", "--type", "custom", "--segments", "0,99"), "segment 99 does not exist"),
    (("compact", "db.t", "--type", "custom", "--segments", "0,1"),
     "segment 1 has status 'Marked for Delete'"),
    (("compact", "db.t", "--type", "cluster", "--by", "id", "--segments", "99"),
     "segment 99 does not exist"),
    (("delete-segments", "db.t", "--ids", "99"), "segment 99 does not exist"),
    (("index", "rebuild", "db.t", "--segments", "99"), "segment(s) 99 of db.t are not readable"),
    (("sql", "ALTER TABLE db.t COMPACT 'CUSTOM' WHERE SEGMENT.ID IN (0, 99)"),
     "segment 99 does not exist"),
    (("sql", "DELETE FROM TABLE db.t WHERE SEGMENT.ID IN (99)"), "segment 99 does not exist"),
    # what the store decides of a statement: its tables, and the columns of its one table
    (("sql", "SELECT nosuch FROM db.t"), "unknown column 'nosuch' of db.t"),
    (("sql", "SELECT id FROM db.t WHERE NoSuch > 1 ORDER BY id"), "unknown column 'NoSuch'"),
    (("sql", "SELECT id, count(*) FROM db.t GROUP BY id ORDER BY nosuch"),
     "unknown column 'nosuch'"),
    (("sql", "SELECT x.nosuch FROM db.t x"), "unknown column 'nosuch' of db.t"),
    (("sql", "SELECT id FROM (SELECT id FROM db.t) s WHERE nosuch = 1"),
     "unknown column 'nosuch' of db.t"),
    (("sql", "INSERT INTO db.t SELECT * FROM db.nosuch"), "table db.nosuch does not exist"),
    (("sql", "INSERT INTO db.t SELECT nosuch, name FROM db.t"), "unknown column 'nosuch'"),
    (("sql", "INSERT INTO db.t (id, name) SELECT id, name FROM db.t JOIN db.nosuch USING (id)"),
     "table db.nosuch does not exist"),
    (("sql", "WITH x AS (SELECT * FROM db.nosuch) SELECT * FROM x"),
     "table db.nosuch does not exist"),
    (("sql", "SELECT * FROM db.t WHERE id IN (SELECT id FROM db.nosuch)"),
     "table db.nosuch does not exist"),
    (("sql", "SELECT count(*) FROM db.t; SELECT nosuch FROM db.t"),
     "statement 2 of 2 (SELECT nosuch FROM db.t): unknown column 'nosuch'"),
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


@pytest.mark.parametrize("ids", ["99", ["0", "99"], "1", "0,1"])
def test_a_plan_of_a_segment_it_cannot_read_is_refused(where: tuple[Store, Path],
                                                       ids: str | list[str]) -> None:
    """The library's plan (under ``prune``, ``to_spark`` and the data source's ``segments``
    option) refuses an unknown or unreadable segment instead of planning nothing."""
    store, _ = where
    with pytest.raises(SegmentNotFoundError, match=r"segment (99|1) of db\.t (does not exist|is "
                                                   r"Marked for Delete)"):
        prune(store.table("db.t"), segments=ids)
    assert prune(store.table("db.t"), segments="0,2").to_json()["levels"]["segments"]["kept"] == 2
