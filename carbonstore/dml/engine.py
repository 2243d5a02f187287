"""What every DML statement on Spark shares: the session and its time zone, the plan of the
target, Spark's errors as one line, the lazy record of what a statement read, and the
write-and-commit step (docs/dml.md, "Execution")."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from carbonstore.dml.target import FILE, POS, DataFile, data_files, group_positions, located_frame
from carbonstore.dml.tasks import write_deltas, write_rows
from carbonstore.errors import ExpressionError, UserError
from carbonstore.expressions.bind import session_zone
from carbonstore.expressions.expr import AlwaysTrue, And, Expr
from carbonstore.expressions.parser import and_terms
from carbonstore.pruning.plan import TablePlan, bind_where, prune
from carbonstore.segments.commit import lease_seconds
from carbonstore.segments.dml_commit import DmlResult, Matches, apply_changes
from carbonstore.segments.dml_conflicts import FileKey, Reads
from carbonstore.spark.session import get_spark
from carbonstore.store.leases import StatementLease
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import TableStatusSnapshot

__all__ = ["LazyRows", "Target", "adaptive_off", "commit_statement", "pruning_filter",
           "spark_errors", "spark_for", "statement_zone"]

ZONE_KEY = "spark.sql.session.timeZone"
ADAPTIVE_KEY = "spark.sql.adaptive.enabled"
_adaptive_lock = threading.Lock()
_adaptive_users: dict[int, list[Any]] = {}  # id(session) -> [statements, value found]
_EMPTY = np.zeros(0, np.uint32)


def spark_for(table: Table) -> Any:
    """The active Spark session, or one started with the store's conf."""
    return get_spark(conf=table.store.conf)


@contextlib.contextmanager
def statement_zone(spark: Any, time_zone: str | None) -> Iterator[None]:
    """Spark's session time zone set to ``time_zone`` while the statement runs."""
    if not time_zone:
        yield
        return
    old = spark.conf.get(ZONE_KEY)
    try:
        spark.conf.set(ZONE_KEY, time_zone)
    except Exception as err:  # noqa: BLE001 - Spark's own check of the zone id
        raise UserError(f"unknown time zone {time_zone!r}: {_first_line(err)}") from None
    try:
        yield
    finally:
        spark.conf.set(ZONE_KEY, old)


@contextlib.contextmanager
def adaptive_off(spark: Any, off: bool = True) -> Iterator[None]:
    """Spark's adaptive query execution off while the statement's jobs run (when ``off``).

    The jobs of DELETE and UPDATE gain nothing from it (the delta job's shuffle has its
    own partition count, the insert job's arrangement is the load's), and it costs them
    one Spark job per query stage: a map stage, a cached relation and the final stage each
    run as a job of their own, re-planned in between (about half a small UPDATE's time).
    A large MERGE keeps it (its join may gain by it: runtime broadcast, coalesced or split
    skewed partitions). Results are the same either way. Statements of several threads on
    one session share the switch: the first sets it, the last restores the value it found.
    """
    if not off:
        yield
        return
    key = id(spark)
    with _adaptive_lock:
        users = _adaptive_users.setdefault(key, [0, None])
        if users[0] == 0:
            users[1] = spark.conf.get(ADAPTIVE_KEY)
            spark.conf.set(ADAPTIVE_KEY, "false")
        users[0] += 1
    try:
        yield
    finally:
        with _adaptive_lock:
            users[0] -= 1
            if users[0] == 0:
                spark.conf.set(ADAPTIVE_KEY, users[1])
                del _adaptive_users[key]


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else type(err).__name__)[:500]


@contextlib.contextmanager
def spark_errors(what: str) -> Iterator[None]:
    """Spark's analysis and runtime errors of the user's expressions as one-line
    :class:`UserError`; a data file missing under a task as ``FileNotFoundError`` (a race
    with clean files when the version moved: ``run_replanned`` plans again)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    try:
        yield
    except (PySparkException, Py4JJavaError) as err:
        text = str(err)
        if "FAILED_READ_FILE" in text and ("FileNotFound" in text or "does not exist" in text):
            raise FileNotFoundError(_first_line(err)) from None
        raise UserError(f"{what}: {_spark_message(err)}; nothing was changed") from None


def _spark_message(err: BaseException) -> str:
    """Spark's error in the words of the store's other errors where they have some (an
    unknown column), else its first line."""
    import re

    text = str(err)
    found = re.search(r"UNRESOLVED_COLUMN\S*\] A column[^`]*`([^`]+)`", text)
    if found:
        return f"unknown column {found.group(1)} ({_first_line(err)})"
    # an error of a Python task (the located read, the delta and insert writers): the
    # exception its traceback ends with, not the "thrown from the Python worker" header
    raised = re.findall(r"^(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*(?:Error|Exception)): (.+)$",
                        text.split("JVM stacktrace:")[0], re.M)
    if "from the Python worker" in text and raised:
        name, message = raised[-1]
        return f"{name}: {message.strip()}"[:500]
    return _first_line(err)


def pruning_filter(table: Table, where: str | None, time_zone: str | None) -> Expr:
    """The conjuncts of ``where`` the store's filter parser binds (the index prunes with
    them; Spark evaluates the whole condition on the rows of the files they keep)."""
    import sqlglot
    from sqlglot.errors import ParseError, TokenError


    if not where:
        return AlwaysTrue()
    zone = (session_zone(time_zone) if time_zone else None) or dt.UTC
    try:
        terms = and_terms(sqlglot.parse_one(where, read="spark"))
    except (ParseError, TokenError, RecursionError):
        return AlwaysTrue()  # Spark reports the mistake
    bound: Expr = AlwaysTrue()
    for term in terms:
        try:
            e = bind_where(table, term.sql(dialect="spark"), time_zone=zone)
        except (ExpressionError, RecursionError, ValueError):
            continue
        bound = e if isinstance(bound, AlwaysTrue) else And(bound, e)
    return bound


class Target:
    """The target rows of one statement on one snapshot: its plan, its files and the
    located DataFrame over them."""

    def __init__(self, spark: Any, table: Table, prune_by: Expr, snap: TableStatusSnapshot,
                 segments: Sequence[str] | None = None) -> None:
        pinned = table.as_of(snap.version, check_files=False)
        self.plan: TablePlan = prune(pinned, prune_by, segments=segments)
        self.files: dict[str, DataFile] = data_files(table, self.plan, snap)
        self.frame = located_frame(spark, table, self.plan)

    def rows(self) -> int:
        """Rows in the row groups the plan keeps."""
        return sum(rg.num_rows for f in self.plan.files for rg in f.row_groups)

    def keys(self) -> list[FileKey]:
        return [(f.segment, f.rel) for f in self.files.values()]

    def positions(self, rows: Any) -> dict[FileKey, Any]:
        """(segment, file) -> positions of a located DataFrame's rows (collected: used only
        after a lost race, docs/dml.md)."""
        return group_positions([(r[0], r[1]) for r in rows.select(FILE, POS).collect()],
                               self.files)


class LazyRows(Mapping[FileKey, Any]):
    """The positions a statement read, per planned file, computed on first use: the
    commit's conflict check asks only after a lost race, and only for files whose delta
    changed (segments/dml_conflicts.py)."""

    def __init__(self, keys: Sequence[FileKey], compute: Callable[[], Mapping[FileKey, Any]]):
        self._keys = list(dict.fromkeys(keys))
        self._compute = compute
        self._data: Mapping[FileKey, Any] | None = None

    def __getitem__(self, key: FileKey) -> Any:
        if key not in set(self._keys):
            raise KeyError(key)
        if self._data is None:
            self._data = self._compute()
        return self._data.get(key, _EMPTY)

    def __iter__(self) -> Iterator[FileKey]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def commit_statement(
    spark: Any, table: Table, snap: TableStatusSnapshot, *, operation: str,
    gone: Any, files: Mapping[str, DataFile], new_rows: Any | None, reads: Reads,
    replaces: bool = False,
) -> DmlResult:
    """Write the statement's deltas (rows of ``gone``) and insert segment (``new_rows``) in
    Spark tasks, then commit both in one version (``segments.dml_commit``). ``replaces``:
    the new rows are new versions of deleted ones (UPDATE): none when nothing was deleted."""
    lease = StatementLease(table.status, operation, lease_seconds(table))
    try:
        with spark_errors(operation):
            written = write_deltas(spark, table, gone, files, what=operation)
            prepared = None
            if new_rows is not None and (written or not replaces):
                prepared = write_rows(spark, table, new_rows, what=operation)
    except BaseException:
        lease.release()
        raise
    version, nfiles, seg = apply_changes(
        table, Matches(snap, {}, None), operation=operation, reads=reads, written=written,
        prepared=prepared, lease=lease)
    inserted = 0 if prepared is None or version is None else int(prepared.fields["row_count"])
    return DmlResult(operation=operation, version=version,
                     deleted=sum(w.added for w in written.values()), inserted=inserted,
                     files=nfiles, segments=tuple(sorted({k[0] for k in written})),
                     inserted_segment=seg)
