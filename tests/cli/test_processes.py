"""The ``carbonstore`` command line, run as real processes (console script and ``-m``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from carbonstore import Store
from carbonstore.store.tablestatus import (
    COMPACTED,
    MARKED_FOR_DELETE,
    PARTIAL_SUCCESS,
    SUCCESS,
)

SCRIPT = Path(sys.executable).with_name("carbonstore")


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return orjson.loads(self.out)


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CARBON_CONF"}
    env.update(extra or {})
    return env


def _cmd(args: Sequence[str], *, module: bool = False) -> list[str]:
    if module:
        return [sys.executable, "-m", "carbonstore.cli", *args]
    return [str(SCRIPT), *args]


def run(
    *args: str, module: bool = False, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Result:
    p = subprocess.run(
        _cmd(args, module=module), capture_output=True, text=True, env=_env(env), cwd=cwd,
        timeout=120,
    )
    return Result(p.returncode, p.stdout, p.stderr)


def test_console_script_is_installed() -> None:
    assert SCRIPT.is_file(), f"{SCRIPT} missing: pip install -e . creates it"


def test_table_lifecycle(tmp_path: Path) -> None:
    st = str(tmp_path / "store")
    r = run(
        "--store", st, "create", "Sales.Orders",
        "--schema", "id long not null, name string, price decimal(10,2), day date",
        "--sort-columns", "id,day", "--sort-scope", "global_sort", "--dictionary", "name",
        "--bloom", "name", "--property", "page_rows=1000", "--property", "BLOOM_FPP=0.05",
        "--json",
    )
    assert (r.code, r.err) == (0, "")
    info = r.json()
    assert isinstance(info, dict)
    assert info["table"] == "sales.orders"
    assert [(c["name"], c["type"], c["nullable"]) for c in info["columns"]] == [
        ("id", "long", False), ("name", "string", True), ("price", "decimal(10,2)", True),
        ("day", "date", True),
    ]
    assert info["properties"] == {
        "sort_columns": "id,day", "sort_scope": "global_sort", "dictionary_include": "name",
        "bloom_columns": "name", "page_rows": "1000", "bloom_fpp": "0.05",
    }
    assert (tmp_path / "store" / "sales" / "orders" / "Metadata" / "schema").is_file()

    # --store after the command works too; -m carbonstore.cli is the same program
    r = run("describe", "sales.orders", "--store", st, "--json", module=True)
    assert r.code == 0 and r.json() == {k: v for k, v in info.items()
                                         if k not in ("created", "differences")}
    assert (info["created"], info["differences"]) == (True, [])

    r = run("--store", st, "describe", "SALES.ORDERS")
    assert r.code == 0
    assert "sales.orders" in r.out and "decimal(10,2)" in r.out and "page_rows" in r.out

    assert run("--store", st, "create", "t2", "--schema", "x int").code == 0
    r = run("--store", st, "tables", "--json")
    assert (r.code, r.json()) == (0, ["default.t2", "sales.orders"])
    assert run("--store", st, "tables").out.split() == ["default.t2", "sales.orders"]

    r = run("--store", st, "drop", "Sales.Orders")
    assert (r.code, r.out.strip()) == (0, "dropped table sales.orders")
    assert not (tmp_path / "store" / "sales" / "orders").exists()
    assert run("--store", st, "tables", "--json").json() == ["default.t2"]


def test_if_not_exists(tmp_path: Path) -> None:
    st = str(tmp_path / "store")
    assert run("--store", st, "create", "t", "--schema", "a int").code == 0
    r = run("--store", st, "create", "t", "--schema", "b int", "--if-not-exists", "--json")
    assert r.code == 0
    info = r.json()
    assert isinstance(info, dict)
    assert [c["name"] for c in info["columns"]] == ["a"]
    assert info["created"] is False
    assert info["differences"] == ["columns: existing 'a int', given 'b int'"]
    assert "already exists with a different definition" in r.err


def test_show_segments(tmp_path: Path) -> None:
    st = str(tmp_path / "store")
    assert run("--store", st, "create", "t", "--schema", "id long").code == 0
    r = run("--store", st, "show-segments", "t", "--json")
    assert (r.code, r.json()) == (0, [])

    table = Store(st).table("t")
    for _ in range(4):
        table.status.allocate()
    table.status.set_status("0", SUCCESS, row_count=10, timestamp=table.status.read().get("0").load_start_time + 5)
    table.status.set_status("1", PARTIAL_SUCCESS, row_count=3, bad_record_count=1)
    table.status.set_status("2", MARKED_FOR_DELETE)
    table.status.set_status("0", COMPACTED, merged_load_name="0.1")
    table.status.update(lambda s: list(s.entries), remove=lambda e: e.status == MARKED_FOR_DELETE)

    r = run("--store", st, "show-segments", "t", "--json")
    assert r.code == 0
    rows = r.json()
    assert isinstance(rows, list) and all(isinstance(o, dict) for o in rows)
    assert [(o["id"], o["status"]) for o in rows] == [
        ("0", "Compacted"), ("1", "Partial Success"), ("3", "In Progress")
    ]
    assert rows[0]["mergedTo"] == "0.1" and rows[0]["rows"] == 10 and rows[0]["timeTakenMs"] == 5
    assert rows[1]["badRecords"] == 1

    r = run("--store", st, "show-segments", "t", "--history", "--json")
    assert [(o["id"], o["status"]) for o in r.json()] == [  # type: ignore[union-attr]
        ("2", "Marked for Delete"), ("0", "Compacted"), ("1", "Partial Success"),
        ("3", "In Progress"),
    ]
    r = run("--store", st, "show-segments", "t")
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0].split()[:2] == ["id", "status"]
    assert "Partial Success" in r.out and "Marked for Delete" not in r.out


def test_conf_file_env_and_store_precedence(tmp_path: Path) -> None:
    conf_store = tmp_path / "from_conf"
    conf = tmp_path / "c.properties"
    conf.write_text(f"carbon.storelocation={conf_store}\n", encoding="utf-8")
    assert run("--conf", str(conf), "create", "a", "--schema", "x int").code == 0
    assert (conf_store / "default" / "a" / "Metadata" / "schema").is_file()
    r = run("tables", "--json", env={"CARBON_CONF": str(conf)})
    assert r.json() == ["default.a"]
    # --store beats the conf file's carbon.storelocation
    (tmp_path / "other").mkdir()  # an existing, empty store (a missing one is an error)
    r = run("--store", str(tmp_path / "other"), "--conf", str(conf), "tables", "--json")
    assert r.json() == []
    # with neither, the default ./carbon.store is relative to the working directory
    assert run("create", "b", "--schema", "x int", cwd=tmp_path).code == 0
    assert (tmp_path / "carbon.store" / "default" / "b" / "Metadata" / "schema").is_file()


# ---- user mistakes: one line on stderr, exit 2, no traceback -----------------------------

MISTAKES: dict[str, tuple[list[str], str]] = {
    "traversal name": (["create", "../x", "--schema", "id long"], "invalid table name"),
    "three-part name": (["describe", "db.t.x"], "invalid table name"),
    "unicode name": (["create", "caf\u00e9", "--schema", "id long"], "invalid table name"),
    "bad type": (["create", "n", "--schema", "id lng"], "unknown type 'lng'"),
    "unknown property": (["create", "n", "--schema", "a int", "--property", "colour=red"],
                         "unknown table property 'colour'"),
    "bad property value": (["create", "n", "--schema", "a int", "--property", "page_rows=0"],
                           "page_rows must be at least 1"),
    "property without value": (["create", "n", "--schema", "a int", "--property", "page_rows"],
                               "expects KEY=VALUE"),
    "unknown sort column": (["create", "n", "--schema", "a int", "--sort-columns", "b"],
                            "unknown column 'b'"),
    "unknown table": (["describe", "nope"], "table default.nope does not exist"),
    "unknown table segments": (["show-segments", "nope", "--json"], "does not exist"),
    "drop unknown table": (["drop", "db.nope"], "table db.nope does not exist"),
    "table exists": (["create", "existing", "--schema", "a int"], "already exists"),
    "missing conf file": (["--conf", "/nonexistent/c.properties", "tables"],
                          "cannot read conf file"),
    "unknown conf key": (["--conf", "{bad_conf}", "tables"], "unknown configuration key"),
    "missing --schema": (["create", "n"], "required: --schema"),
    "bad sort scope": (["create", "n", "--schema", "a int", "--sort-scope", "fast"],
                       "invalid choice"),
    "unknown command": (["frobnicate"], "invalid choice"),
    "unknown option": (["tables", "--colour"], "unrecognized arguments"),
    "no command": ([], "required"),
}


@pytest.fixture(scope="module")
def mistakes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    """Run every mistake at once (they are independent) to keep the suite quick."""
    base = tmp_path_factory.mktemp("mistakes")
    st = str(base / "store")
    Store(st).create_table("existing", "a int")
    bad_conf = base / "bad.properties"
    bad_conf.write_text("carbon.nope=1\n", encoding="utf-8")
    procs = {}
    for i, (name, (args, _)) in enumerate(sorted(MISTAKES.items())):
        argv = [a.replace("{bad_conf}", str(bad_conf)) for a in args]
        # alternate the two entry points; --store first, as users type it
        procs[name] = subprocess.Popen(
            _cmd(["--store", st, *argv], module=bool(i % 2)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
        )
    out = {}
    for name, p in procs.items():
        stdout, stderr = p.communicate(timeout=120)
        out[name] = Result(p.returncode, stdout, stderr)
    names = sorted(os.listdir(Path(st) / "default"))
    assert names == ["existing"], f"a refused command created something: {names}"
    return out


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_user_mistake_is_one_line_and_exit_2(mistakes: dict[str, Result], name: str) -> None:
    r = mistakes[name]
    expected = MISTAKES[name][1]
    assert r.code == 2, r
    assert "Traceback" not in r.err
    lines = r.err.splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith("carbonstore"), lines[0]
    assert "error" in lines[0]
    assert expected in lines[0]
    assert r.out == ""


def test_corrupt_metadata_is_one_line_and_exit_2(tmp_path: Path) -> None:
    st = str(tmp_path / "store")
    table = Store(st).create_table("t", "id long")
    table.status.allocate()
    table.status.allocate()
    latest = f"{table.status.log_dir}/{2:020d}.json"  # a version file, no longer one file
    with open(latest, "r+b") as f:
        f.truncate(10)
    r = run("--store", st, "show-segments", "t", "--json")
    assert r.code == 2
    assert "Traceback" not in r.err and len(r.err.splitlines()) == 1
    assert "CorruptMetadataError" in r.err
    assert latest in r.err
    assert r.out == ""


def test_store_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    r = run("--store", str(blocker / "store"), "create", "t", "--schema", "id long")
    assert r.code == 1
    assert "Traceback" not in r.err and len(r.err.splitlines()) == 1
    assert r.err.startswith("carbonstore: error:")


def test_help_lists_the_foundation_commands() -> None:
    r = run("--help")
    assert r.code == 0
    for command in ("create", "describe", "drop", "tables", "show-segments"):
        assert command in r.out
