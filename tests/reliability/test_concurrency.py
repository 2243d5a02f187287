"""Concurrency suite: 8 loads, a compaction, queries and a clean-files run at the same time.

All are separate OS processes on one table (tests/reliability/workload.py: the product's
driver and writer code without a JVM, so eight loads fit on two cores). The queries check
every snapshot they read while the others run: whole loads only, each row once. At the end
every committed row is present exactly once and the global dictionary holds each value once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.dictionary import clear_cache as clear_dictionary_cache
from carbonstore.dictionary import load_dictionary
from carbonstore.pruning.cache import clear_cache
from carbonstore.store import load_conf
from carbonstore.store.tablestatus import COMPACTED, SUCCESS
from tests.reliability.test_crash import WORKLOAD, _env, assert_no_orphans, check_rows, clean
from tests.reliability.workload import CITIES, SCHEMA

pytestmark = pytest.mark.slow

LOADS = 8
ROWS = 40


def test_loads_compaction_queries_and_clean_files_at_once(tmp_path: Path) -> None:
    conf = load_conf(None).with_overrides({"carbon.clean.files.force.allowed": "true"})
    store = Store(str(tmp_path / "store"), conf=conf)
    table = store.create_table("db.t", SCHEMA, properties={"dictionary_include": "city"})
    loc = store.location

    def start(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, WORKLOAD, loc, *args], env=_env(None),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    procs = {f"load{k}": start("load", "db.t", str(k * 1000), str(ROWS)) for k in range(LOADS)}
    procs["compact"] = start("compact", "db.t", "--wait", "4")
    procs["query1"] = start("query", "db.t", "6", str(ROWS))
    procs["query2"] = start("query", "db.t", "6", str(ROWS))
    procs["clean"] = start("clean", "db.t")  # no --force: retention protects running queries
    out: dict[str, str] = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"{name}: {stderr[-3000:]}"
        out[name] = stdout.strip()
    assert int(out["query1"]) >= 1 and int(out["query2"]) >= 1
    assert out["compact"], "the compaction merged nothing"

    snap = table.status.read()
    assert {e.status for e in snap.entries} <= {SUCCESS, COMPACTED}
    assert sorted(out[f"load{k}"] for k in range(LOADS)) == sorted(str(i) for i in range(LOADS))
    expected = sorted(k * 1000 + i for k in range(LOADS) for i in range(ROWS))
    check_rows(table, expected)

    conf_file = tmp_path / "carbon.properties"
    conf_file.write_text("carbon.clean.files.force.allowed=true\n")
    clean(table, str(conf_file))
    assert_no_orphans(table)
    check_rows(table, expected)

    clear_cache()
    clear_dictionary_cache()
    values = load_dictionary(table, "city").values.to_pylist()
    assert sorted(values) == sorted(CITIES)  # every value once, whoever added it first
