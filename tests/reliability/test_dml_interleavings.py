"""DELETE / UPDATE / MERGE racing each other, a restore and a load, made deterministic.

One statement runs in this process and is paused at a crash point
(``carbonstore.store.faults.on_point``) just before its tablestatus write; there the other
operation runs to completion in its own process (tests/reliability/dml_race_worker.py),
then the paused one goes on and meets the newer version. The property is serializability
in commit order: the table ends as if the statement that committed second had run, from
its first read, after the first one had committed - the result it reports included
(docs/tablestatus.md, "Conflict rules").
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

from carbonstore.api import Store, Table
from carbonstore.segments.dml import scan_rows
from carbonstore.store.faults import on_point
from tests.dml.rows import load
from tests.reliability.dml_race_worker import upsert

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = "id long not null, v long"


@pytest.fixture
def table(tmp_path: Path) -> Table:
    t = Store(str(tmp_path / "store")).create_table("db.t", SCHEMA)
    _load(t, range(0, 10))  # segment 0
    _load(t, range(10, 20))  # segment 1
    return t


def _load(t: Table, ids: range, v: int = 0) -> str:
    data = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids), pa.int64())})
    return load(t, data).load_name


def rows_of(t: Table) -> list[tuple[int, int]]:
    got = scan_rows(t, _all(t), with_rows=True).rows
    assert got is not None
    return sorted(zip(got["id"].to_pylist(), got["v"].to_pylist(), strict=True))


def _all(t: Table) -> Any:
    from carbonstore.expressions.expr import AlwaysTrue

    return AlwaysTrue()


def other(t: Table, *args: str) -> dict[str, Any]:
    """Run one operation in another process (its own courtesy locks) to completion."""
    env = {k: v for k, v in os.environ.items() if k != "CARBON_CONF"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    locks = str(Path(t.store.location).parent / "other-locks")
    done = subprocess.run(
        [sys.executable, "-m", "tests.reliability.dml_race_worker", t.store.location, locks,
         *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return orjson.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def at_commit(fn: Callable[[], object], nth: int) -> AbstractContextManager[None]:
    """Run ``fn`` once, when this process is about to write its ``nth`` tablestatus version
    (an UPDATE's / MERGE's first one commits its insert segment's In Progress entry)."""
    seen = [0]
    ran: list[object] = []

    def hook() -> None:
        seen[0] += 1
        if seen[0] == nth:
            ran.append(fn())

    return on_point("tablestatus.before_write", hook, once=False)


# ---- item 1: a DELETE and an UPDATE of the same row ------------------------------------------
@pytest.mark.parametrize("first", ["update", "delete"])
@pytest.mark.parametrize("where", ["id = 7", "id < 10"])
@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_delete_racing_an_update_of_its_row_leaves_no_row(
    table: Table, first: str, where: str,
) -> None:
    """DELETE planned on V finds row 7; an UPDATE of row 7 commits first (it deletes the row
    and writes its new version into an insert segment). The DELETE's commit unioned the two
    deltas without planning again: the new version of row 7 survived, and the DELETE
    reported it deleted. Both serial orders leave no row 7; the count is the serial one."""
    if first == "update":  # the DELETE here commits second
        with at_commit(lambda: other(table, "update", "v + 10", "id = 7"), 1):
            result = table.delete(where)
    else:  # the UPDATE here commits second
        with at_commit(lambda: other(table, "delete", where), 2):
            result = table.update({"v": "v + 10"}, where="id = 7")
    got = rows_of(table)
    assert not [r for r in got if r[0] == 7], got
    gone = {7} if where == "id = 7" else set(range(10))
    assert got == [(i, 0) for i in range(20) if i not in gone]
    if first == "update":
        assert result.deleted == len(gone) and result.replans >= 1
    else:
        assert (result.deleted, result.inserted) == (0, 0) and result.replans >= 1


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_delete_racing_an_update_that_moves_a_row_into_its_condition(table: Table) -> None:
    """The rows a newer version ADDED count too: DELETE WHERE v >= 10 plans on V and finds
    row 3 (v = 10 there); an UPDATE makes row 12's v 10 and commits first. Committed
    after it, the DELETE must delete row 12 as well (its condition on the rows as they are
    now), not only its planned rows."""
    table.update({"v": "10"}, where="id = 3")
    with at_commit(lambda: other(table, "update", "10", "id = 12"), 1):
        result = table.delete("v >= 10")
    assert [r for r in rows_of(table) if r[1] >= 10] == []
    assert result.deleted == 2 and result.replans >= 1


def test_delete_ignores_a_blind_append_that_committed_first(table: Table) -> None:
    """A plain load never conflicts with DELETE (snapshot semantics, as Delta's blind
    appends): committed between the DELETE's plan and its commit, its rows stay."""
    with at_commit(lambda: other(table, "load", "5", "3", "1"), 1):
        result = table.delete("id < 10")
    assert result.deleted == 10 and result.replans == 0
    assert rows_of(table) == sorted([(i, 0) for i in range(10, 20)] + [(5, 1), (6, 1), (7, 1)])


# ---- item 2: MERGE upserts of one new key -----------------------------------------------------
K = 100


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_two_merge_upserts_of_a_new_key_insert_it_once(table: Table) -> None:
    """Both plan on V where K is missing; the other commits ``inserted=1``. This one then
    inserted K again (two rows K). Committed second, it must see K and take the matched
    clause: one row K with v = 5 + 3."""
    theirs: list[dict[str, Any]] = []
    with at_commit(lambda: theirs.append(other(table, "upsert", str(K), "5")), 2):
        mine = upsert(table, K, 3)
    assert theirs[0]["inserted"] == 1
    assert [r for r in rows_of(table) if r[0] == K] == [(K, 8)]
    assert (mine.inserted, mine.deleted) == (1, 1) and mine.replans >= 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("how", ["delta", "segment"])
@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_merge_upsert_racing_a_restore_that_brings_the_key_back(table: Table, how: str) -> None:
    """K was deleted (a row of a delta, or its whole segment); a restore to the version
    that still had K commits while a MERGE upsert of K, planned without K, waits to commit:
    the upsert must find the restored K and update it, never add a second K."""
    from carbonstore.segments.manage import delete_segments

    seg = _load(table, range(K, K + 3), v=1)
    had = table.status.read().version
    if how == "delta":
        table.delete(f"id = {K}")
    else:
        delete_segments(table, [seg])
    assert not [r for r in rows_of(table) if r[0] == K]
    with at_commit(lambda: other(table, "restore", str(had)), 2):
        mine = upsert(table, K, 3)
    assert Counter(r[0] for r in rows_of(table))[K] == 1
    assert [r for r in rows_of(table) if r[0] == K] == [(K, 4)]
    assert mine.replans >= 1  # type: ignore[attr-defined]


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_merge_upsert_racing_a_load_of_the_key(table: Table) -> None:
    """A NOT MATCHED insert is checked against every row added since its plan, loads too:
    a load of K committed first makes the upsert update it instead of adding a second K."""
    with at_commit(lambda: other(table, "load", str(K), "1", "5"), 2):
        mine = upsert(table, K, 3)
    assert [r for r in rows_of(table) if r[0] == K] == [(K, 8)]
    assert mine.replans >= 1  # type: ignore[attr-defined]


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_merge_insert_racing_a_delete_of_the_key_it_matched(table: Table) -> None:
    """The rows a MERGE joined are what it read, whether a clause took them or not: K
    matched (so no insert) and a DELETE of K committed first - committed second, the MERGE
    must insert K."""
    _load(table, range(K, K + 1), v=1)
    src = pa.table({"id": pa.array([K, K + 1], pa.int64()), "v": pa.array([3, 4], pa.int64())})
    with at_commit(lambda: other(table, "delete", f"id = {K}"), 2):
        mine = table.merge(src, on=["id"], when_not_matched_insert="*")
    assert [r for r in rows_of(table) if r[0] >= K] == [(K, 3), (K + 1, 4)]
    assert mine.inserted == 2 and mine.replans >= 1


# ---- item 9a: a statement racing a forced clean files -----------------------------------------
LATER = 3 * 3_600_000  # "three hours later": every lease and retention time ran out


def _forcing(t: Table) -> Table:
    """``t`` opened with forced clean files allowed."""
    from carbonstore.store import load_conf

    conf = load_conf(None).with_overrides({"carbon.clean.files.force.allowed": "true"})
    return Store(t.store.location, conf=conf).table("db.t")


def _run(t: Table, statement: str) -> Any:
    if statement == "delete":
        return t.delete("id = 7")
    if statement == "update":
        return t.update({"v": "v + 10"}, where="id = 7")
    return upsert(t, 7, 10)


@pytest.mark.parametrize("statement", ["delete", "update", "merge"])
@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_a_statement_whose_planned_segments_a_forced_clean_removed_plans_again(
    table: Table, statement: str,
) -> None:
    """The statement read version V (segments 0 and 1); a compaction and a forced clean
    files then removed both segments' folders before it read their index or data files:
    it failed with a raw FileNotFoundError, or with "index file is missing ... index
    rebuild", although nothing is damaged. It plans again on the compacted segment."""
    from carbonstore.segments.clean import clean_files
    from carbonstore.segments.compaction import compact

    forcing = _forcing(table)

    def compact_and_clean() -> None:
        compact(forcing, "custom", segment_ids=["0", "1"])
        report = clean_files(forcing, dry_run=False, force=True)
        assert report.removed_entries  # the two compacted segments went

    with on_point("dml.after_read", compact_and_clean):
        result = _run(table, statement)
    assert result.replans == 1
    want = {"delete": [], "update": [(7, 10)], "merge": [(7, 10)]}[statement]
    assert [r for r in rows_of(table) if r[0] == 7] == want
    assert len(rows_of(table)) == 20 - (statement == "delete")


def test_a_statement_whose_planned_delta_a_forced_clean_removed_plans_again(table: Table) -> None:
    """The delete delta the statement's version names was superseded by a newer DELETE and
    removed by a forced clean before the statement read it: "delete delta ... is missing;
    restore it from a backup" - advice for damage, where there was only a race."""
    from carbonstore.segments.clean import clean_files
    from carbonstore.store.tablestatus import now_ms

    table.delete("id = 3")
    forcing = _forcing(table)

    def supersede_and_clean() -> None:
        forcing.delete("id = 5")
        report = clean_files(forcing, dry_run=False, force=True, now=now_ms() + LATER)
        assert [i for i in report.items if i.kind == "delta"]

    with on_point("dml.after_read", supersede_and_clean):
        result = table.delete("id = 7")
    assert (result.deleted, result.replans) == (1, 1)
    assert [r[0] for r in rows_of(table)] == [i for i in range(20) if i not in (3, 5, 7)]


def test_a_statement_that_keeps_losing_to_forced_cleans_says_so_in_one_line(
    table: Table, capsys: pytest.CaptureFixture[str],
) -> None:
    """Every plan of ``carbonstore delete`` finds its version's delta removed by a forced
    clean (a newer DELETE superseded it each time): after its re-plans the command fails
    with one line naming the race and exit status 2 - no traceback, no advice to restore
    anything from a backup - and nothing changed."""
    from carbonstore.cli.app import main
    from carbonstore.segments.clean import clean_files
    from carbonstore.store.tablestatus import now_ms

    _load(table, range(100, 140))  # one file: the target, and the rows deleted meanwhile
    table.delete("id = 100")
    forcing = _forcing(table)
    busy: list[bool] = []
    victims = iter(range(101, 139))

    def supersede_and_clean() -> None:
        if busy:
            return  # the DELETE of this hook reaches the point too
        busy.append(True)
        try:
            forcing.delete(f"id = {next(victims)}")
            clean_files(forcing, dry_run=False, force=True, now=now_ms() + LATER)
        finally:
            busy.clear()

    with on_point("dml.after_read", supersede_and_clean, once=False):
        code = main(["--store", table.store.location, "delete", "db.t", "--where", "id = 139"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert "clean files" in err and "nothing is damaged" in err, err
    assert "backup" not in err and "Traceback" not in err, err
    assert 139 in [r[0] for r in rows_of(table)]


@pytest.mark.usefixtures("spark")  # its DML statements run on Spark
def test_a_merge_whose_source_table_a_forced_clean_removed_reads_it_again(table: Table) -> None:
    """``MERGE INTO db.t USING db.src``: the source table's segments were compacted and
    removed by a forced clean between the read of its version and of its files."""
    from carbonstore.segments.clean import clean_files
    from carbonstore.segments.compaction import compact
    from carbonstore.sql.dml_parse import parse_dml
    from carbonstore.sql.dml_run import run_dml

    src = table.store.create_table("db.src", SCHEMA)
    _load(src, range(K, K + 2), v=1)
    _load(src, range(K + 2, K + 4), v=1)
    forcing = _forcing(table).store.table("db.src")

    def compact_and_clean() -> None:
        compact(forcing, "custom", segment_ids=["0", "1"])
        assert clean_files(forcing, dry_run=False, force=True).removed_entries

    statement = parse_dml("MERGE INTO db.t AS t USING db.src AS s ON t.id = s.id "
                          "WHEN NOT MATCHED THEN INSERT *")
    assert statement is not None
    with on_point("dml.after_read", compact_and_clean):
        result = run_dml(table.store, statement, read_source=None, time_zone="UTC")
    assert result.inserted == 4
    assert [r for r in rows_of(table) if r[0] >= K] == [(K + i, 1) for i in range(4)]
