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
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

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


@pytest.mark.parametrize("content", list(HINTS.values()), ids=list(HINTS))
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


# ---- random damage over random metadata files (hypothesis) ------------------------------
# CI: 25 fixed examples; CARBONSTORE_DAMAGE_EXAMPLES=N runs N random ones (a hunt).
EXAMPLES = int(os.environ.get("CARBONSTORE_DAMAGE_EXAMPLES", "25"))
DERANDOMIZE = "CARBONSTORE_DAMAGE_EXAMPLES" not in os.environ
READS = (
    ("show-segments", "db.t", "--json"),
    ("prune", "db.t", "--where", "id >= 1000", "--json"),
    ("prune", "db.t", "--where", "city = 'lima'", "--json"),
    ("history", "db.t", "--json"),
    ("stats", "db.t", "--json"),
    ("dictionary", "db.t", "city", "--json"),
)


def _normal(out: str) -> str:
    import re

    return re.sub(r'"planning_ms": [0-9.]+', "", out)


def _metadata_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and "Metadata" in p.parts)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from carbonstore.segments.compaction import compact
    from carbonstore.segments.dml import delete_rows
    from carbonstore.store import load_conf

    root = tmp_path_factory.mktemp("pristine") / "store"
    conf = load_conf(None).with_overrides({"carbon.index.snapshot.max.lag": "0"})
    t = Store(str(root), conf=conf).create_table(
        "db.t", SCHEMA, properties={"dictionary_include": "city"})
    for k in range(5):
        load(t, rows(k * 1000, 20), tasks=1 + k % 2)
    compact(t, "custom", segment_ids=["0", "1"])
    delete_rows(t, "id = 2005")
    from carbonstore.pruning.plan import prune

    prune(t, "id >= 1000")  # writes the index snapshot
    return root


@given(data=st.data())
@settings(max_examples=EXAMPLES, deadline=None, derandomize=DERANDOMIZE,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_damage_to_a_metadata_file(
    pristine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], data: st.DataObject
) -> None:
    """A random metadata file damaged at random (bit flips, a cut, bytes overwritten, an
    empty file, deleted): every read answers as the pristine table or fails with one line
    and exit 2; a forced clean files run on the damaged table deletes no data file of a
    readable segment, and once the file is restored the table answers as before."""
    import shutil
    import tempfile

    work = Path(tempfile.mkdtemp(dir=tmp_path)) / "store"  # one per example
    shutil.copytree(pristine, work)
    table = Store(str(work)).table("db.t")
    want = {argv: cli(capsys, table, *argv) for argv in READS}
    assert all(code == 0 for code, _, _ in want.values()), want
    rel = data.draw(st.sampled_from(_metadata_files(work)))
    path = work / rel
    original = path.read_bytes()
    how = data.draw(st.sampled_from(["flip", "cut", "overwrite", "empty", "delete"]))
    if how == "delete":
        path.unlink()
    else:
        damaged = bytearray(original)
        if how == "flip" and damaged:
            for _ in range(data.draw(st.integers(1, 4))):
                i = data.draw(st.integers(0, len(damaged) - 1))
                damaged[i] ^= 1 << data.draw(st.integers(0, 7))
        elif how == "cut":
            del damaged[data.draw(st.integers(0, max(0, len(damaged) - 1))):]
        elif how == "overwrite" and damaged:
            i = data.draw(st.integers(0, len(damaged) - 1))
            junk = data.draw(st.binary(min_size=1, max_size=16))
            damaged[i:i + len(junk)] = junk
        elif how == "empty":
            damaged = bytearray()
        path.write_bytes(bytes(damaged))
    note(f"{how} {rel}")
    for argv in READS:
        code, out, err = cli(capsys, table, *argv)
        if code == 0 and argv[0] == "stats" and how == "delete":
            # a deleted statistics file is a segment without statistics, and says so
            assert _normal(out) == _normal(want[argv][1]) or '"missingSegments": []' not in out
        elif code == 0:
            assert _normal(out) == _normal(want[argv][1]), (argv, err)
        else:
            assert code == 2, (argv, code, err)
            assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)
    readable = data_files(table)
    code, out, err = cli(capsys, table, "clean-files", "db.t", "--force", "--stale-inprogress")
    assert code in (0, 2), err
    assert len(err.strip().splitlines()) <= 1 and "Traceback" not in err, err
    assert readable <= data_files(table), "clean files deleted data of a readable segment"
    path.write_bytes(original)
    for argv in READS[:3]:
        code, out, err = cli(capsys, table, *argv)
        assert code == 0 and _normal(out) == _normal(want[argv][1]), (argv, err)


def _latest_version(table: Table) -> str:
    log = table.status.log_dir
    return f"{log}/{max(n for n in os.listdir(log) if n[0].isdigit())}"


@pytest.mark.parametrize(("old", "new"), [
    (b'"upserts":', b'"uxserts":'),  # one bit (0x08) of the latest version: a load vanishes
    (b'"rowCount":', b'"rowCound":'),  # one bit (0x10): the load counts 0 rows in metadata
])
def test_a_bit_flip_in_a_key_of_the_latest_version_is_damage(
    table: Table, capsys: pytest.CaptureFixture[str], old: bytes, new: bytes
) -> None:
    """Found by bit flips over tablestatus versions: flipping one bit of the key
    ``"upserts"`` of the version that committed a load makes the load's rows silently
    disappear from every read (459 of 499 rows, exit 0); flipping one bit of ``"rowCount"``
    makes its entry count 0 rows (what count(*) from metadata answers). Versions now carry
    a checksum, and a key no writer writes is damage."""
    want = cli(capsys, table, "show-segments", "db.t", "--json")
    path = _latest_version(table)
    with open(path, "rb") as f:
        data = f.read()
    assert data.count(old) >= 1
    with open(path, "wb") as f:
        f.write(data.replace(old, new))
    code, out, err = cli(capsys, table, "show-segments", "db.t", "--json")
    if code == 0:
        assert out == want[1], "a damaged version answered differently with exit 0"
    assert code == 2 and path in err, (code, out, err)


@pytest.mark.parametrize(("old", "new"), [
    (b'"upserts":', b'"uxserts":'),
    (b'"rowCount":', b'"rowCound":'),
])
def test_clean_files_deletes_nothing_on_a_version_that_does_not_add_up(
    table: Table, capsys: pytest.CaptureFixture[str], old: bytes, new: bytes
) -> None:
    """The same bit flips: the last load then looks ``In Progress`` (its lease long
    expired), and ``clean-files --stale-inprogress`` judged it dead, committed it
    ``Failure`` and deleted the folder of a committed load. Now clean files checks that
    the versions since the last checkpoint add up (their recorded readable rows and
    segments against their decoded entries) before it judges anything, and versions carry a
    checksum: one line naming the version, exit 2, nothing committed or deleted."""
    path = _latest_version(table)
    before = data_files(table)
    versions = sorted(os.listdir(table.status.log_dir))
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data.replace(old, new))
    for argv in (["clean-files", "db.t", "--stale-inprogress"],
                 ["clean-files", "db.t", "--stale-inprogress", "--dry-run"]):
        code, out, err = cli(capsys, table, *argv)
        assert code == 2, (argv, code, out, err)
        assert len(err.strip().splitlines()) == 1, err
        assert "does not add up" in err or "checksum does not match" in err, err
        assert os.path.basename(path) in err, err
    assert data_files(table) == before
    assert sorted(os.listdir(table.status.log_dir)) == versions
    with open(path, "wb") as f:
        f.write(data)  # restored: clean files runs, the load is whole
    code, out, err = cli(capsys, table, "clean-files", "db.t", "--stale-inprogress")
    assert code == 0, err
    _forget()
    assert len(committed_ids(table)) == 80


@pytest.mark.parametrize("key", [b'"tableId"', b'"tableId": "'])
def test_a_schema_that_lost_its_table_id_is_not_an_empty_old_format_table(
    table: Table, capsys: pytest.CaptureFixture[str], key: bytes
) -> None:
    """Found by random bit flips: a flip in the schema's ``"tableId"`` key (or the key cut
    away) made the table one of the single-file format with no tablestatus file: every
    read answered an empty table with exit 0, and clean files would have moved every
    segment folder to the trash as an orphan. Now one line naming the schema file, exit 2,
    nothing moved."""
    with open(table.paths.schema, "rb") as f:
        data = f.read()
    damaged = (data.replace(b'"tableId"', b'"tablfId"') if key == b'"tableId"'
               else data.replace(key, b'"x": "'))
    assert damaged != data
    with open(table.paths.schema, "wb") as f:
        f.write(damaged)
    before = data_files(table)
    for argv in (["show-segments", "db.t", "--json"], ["prune", "db.t", "--json"],
                 ["clean-files", "db.t", "--stale-inprogress"]):
        code, out, err = cli(capsys, table, *argv)
        assert code == 2, (argv, code, out, err)
        assert len(err.strip().splitlines()) == 1 and "schema" in err, (argv, err)
    assert data_files(table) == before
    assert not os.path.exists(table.paths.trash_dir) or not os.listdir(table.paths.trash_dir)


@pytest.mark.parametrize("damage", ["table name", "row count", "a list", "not json"])
def test_a_damaged_table_statistics_cache_is_recomputed(
    table: Table, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """``Metadata/stats/table.stats`` caches the merged statistics under a fingerprint of
    the segment files; its content was trusted: a flipped bit answered ``"table":
    "eb.t"`` (found by the random damage test). Now it holds a checksum of what it caches
    and a cache that fails it is recomputed: the same answer."""
    want = cli(capsys, table, "stats", "db.t", "--json")
    assert want[0] == 0
    path = f"{table.paths.stats_dir}/table.stats"
    with open(path, "rb") as f:
        data = f.read()
    damaged = {
        "table name": data.replace(b'"db.t"', b'"eb.t"'),
        "row count": data.replace(b'"rowCount":80', b'"rowCount":81'),
        "a list": b"[1]",
        "not json": data[:-3],
    }[damage]
    assert damaged != data
    with open(path, "wb") as f:
        f.write(damaged)
    assert cli(capsys, table, "stats", "db.t", "--json") == want
