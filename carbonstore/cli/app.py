"""The ``carbonstore`` command line.

Each module of ``carbonstore.cli`` exposes ``register(subparsers, parents)``; this
file only wires them together, resolves ``--store`` / ``--conf`` and turns our errors into
one clear line (exit 2 for a user mistake and for a damaged or unusable file of the store or
the input - the user's to restore or replace, not a failure of the command - 1 for anything
else we raise on purpose, 130 after Ctrl-C).

The one-line promise is kept here for every command: arguments that are not UTF-8 text
are refused before any command runs, an error message is printed on one line without
terminal control codes, and library log records that would print tracebacks while the
process is interrupted (py4j) are dropped.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import re
import signal
import sys
import warnings
from collections.abc import Iterator, Sequence

from carbonstore.errors import (
    QUIET_ERROR_LOGS,
    CarbonStoreError,
    CorruptIndexError,
    CorruptMetadataError,
    DictionaryError,
    UnsupportedParquetError,
    UserError,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at --help (mypy knows it)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["COMMANDS", "DAMAGE_ERRORS", "UNCHECKED", "build_parser", "main"]

# Damage to a file (a metadata file, an index, a dictionary, a data file) or an input file we
# cannot index: exit 2 like a user mistake - the message names the file and the fix. These
# stay outside UserError in the library: code that skips a conjunct it cannot bind
# (UserError) must not skip one that met a damaged dictionary.
DAMAGE_ERRORS = (CorruptIndexError, CorruptMetadataError, DictionaryError, UnsupportedParquetError)

# The modules of carbonstore.cli that add top-level commands, in help order. `index rebuild`
# is added by cli/index.py (cli/rebuild.py adds no top-level command).
COMMANDS = (
    "alter", "compact", "dictionary", "dml", "history", "index", "load", "partitions",
    "query", "segments", "stats", "tables",
)

#: The commands each module of COMMANDS adds, with their help line, in help order: a command
#: line naming one of them imports only that module (``show-segments`` does not pay for the
#: imports of ``load`` or ``sql``), and ``carbonstore --help`` imports none (it lists these
#: lines). A command missing here imports every module. tests/cli/test_fast_start.py checks
#: this table against what the modules register.
COMMAND_MODULES: dict[str, tuple[str, str]] = {
    'alter': ('alter', "change a table's schema or properties (a new schema version; no data rewritten)"),
    'compact': ('compact', 'merge segments (minor: level thresholds, major: size, custom: given ids, cluster: along a Z-order / Hilbert curve)'),
    'dictionary': ('dictionary', "show a column's global dictionary; look values or surrogates up"),
    'delete': ('dml', 'delete the rows matching --where (delete deltas; no file rewritten)'),
    'update': ('dml', 'set columns of the rows matching --where (Spark SQL expressions)'),
    'history': ('history', "list the table's versions: time, operation, segments, rows"),
    'restore': ('history', 'commit a new version whose readable segments are those of an old one'),
    'index': ('index', 'inspect or rebuild index files'),
    'add-segment': ('index', 'adopt a folder of Parquet files as a new segment (files are copied)'),
    'load': ('load', 'load CSV/Parquet/JSON/ORC files into a new segment'),
    'show-partitions': ('partitions', "list a table's partitions: values, files, rows"),
    'partition': ('partitions', 'show or change the partition and bucket spec of new loads'),
    'prune': ('query', 'plan a scan from the indexes: what survives and why the rest is skipped'),
    'query': ('query', 'read a table through Spark (pruned by --where)'),
    'sql': ('query', "run SQL statements over the store's tables (db.table): queries, DML, DDL, CarbonData verbs (docs/sql.md)"),
    'delete-segments': ('segments', 'mark segments for delete, by id or by load start time'),
    'clean-files': ('segments', 'remove compacted, deleted and failed segments and unreferenced folders'),
    'analyze': ('stats', 'compute column statistics of segments (ANALYZE ... COMPUTE STATISTICS FOR COLUMNS)'),
    'stats': ('stats', 'show (or delete) column statistics of a table or of one segment'),
    'create': ('tables', 'create a table'),
    'describe': ('tables', "show a table's schema and properties"),
    'drop': ('tables', 'drop a table and all its files'),
    'tables': ('tables', 'list the tables of the store'),
    'show-segments': ('tables', "list a table's segments"),
}
_TOP_OPTIONS = ("--store", "--conf")  # the top-level options that take a value


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, reading the terminal's width when it first formats help,
    not when it is made: argparse makes one for every ``add_argument`` (to check a metavar)
    and the width needs ``shutil`` (3-6 ms of a fresh process that prints no help)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, 0 if width is None else width)
        if width is None:  # read by __getattr__ when first asked for
            del self._width, self._max_help_position
            self._asked_position = max_help_position

    def __getattr__(self, name: str) -> Any:
        if name not in ("_width", "_max_help_position"):
            raise AttributeError(name)
        import shutil

        width = shutil.get_terminal_size().columns - 2  # as HelpFormatter computes it
        self._width = width
        self._max_help_position = min(self._asked_position,
                                      max(width - 20, self._indent_increment * 2))
        return getattr(self, name)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> object:
        # "--opt=--" gives the value "--": Python before 3.12 drops it as the end-of-options
        # marker and hands the command an empty list instead of a string.
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            arg_strings = ["--", "--"]
        return super()._get_values(action, arg_strings)

    def error(self, message: str) -> None:  # type: ignore[override]
        # A usage mistake is a user mistake: one line and exit status 2, like UserError.
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see '{self.prog} --help')\n")


class _Version(argparse.Action):
    """``--version``: the installed distribution's version (importlib.metadata is read only
    when asked: it is not part of a command's start)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("carbonstore")
        except PackageNotFoundError:  # run from a source tree that was never installed
            found = "unknown (not installed)"
        print(f"carbonstore {found}")
        parser.exit(0)


def command_of(argv: Sequence[str]) -> str | None:
    """The command a command line names (its first argument that is not a top-level option
    or an option's value), or None."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _TOP_OPTIONS:
            skip = True
        elif not arg.startswith("-"):
            return arg
        elif arg == "--":
            return None
    return None


def build_parser(command: str | None = None, *, index: bool = False) -> argparse.ArgumentParser:
    """The parser of every command; with ``command`` (a key of COMMAND_MODULES), of the
    module adding it only; with ``index``, of no module: the commands' help lines only
    (for ``carbonstore --help``)."""
    common = _Parser(add_help=False)
    common.add_argument(
        "--store", default=argparse.SUPPRESS,
        help="store location (path or URI); default: carbon.storelocation (./carbon.store)",
    )
    common.add_argument(
        "--conf", default=argparse.SUPPRESS,
        help="properties file (default: $CARBON_CONF); see conf/carbon.properties",
    )
    parser = _Parser(
        prog="carbonstore",
        description="A segment store of Parquet files with side indexes, driven by PySpark.",
        parents=[common],
    )
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    # prog: what argparse would format from the usage (no positional precedes COMMAND)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser,
                                prog=parser.prog)
    sub.required = True
    if index:
        for name, (_, text) in COMMAND_MODULES.items():
            sub.add_parser(name, help=text, add_help=False)
        return parser
    names = (COMMAND_MODULES[command][0],) if command in COMMAND_MODULES else COMMANDS
    for name in names:
        importlib.import_module(f"carbonstore.cli.{name}").register(sub, [common])
    return parser


_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BREAKS = re.compile(r"\s*(?:\r\n|\r|\n|\u2028|\u2029|\x85)\s*")


def one_line(message: str) -> str:
    """``message`` without terminal control sequences, its lines joined by a space (spaces
    inside a line are kept: a quoted value is shown as given)."""
    return _BREAKS.sub(" ", _CONTROL.sub("", message)).strip()


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def _argument_name(parser: argparse.ArgumentParser, dest: str) -> str:
    for p in _parsers(parser):
        for action in p._actions:
            if action.dest == dest:
                return action.option_strings[-1] if action.option_strings else (
                    action.metavar if isinstance(action.metavar, str) else dest)
    return dest


def _not_utf8(value: str) -> int | None:
    """The first byte that is not UTF-8 in an argument (Python keeps such bytes of the
    command line as lone surrogates), or None."""
    for ch in value:
        if "\udc80" <= ch <= "\udcff":
            return ord(ch) - 0xDC00
        if "\ud800" <= ch <= "\udfff":
            return ord(ch)
    return None


def _check_text(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse an argument that is not UTF-8 text, naming it (every store path, filter,
    value and name is UTF-8 text)."""
    for dest, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and (byte := _not_utf8(item)) is not None:
                raise UserError(
                    f"argument {_argument_name(parser, dest)} is not valid UTF-8 text "
                    f"(byte 0x{byte:02x}); give it in UTF-8"
                )


class _DropPy4J:
    """py4j reports an interrupted call with ``logging.exception`` on the root logger: a
    traceback for what is only Ctrl-C. Those records are dropped; others pass (a logging
    filter: any object with this method)."""

    def filter(self, record: Any) -> bool:
        return "py4j" not in record.pathname.replace("\\", "/").split("/")


def _route_logging(logging: Any) -> None:
    """Give the root logger a handler (as ``logging.lastResort`` would print: the message
    alone, WARNING and above, on stderr) that drops py4j's records."""
    # sqlglot warns "contains unsupported syntax" for statements it falls back on; the
    # statement is then refused (or run) with its own one-line message
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    root = logging.getLogger()
    if root.handlers:  # configured by the embedding program: leave it alone
        return
    handler = logging.StreamHandler()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(_DropPy4J())
    root.addHandler(handler)


class _RouteOnImport:
    """An import finder that routes ``logging`` (``_route_logging``) right after something
    first imports it: a command none of whose libraries log (``prune``, the metadata
    commands) does not import logging itself (3-10 ms of a fresh process), and a record
    logged by py4j or sqlglot meets the same routing as when it was set up first."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "logging":
            return None
        from importlib.machinery import PathFinder

        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = PathFinder.find_spec(name, path)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            _route_logging(module)

        loader.exec_module = exec_module
        return spec


def _route_logging_when_imported() -> None:
    """Route ``logging`` now if it is loaded, else as soon as it is."""
    if "logging" in sys.modules:
        _route_logging(sys.modules["logging"])
    elif not any(isinstance(f, _RouteOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _RouteOnImport())


#: PySpark's FutureWarning when pandas 3 is installed (pyspark[connect] pulls it): said on
#: every Spark command, about pandas features carbonstore does not use
_PANDAS_WARNING = "PySpark does not yet fully support pandas"


def _quiet_warnings() -> None:
    """Drop PySpark's pandas warning here and in the Python workers Spark starts from this
    process (they inherit ``PYTHONWARNINGS``); other warnings are shown as before."""
    warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)
    rule = f"ignore:{_PANDAS_WARNING}:FutureWarning"
    current = os.environ.get("PYTHONWARNINGS", "")
    if rule not in current:
        os.environ["PYTHONWARNINGS"] = f"{current},{rule}" if current else rule


def _quiet_spark_error_logs() -> None:
    """The CLI reports a Spark error in one line itself: PySpark's own JSON log of the same
    error with its query context (its DataFrame/SQL query-context loggers, which write to
    stderr) is turned off once Spark starts (spark/session.py reads the variable)."""
    os.environ.setdefault(QUIET_ERROR_LOGS, "1")


def _report(message: str) -> None:
    print(one_line(message), file=sys.stderr)


#: numpy's OpenBLAS starts a thread per core when numpy is imported (a plan, an Arrow
#: checkpoint): 0.02 s of CPU on 2 cores (0.141 against 0.123 s, median of 9, load 20), more
#: on a machine with many. carbonstore makes no BLAS call (no dot, matmul or linalg), so
#: the program runs with one. Spark's local Python workers inherit it (they make none
#: either); executors of a cluster and a program embedding main() keep their own setting.
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "1")

#: A command's first tenths of a second are imports and a plan: hundreds of thousands of new
#: objects (modules, functions, arrays' wrappers, a plan's files), next to none in a cycle.
#: At the default threshold (700 new containers) the cycle collector ran over them again
#: and again: 15-20 ms of a 0.3 s lookup at 100,000 segments. At this one it still runs
#: (a long command's cycles are freed), a hundred times less often. Set for the program
#: itself only; a program embedding main() keeps its own.
_GC_THRESHOLD = (100_000, 10, 10)


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the program itself (console script, python -m): before numpy loads
        os.environ.setdefault(*_BLAS_THREADS)
        gc.set_threshold(*_GC_THRESHOLD)
        try:
            return _main(sys.argv[1:])
        finally:
            _freeze_before_exit()
    return _main(list(argv))


def _freeze_before_exit() -> None:
    """At exit, Python runs the cycle collector over every object still alive: a plan's
    modules, arrays and records, 30-90 ms of a 0.3-1 s ``prune`` at 100,000 segments, to
    find next to no cycle in a process about to end. The program moves them out of its
    reach when the command is done. Everything is still released as the interpreter
    finalizes (atexit handlers run, files close and flush); a cycle left from the command
    is simply not searched for. Not done once Spark ran: its gateway's objects are
    finalized by that collection."""
    if "pyspark" not in sys.modules:
        gc.freeze()


def _main(argv: list[str]) -> int:
    command = command_of(argv)
    # no command (``--help``, or a missing one): the help lines, no command module imported
    parser = build_parser(command, index=command is None)
    args = parser.parse_args(argv)
    args.store = getattr(args, "store", None)
    args.conf = getattr(args, "conf", None)
    _route_logging_when_imported()
    _quiet_warnings()
    _quiet_spark_error_logs()
    try:
        _check_text(parser, args)
        return int(args.func(args) or 0)
    except UserError as err:
        _report(f"carbonstore: error: {err}")
        return 2
    except CarbonStoreError as err:
        workers = _worker_import_error(err)
        if workers is not None:
            _report(f"carbonstore: error: {workers}")
            return 2
        _report(f"carbonstore: {type(err).__name__}: {err}")
        return 2 if isinstance(err, DAMAGE_ERRORS) else 1
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep Python's final flush of
        # stdout from reporting the broken pipe again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 0
    except OSError as err:
        # The store folder is missing, unwritable, a file, ... : say so without a traceback.
        _report(f"carbonstore: error: {err}")
        return 1
    except KeyboardInterrupt:
        _interrupted()
        return 130
    except RecursionError:
        # Last line of defence: every input is checked against docs/reliability.md#limits
        # before any work; an input nested deeper than some code path can walk still ends
        # in one line.
        _report("carbonstore: error: the input nests too deeply to be processed; see the "
                "limits in docs/reliability.md#limits")
        return 2
    except Exception as err:  # noqa: BLE001 - the last line of defence (see _unexpected)
        workers = _worker_import_error(err)
        if workers is not None:
            _report(f"carbonstore: error: {workers}")
            return 2
        spark = _spark_error(err)
        if spark is not None:
            user, message = spark
            _report(f"carbonstore: error: {message}" if user
                    else f"carbonstore: SparkError: {message}")
            return 2 if user else 1
        return _unexpected(err)


#: Said after the message of a ValueError no check of carbonstore refused first (a test
#: that meets it has found an input to check: docs/reliability.md#limits).
UNCHECKED = "an input carbonstore did not check first"


def _unexpected(err: Exception) -> int:
    """Last line of defence for an exception no command meant to raise: one line, never a
    traceback (``CARBONSTORE_DEBUG=1`` raises it instead). A ``ValueError`` (pyarrow's
    ``ArrowInvalid`` is one) is a library refusing a value the user gave: exit 2. Anything
    else is a bug of carbonstore: exit 1, said as an internal error."""
    if os.environ.get("CARBONSTORE_DEBUG"):
        raise err
    text = " ".join(str(err).split())[:500] or type(err).__name__
    if isinstance(err, ValueError):
        _report(f"carbonstore: error: {text} ({UNCHECKED})")
        return 2
    _report(f"carbonstore: internal error: {type(err).__name__}: {text} (a bug; run with "
            "CARBONSTORE_DEBUG=1 for the traceback and report it)")
    return 1


def _spark_error(err: BaseException) -> tuple[bool, str] | None:
    """(a user error?, its first line) of an error Spark raised while it ran a statement
    (ANSI casts, division by zero, overflow: SQLSTATE class 22, or an analysis error: 42),
    or None for an error that is not Spark's."""
    module = type(err).__module__
    if not module.startswith(("pyspark.", "py4j.")):
        return None
    text = ""
    state = ""
    get_message = getattr(err, "getMessage", None)
    get_state = getattr(err, "getSqlState", None)
    try:
        text = str(get_message() if callable(get_message) else err)
        state = str(get_state() or "") if callable(get_state) else ""
    except Exception:  # noqa: BLE001 - the gateway may be gone; fall back on str()
        text = str(err)
    if not state:
        found = re.search(r"SQLSTATE: (\w{5})", text)
        state = found.group(1) if found else ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = next((ln for ln in lines if "SQLSTATE" in ln), lines[0] if lines else type(err).__name__)
    first = re.sub(r"^.*?(?=\[[A-Z_.]+\])", "", first) if "[" in first else first
    return state[:2] in ("22", "42"), first[:500]


_MISSING = re.compile(r"No module named '(carbonstore|pyarrow|numpy|numba|datasketches)\b")


def _worker_import_error(err: BaseException) -> str | None:
    """One line for a Spark job that failed because its Python workers cannot import
    carbonstore (or a library it needs): they run another Python than this process. The
    error, or one it was raised from (a load wraps Spark's error), is Spark's and its text
    carries the worker's ``ModuleNotFoundError``."""
    seen: set[int] = set()
    cur: BaseException | None = err
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if type(cur).__module__.startswith(("pyspark.", "py4j.")):
            found = _MISSING.search(str(cur))
            if found is not None:
                return (
                    f"Spark's Python workers cannot import {found.group(1)} (No module named "
                    f"'{found.group(1)}'): they run another Python than this one "
                    f"({sys.executable}); set PYSPARK_PYTHON to a Python where carbonstore is "
                    "installed (export PYSPARK_PYTHON=$(which python)), or ship it to the "
                    "executors (docs/cluster.md)")
        cur = cur.__cause__ or cur.__context__
    return None


def _interrupted() -> None:
    """Ctrl-C: one line, and a second Ctrl-C while the process winds down adds nothing."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass
    _report("carbonstore: interrupted")


if __name__ == "__main__":
    sys.exit(main())
