"""A deleted metadata file that made a table look absent: damage, one line, exit 2.

``Metadata/schema`` deleted while the table's tablestatus version log lives read as "table
does not exist" on every command; it is damage now, naming the file. What a drop or a
create cut short leaves (the schema gone after the DROP version; no version 0 yet) still
reads as no table, and ``create`` starts afresh as before. (The version log gone while the
schema is there stays "dropped": a drop's removal cut short on a store that deletes in no
fixed order leaves exactly that, tests/reliability/test_drop_crash.py.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.errors import CorruptMetadataError, TableNotFoundError
from carbonstore.store.table import Table
from tests.reliability.workload import SCHEMA, committed_ids, load, rows

ROOT = str(Path(__file__).resolve().parents[2])
COMMANDS = [["show-segments", "db.t"], ["history", "db.t"], ["describe", "db.t"],
            ["clean-files", "db.t"], ["restore", "db.t", "--to-version", "1"],
            ["alter", "db.t", "add-column", "z int"], ["prune", "db.t"],
            ["delete-segments", "db.t", "--ids", "0"]]


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA)
    load(t, rows(0, 10), tasks=1)
    return t


def _one_line_exit_2(store: Store, capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    assert main(["--store", store.location, *args]) == 2, args
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, (args, err)
    return lines[0]


def test_a_deleted_schema_is_damage_on_every_command(
    table: Table, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    schema = Path(table.paths.schema)
    kept = tmp_path / "schema.bak"
    shutil.move(schema, kept)
    for args in COMMANDS:
        line = _one_line_exit_2(table.store, capsys, args)
        assert "CorruptMetadataError" in line and "Metadata/schema" in line, line
        assert "does not exist" not in line and "restore the file" in line, line
    with pytest.raises(CorruptMetadataError, match="Metadata/schema of table db.t is missing"):
        Store(table.store.location).table("db.t")
    assert Store(table.store.location).exists("db.t")  # there, damaged
    # A real process too.
    proc = subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", "--store", table.store.location,
         "show-segments", "db.t"], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Metadata/schema" in proc.stderr and "does not exist" not in proc.stderr
    # Nothing was written or deleted: the file put back, the table answers as before.
    shutil.move(kept, schema)
    assert committed_ids(Store(table.store.location).table("db.t")) == list(range(10))


def test_a_deleted_schema_of_an_empty_table_is_damage_too(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    t = store.create_table("db.t", SCHEMA)
    os.remove(t.paths.schema)
    line = _one_line_exit_2(store, capsys, ["show-segments", "db.t"])
    assert "Metadata/schema" in line and "create the table again" in line, line
    store.create_table("db.t", SCHEMA)  # create starts afresh (the old folder is trashed)
    assert main(["--store", store.location, "show-segments", "db.t"]) == 0


def test_what_a_drop_or_create_cut_short_leaves_is_still_no_table(
    table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    table.status.drop()  # the DROP version committed ...
    os.remove(table.paths.schema)  # ... the schema deleted, the folder not yet
    line = _one_line_exit_2(table.store, capsys, ["show-segments", "db.t"])
    assert "does not exist" in line, line
    with pytest.raises(TableNotFoundError):
        table.store.table("db.t")
    assert not table.store.exists("db.t")
    # A create cut short before its version 0: an empty log folder, no schema.
    shutil.rmtree(table.paths.root)
    os.makedirs(f"{table.paths.tablestatus_log}/0d7bd55c-2f8c-4c8e-9a57-6c1d6a5d2a11")
    line = _one_line_exit_2(table.store, capsys, ["show-segments", "db.t"])
    assert "does not exist" in line, line
