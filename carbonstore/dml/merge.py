"""MERGE as a Spark job (docs/dml.md, "MERGE").

The source is a Spark DataFrame (a carbonstore table's live rows, a SQL query, a pyarrow or
pandas table handed to Spark); the join with the target's located rows is Spark's, with the
ON condition and every clause condition and value as Spark SQL. Each joined row gets the
index of the first clause that takes it (``WHEN MATCHED``, ``WHEN NOT MATCHED [BY TARGET]``,
``WHEN NOT MATCHED BY SOURCE``, in the order given); rows of update / delete clauses are
the target rows to delete (their tasks build the deltas; a target row two source rows
would modify is refused, as in Spark and Delta Lake), and update / insert clauses give the
new rows, written by the load writer's tasks as one insert segment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa

from carbonstore.dml.engine import (
    LazyRows,
    Target,
    adaptive_off,
    commit_statement,
    spark_errors,
    spark_for,
    statement_zone,
)
from carbonstore.dml.statements import assigned_columns
from carbonstore.dml.target import FILE, table_frame
from carbonstore.errors import UserError
from carbonstore.expressions.expr import AlwaysTrue, Expr
from carbonstore.expressions.parser import and_terms
from carbonstore.pruning.plan import bind_where, prune
from carbonstore.segments.dml_commit import DmlResult, read_latest, run_replanned
from carbonstore.segments.dml_conflicts import FileKey, Reads
from carbonstore.store.ddl import quote_name
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import TableStatusSnapshot

__all__ = ["WhenMatched", "WhenNotMatched", "WhenNotMatchedBySource", "merge_rows",
           "source_frame"]

_PRESENT = "__carbon_source_row"
#: a MERGE whose target plan keeps more rows runs with Spark's adaptive execution as the
#: session has it (its join may gain by it); a smaller one without (engine.adaptive_off)
ADAPTIVE_ROWS = 1_000_000
_CLAUSE = "__carbon_clause"


@dataclass(frozen=True, slots=True, kw_only=True)
class WhenMatched:
    """``WHEN MATCHED [AND condition] THEN UPDATE SET ... | DELETE``.

    ``assignments``: target column -> Spark SQL expression (over target and source
    aliases); None with ``action="update"`` is ``UPDATE SET *`` (every column from the
    source column of the same name).
    """

    action: Literal["update", "delete"]
    condition: str | None = None
    assignments: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WhenNotMatched:
    """``WHEN NOT MATCHED [AND condition] THEN INSERT (...) VALUES (...) | INSERT *``.

    ``values``: target column -> expression over the source alias (columns left out are
    NULL); None is ``INSERT *``.
    """

    condition: str | None = None
    values: Mapping[str, str] | None = field(default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class WhenNotMatchedBySource:
    """``WHEN NOT MATCHED BY SOURCE [AND condition] THEN UPDATE SET ... | DELETE``: target
    rows no source row joins; expressions see the target alias only."""

    action: Literal["update", "delete"]
    condition: str | None = None
    assignments: Mapping[str, str] | None = None


def source_frame(spark: Any, source: Any) -> Any:
    """The MERGE source as a Spark DataFrame: a DataFrame as it is; a carbonstore table's
    live rows (its latest version; read natively, or in Python on s3://); a SQL query; a pyarrow or pandas table."""
    from pyspark.sql import DataFrame

    if isinstance(source, DataFrame):
        return source
    if isinstance(source, Table):
        def read(snap: TableStatusSnapshot) -> Any:
            pinned = source.as_of(snap.version, check_files=False)
            frame = table_frame(spark, source, prune(pinned, AlwaysTrue()))
            return frame.localCheckpoint(eager=True)  # its files read now, while named

        return read_latest(source, "MERGE USING", read)
    if isinstance(source, str):
        return spark.sql(source)
    if isinstance(source, pa.Table):
        return spark.createDataFrame(source)
    if type(source).__module__.startswith("pandas"):
        return spark.createDataFrame(source)
    raise UserError("MERGE: the source must be a Spark DataFrame, a carbonstore table, a SQL "
                    f"query, a pyarrow Table or a pandas DataFrame, not {type(source).__name__}")


def _key_filter(table: Table, source: Any, on: str, ta: str, sa: str,
                local: Any = None) -> Expr:
    """The index's filter on the target for the source's key range (``t.k = s.k`` conjuncts
    on integer keys: ``k >= min AND k <= max``); AlwaysTrue otherwise. ``local``: the
    source as the caller's pyarrow table, when it was one (its range needs no Spark job)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError


    try:
        terms = and_terms(sqlglot.parse_one(on, read="spark"))
    except (ParseError, TokenError, RecursionError):
        return AlwaysTrue()
    pairs = []
    for c in terms:
        if isinstance(c, exp.EQ) and isinstance(c.left, exp.Column) \
                and isinstance(c.right, exp.Column):
            sides = {c.left.table.lower(): c.left.name.lower(),
                     c.right.table.lower(): c.right.name.lower()}
            if ta in sides and sa in sides and ta != sa:
                pairs.append((sides[ta], sides[sa]))
    dictionary = set(table.schema.dictionary_columns)
    usable = [(t, s) for t, s in pairs if t in table.schema.column_names and t not in dictionary
              and table.schema.column(t).type.name in ("byte", "short", "int", "long")
              and s in {c.lower() for c in source.columns}]
    if not usable:
        return AlwaysTrue()
    row = _bounds(source, [s for _, s in usable], local)
    terms_sql = []
    for i, (t, _) in enumerate(usable):
        lo, hi = row[2 * i], row[2 * i + 1]
        if isinstance(lo, int) and isinstance(hi, int) and not isinstance(lo, bool):
            terms_sql.append(f"{quote_name(t)} >= {lo} AND {quote_name(t)} <= {hi}")
    if not terms_sql:
        return AlwaysTrue()
    return bind_where(table, " AND ".join(terms_sql))


def _bounds(source: Any, columns: Sequence[str], local: Any) -> list[Any]:
    """[min, max] of each of ``columns`` of the source, nulls ignored: from the caller's
    pyarrow table when it was one, else by one Spark aggregate."""
    if local is not None:
        import pyarrow.compute as pc

        names = {n.lower(): n for n in local.column_names}
        out = []
        for c in columns:
            got = pc.min_max(local.column(names[c]))
            out += [got["min"].as_py(), got["max"].as_py()]
        return out
    from pyspark.sql import functions as F

    aggs = [f(F.col(quote_name(c))) for c in columns for f in (F.min, F.max)]
    return list(source.agg(*aggs).collect()[0])


def _first_taken(conditions: Sequence[tuple[str, str | None]]) -> str:
    """SQL: the index of the first clause (kind guard, its condition) that holds, else NULL."""
    parts = []
    for i, (guard, cond) in enumerate(conditions):
        test = guard if cond is None else f"{guard} AND coalesce(({cond}), false)"
        parts.append(f"WHEN {test} THEN {i}")
    return f"CASE {' '.join(parts)} END" if parts else "CAST(NULL AS INT)"


def merge_rows(
    table: Table,
    source: Any,
    *,
    on: str | Sequence[str],
    matched: Sequence[WhenMatched] = (),
    not_matched: Sequence[WhenNotMatched] = (),
    not_matched_by_source: Sequence[WhenNotMatchedBySource] = (),
    target_alias: str = "t",
    source_alias: str = "s",
    time_zone: str | None = None,
) -> DmlResult:
    """``MERGE INTO table AS t USING source AS s ON ... WHEN ...``, one commit.

    Args:
        table: the target.
        source: a Spark DataFrame, a carbonstore Table, a SQL query, a pyarrow Table or a
            pandas DataFrame.
        on: a Spark SQL condition over both aliases, or column names equal in both.
        matched / not_matched / not_matched_by_source: the clauses, each kind in order.
        time_zone: Spark's session time zone the expressions are evaluated in.
    """
    if not matched and not not_matched and not not_matched_by_source:
        raise UserError("MERGE needs at least one WHEN clause")
    ta, sa = target_alias.lower(), source_alias.lower()
    if ta == sa:
        raise UserError("MERGE: the target and the source need different aliases")
    if not isinstance(on, str):
        keys = [c.lower() for c in on]
        if not keys:
            raise UserError("MERGE: give the ON condition or the key columns")
        on = " AND ".join(f"{ta}.{quote_name(c)} = {sa}.{quote_name(c)}" for c in keys)
    spark = spark_for(table)
    with statement_zone(spark, time_zone), spark_errors("MERGE"):
        src = source_frame(spark, source)
        src = src.toDF(*[c.lower() for c in src.columns])
        # WHEN NOT MATCHED BY SOURCE takes target rows outside the source's keys too
        local = source if isinstance(source, pa.Table) else None
        prune_by = AlwaysTrue() if not_matched_by_source else _key_filter(
            table, src, on, ta, sa, local)
        plan = _Merge(spark, table, src, on, ta, sa, matched, not_matched,
                      not_matched_by_source, prune_by)
        return run_replanned(table, "MERGE", plan.step)


class _Merge:
    def __init__(self, spark: Any, table: Table, src: Any, on: str, ta: str, sa: str,
                 matched: Sequence[WhenMatched], not_matched: Sequence[WhenNotMatched],
                 by_source: Sequence[WhenNotMatchedBySource], prune_by: Expr) -> None:
        from pyspark.sql import functions as F

        self.spark, self.table, self.on, self.ta, self.sa = spark, table, on, ta, sa
        self.matched, self.not_matched, self.by_source = matched, not_matched, by_source
        self.prune_by = prune_by
        self.src = src.select("*", F.lit(True).alias(_PRESENT))
        self.names = list(table.schema.column_names)

    def _join(self, target: Target) -> Any:
        from pyspark.sql import functions as F

        how = {(False, False): "inner", (True, False): "right_outer",
               (False, True): "left_outer", (True, True): "full_outer"}[
            (bool(self.not_matched), bool(self.by_source))]
        t = target.frame.alias(self.ta)
        s = self.src.alias(self.sa)
        return t.join(s, F.expr(self.on), how)

    def _clauses(self) -> list[tuple[str, str, Any]]:
        """(kind, guard SQL, clause) of every clause in the order they are tried."""
        tf, sp = f"{self.ta}.{FILE}", f"{self.sa}.{_PRESENT}"
        both = f"({tf} IS NOT NULL AND {sp} IS NOT NULL)"
        out: list[tuple[str, str, Any]] = [("matched", both, c) for c in self.matched]
        out += [("insert", f"({tf} IS NULL)", c) for c in self.not_matched]
        out += [("by_source", f"({sp} IS NULL)", c) for c in self.by_source]
        return out

    def _sets(self, kind: str, clause: Any) -> dict[str, str]:
        given = clause.values if kind == "insert" else clause.assignments
        if given is None:
            if kind == "by_source":
                raise UserError("MERGE WHEN NOT MATCHED BY SOURCE: UPDATE SET * has no source "
                                "row; name the columns")
            have = set(self.src.columns)
            return {c: f"{self.sa}.{quote_name(c)}" for c in self.names if c in have}
        out = {c.lower(): v for c, v in given.items()}
        unknown = [c for c in out if c not in self.names]
        if unknown:
            raise UserError(f"MERGE {'INSERT' if kind == 'insert' else 'UPDATE SET'}: unknown "
                            f"column(s) {', '.join(unknown)} of {self.table.name}")
        return out

    def _read(self, snap: TableStatusSnapshot, segments: Any = None) -> dict[FileKey, Any]:
        """Target rows that joined a source row (what the MERGE read)."""
        from pyspark.sql import functions as F

        target = Target(self.spark, self.table, self.prune_by, snap, segments)
        joined = target.frame.alias(self.ta).join(self.src.alias(self.sa), F.expr(self.on),
                                                  "left_semi")
        return target.positions(joined)

    def step(self, snap: TableStatusSnapshot) -> DmlResult:
        from pyspark.sql import functions as F

        target = Target(self.spark, self.table, self.prune_by, snap)
        clauses = self._clauses()
        large = target.rows() > ADAPTIVE_ROWS
        with adaptive_off(self.spark, not large), spark_errors("MERGE"):
            joined = self._join(target)
            # persisted: the delta job and the insert job see one join (and run it once)
            taken = joined.withColumn(_CLAUSE, F.expr(_first_taken(
                [(guard, c.condition) for _, guard, c in clauses]))).persist()
        try:
            with adaptive_off(self.spark, not large):
                return self._commit(snap, target, clauses, taken)
        finally:
            taken.unpersist()

    def _commit(self, snap: TableStatusSnapshot, target: Target, clauses: list[Any],
                taken: Any) -> DmlResult:
        from pyspark.sql import functions as F

        with spark_errors("MERGE"):
            new_parts = []
            for i, (kind, _, clause) in enumerate(clauses):
                if kind != "insert" and clause.action == "delete":
                    continue
                rows = taken.where(F.col(_CLAUSE) == i)
                sets = self._sets(kind, clause)
                keep = self.ta if kind != "insert" else None
                cols = assigned_columns(self.spark, self.table, rows, sets, "MERGE", keep=keep)
                if kind == "insert":  # columns left out are NULL
                    cols = [c if n in sets else F.lit(None).cast(str(col.type)).alias(n)
                            for c, n, col in zip(cols, self.names, self.table.schema.columns,
                                                 strict=True)]
                new_parts.append(rows.select(*cols))
            gone_ids = [i for i, (kind, _, _) in enumerate(clauses) if kind != "insert"]
            gone = taken.where(F.col(_CLAUSE).isin(gone_ids)).select(
                F.col(f"{self.ta}.{FILE}").alias(FILE),
                F.col(f"{self.ta}.__carbon_pos").alias("__carbon_pos"))
            new = None
            for part in new_parts:
                new = part if new is None else new.unionByName(part)
        # A NOT MATCHED insert depends on keys being absent: rows any newer version added
        # (loads too) may be ones it would have matched.
        reads = Reads(LazyRows(target.keys(), lambda: self._read(snap)), match=self._read,
                      appends=bool(self.not_matched))
        # without a NOT MATCHED clause every new row replaces a deleted one: none deleted,
        # no insert job
        return commit_statement(self.spark, self.table, snap, operation="MERGE", gone=gone,
                                files=target.files, new_rows=new, reads=reads,
                                replaces=not self.not_matched)
