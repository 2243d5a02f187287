"""``carbonstore dictionary TABLE COLUMN``."""

from __future__ import annotations

import json

import pytest

from carbonstore import Store, Table
from carbonstore.cli import main
from carbonstore.dictionary import add_values


def _run(store: Store, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["--store", store.location, "dictionary", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_dictionary_command(table: Table, store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    add_values(table, "city", ["b", "a"], segment_id="0")
    add_values(table, "city", ["ü"], segment_id="1")
    rc, out, _ = _run(store, capsys, "t", "city", "--lookup", "ü", "--lookup", "nope",
                      "--key", "2", "--key", "1", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["size"] == 3 and doc["chunks"] == 2
    assert [e["segmentId"] for e in doc["loads"]] == ["0", "1"]
    assert doc["lookups"] == [{"value": "ü", "surrogate": 4}, {"value": "nope", "surrogate": None}]
    assert doc["keys"] == [{"surrogate": 2, "value": "a"}, {"surrogate": 1, "value": None}]
    rc, out, _ = _run(store, capsys, "t", "city", "--lookup", "a")
    assert rc == 0 and "3 values" in out and "a      2" in out


def test_dictionary_command_typed_lookup_and_errors(
    table: Table, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    add_values(table, "day", ["2024-01-02"], segment_id="0")
    rc, out, _ = _run(store, capsys, "t", "day", "--lookup", "2024-01-02", "--key", "2", "--json")
    doc = json.loads(out)
    assert doc["lookups"][0]["surrogate"] == 2 and doc["keys"][0]["value"] == "2024-01-02"
    rc, _, err = _run(store, capsys, "t", "id")
    assert rc == 2 and "no global dictionary" in err
    rc, _, err = _run(store, capsys, "t", "city", "--key", "9")
    assert rc == 2 and "surrogate 9" in err
    rc, _, err = _run(store, capsys, "t", "code", "--lookup", "x")
    assert rc == 2 and "not a valid int" in err
