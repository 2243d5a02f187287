"""The table the scan tests read: two schema versions (a dropped and an added column),
delete deltas, a dictionary column, partitions by city and NaN scores."""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa

from carbonstore import Store, Table


def rows(lo: int, hi: int, *, with_gone: bool) -> pa.Table:
    ids = list(range(lo, hi))
    cols = {
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([None if i % 13 == 0 else f"n{i % 40}" for i in ids]),
        "city": pa.array([[None, "a", "b", "c"][i % 4] for i in ids]),
        "score": pa.array([math.nan if i % 9 == 0 else None if i % 11 == 0 else (i % 50) - 10.5
                           for i in ids], pa.float64()),
        "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 30) for i in ids]),
    }
    if with_gone:
        cols["gone"] = pa.array([i * 2 for i in ids], pa.int32())
    else:
        cols["extra"] = pa.array([None if i % 3 else i % 7 for i in ids], pa.int32())
    return pa.table(cols)


def build(store: Store) -> Table:
    t = store.create_table(
        "db.scan", "id long not null, name string, city string, score double, day date, "
        "gone int", sort_columns="id", dictionary_columns="name", partition_by="city",
        properties={"page_rows": "500"})
    t.append(rows(0, 1500, with_gone=True))
    t.append(rows(1500, 2500, with_gone=True))
    t.delete("id >= 100 AND id < 400 OR name = 'n7'")
    t = t.alter(drop_columns="gone", add_columns="extra int")
    t.append(rows(2500, 3500, with_gone=False))
    t.delete("id > 3300")
    return t
