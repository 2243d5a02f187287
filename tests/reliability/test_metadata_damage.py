"""Damaged and hostile metadata files of a real table, through the CLI and the API.

Each case damages one metadata file of a loaded table (a bit flip, a cut, an empty file,
garbage, or valid JSON of the wrong shape: wrong types, missing keys, huge or negative
numbers, paths escaping the table) and runs commands on it. Allowed outcomes: the answer of
the undamaged table, or one line on stderr with exit status 2 (the file named, the fix
said). Whatever the command, no data file of a segment that was readable before is
deleted: clean files must never delete data because metadata was unreadable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.dictionary import clear_cache as clear_dictionary_cache
from carbonstore.pruning.cache import clear_cache
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import forget_decoded
from tests.reliability.workload import SCHEMA, committed_ids, load, rows


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA, properties={"dictionary_include": "city"})
    load(t, rows(0, 40), tasks=2)
    load(t, rows(1000, 20), tasks=1)
    load(t, rows(2000, 20), tasks=1)
    return t


def _forget() -> None:
    clear_cache()
    clear_dictionary_cache()
    forget_decoded()


def cli(capsys: pytest.CaptureFixture[str], table: Table, *argv: str) -> tuple[int, str, str]:
    _forget()
    capsys.readouterr()
    code = main(["--store", table.store.location, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def data_files(table: Table) -> set[str]:
    fact = Path(table.paths.fact_dir)
    return {str(p.relative_to(fact)) for p in fact.rglob("*.parquet")}


def assert_same_or_one_line(code: int, out: str, err: str, want: str) -> None:
    if code == 0:
        assert out == want, err
    else:
        assert code == 2, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


HINTS = {
    "negative": b'{"version": -3}',
    "far negative": b'{"version": -1000000}',
    "bool": b'{"version": true}',
    "string": b'{"version": "2"}',
    "float": b'{"version": 2.5}',
    "list": b"[3]",
    "null": b'{"version": null}',
    "huge": b'{"version": 99999999999999999999999}',
}


@pytest.mark.parametrize("content", [
    pytest.param(v, id=k, marks=[pytest.mark.xfail(
        strict=True, reason="tablestatus._latest: a negative hint walks from -v-1 "
        "(VersionNotFoundError 'has no tablestatus version N')")] if k == "far negative" else [])
    for k, v in HINTS.items()
])
def test_a_hint_of_the_wrong_shape_is_only_a_slower_start(
    table: Table, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    """``_latest.json`` is never needed for correctness: whatever it holds, the table reads
    as before (a hint naming a version beyond the newest one is the documented exception:
    the newest version file was lost)."""
    want = cli(capsys, table, "show-segments", "db.t", "--json")
    assert want[0] == 0, want
    with open(f"{table.status.log_dir}/_latest.json", "wb") as f:
        f.write(content)
    assert cli(capsys, table, "show-segments", "db.t", "--json") == want


def _edit_json(path: str, edit: Callable[[Any], None]) -> None:
    import json

    with open(path, "rb") as f:
        obj = json.loads(f.read())
    edit(obj)
    with open(path, "wb") as f:
        f.write(_dumps(obj))


def _dumps(obj: object) -> bytes:
    import json

    return json.dumps(obj).encode()  # json, not orjson: it writes integers beyond 64 bits


def _first_column(obj: dict) -> dict:  # type: ignore[type-arg]
    return obj["columns"][0]  # type: ignore[no-any-return]


STATS_EDITS = {
    "rowCount huge": lambda o: o.__setitem__("rowCount", 10**30),
    "rowCount negative": lambda o: o.__setitem__("rowCount", -5),
    "rowCount text": lambda o: o.__setitem__("rowCount", "12x"),
    "numNulls negative": lambda o: _first_column(o).__setitem__("numNulls", -1),
    "numNulls fraction": lambda o: _first_column(o).__setitem__("numNulls", 1.5),
    "numDVs huge": lambda o: _first_column(o).__setitem__("numDVs", 2**64),
    "numDVs true": lambda o: _first_column(o).__setitem__("numDVs", True),
    "lastAnalyzed huge": lambda o: _first_column(o).__setitem__("lastAnalyzed", 10**25),
    "another segment's": lambda o: o.__setitem__("segmentId", "1"),
}


@pytest.mark.parametrize("edit", sorted(STATS_EDITS))
def test_a_statistics_file_of_the_wrong_shape_is_one_line_and_compaction_goes_on(
    table: Table, capsys: pytest.CaptureFixture[str], edit: str
) -> None:
    """A segment's statistics file with counts that are no counts (beyond 64 bits,
    negative, fractional, booleans) or another segment's: ``stats`` printed the numbers
    (negative row counts) or died in a traceback (orjson cannot write 10**30 back into the
    table cache); now one line naming the file, exit 2. Statistics are derived data:
    compaction and ``analyze --missing`` treat the file as missing and write new ones."""
    path = f"{table.paths.stats_dir}/segment_2.stats"
    assert os.path.exists(path)
    _edit_json(path, STATS_EDITS[edit])
    code, out, err = cli(capsys, table, "stats", "db.t", "--json")
    assert code == 2 and out == "", (code, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert path in err and "carbonstore analyze" in err, err
    code, _, err = cli(capsys, table, "analyze", "db.t", "--missing", "--engine", "local")
    assert code == 0, err
    assert cli(capsys, table, "stats", "db.t", "--json")[0] == 0  # rewritten
    _edit_json(path, STATS_EDITS[edit])
    want = committed_ids(table)
    code, out, err = cli(capsys, table, "compact", "db.t", "--type", "custom", "--segments",
                         "1,2", "--engine", "local", "--json")
    assert code == 0, err
    code, _, err = cli(capsys, table, "analyze", "db.t", "--missing", "--engine", "local")
    assert code == 0, err
    code, out, err = cli(capsys, table, "stats", "db.t", "--segment", "1.1", "--json")
    assert code == 0 and '"rowCount": 40' in out, (out, err)
    _forget()
    assert committed_ids(table) == want


SCHEMA_EDITS = {
    "column id not hex": lambda o: _first_column(o).__setitem__(
        "columnId", _first_column(o)["columnId"].replace("-", "v", 1)),
    "column id escaping": lambda o: _first_column(o).__setitem__("columnId", "../../../x"),
    "column id empty": lambda o: _first_column(o).__setitem__("columnId", ""),
    "nullable as text": lambda o: _first_column(o).__setitem__("nullable", "false"),
    "name upper case": lambda o: _first_column(o).__setitem__("name", "ID"),
    "name with a control character": lambda o: _first_column(o).__setitem__("name", "i\x01d"),
    "default a number": lambda o: _first_column(o).__setitem__("default", 5),
    "createdMs huge": lambda o: o.__setitem__("createdMs", 10**30),
    "schemaVersion negative": lambda o: o.__setitem__("schemaVersion", -1),
}


@pytest.mark.parametrize("edit", sorted(SCHEMA_EDITS))
def test_a_schema_file_of_the_wrong_shape_is_one_line_on_every_command(
    table: Table, capsys: pytest.CaptureFixture[str], edit: str
) -> None:
    """``Metadata/schema`` with a damaged column id (a bit flip turned a hex digit into
    'v': the table opened, pruning lost its statistics and a compaction died in a pyarrow
    traceback), a column id escaping the table (dictionary files are named by it), a
    nullable flag that is text (``bool("false")`` is true), or numbers beyond 64 bits (an
    ALTER died writing them back): one line naming the schema file, exit 2, on every
    command; nothing written, nothing deleted."""
    _edit_json(table.paths.schema, SCHEMA_EDITS[edit])
    before = data_files(table)
    versions = sorted(os.listdir(table.status.log_dir))
    for argv in (["describe", "db.t"], ["show-segments", "db.t"],
                 ["prune", "db.t", "--where", "id >= 1000", "--json"],
                 ["compact", "db.t", "--type", "custom", "--segments", "1,2", "--engine",
                  "local"],
                 ["alter", "db.t", "add-column", "z int"],
                 ["delete", "db.t", "--where", "id = 3"],
                 ["clean-files", "db.t", "--force", "--stale-inprogress"],
                 ["index", "rebuild", "db.t", "--segments", "1"]):
        code, out, err = cli(capsys, table, *argv)
        assert code == 2, (argv, code, out, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)
        assert "schema" in err, (argv, err)
    assert data_files(table) == before
    assert sorted(os.listdir(table.status.log_dir)) == versions
