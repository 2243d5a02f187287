"""The metadata commands start without the heavy engines: ``--help`` imports no command
module, a command imports only its own module, and nothing but Spark commands import
pyspark (nor numba, nor DuckDB); a missing input fails before any of them."""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.cli.app import COMMAND_MODULES, COMMANDS, build_parser, command_of

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pyspark", "py4j", "numba", "duckdb")
#: what a metadata command on a table whose tablestatus is JSON never needs: the answer is
#: plain Python over JSON files (the Arrow types, the numpy arrays and the file layer's
#: pyarrow.fs come in only for a big table's Arrow checkpoint, a plan or a data file)
ARROW = ("numpy", "pyarrow")

#: ``python -m carbonstore`` in the process that runs it (its argv: the process's own)
_PROGRAM = """
import runpy, sys
sys.argv = ["carbonstore", *sys.argv[1:]]
try:
    runpy.run_module("carbonstore", run_name="__main__")
except SystemExit:
    pass
"""


def _program(after: str, *argv: str, before: str = "",
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m carbonstore argv...`` in a fresh process, between code ``before`` and
    ``after`` run in the same process (what it loaded, what it left set)."""
    return subprocess.run([sys.executable, "-c", before + _PROGRAM + after, *argv], capture_output=True,
                          text=True, cwd=ROOT, env={**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)},
                          timeout=120)


_MODULES = """print("MODULES", " ".join(sorted(m for m in sys.modules if "." not in m)), file=sys.stderr)"""


def _run(*argv: str) -> tuple[str, set[str]]:
    """``python -m carbonstore argv...`` in a fresh process: (its stderr's first lines, the
    top-level modules it imported)."""
    lines = _program(_MODULES, *argv).stderr.splitlines()
    mods = next(ln for ln in lines if ln.startswith("MODULES")).split()[1:]
    return "\n".join(ln for ln in lines if not ln.startswith("MODULES")), set(mods)


def _run_full(*argv: str) -> tuple[str, set[str]]:
    """Like ``_run``, with every module's dotted name."""
    lines = _program(_MODULES.replace('if "." not in m', ""), *argv).stderr.splitlines()
    mods = next(ln for ln in lines if ln.startswith("MODULES")).split()[1:]
    return "\n".join(ln for ln in lines if not ln.startswith("MODULES")), set(mods)


def test_the_command_table_is_what_the_modules_register() -> None:
    found: dict[str, tuple[str, str]] = {}
    for name in COMMANDS:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"carbonstore.cli.{name}").register(sub, [])
        for action in sub._choices_actions:
            found[action.dest] = (name, str(action.help))
    assert found == COMMAND_MODULES
    assert list(found) == list(COMMAND_MODULES)  # help order


def test_command_of_skips_the_top_level_options() -> None:
    assert command_of(["--store", "s", "--conf", "c", "show-segments", "t"]) == "show-segments"
    assert command_of(["--store=s", "tables"]) == "tables"
    assert command_of(["--help"]) is None and command_of([]) is None
    # one module's parser parses its command like the full parser
    args = build_parser("show-segments").parse_args(["show-segments", "db.t"])
    assert args.func is build_parser().parse_args(["show-segments", "db.t"]).func


def test_import_and_help_load_no_engine() -> None:
    code = "import sys, carbonstore.cli; print(sorted(m for m in sys.modules if '.' not in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert not set(eval(out.stdout)) & set(HEAVY)  # noqa: S307 - our own repr of a list
    err, mods = _run("--help")
    assert not mods & {*HEAVY, "pyarrow", "numpy", "sqlglot"}, sorted(mods)
    err, mods = _run()  # no command: argparse's one line, still nothing imported
    assert "required: COMMAND" in err and "pyarrow" not in mods
    err, mods = _run("--version")
    assert not err and not mods & {*HEAVY, *ARROW, "sqlglot"}, sorted(mods)
    out = subprocess.run([sys.executable, "-m", "carbonstore", "--version"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0 and out.stdout.startswith("carbonstore "), out


@pytest.fixture
def loaded(store: Store) -> Store:
    """A table of three segments (appended without Spark)."""
    import pyarrow as pa

    table = store.create_table("db.t", "id long not null, name string")
    for i in range(3):
        table.append(pa.table({"id": pa.array([i, i + 10], pa.int64()), "name": ["a", "b"]}))
    return store


@pytest.mark.parametrize("argv", [
    ("show-segments", "db.t"), ("show-segments", "db.t", "--limit", "2", "--json"),
    ("show-segments", "db.t", "--history"), ("history", "db.t"), ("history", "db.t", "--json"),
    ("describe", "db.t"), ("describe", "db.t", "--json"), ("tables",), ("tables", "--json"),
    ("show-segments", "--help"),
])
def test_metadata_commands_load_no_engine(loaded: Store, argv: tuple[str, ...]) -> None:
    err, mods = _run("--store", loaded.location, *argv)
    assert not err, err
    # pandas: pyarrow imports it on a first pa.array / to_numpy; sqlglot: no filter here
    heavy = {*HEAVY, *ARROW, "pandas", "sqlglot"}
    assert not mods & heavy, sorted(mods & heavy)


def test_a_table_past_its_first_checkpoint_is_read_without_arrow(store: Store) -> None:
    """Past version 50 a table has an Arrow checkpoint; a process without pyarrow reads
    its JSON versions from version 0 instead (status_checkpoints.replays_json), and shows
    the same segments."""
    import orjson
    import pyarrow as pa

    from carbonstore.store.status_checkpoints import checkpoint_name

    table = store.create_table("db.t", "id long not null, name string")
    for i in range(26):  # 1 + 2 versions each: 53
        table.append(pa.table({"id": pa.array([i], pa.int64()), "name": ["a"]}))
    status = store.table("db.t").status
    assert (Path(status.log_dir) / checkpoint_name(50)).exists()
    out = _program("print('ARROW' if {'numpy', 'pyarrow'} & set(sys.modules) else 'PLAIN', file=sys.stderr)",
                   "--store", store.location, "show-segments", "db.t", "--json")
    assert out.stderr.strip() == "PLAIN", out.stderr
    shown = orjson.loads(out.stdout)
    assert [r["id"] for r in shown] == [e.load_name for e in status.read().entries]
    assert [r["rows"] for r in shown] == [1] * 26


@pytest.mark.parametrize("command", ["describe", "show-segments"])
def test_a_partitioned_tables_metadata_loads_no_arrow(store: Store, command: str) -> None:
    """A partition spec (checked whenever the schema is read) is plain Python: only
    computing partition values of rows needs numpy and pyarrow."""
    store.create_table("db.p", "id long, d date, r string",
                       properties={"partition_by": "day(d), r", "bucket_number": "4",
                                   "bucket_columns": "id"})
    err, mods = _run("--store", store.location, command, "db.p")
    assert not err, err
    assert not mods & {*HEAVY, *ARROW}, sorted(mods & {*HEAVY, *ARROW})


@pytest.mark.parametrize("where", ["id = 3", "name = 'a'", "name >= 'a' AND id < 5"])
def test_prune_loads_no_engine(loaded: Store, where: str) -> None:
    """``prune`` reads index files (numpy arrays): no engine, no pandas, and no sqlglot for
    a filter of the lookup shape. A string filter neither: its inexact maxima's successors
    are numbered without Arrow's ``pa.array`` (which imports pandas, 0.2-0.4 s) or its
    ``dictionary_encode`` (pyarrow.compute, 0.08 s)."""
    err, mods = _run("--store", loaded.location, "prune", "db.t", "--where", where)
    assert not err, err
    heavy = {*HEAVY, "pandas", "sqlglot"}
    assert not mods & heavy, sorted(mods & heavy)
    _, full = _run_full("--store", loaded.location, "prune", "db.t", "--where", where, "--json")
    assert "pyarrow.compute" not in full


#: what a plan never loads: pyarrow.fs (it brings ssl), numpy.ma (np.unique loads it),
#: zoneinfo (a UTC filter), logging (nothing of a plan logs), shutil (argparse's help width,
#: read only to format help), random (a commit's retry waits), csv (the CSV answer of
#: ``query``), the Parquet footer reader and the generated Parquet thrift types (a plan
#: reads the packed index arrays)
_NOT_IN_A_PLAN = ("numpy.ma", "pyarrow.fs", "ssl", "zoneinfo", "logging", "shutil", "random", "csv",
                  "carbonstore.indexfiles.footer", "carbonstore.indexfiles._gen.parquet.ttypes")


def test_prune_loads_only_what_a_plan_uses(loaded: Store) -> None:
    """A plan of a small table reads its index files with pyarrow's own file (not
    pyarrow.fs, which brings ssl), decides without numpy.ma (np.unique loads it), reads
    a UTC filter without zoneinfo, and loads neither logging nor the Parquet footer reader
    and its thrift types: about 0.04 s of CPU of a fresh process."""
    code = (f"print(' '.join(sorted(m for m in {_NOT_IN_A_PLAN!r} if m in sys.modules and "
            "not (m in ('logging', 'shutil', 'random', 'csv') and 'sqlglot' in sys.modules))) or 'NONE', "
            "file=sys.stderr)")
    # (sqlglot, which parses a filter of another shape than a lookup's, imports these four)
    for where in ("id = 3", "id IN (1, 2) OR id > 7", "name = 'a'"):
        out = _program(code, "--store", loaded.location, "prune", "db.t", "--where", where, "--json")
        assert out.stderr.strip() == "NONE", (where, out.stderr)
        assert '"kept"' in out.stdout


_LOG_AFTER = """
print("LOGGING" if "logging" in sys.modules else "NO LOGGING", file=sys.stderr)
import logging  # what a library (py4j, sqlglot) does after the command started
logging.getLogger().handle(logging.LogRecord(
    "py4j.clientserver", logging.ERROR, "/x/py4j/clientserver.py", 1, "dropped", None, None))
logging.getLogger("sqlglot").warning("quiet")
logging.getLogger("carbonstore.x").info("below warning")
logging.getLogger("carbonstore.x").warning("shown %s", 1)
"""


@pytest.mark.parametrize("argv", [("tables",), ("prune", "db.t", "--where", "id = 3", "--json")])
def test_a_command_that_logs_nothing_imports_no_logging(loaded: Store,
                                                          argv: tuple[str, ...]) -> None:
    """``logging`` (3-10 ms of a fresh process) is imported by no part of a plan or of a
    metadata command; the program routes it when a library first imports it: py4j's
    records dropped, sqlglot's warnings quiet, others said as their message alone."""
    out = _program(_LOG_AFTER, "--store", loaded.location, *argv)
    assert out.stderr.splitlines() == ["NO LOGGING", "shown 1"], out.stderr


@pytest.mark.parametrize("command", ["show-segments", "history", "describe", "tables",
                                     "prune", "drop", "create"])
def test_a_commands_help_imports_no_arrow(command: str) -> None:
    """``carbonstore <command> --help`` builds the command's parser only: no pyarrow, numpy
    (the file layer and the Arrow types, ~0.2 s of CPU), sqlglot or engine."""
    err, mods = _run(command, "--help")
    assert not mods & {*HEAVY, "pyarrow", "numpy", "sqlglot"}, sorted(mods)


def test_a_missing_input_fails_before_spark(store: Store, tmp_path: Path) -> None:
    store.create_table("db.t", "id long not null, name string")
    err, mods = _run("--store", store.location, "load", "db.t", "--input",
                     str(tmp_path / "nope.csv"))
    assert err == f"carbonstore: error: input {tmp_path / 'nope.csv'} does not exist"
    assert not mods & set(HEAVY)


@pytest.mark.parametrize("given", [None, "3"])
def test_the_program_runs_numpy_with_one_blas_thread(given: str | None) -> None:
    """``carbonstore`` (python -m, the console script) sets OPENBLAS_NUM_THREADS=1 before
    anything imports numpy, unless the user set it; numpy then starts no BLAS threads."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    out = _program("import os\nprint(os.environ.get('OPENBLAS_NUM_THREADS'), file=sys.stderr)", "--help",
                   env=env)
    assert out.stderr.strip() == (given or "1")


def test_main_called_by_a_program_leaves_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from carbonstore.cli.app import main

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "OPENBLAS_NUM_THREADS" not in os.environ


_DATACLASSES = """
print(" ".join(sorted(f"{m}.{k}" for m, mod in list(sys.modules.items()) if m.startswith("carbonstore")
                      for k, v in vars(mod).items() if isinstance(v, type) and v.__module__ == m
                      and "__dataclass_fields__" in vars(v))) or "NONE", file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [("describe", "db.t"), ("show-segments", "db.t"), ("tables",),
                                  ("history", "db.t"), ("prune", "db.t", "--where", "id = 3", "--json")])
def test_metadata_commands_and_a_plan_create_no_dataclass(loaded: Store, argv: tuple[str, ...]) -> None:
    """Their values are records (store/records.py): a dataclass costs about a millisecond of
    code generation when its module is imported (a fresh ``prune`` created some 35)."""
    out = _program(_DATACLASSES, "--store", loaded.location, *argv)
    assert out.returncode == 0 and out.stdout, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "NONE", out.stderr


_COUNT_COLLECTIONS = """
import gc
runs = [0]
gc.callbacks.append(lambda phase, info: runs.__setitem__(0, runs[0] + (phase == "start")))
"""
_COLLECTIONS = """
print("COLLECTIONS", runs[0], gc.get_threshold()[0], gc.get_freeze_count(), file=sys.stderr)
"""


def test_the_program_runs_the_cycle_collector_rarely(loaded: Store) -> None:
    """A plan's imports and arrays are hundreds of thousands of new objects next to none in
    a cycle: the program raises the collector's threshold (a program embedding main() keeps
    its own, test_main_called_by_a_program_keeps_its_collector)."""
    out = _program(_COLLECTIONS, "--store", loaded.location, "prune", "db.t", "--where", "id = 3", "--json",
                   before=_COUNT_COLLECTIONS)
    assert out.returncode == 0 and out.stdout, out.stderr
    runs, threshold, frozen = (int(x) for x in out.stderr.split("COLLECTIONS")[-1].split())
    assert threshold >= 100_000
    assert runs < 10, out.stderr  # (at the default threshold: a few hundred)
    assert frozen > 10_000, out.stderr  # (the exit's collection has nothing left to search)


def test_main_called_by_a_program_leaves_its_objects_to_its_collector(loaded: Store,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import gc

    from carbonstore.cli.app import main

    before = gc.get_freeze_count()
    assert main(["--store", loaded.location, "prune", "db.t", "--where", "id = 3", "--json"]) == 0
    assert '"kept"' in capsys.readouterr().out
    assert gc.get_freeze_count() == before


def test_main_called_by_a_program_keeps_its_collector() -> None:
    import gc

    from carbonstore.cli.app import main

    before = gc.get_threshold()
    with pytest.raises(SystemExit):
        main(["--help"])
    assert gc.get_threshold() == before
