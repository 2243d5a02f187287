"""What a table plan holds: the level counters, the kept files and row groups, the drops.

:class:`TablePlan` is what :func:`carbonstore.pruning.plan.prune` returns; its JSON form is
the contract of ``carbonstore prune --json`` (described in plan.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from carbonstore.expressions.expr import Expr
from carbonstore.store.records import Frozen, field

__all__ = ["LEVELS", "DeferredFiles", "Dropped", "FilePlan", "LevelSummary", "RowGroupPlan", "TablePlan"]

LEVELS = ("segments", "files", "row_groups", "pages", "rows")


class LevelSummary(Frozen, kw_only=True):
    """Units of one level: total, kept, and the drops per reason."""

    total: int
    kept: int
    dropped: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict[str, int]:
        return {"total": self.total, "kept": self.kept, **{f"dropped_by_{r}": n for r, n in self.dropped}}


class RowGroupPlan(Frozen, kw_only=True):
    """A surviving row group: ordinal in its file, rows, surviving ``[start, end)`` ranges."""

    index: int
    num_rows: int
    row_ranges: tuple[tuple[int, int], ...]
    length: int = 0  # compressed bytes (for sizing read partitions)

    @property
    def whole(self) -> bool:
        return self.row_ranges == ((0, self.num_rows),)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "num_rows": self.num_rows,
                "row_ranges": [list(r) for r in self.row_ranges]}


class FilePlan(Frozen, kw_only=True):
    """A surviving data file; ``path`` is relative to the table folder."""

    segment: str
    path: str
    row_groups: tuple[RowGroupPlan, ...]
    #: the file's live delete delta (relative to the table folder) in the planned version
    delete_delta: str | None = None
    deleted_rows: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"segment": self.segment, "path": self.path,
                               "row_groups": [rg.to_json() for rg in self.row_groups]}
        if self.delete_delta is not None:
            out["delete_delta"] = self.delete_delta
            out["deleted_rows"] = self.deleted_rows
        return out


class Dropped(Frozen, kw_only=True):
    """One dropped unit, for ``--explain``."""

    level: str
    segment: str
    reason: str
    path: str | None = None
    row_group: int | None = None
    rows: tuple[tuple[int, int], ...] = ()


class DeferredFiles:
    """A plan's kept files not built yet: ``build()`` makes the FilePlan objects (once).

    A plan keeps column arrays until a caller reads :attr:`TablePlan.files`, so planning
    that only needs the counters (``carbonstore prune``, metadata answers) builds no
    per-row-group objects.
    """

    __slots__ = ("_build", "_built", "json")

    def __init__(self, build: Callable[[], tuple[FilePlan, ...]], *,
                 json: Callable[[], list[dict[str, Any]]] | None = None) -> None:
        self._build = build
        self._built: tuple[FilePlan, ...] | None = None
        #: the files' JSON without building the objects (None: from the objects)
        self.json = json

    def build(self) -> tuple[FilePlan, ...]:
        """The files, built on the first call (plans reissued from one memo share them:
        FilePlan and RowGroupPlan are immutable)."""
        got = self._built
        if got is None:
            got = self._built = tuple(self._build())
        return got


class TablePlan(Frozen, kw_only=True, slots=False):
    """What a scan of the table must read for a filter, and what pruning saved.

    ``files`` may be given as a :class:`DeferredFiles`: it is built on first read and is
    then an ordinary tuple of FilePlan (equality, ``replace`` and JSON see the same plan;
    a pickled plan, e.g. shipped to Spark executors, carries its files built, never the
    index view: records pickle through ``__init__`` with each field read).
    """

    table: str
    where: str | None
    expr: Expr
    planning_ms: float
    root: str
    segments: tuple[str, ...]
    levels: dict[str, LevelSummary]
    files: tuple[FilePlan, ...]
    dropped: tuple[Dropped, ...] = field(default=())
    #: rows of the planned segments deleted by row-level DML (``levels`` count them still)
    deleted_rows: int = 0
    #: the tablestatus version planned
    version: int | None = None

    @property
    def rows(self) -> int:
        return self.levels["rows"].kept

    def reissued(self, planning_ms: float) -> TablePlan:
        """The same plan as a new object (its own ``levels`` dict and ``planning_ms``); the
        immutable parts - files, drops, expression - are shared, files built at most once."""
        out = object.__new__(TablePlan)
        out.__dict__.update(self.__dict__)
        out.__dict__["levels"] = dict(self.levels)
        out.__dict__["planning_ms"] = planning_ms
        return out

    def absolute(self, path: str) -> str:
        return f"{self.root.rstrip('/')}/{path}"

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "where": self.where,
            "planning_ms": round(self.planning_ms, 3),
            "levels": {k: self.levels[k].to_json() for k in LEVELS},
            "files": _files_json(self),
        }

    def explain(self) -> str:
        """Human-readable plan: the level counters, then why each dropped unit was dropped."""
        lines = [f"table {self.table}  where {self.where or '(none)'}  "
                 f"planned in {self.planning_ms:.1f} ms"]
        for k in LEVELS:
            lv = self.levels[k]
            why = ", ".join(f"{n} by {r}" for r, n in lv.dropped if n)
            lines.append(f"  {k:<10} {lv.kept:>10} of {lv.total:<10} kept" + (f"; dropped {why}" if why else ""))
        text = {
            "counts": "null/NaN counts prove no row matches",
            "minmax": "min/max prove no row matches",
            "bloom": "bloom filter proves the value absent",
            "pages": "every page dropped by page statistics",
            "row_groups": "every row group dropped",
            "segment": "its segment was dropped",
            "partition": "its partition proves no row matches (or an overwrite replaced it)",
        }
        for d in self.dropped:
            where = f"segment {d.segment}"
            if d.path is not None:
                where += f" file {d.path}"
            if d.row_group is not None:
                where += f" row group {d.row_group}"
            if d.level == "rows":
                spans = ", ".join(f"[{a}, {b})" for a, b in d.rows)
                lines.append(f"  rows {spans} of {where}: dropped by page {d.reason}")
            else:
                lines.append(f"  dropped {where}: {text.get(d.reason, d.reason)}")
        for f in self.files:
            for rg in f.row_groups:
                spans = ", ".join(f"[{a}, {b})" for a, b in rg.row_ranges)
                lines.append(f"  read segment {f.segment} {f.path} row group {rg.index}: rows {spans}")
        return "\n".join(lines)


def _files_get(plan: TablePlan) -> tuple[FilePlan, ...]:
    files = plan.__dict__["files"]
    if isinstance(files, DeferredFiles):
        files = files.build()
        plan.__dict__["files"] = files
    return files  # type: ignore[no-any-return]


def _files_json(plan: TablePlan) -> list[dict[str, Any]]:
    """The files' JSON; of files not built yet, straight from the plan's arrays."""
    files = plan.__dict__["files"]
    if isinstance(files, DeferredFiles) and files._built is None and files.json is not None:
        return files.json()
    return [f.to_json() for f in plan.files]


def _files_set(plan: TablePlan, files: tuple[FilePlan, ...] | DeferredFiles) -> None:
    plan.__dict__["files"] = files


# the record field ``files`` is read through this property: built on first read
TablePlan.files = property(_files_get, _files_set)  # type: ignore[assignment,method-assign]
