"""A damaged or missing dictionary is damage, never an empty dictionary (issue 22, item 2).

Each case loads a table with a dictionary column through the local load path, damages
one of its dictionary files and then plans a filtered read, scans it and runs the
``dictionary`` command. Allowed: exactly the undamaged answer, or ``DictionaryError``
naming a dictionary file.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.dictionary import clear_cache
from carbonstore.errors import CorruptIndexError, DictionaryError
from carbonstore.pruning.cache import clear_cache as clear_index_cache
from carbonstore.pruning.plan import prune
from carbonstore.store.checksums import with_checksum
from carbonstore.store.table import Table
from tests.reliability.workload import SCHEMA, load, rows, scan


@pytest.fixture
def loaded(store: Store) -> Table:
    t = store.create_table("t", SCHEMA, properties={"dictionary_include": "city"})
    load(t, rows(0, 100), tasks=1)
    load(t, rows(100, 50), tasks=1)
    return t


def _answers(table: Table) -> tuple[int, list[int]]:
    clear_cache()
    clear_index_cache()
    fresh = Store(table.store.location, conf=table.store.conf).table(table.name)
    kept = prune(fresh, "city = 'oslo'").to_json()["levels"]["rows"]["kept"]
    got = scan(fresh, "city = 'oslo'")
    ids = sorted(i for i, c in zip(got.column("id").to_pylist(), got.column("city").to_pylist(),
                                   strict=True) if c == "oslo")
    return kept, ids


def _dictionary_files(table: Table) -> dict[str, str]:
    folder = table.paths.dictionary_dir
    out = {}
    for name in os.listdir(folder):
        kind = name.rsplit(".", 1)[-1]
        out.setdefault(kind, os.path.join(folder, name))
    return out


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def _assert_same_or_dictionary_error(table: Table, before: tuple[int, list[int]]) -> str | None:
    try:
        after = _answers(table)
    except DictionaryError as err:
        return str(err)
    assert after == before
    return None


@pytest.mark.parametrize("kinds", [("dictmeta",), ("dict", "dictmeta"), ("dict", "dictmeta", "dictlog"),
                                   ("dictlog",)])
def test_missing_dictionary_files_are_damage(loaded: Table, kinds: tuple[str, ...]) -> None:
    before = _answers(loaded)
    assert before[1]
    files = _dictionary_files(loaded)
    for kind in kinds:
        if kind in files:
            _remove(files[kind])
    msg = _assert_same_or_dictionary_error(loaded, before)
    if set(kinds) >= {"dict", "dictmeta", "dictlog"} or kinds == ("dictlog",):
        # every copy of the committed values is gone: only an error is right
        assert msg is not None and "Metadata/dictionary" in msg


def test_every_dictionary_file_deleted_fails_the_plan(loaded: Table) -> None:
    shutil.rmtree(loaded.paths.dictionary_dir)
    clear_cache()
    with pytest.raises(DictionaryError, match=r"restore"):
        prune(loaded, "city = 'oslo'")
    with pytest.raises(DictionaryError):
        scan(loaded)


def test_changed_column_id_is_damage(loaded: Table, capsys: pytest.CaptureFixture[str]) -> None:
    with open(loaded.paths.schema) as f:
        doc = json.load(f)
    for col in doc["columns"]:
        if col["name"] == "city":
            col["columnId"] = "00000000-0000-0000-0000-000000000000"
    del doc["checksum"]  # re-signed below: an edit, not damage (damage fails the checksum)
    with open(loaded.paths.schema, "wb") as f:
        f.write(with_checksum(json.dumps(doc).encode()))
    clear_cache()
    fresh = Store(loaded.store.location, conf=loaded.store.conf).table("t")
    # The index of every segment names the old id: it is refused (another table's index in
    # its place) before the dictionary of the new id is looked for.
    with pytest.raises((CorruptIndexError, DictionaryError), match="does not have|00000000-"):
        prune(fresh, "city = 'oslo'")
    assert main(["--store", loaded.store.location, "dictionary", "t", "city"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_dictionary_command_refuses_missing_dictionary(
    loaded: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(loaded.paths.dictionary_dir)
    clear_cache()
    rc = main(["--store", loaded.store.location, "dictionary", "t", "city"])
    err = capsys.readouterr().err
    assert rc != 0
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "dictionary" in err


def test_sortindex_bit_flips_never_change_the_answer(loaded: Table) -> None:
    before = _answers(loaded)
    path = _dictionary_files(loaded)["sortindex"]
    with open(path, "rb") as f:
        original = f.read()
    for pos in range(len(original)):
        for bit in (0x01, 0x10, 0x80):
            damaged = bytearray(original)
            damaged[pos] ^= bit
            with open(path, "wb") as f:
                f.write(damaged)
            _assert_same_or_dictionary_error(loaded, before)
    with open(path, "wb") as f:
        f.write(original)
