"""Run a parsed statement (:mod:`carbonstore.sql.statements`) over a store.

One function, :func:`run`, serves ``carbonstore sql`` (which prints the :class:`Result`) and
``carbonstore.spark.sql()`` (which returns it as a DataFrame). What needs a JVM goes through
an :class:`Engine` (``carbonstore.sql.spark_engine.SparkEngine``), whose session starts when the
first statement asks for it; everything else runs here, from the store's metadata and files:

- metadata: SHOW SEGMENTS / TABLES / PARTITIONS / CREATE TABLE, DESCRIBE [EXTENDED|HISTORY],
  CREATE / DROP TABLE, ALTER TABLE (schema), DELETE FROM TABLE ... SEGMENT.ID, CLEAN FILES,
  and the queries the index answers exactly (count / min / max, also ``VERSION AS OF``);
- JVM-free row work: DELETE / UPDATE, MERGE from a store table (``sql.dml_run``);
- Spark: other queries, INSERT INTO (a load), MERGE from a query, compaction's merge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from carbonstore.errors import TableExistsError, TableNotFoundError, UserError
from carbonstore.expressions.bind import session_zone
from carbonstore.segments.manage import delete_segments, delete_segments_before
from carbonstore.segments.partitions import show_partitions
from carbonstore.spark.query_answers import answer_statement
from carbonstore.spark.statements import parse_statement
from carbonstore.sql import catalog
from carbonstore.sql.checks import check_query
from carbonstore.sql.statements import Alter, Catalog, Dml, Insert, Query, Statement, Verb
from carbonstore.sql.verbs import clean_options, segment_ids, table_properties
from carbonstore.store.alter import alter_table
from carbonstore.store.table import StoreRoot, Table

__all__ = ["DML_COLUMNS", "Engine", "Result", "run"]

DML_COLUMNS = ["operation", "version", "deleted", "inserted", "files", "segments",
               "insertedSegment"]


class Engine(Protocol):
    """What the router asks of Spark; each call may start the session (once)."""

    #: more names (lower case, no database) that stand for tables (``register``'s views)
    aliases: Mapping[str, Table] | None

    @property
    def live(self) -> bool:
        """A session runs: a query the index answers is asked of it (Spark's types)."""

    def query(self, store: StoreRoot, statement: Query, *, as_of: int | str | None) -> Any:
        """The DataFrame of a query over the store's tables."""

    def read_source(self, store: StoreRoot, sql: str) -> Any:
        """The rows of a MERGE source that is no store table (a Spark DataFrame)."""

    def merger(self) -> Any:
        """The compaction merger (``segments.compaction.Merger``)."""

    def cluster_merger(self) -> Any:
        """The clustering merger (``segments.compaction.ClusterMerger``)."""

    def insert(self, table: Table, statement: Insert) -> Any:
        """Load the rows of ``statement.source`` into ``table``: the committed entry."""

    def time_zone(self, store: StoreRoot) -> str:
        """Spark's session time zone (the statement's timestamps without an offset)."""


@dataclass
class Result:
    """What a statement gave: a table (``columns``, ``rows``; a query run by Spark leaves
    its rows in ``frame``, a DataFrame), a one-line ``summary`` of what it did, and where it
    ran (``metadata``, ``local`` or ``spark``)."""

    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: str | None = None
    ran: str = "metadata"
    frame: Any = None


def _dml(store: StoreRoot, stmt: Dml, engine: Engine | None, as_of: Any) -> Result:
    from carbonstore.sql.dml_run import run_dml

    assert stmt.dml is not None
    if as_of is not None:
        raise UserError(f"{stmt.dml.verb} changes the latest version; leave out --as-of")
    read_source = None if engine is None else (lambda sql: engine.read_source(store, sql))
    zone = engine.time_zone(store) if engine is not None else "UTC"
    result = run_dml(store, stmt.dml, read_source=read_source, time_zone=zone)
    row = result.to_json()
    summary = (f"{row['operation']} {stmt.dml.tree.this.sql(dialect='spark')}: "
               f"{row['deleted']} row(s) deleted, {row['inserted']} inserted, version "
               f"{row['version']}")
    return Result(DML_COLUMNS, [row], summary, "local")


def _closed(engine: Engine | None) -> bool:
    """The session knows no name of the user's (none yet, or the CLI's own)."""
    return engine is None or bool(getattr(engine, "closed", False))


def _query(store: StoreRoot, stmt: Query, engine: Engine | None, as_of: Any) -> Result:
    # what the store decides is refused before a JVM starts for it
    check_query(store, stmt.tree, aliases=engine.aliases if engine is not None else None,
                closed=_closed(engine), as_of=as_of)
    zone = session_zone(engine.time_zone(store) if engine is not None else "UTC")
    if zone is not None and (engine is None or not engine.live):
        # count / min / max the index decides exactly: no JVM, nothing read (a live session
        # answers the same from the index, with Spark's types: run_statement)
        answered = answer_statement(store, stmt.tree, as_of=as_of, time_zone=zone,
                                    aliases=engine.aliases if engine is not None else None)
        if answered is not None:
            return Result(answered[0], answered[1], None, "metadata")
    if engine is None:
        raise UserError("this query needs Spark: run it with carbonstore.spark.sql(spark, ...)")
    frame = engine.query(store, stmt, as_of=as_of)
    return Result(list(frame.columns), [], None, "spark", frame)


def _insert(store: StoreRoot, stmt: Insert, engine: Engine | None, as_of: Any) -> Result:
    if as_of is not None:
        raise UserError("INSERT changes the latest version; leave out --as-of")
    table = store.table(stmt.table)
    if stmt.columns is not None:
        unknown = [c for c in stmt.columns if c not in table.schema.column_names]
        if unknown:
            raise UserError(f"INSERT INTO {table.name}: unknown column(s) {', '.join(unknown)}; "
                            f"it has {', '.join(table.schema.column_names)}")
    check_query(store, parse_statement(stmt.source),
                aliases=engine.aliases if engine is not None else None, closed=_closed(engine))
    if engine is None:
        raise UserError("INSERT INTO needs Spark: run it with carbonstore.spark.sql(spark, ...)")
    entry = engine.insert(table, stmt)
    row = {"table": str(table.name), "segment": entry.load_name, "status": entry.status,
           "rows": entry.row_count}
    return Result(["table", "segment", "status", "rows"], [row],
                  f"inserted {entry.row_count} row(s) into {table.name} as segment "
                  f"{entry.load_name}", "spark")


def _catalog(store: StoreRoot, stmt: Catalog) -> Result:
    if stmt.what == "show_tables":
        catalog.check_database(stmt.name)
        rows = catalog.table_rows(store, stmt.name)
        return Result(["database", "tableName"], rows, f"{len(rows)} table(s)")
    table = store.table(str(stmt.name))
    if stmt.what == "describe":
        return Result(["col_name", "data_type", "comment"],
                      catalog.describe_rows(table, stmt.extended))
    if stmt.what == "history":
        rows = catalog.history_rows(table)
        return Result(["version", "timestamp", "operation", "added", "removed", "rows",
                       "writer"], rows, f"{len(rows)} version(s) of {table.name}")
    return Result(["createtab_stmt"], [{"createtab_stmt": catalog.create_statement(table)}])


def _alter(store: StoreRoot, stmt: Alter) -> Result:
    assert stmt.alter is not None
    table = store.table(stmt.alter.table)
    schema = alter_table(table, stmt.alter.change, operation=stmt.alter.operation)
    return Result(["table", "schemaVersion"],
                  [{"table": str(table.name), "schemaVersion": schema.schema_version}],
                  f"altered {table.name}: {stmt.alter.operation.split('(')[0].strip()}; "
                  f"schema version {schema.schema_version}")


def _verb(store: StoreRoot, stmt: Verb, engine: Engine | None) -> Result:
    verb, parts, name = stmt.verb, stmt.parts, str(stmt.parts["name"])
    if verb == "show_segments":
        entries = list(store.table(name).status.read().entries)
        if parts.get("limit") is not None:  # the newest n; LIMIT 0 shows none
            entries = entries[len(entries) - min(int(str(parts["limit"])), len(entries)):]
        return Result(catalog.SEGMENT_COLUMNS, catalog.segment_rows(entries),
                      f"{len(entries)} segment(s) of {store.table(name).name}")
    if verb in ("compact", "optimize"):
        from carbonstore.segments.compaction import compact

        table = store.table(name)
        mergers = ({} if engine is None else
                   {"merger": engine.merger(), "cluster_merger": engine.cluster_merger()})
        if verb == "optimize":
            kind = "cluster"
            by = [c.strip().strip("`") for c in str(parts["by"]).split(",")]
            result = compact(table, "cluster", by=by, curve=str(parts["curve"]).lower(),
                             where=parts.get("where"), **mergers)
        else:
            kind = str(parts["kind"]).lower()
            if kind not in ("minor", "major", "custom", "cluster"):
                raise UserError(f"COMPACT '{parts['kind']}': use 'MINOR', 'MAJOR', 'CUSTOM' or "
                                "'CLUSTER'")
            ids = segment_ids(parts.get("ids")) if kind == "custom" or (
                kind == "cluster" and parts.get("ids") is not None) else None
            result = compact(table, kind, segment_ids=ids, **mergers)  # type: ignore[arg-type]
        rows = [m.to_json() | {"sources": ",".join(m.sources)} for m in result.merged]
        summary = (f"compacted {sum(len(m.sources) for m in result.merged)} segment(s) of "
                   f"{table.name} into {', '.join(m.output for m in result.merged)}"
                   if rows else f"nothing to compact ({kind}) in {table.name}")
        return Result(["output", "sources", "rows", "dataSize", "indexSize", "seconds",
                       "clustering"], rows, summary,
                      "spark" if rows and engine is not None else "local")
    if verb == "clean":
        from carbonstore.segments.clean import clean_files

        opts = clean_options(parts.get("options"))
        table = store.table(name)
        report = clean_files(table, dry_run=opts.get("dryrun", opts.get("dry_run", False)),
                             force=opts.get("force", False),
                             stale_inprogress=opts.get("stale_inprogress", False))
        rows = [i.to_json() | {"path": table.paths.relative(i.path)} for i in report.items]
        summary = (f"{'dry run: would free' if report.dry_run else 'freed'} {report.bytes} "
                   f"bytes ({len(report.items)} item(s)) of {table.name}"
                   + ("; nothing was removed" if report.dry_run else "")
                   + "".join(f"; kept: {s}" for s in report.skipped))
        return Result(["kind", "segment", "bytes", "path", "reason"], rows, summary, "local")
    if verb in ("delete_ids", "delete_before"):
        table = store.table(name)
        marked = (delete_segments(table, segment_ids(parts.get("ids"))) if verb == "delete_ids"
                  else delete_segments_before(table, str(parts["before"])))
        rows = [{"id": e.load_name, "status": e.status} for e in marked]
        return Result(["id", "status"], rows,
                      f"marked for delete: {', '.join(r['id'] for r in rows)}" if rows
                      else "no segment matched")
    if verb == "create":
        return _create(store, name, parts)
    if verb == "show_partitions":
        rows = [{"partition": p.partition, "segments": ",".join(p.segments), "files": p.files,
                 "rows": p.rows} for p in show_partitions(store.table(name))]
        return Result(["partition", "segments", "files", "rows"], rows,
                      f"{len(rows)} partition(s)")
    if not store.exists(name):  # drop
        if parts.get("ie"):
            return Result(["table", "dropped"], [{"table": name, "dropped": False}],
                          f"table {name} does not exist; nothing dropped")
        raise TableNotFoundError(f"DROP TABLE {name}: no such table in store {store.location}")
    dropped = str(store.table(name).name)
    store.drop_table(name)
    return Result(["table", "dropped"], [{"table": dropped, "dropped": True}],
                  f"dropped table {dropped}")


def _create(store: StoreRoot, name: str, parts: dict[str, str | None]) -> Result:
    try:
        table = store.create_table(name, str(parts["schema"]), properties=table_properties(parts))
    except TableExistsError:
        if not parts.get("ine"):
            raise
        existing = str(store.table(name).name)
        return Result(["table", "created"], [{"table": existing, "created": False}],
                      f"table {existing} already exists; not created")
    return Result(["table", "created"], [{"table": str(table.name), "created": True}],
                  f"created table {table.name}")


def _reads_one_version(statement: Statement) -> bool:
    """Statements that read one table's version: ``--as-of`` pins it."""
    if isinstance(statement, Catalog):
        return statement.what in ("describe", "history", "show_create")
    return isinstance(statement, Verb) and statement.verb in ("show_segments", "show_partitions")


class _Pinned:
    """A store whose tables open as of one version (``--as-of`` of a SHOW / DESCRIBE)."""

    def __init__(self, store: StoreRoot, as_of: int | str) -> None:
        self._store, self._as_of = store, as_of

    def table(self, name: str) -> Table:
        return self._store.table(name).as_of(self._as_of)


def run(store: StoreRoot, statement: Statement, *, engine: Engine | None = None,
        as_of: int | str | None = None) -> Result:
    """Run one parsed statement over ``store``; ``engine`` (None: no Spark, a statement
    that needs it is refused in one line) runs what needs a JVM; ``as_of`` pins the
    queries' tables (a version, a local time or ``@epoch ms``).

    Raises:
        UserError: the statement's mistakes, in one line.
    """
    if isinstance(statement, Query):
        return _query(store, statement, engine, as_of)
    if as_of is not None:
        if not _reads_one_version(statement):
            raise UserError(f"--as-of pins the tables a statement reads: {statement.text} "
                            "reads none or changes the latest version; leave out --as-of")
        # these statements only open tables (store.table): each opens pinned
        store = cast(StoreRoot, _Pinned(store, as_of))
    if isinstance(statement, Dml):
        return _dml(store, statement, engine, as_of)
    if isinstance(statement, Insert):
        return _insert(store, statement, engine, as_of)
    if isinstance(statement, Catalog):
        return _catalog(store, statement)
    if isinstance(statement, Alter):
        return _alter(store, statement)
    assert isinstance(statement, Verb)
    return _verb(store, statement, engine)
