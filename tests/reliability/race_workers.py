"""Worker processes of the model-checked race (tests/reliability/test_race_model.py).

Each worker is one OS process running random operations on one table for a bounded time,
through the product's Python API without a JVM (DML runs in the driver: pyarrow + DuckDB):

- ``load``: a fresh key range of this worker, through the load commit protocol
  (workload.load: In Progress entry, writer task, commit);
- ``delete`` / ``update``: ``DELETE WHERE id BETWEEN a AND b`` / ``UPDATE SET v = v + k``
  over the keys every worker shares (0..SHARED-1) or this worker's loaded keys;
- ``merge``: an upsert ``v = t.v + s.v`` / insert of a few keys, shared ones and NEW ones
  (SHARED..SHARED+NEW-1, the same for every worker, so two inserts of a key collide);
- ``compact`` (custom, 2-3 readable segments), ``clean`` (forced, or with a retention of
  one minute), ``alter`` (add a column ``c<w>_<k> long default <n>``), ``restore`` (to a
  recent earlier version);
- ``read`` (the latest version) and ``read_old`` (time travel to an earlier version).

Every operation is appended as one JSON line to the worker's log: its kind and parameters,
the latest version before (``lo``) and after (``hi``) it ran, and either its result (the
version it committed, reported counts, the rows it read) or its error (class and first
line). race_model.py replays the committed ones on a model and checks the rest.

Run: ``python -m tests.reliability.race_workers STORE TABLE WORKER SEED SECONDS LOG``.
"""

from __future__ import annotations

import random
import sys
import time
from typing import Any

import orjson
import pyarrow as pa

from carbonstore import Store
from carbonstore.store import load_conf
from tests.reliability.workload import load as load_segment
from tests.reliability.workload import scan

TABLE_SCHEMA = "id long not null, v long"
SHARED = 200  # keys 0..SHARED-1 are loaded before the race and shared by every worker
NEW = 60  # keys SHARED..SHARED+NEW-1 do not exist at first: MERGE inserts them
LOAD_BASE = 1_000_000  # worker w loads keys LOAD_BASE * (w + 1) + 1000 * j + 0..LOAD_ROWS-1
LOAD_ROWS = 8
LEASE_S = 3  # short: clean files may remove superseded deltas within a CI run
MAX_ALTERS = 2  # per worker
ALTER_AFTER = 0.6  # ALTERs only in the last 40% of the run: DML over mixed schemas comes late
HOT = range(SHARED - 8, SHARED + 8)  # most statements pick keys here: they collide
FORCE = 0.1  # the share of clean files runs that are forced

CONF = {
    "carbon.clean.files.force.allowed": "true",
    "carbon.segment.lease.seconds": str(LEASE_S),
    "carbon.lock.retry.timeout.sec": "30",
    "carbon.lock.retries": "20",
}

STATEMENTS = ("delete", "update", "merge")
MIN_STATEMENTS = 5  # per worker; the CI race asserts at least 10 over its 2 workers
WEIGHTS = {
    "load": 8, "delete": 10, "update": 10, "merge": 12, "compact": 5, "clean": 5,
    "alter": 1, "restore": 4, "read": 10, "read_old": 8,
}


def conf(retention_minutes: int | None = None) -> Any:
    extra = {} if retention_minutes is None else {
        "carbon.segment.retention.minutes": str(retention_minutes)}
    return load_conf(None).with_overrides({**CONF, **extra})


def load_rows(table: Any, first: int, count: int) -> pa.Table:
    """Rows ``first..first+count-1`` with v = id % 97, every added column at its default."""
    ids = list(range(first, first + count))
    cols: dict[str, pa.Array] = {"id": pa.array(ids, pa.int64()),
                                 "v": pa.array([i % 97 for i in ids], pa.int64())}
    for c in table.schema.columns[2:]:
        cols[c.name] = pa.array([int(c.default)] * count, pa.int64())
    return pa.table(cols)


def read_rows(table: Any) -> dict[str, Any]:
    """Every live row of ``table`` (pinned or not): column names and sorted row lists.

    The read path of the data source (plan, partitions with the projections of segments
    written with older schema versions, row groups), without the JVM."""
    got = scan(table)
    names = got.column_names
    rows = sorted(zip(*(got.column(n).to_pylist() for n in names), strict=True)) \
        if got.num_rows else []
    return {"columns": names, "rows": [list(r) for r in rows]}


class Worker:
    """One process's random operations (``run``), or single named ones (``do``)."""

    def __init__(self, location: str, name: str, worker: int, seed: int) -> None:
        self.location, self.name, self.w = location, name, worker
        self.rnd = random.Random(seed * 1000 + worker)
        self.loads = 0
        self.alters = 0
        self.loaded: list[int] = []  # first keys of this worker's committed loads
        self.alter_from = 0.0  # monotonic time from which ALTERs run

    def table(self, retention: int | None = None) -> Any:
        return Store(self.location, conf=conf(retention)).table(self.name)

    def latest(self) -> int:
        return self.table().status.read().version

    # ---- the operations: each returns (params, result) ----------------------------------
    def _range(self) -> tuple[int, int]:
        draw = self.rnd.random()
        if self.loaded and draw < 0.15:
            first = self.rnd.choice(self.loaded)
            a = first + self.rnd.randrange(LOAD_ROWS)
            return a, a + self.rnd.randrange(3)
        a = self.rnd.choice(HOT) if draw < 0.7 else self.rnd.randrange(SHARED + NEW)
        return a, a + self.rnd.choice((0, 0, 1, 2, 5))

    def op_load(self, p: dict[str, Any]) -> dict[str, Any]:
        first = LOAD_BASE * (self.w + 1) + 1000 * self.loads
        self.loads += 1
        p.update(first=first, count=LOAD_ROWS)
        t = self.table()
        seg = load_segment(t, load_rows(t, first, LOAD_ROWS), tasks=1)
        self.loaded.append(first)
        return {"segment": seg}

    def op_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        if "lo" not in p:
            p["lo"], p["hi"] = self._range()
        return _dml(self.table().delete(f"id >= {p['lo']} AND id <= {p['hi']}"))

    def op_update(self, p: dict[str, Any]) -> dict[str, Any]:
        if "lo" not in p:
            p["lo"], p["hi"] = self._range()
            p["k"] = self.rnd.randrange(1, 10)
        return _dml(self.table().update({"v": f"v + {p['k']}"},
                                        where=f"id >= {p['lo']} AND id <= {p['hi']}"))

    def op_merge(self, p: dict[str, Any]) -> dict[str, Any]:
        if "rows" not in p:
            n = self.rnd.randrange(1, 4)
            draw = self.rnd.random()
            pool = HOT if draw < 0.6 else range(SHARED, SHARED + NEW) if draw < 0.8 \
                else range(SHARED)
            ids = sorted(self.rnd.sample(pool, n))
            p["rows"] = [[i, self.rnd.randrange(1, 10)] for i in ids]
        ids, vals = [r[0] for r in p["rows"]], [r[1] for r in p["rows"]]
        t = self.table()
        insert = {"id": "s.id", "v": "s.v"}
        insert.update({c.name: str(c.default) for c in t.schema.columns[2:]})
        source = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(vals, pa.int64())})
        return _dml(t.merge(source, on=["id"], when_matched_update={"v": "t.v + s.v"},
                            when_not_matched_insert=insert))

    def op_compact(self, p: dict[str, Any]) -> dict[str, Any]:
        from carbonstore.segments.compaction import compact

        t = self.table()
        ids = [e.load_name for e in t.status.read().readable]
        if len(ids) < 2:
            return {"skipped": True}
        p["segments"] = pick = self.rnd.sample(ids, min(len(ids), self.rnd.choice((2, 3))))
        res = compact(t, "custom", segment_ids=pick)
        return {"merged": [m.output for m in res.merged]}

    def op_clean(self, p: dict[str, Any]) -> dict[str, Any]:
        from carbonstore.segments.clean import clean_files

        force = p.setdefault("force", self.rnd.random() < FORCE)
        t = self.table(None if force else 1)
        rep = clean_files(t, dry_run=False, force=force, stale_inprogress=True)
        return {"removed": list(rep.removed_entries), "items": len(rep.items)}

    def op_alter(self, p: dict[str, Any]) -> dict[str, Any]:
        from carbonstore.store.alter import add_columns, alter_table, columns_from_defs
        from carbonstore.store.ddl import parse_column_defs

        if self.alters >= MAX_ALTERS or time.monotonic() < self.alter_from:
            return {"skipped": True}
        self.alters += 1
        name = f"c{self.w}_{self.alters}"
        default = 10 * self.w + self.alters
        p.update(column=name, default=default)
        change = add_columns(columns_from_defs(parse_column_defs(f"{name} long default {default}")))
        schema = alter_table(self.table(), change, operation=f"ADD COLUMNS {name}")
        return {"schema_version": schema.schema_version}

    def op_restore(self, p: dict[str, Any]) -> dict[str, Any]:
        t = self.table()
        latest = t.status.read().version
        to = p.setdefault("to", max(1, latest - self.rnd.randrange(1, 12)))
        return {"version": t.restore(to).version}

    def op_read(self, p: dict[str, Any]) -> dict[str, Any]:
        t = self.table()
        p["version"] = version = t.status.read().version
        return read_rows(t.as_of(version, check_files=False))

    def op_read_old(self, p: dict[str, Any]) -> dict[str, Any]:
        t = self.table()
        latest = t.status.read().version
        version = p.setdefault("version", self.rnd.randrange(0, latest + 1))
        return read_rows(t.as_of(version))

    # ---- the loop ----------------------------------------------------------------------
    def do(self, kind: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run one operation of ``kind`` (random parameters unless given); its log record."""
        params = dict(params or {})
        rec: dict[str, Any] = {"w": self.w, "kind": kind, "params": params, "lo": self.latest(),
                               "t0": time.time()}
        try:
            rec.update(ok=True, result=getattr(self, f"op_{kind}")(params))
        except Exception as err:  # noqa: BLE001 - every error is recorded, the checker judges
            text = str(err).splitlines()[0] if str(err) else ""
            rec.update(ok=False, error=type(err).__name__, message=text[:300],
                       carbon=_is_carbon(err))
        rec["hi"] = self.latest()
        rec["t1"] = time.time()
        return rec

    def run(self, seconds: float, log_path: str) -> int:
        kinds = list(WEIGHTS)
        weights = [WEIGHTS[k] for k in kinds]
        start = time.monotonic()
        deadline, cap = start + seconds, start + 3 * seconds
        self.alter_from = start + ALTER_AFTER * seconds
        n = statements = 0
        with open(log_path, "ab") as out:
            # a statement (DELETE/UPDATE/MERGE) starts Spark jobs: on a loaded machine a worker
            # races past its time until it has run MIN_STATEMENTS of them (at most 3x as long)
            while time.monotonic() < deadline or (
                    statements < MIN_STATEMENTS and time.monotonic() < cap):
                rec = self.do(self.rnd.choices(kinds, weights)[0])
                out.write(orjson.dumps(rec) + b"\n")
                out.flush()
                n += 1
                statements += rec["kind"] in STATEMENTS and rec["ok"]
        return n


def _dml(r: Any) -> dict[str, Any]:
    return {"version": r.version, "deleted": r.deleted, "inserted": r.inserted,
            "replans": r.replans}


def _is_carbon(err: BaseException) -> bool:
    from carbonstore.errors import CarbonStoreError

    return isinstance(err, CarbonStoreError)


def main(argv: list[str]) -> int:
    location, name, worker, seed, seconds, log_path = argv
    n = Worker(location, name, int(worker), int(seed)).run(float(seconds), log_path)
    print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
