"""The model and checker of the model-checked race (tests/reliability/test_race_model.py).

After the workers (race_workers.py) stopped, the committed operations are replayed in
version order on an in-memory model, a dict ``id -> v`` per version:

- a LOAD version adds the rows of the worker load whose segment it committed;
- a DELETE / UPDATE / MERGE version applies the statement the worker logged with that
  version (``DmlResult.version``) to the model of the version before; its reported counts
  must be the model's (each statement applied exactly once, with the effect it reported);
- ``RESTORE N`` makes the model that of version N;
- every other version (load / compaction begin, compaction, abort, clean files, ALTER) changes
  no row; an ALTER adds its column (schema log ``appliesFrom``), read as its default.

Then it checks (``check``): (a) the table read as of every version equals the model there,
or fails with the one-line ``VersionNotFoundError`` of files removed by clean files (only a
version that is no longer the latest); (b) the counts above; (c) every read a worker took
during the race equals the model of the version it reported reading (a latest read that
failed while its version stayed the latest is a violation); (d) the latest version is
readable and equals the final model; and no operation failed with an error other than the
expected one-line ones (a lost race, a held lock, files cleaned), nor with damage
(``CorruptMetadataError``), nor with a traceback-class error (``OSError``, ``KeyError``...)
- except a one-line error of an operation whose version was superseded while it ran
(forced clean files removes such files at once; counted in ``Run.notes``).

A violation after the first version whose rows differ from the model is usually its
consequence (a key inserted twice is then updated twice): ``Run.primary`` leaves those out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tests.reliability.race_workers import read_rows

#: errors an operation may end with under concurrency, per kind (one line, nothing changed)
EXPECTED = {
    "load": {"CommitConflictError"},
    "delete": {"CommitConflictError"},
    "update": {"CommitConflictError"},
    "merge": {"CommitConflictError"},
    "compact": {"CompactionError", "CommitConflictError", "RowsDeletedMeanwhile"},
    "clean": {"UserError"},  # another clean files is running
    "alter": {"CommitConflictError"},
    "restore": {"VersionNotFoundError"},
    "read": set(),
    "read_old": {"VersionNotFoundError"},
}

Model = dict[int, int]


# The classes of violations (``Violation.cls``); those in KNOWN are bugs known when this
# was written (test_race_model.py accepts them through its xfail marks), OTHER is any other.
# A statement committed over a concurrent one without planning again: a row a DELETE
# removed reads again, an UPDATE misses a row version written meanwhile, a row counted twice
DML_CONFLICT = "dml-conflict"
MERGE_DUPLICATE = "merge-duplicate"  # one key read twice
RESTORE_CLEAN = "restore-clean"  # damage: a version naming a file clean files removed
# a MERGE whose rows lie in segments of two schema versions (before and after an ALTER
# ADD COLUMN) fails with pyarrow's "Schema at index N was different" (nullability of id)
SCHEMA_MIX = "schema-mix"
KNOWN = frozenset({DML_CONFLICT, MERGE_DUPLICATE, RESTORE_CLEAN, SCHEMA_MIX})
OTHER = "other"


@dataclass
class Violation:
    rule: str  # "a" version read, "b" count, "c" concurrent read, "d" final, "e" error
    text: str
    cls: str = OTHER
    version: int | None = None  # the version it is about (None: an operation's error)

    def __str__(self) -> str:
        return f"({self.rule}, {self.cls}) {self.text}"


@dataclass
class Run:
    """Everything one race left: the worker logs, history, schema log and final reads."""

    records: list[dict[str, Any]]
    history: list[Any]  # VersionInfo, oldest first
    alters: dict[int, list[tuple[str, int]]]  # version -> columns (name, default) it added
    setup: dict[str, tuple[int, int]]  # segment -> (first id, count) of the loads before
    models: list[Model] = field(default_factory=list)
    written: dict[int, set[int]] = field(default_factory=dict)  # version -> keys a DML wrote
    cause: dict[int, str] = field(default_factory=dict)  # version -> class of its count error
    violations: list[Violation] = field(default_factory=list)
    notes: Counter[str] = field(default_factory=Counter)

    def fail(self, rule: str, text: str, cls: str = OTHER, version: int | None = None) -> None:
        self.violations.append(Violation(rule, text, cls, version))

    def primary(self) -> list[Violation]:
        """The violations that are no consequence of an earlier one: every failed
        operation, and those about versions up to the first whose rows differ from the
        model (after it, the model and the table differ, and so do later counts)."""
        rows = [v.version for v in self.violations if v.rule in "acd" and v.version is not None]
        first = min(rows, default=None)
        return [v for v in self.violations
                if v.version is None or first is None or v.version <= first]


def read_logs(paths: Iterable[Path]) -> list[dict[str, Any]]:
    out = []
    for p in paths:
        out.extend(orjson.loads(line) for line in p.read_bytes().splitlines() if line.strip())
    return out


def schema_alters(table: Any) -> dict[int, list[tuple[str, int]]]:
    """tablestatus version -> the columns (name, default) its ALTER added."""
    out: dict[int, list[tuple[str, int]]] = {}
    versions = table.schema_versions()
    for prev, cur in zip(versions, versions[1:], strict=False):
        have = {c.name for c in prev.schema.columns}
        added = [(c.name, int(c.default)) for c in cur.schema.columns if c.name not in have]
        out.setdefault(cur.applies_from, []).extend(added)
    return out


# ---- the model --------------------------------------------------------------------------
def in_range(m: Model, p: dict[str, Any]) -> list[int]:
    return sorted(i for i in m if p["lo"] <= i <= p["hi"])


def apply_dml(kind: str, p: dict[str, Any], before: Model) -> tuple[Model, int, int]:
    """The model after the statement ``kind`` with parameters ``p``; the counts it must
    report (deleted, inserted)."""
    m = dict(before)
    if kind == "delete":
        hit = in_range(m, p)
        for i in hit:
            del m[i]
        return m, len(hit), 0
    if kind == "update":
        hit = in_range(m, p)
        for i in hit:
            m[i] += p["k"]
        return m, len(hit), len(hit)
    matched = 0
    for i, x in p["rows"]:
        matched += i in m
        m[i] = m.get(i, 0) + x
    return m, matched, len(p["rows"])


def columns_at(run: Run, version: int) -> list[tuple[str, int]]:
    return [c for v in sorted(run.alters) if v <= version for c in run.alters[v]]


def expected_rows(run: Run, version: int, columns: list[str]) -> list[list[int]]:
    defaults = dict(columns_at(run, version))
    return sorted([i, x, *(defaults[c] for c in columns[2:])]
                  for i, x in run.models[version].items())


def replay(run: Run) -> None:
    """Build ``run.models`` (one per version) and check (b) and that every committed
    statement is claimed by exactly one worker record."""
    by_version: dict[int, list[dict[str, Any]]] = {}
    loads: dict[str, dict[str, Any]] = {}
    noop: list[dict[str, Any]] = []
    for r in run.records:
        res = r.get("result") or {}
        if not r["ok"]:
            continue
        if r["kind"] == "restore" and res["version"] <= r["lo"]:
            noop.append(r)  # nothing to change: it returns the version it found
        elif r["kind"] in ("delete", "update", "merge", "restore") \
                and res.get("version") is not None:
            by_version.setdefault(res["version"], []).append(r)
        if r["kind"] == "load":
            loads[res["segment"]] = r
    models: list[Model] = []
    for info in run.history:
        v = info.version
        prev = models[-1] if models else {}
        op = info.operation.split(" ")[0]
        claims = by_version.pop(v, [])
        if len(claims) > 1:
            run.fail("b", f"version {v} ({info.operation}) is claimed by {len(claims)} "
                     f"statements: {[_show(c) for c in claims]}", version=v)
        model = prev
        if info.operation == "LOAD":
            model = dict(prev)
            for seg in info.added:
                if seg in run.setup:
                    first, count = run.setup[seg]
                elif seg in loads:
                    first, count = loads[seg]["params"]["first"], loads[seg]["params"]["count"]
                else:
                    run.fail("b", f"version {v} loaded segment {seg} that no load reported",
                             version=v)
                    continue
                model.update({i: i % 97 for i in range(first, first + count)})
        elif op in ("DELETE", "UPDATE", "MERGE", "RESTORE"):
            if not claims:
                run.fail("b", f"version {v} ({info.operation}) was committed by no statement "
                         "that reported success", version=v)
            else:
                model = _apply_claim(run, v, info.operation, claims[0], prev, models)
        elif op in ("INSERT", "DELETE SEGMENTS", "OVERWRITE"):
            run.fail("b", f"version {v}: unexpected operation {info.operation}", version=v)
        models.append(model)
    for v, claims in by_version.items():
        run.fail("b", f"{[_show(c) for c in claims]} reported version {v}, which is no "
                 "statement's version in the history")
    run.models = models
    _check_nothing_matched(run)
    for r in noop:
        to, at = r["params"]["to"], r["result"]["version"]
        if models[to] != models[at]:
            run.fail("b", f"{_show(r)} committed nothing (version {at}), but the model of "
                     f"version {to} is not that of {at}", version=at)


def _apply_claim(run: Run, v: int, operation: str, rec: dict[str, Any], prev: Model,
                 models: list[Model]) -> Model:
    kind, p, res = rec["kind"], rec["params"], rec["result"]
    if kind != operation.split(" ")[0].lower():
        run.fail("b", f"version {v} is {operation} but {_show(rec)} claims it", version=v)
        return prev
    if not rec["lo"] < v <= rec["hi"]:
        run.fail("b", f"{_show(rec)} committed version {v} outside the versions "
                 f"{rec['lo']}..{rec['hi']} it saw before and after", version=v)
    if kind == "restore":
        if operation != f"RESTORE {p['to']}":
            run.fail("b", f"version {v} is {operation}, {_show(rec)} asked for {p['to']}",
                     version=v)
        return dict(models[p["to"]])
    model, deleted, inserted = apply_dml(kind, p, prev)
    run.written[v] = {i for i, _ in p["rows"]} if kind == "merge" else set(in_range(prev, p))
    if (res["deleted"], res["inserted"]) != (deleted, inserted):
        cls = _count_class(run, rec, v, prev, res["deleted"] - deleted)
        run.cause[v] = cls
        run.fail("b", f"{_show(rec)} at version {v} reported deleted={res['deleted']} "
                 f"inserted={res['inserted']}; on the state of version {v - 1} it is "
                 f"deleted={deleted} inserted={inserted}{_rows_note(kind, p, prev)}; "
                 f"committed while it ran: {_between(run, rec['lo'], v)}", cls, v)
    return model


def _count_class(run: Run, rec: dict[str, Any], v: int, prev: Model, excess: int) -> str:
    """The class of a statement whose count differs from the model's by ``excess``."""
    kind = rec["kind"]
    if kind == "merge" and excess < 0:  # it inserted a key that exists
        return MERGE_DUPLICATE
    if kind == "delete" and excess > 0:  # it counted rows a concurrent DELETE removed first
        return DML_CONFLICT
    if kind in ("delete", "update") and excess < 0:
        # it missed rows a concurrent UPDATE / MERGE wrote after it planned (the row
        # versions of an insert segment): committed without planning again
        recent = set().union(*(run.written.get(u, set()) for u in range(rec["lo"] + 1, v)))
        if -excess <= len(recent & set(in_range(prev, rec["params"]))):
            return DML_CONFLICT
    return OTHER


def _check_nothing_matched(run: Run) -> None:
    """A statement that committed nothing saw a version where it matched no row."""
    for r in run.records:
        res = r.get("result") or {}
        if not r["ok"] or r["kind"] not in ("delete", "update") or res.get("version") is not None:
            continue
        span = range(r["lo"], min(r["hi"], len(run.models) - 1) + 1)
        if res["deleted"] or all(in_range(run.models[v], r["params"]) for v in span):
            run.fail("b", f"{_show(r)} committed nothing (deleted={res['deleted']}) but every "
                     f"version {r['lo']}..{r['hi']} it ran over has matching rows", version=r["lo"])


# ---- the checks --------------------------------------------------------------------------
def check_read(run: Run, version: int, got: dict[str, Any]) -> tuple[str, str] | None:
    """Why ``got`` (read_rows of ``version``) is not the model there and the class of
    that, or None."""
    if version >= len(run.models):
        return f"version {version} is past the history ({len(run.models) - 1})", OTHER
    cols = got["columns"]
    want_cols = ["id", "v", *(c for c, _ in columns_at(run, version))]
    late = ["id", "v", *(c for c, _ in columns_at(run, version - 1))]  # schema file not yet there
    if cols not in (want_cols, late):
        return f"columns {cols}, expected {want_cols}", OTHER
    want = expected_rows(run, version, cols)
    if got["rows"] == want:
        return None
    text, cls = diff_rows(got["rows"], want)
    # rows that differ where a statement's count did: that statement's class
    return text, run.cause.get(version, cls) if cls == OTHER else cls


def diff_rows(got: list[list[int]], want: list[list[int]]) -> tuple[str, str]:
    """What differs, and its class: a key read twice (MERGE_DUPLICATE), else only rows
    whose key the model does not hold (DML_CONFLICT), else OTHER (lost or wrong rows)."""
    g, w = Counter(map(tuple, got)), Counter(map(tuple, want))
    extra, missing = sorted((g - w).elements()), sorted((w - g).elements())
    dup = sorted(i for i, n in Counter(r[0] for r in got).items() if n > 1)
    text = (f"{len(got)} rows, expected {len(want)}: unexpected {extra[:6]}, missing "
            f"{missing[:6]}" + (f", duplicated ids {dup[:6]}" if dup else ""))
    keys = {r[0] for r in want}
    if dup:  # the model's one row (merged value) is then missing too
        return text, MERGE_DUPLICATE
    if not missing and all(r[0] not in keys for r in extra):
        return text, DML_CONFLICT
    return text, OTHER


def check_records(run: Run) -> None:
    """(c) the reads taken during the race, (e) the errors operations ended with."""
    for r in run.records:
        kind = r["kind"]
        if not r["ok"]:
            run.notes[f"{kind}: {r['error']}"] += 1
            _judge_error(run, r)
            continue
        run.notes[f"{kind}: ok"] += 1
        if kind in ("read", "read_old"):
            why = check_read(run, r["params"]["version"], r["result"])
            if why:
                run.fail("c", f"{_show(r)} read version {r['params']['version']}: {why[0]}",
                         why[1], r["params"]["version"])


def _judge_error(run: Run, r: dict[str, Any]) -> None:
    """An operation's error: expected (a lost race, a held lock, cleaned files), tolerated
    (a one-line error while the version it used was superseded: forced clean files may
    remove the files of superseded versions at once), or a violation (any other error, and
    every error that is no one-line ``CarbonStoreError``: a traceback for the user)."""
    kind, err, msg = r["kind"], r["error"], r["message"]
    if err in EXPECTED[kind]:
        return
    used = r["params"].get("version", r["lo"]) if kind.startswith("read") else r["lo"]
    superseded = used < r["hi"]
    if superseded and r["carbon"]:
        run.notes[f"{kind} of a superseded version: {err} (tolerated)"] += 1
        return
    cls = OTHER
    if err == "CorruptMetadataError":  # a version naming a file clean files removed
        cls = RESTORE_CLEAN
    elif err == "ArrowInvalid" and "Schema at index" in msg:
        cls = SCHEMA_MIX
    rule = "c" if kind.startswith("read") else "e"
    state = "superseded meanwhile" if superseded else "still the latest"
    run.fail(rule, f"{_show(r)} failed ({state}): {err}: {msg}", cls)


def check_versions(run: Run, table: Any, versions: Iterable[int]) -> None:
    """(a) every version read by time travel, (d) the latest one read plainly."""
    from carbonstore.errors import VersionNotFoundError

    last = len(run.models) - 1
    for v in versions:
        try:
            got = read_rows(table.as_of(v))
        except VersionNotFoundError as err:
            if v == last:  # the delta of a restore that clean files removed
                run.fail("a", f"the latest version {v} is not readable: {err}", RESTORE_CLEAN,
                         v)
            run.notes["versions cleaned"] += 1
            continue
        except Exception as err:  # noqa: BLE001 - any other error is a finding
            run.fail("a", f"version {v} ({run.history[v].operation}) read fails: "
                     f"{type(err).__name__}: {str(err)[:300]}", _error_class(err), v)
            continue
        why = check_read(run, v, got)
        if why:
            run.fail("a", f"version {v} ({run.history[v].operation}): {why[0]}", why[1], v)
        run.notes["versions read"] += 1
    try:
        got = read_rows(table)
    except Exception as err:  # noqa: BLE001
        run.fail("d", f"the table fails to read: {type(err).__name__}: {str(err)[:300]}",
                 _error_class(err), last)
        return
    why = check_read(run, last, got)
    if why:
        run.fail("d", f"the final table (version {last}): {why[0]}", why[1], last)


def check_alters(run: Run) -> None:
    """Each ALTER that reported success added its column exactly once."""
    added = Counter(c for cols in run.alters.values() for c, _ in cols)
    for r in run.records:
        if r["kind"] == "alter" and r["ok"] and "column" in r["params"]:
            if added[r["params"]["column"]] != 1:
                run.fail("b", f"{_show(r)}: its column is in the schema log "
                         f"{added[r['params']['column']]} times")


def check(run: Run, table: Any, versions: Iterable[int] | None = None) -> Run:
    """Replay and run every check; ``versions``: the versions (a) reads (default all)."""
    replay(run)
    check_records(run)
    check_alters(run)
    check_versions(run, table, range(len(run.models)) if versions is None else versions)
    return run


def _error_class(err: Exception) -> str:
    return RESTORE_CLEAN if type(err).__name__ == "CorruptMetadataError" else OTHER


def _show(r: dict[str, Any]) -> str:
    return f"w{r['w']} {r['kind']} {r['params']}"


def _rows_note(kind: str, p: dict[str, Any], m: Model) -> str:
    keys = [i for i, _ in p["rows"]] if kind == "merge" else in_range(m, p)
    return f" (rows then: {[(i, m.get(i)) for i in keys][:6]})"


def _between(run: Run, lo: int, v: int) -> str:
    """The versions committed after ``lo`` and before ``v`` (what a statement raced)."""
    ops = [f"{u} {run.history[u].operation}" for u in range(lo + 1, v)
           if not run.history[u].operation.startswith(("LOAD BEGIN", "COMPACTION BEGIN"))]
    return ", ".join(ops[-8:]) or "nothing"
