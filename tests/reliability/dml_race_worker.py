"""One DML-side operation in its own process, for the interleaving tests of
test_dml_interleavings.py: ``python -m tests.reliability.dml_race_worker STORE LOCKS OP ...``.

    delete WHERE                 DELETE FROM db.t WHERE ...
    update SET WHERE             UPDATE db.t SET v = SET WHERE ...   (SET: an expression)
    upsert ID V                  MERGE of the row (ID, V): matched -> v = t.v + s.v, else insert
    restore VERSION              restore db.t to VERSION
    load FIRST COUNT V           a plain load of ids FIRST.. with v = V

Prints the statement's result as one JSON line. ``LOCKS`` is a folder for this process's
courtesy locks (as a writer on another machine, which shares none with the test process:
the paused commit holds the local one).
"""

from __future__ import annotations

import sys

import orjson
import pyarrow as pa

from carbonstore.api import Store
from carbonstore.store import load_conf


def source(key: int, v: int) -> pa.Table:
    return pa.table({"id": pa.array([key], pa.int64()), "v": pa.array([v], pa.int64())})


def upsert(table: object, key: int, v: int) -> object:
    return table.merge(source(key, v), on=["id"],  # type: ignore[attr-defined]
                       when_matched_update={"v": "t.v + s.v"}, when_not_matched_insert="*")


def main(argv: list[str]) -> int:
    location, locks, op, *args = argv
    conf = load_conf(None).with_overrides({"carbon.lock.path": locks})
    table = Store(location, conf=conf).table("db.t")
    if op == "delete":
        out: object = table.delete(args[0]).to_json()
    elif op == "update":
        out = table.update({"v": args[0]}, where=args[1]).to_json()
    elif op == "upsert":
        out = upsert(table, int(args[0]), int(args[1])).to_json()  # type: ignore[attr-defined]
    elif op == "restore":
        out = {"version": table.restore(int(args[0])).version}
    elif op == "load":
        from tests.reliability.workload import load  # the product's commit protocol: LOAD

        first, count, v = (int(a) for a in args)
        ids = pa.array(range(first, first + count), pa.int64())
        out = {"segment": load(table, pa.table({"id": ids, "v": pa.array([v] * count, pa.int64())}),
                               tasks=1)}
    else:
        raise SystemExit(f"unknown operation {op}")
    print(orjson.dumps(out).decode(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
