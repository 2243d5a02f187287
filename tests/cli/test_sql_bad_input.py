"""``carbonstore sql`` given statements a user gets wrong: one line on stderr, exit 2, never
a traceback and never a silent no-op (the CarbonData verbs, and errors Spark raises only
while it runs the statement: ANSI casts, division by zero)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from carbonstore import Store
from tests.cli.conftest import RunCli

ROOT = Path(__file__).resolve().parents[2]


def _one_line_error(code: int, out: str, err: str, message: str) -> None:
    assert code == 2 and out == "", (code, out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("carbonstore: error:"), err
    assert message in err, err


@pytest.mark.parametrize(("options", "message"), [
    ("OPTIONS('force'='maybe')", "'force' takes 'true' or 'false'"),
    ("OPTIONS('forse'='true')", "unknown option 'forse'"),
    ("OPTIONS(force=true)", "OPTIONS('key'='value', ...)"),
    ("OPTIONS('dryrun'='true', junk)", "OPTIONS('key'='value', ...)"),
])
def test_clean_files_refuses_options_it_would_ignore(
    run_cli: RunCli, store: Store, table: object, options: str, message: str
) -> None:
    """A misspelt or malformed option must not run CLEAN FILES without it (a forgotten
    dry run removes files)."""
    from carbonstore.segments.manage import delete_segments

    delete_segments(store.table("db.sales"), ["1"])
    before = sorted(p.relative_to(store.location) for p in Path(store.location).rglob("*"))
    code, out, err = run_cli(store, "sql", f"CLEAN FILES FOR TABLE db.sales {options}")
    _one_line_error(code, out, err, message)
    assert sorted(p.relative_to(store.location) for p in Path(store.location).rglob("*")) == before


def test_clean_files_options_are_case_blind(
    run_cli: RunCli, store: Store, table: object
) -> None:
    code, out, err = run_cli(store, "sql",
                          "clean files for table db.sales options ('DryRun' = 'TRUE', 'force'='false')",
                          "--json")
    assert code == 0, err
    assert json.loads(out) == []


def test_show_segments_limit_counts_from_the_newest(
    run_cli: RunCli, store: Store, table: object
) -> None:
    def ids(limit: str) -> list[str]:
        code, out, err = run_cli(store, "sql", f"SHOW SEGMENTS FOR TABLE db.sales{limit}", "--json")
        assert code == 0, err
        return [r["id"] for r in json.loads(out)]

    assert ids("") == ["0", "1", "2"]
    assert ids(" LIMIT 2") == ["1", "2"]
    assert ids(" LIMIT 0") == []  # was every segment: entries[-0:]
    assert ids(" LIMIT 9") == ["0", "1", "2"]


@pytest.mark.parametrize("statement", [
    "SHOW SEGMENTS FOR TABLE db.sales LIMIT -1",
    "ALTER TABLE db.sales COMPACT MINOR",
    "SHOW SEGMENTS db.sales",
])
def test_unknown_verb_forms_say_one_line_in_a_real_process(
    store: Store, table: object, statement: str
) -> None:
    """sqlglot's "contains unsupported syntax" warnings must not reach stderr."""
    res = subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", "--store", store.location, "sql", statement],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 2 and res.stdout == "", res
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith("carbonstore: error:"), res.stderr


@pytest.mark.parametrize(("statement", "message"), [
    ("SELECT id / 0 FROM db.sales", "DIVIDE_BY_ZERO"),
    ("SELECT count(*) FROM db.sales WHERE v > 'abc'", "CAST_INVALID_INPUT"),
    ("SELECT 'a', count(*) FROM db.sales WHERE cat = 'cat_1' UNION ALL "
     "SELECT 'b', count(*) FROM db.sales WHERE id > 'x'", "CAST_INVALID_INPUT"),
    ("SELECT CAST(cat AS INT) FROM db.sales", "CAST_INVALID_INPUT"),
])
def test_errors_spark_raises_while_running_are_one_line(
    run_cli: RunCli, spark: object, store: Store, table: object,
    statement: str, message: str,
) -> None:
    code, out, err = run_cli(store, "sql", statement)
    _one_line_error(code, out, err, message)
    assert "Traceback" not in err and "JVM stacktrace" not in err


def test_query_filter_errors_while_running_are_one_line(
    run_cli: RunCli, spark: object, store: Store, table: object,
) -> None:
    code, out, err = run_cli(store, "sql", "SELECT id FROM db.sales WHERE id = 5 AND 1 / 0 > 0")
    _one_line_error(code, out, err, "DIVIDE_BY_ZERO")
