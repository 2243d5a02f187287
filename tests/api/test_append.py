"""``Table.append``: rows in through the load writer, one segment, one commit, no JVM."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.errors import UserError

SCHEMA = ("id long not null, b boolean, t byte, s short, i int, f float, d double, "
          "m decimal(12,3), str string, bin binary, day date, ts timestamp, "
          "arr array<int>, kv map<string,int>, st struct<a:int,b:string>, "
          "code string, region string")


def _data(lo: int, hi: int) -> pa.Table:
    ids = range(lo, hi)
    utc = dt.UTC

    def maybe(i: int, v: Any) -> Any:
        return None if i % 7 == 3 else v

    return pa.table({
        "id": pa.array(list(ids), pa.int64()),
        "b": pa.array([maybe(i, i % 2 == 0) for i in ids]),
        "t": pa.array([maybe(i, i % 100 - 50) for i in ids], pa.int8()),
        "s": pa.array([maybe(i, i * 3 - 1000) for i in ids], pa.int16()),
        "i": pa.array([maybe(i, i * 1000) for i in ids], pa.int32()),
        "f": pa.array([math.nan if i % 5 == 0 else maybe(i, i / 4) for i in ids], pa.float32()),
        "d": pa.array([math.nan if i % 6 == 0 else -0.0 if i % 6 == 1 else maybe(i, i * 1.5)
                       for i in ids], pa.float64()),
        "m": pa.array([maybe(i, decimal.Decimal(i) / 1000) for i in ids], pa.decimal128(12, 3)),
        "str": pa.array([maybe(i, f"s{i}é") for i in ids]),
        "bin": pa.array([maybe(i, bytes([i % 256, 0])) for i in ids], pa.binary()),
        "day": pa.array([maybe(i, dt.date(2020, 1, 1) + dt.timedelta(days=i)) for i in ids]),
        "ts": pa.array([maybe(i, dt.datetime(2024, 3, 1, tzinfo=utc) + dt.timedelta(seconds=i))
                        for i in ids], pa.timestamp("us", tz="UTC")),
        "arr": pa.array([maybe(i, [i, None, -i]) if i % 4 else [] for i in ids],
                        pa.list_(pa.int32())),
        "kv": pa.array([maybe(i, [("k", i), ("z", None)]) for i in ids],
                       pa.map_(pa.string(), pa.int32())),
        "st": pa.array([maybe(i, {"a": i, "b": None if i % 2 else f"b{i}"}) for i in ids],
                       pa.struct([("a", pa.int32()), ("b", pa.string())])),
        "code": pa.array([maybe(i, f"c{i % 5}") for i in ids]),
        "region": pa.array([[None, "eu", "us"][i % 3] for i in ids]),
    })


def _rows(t: pa.Table) -> list[tuple[Any, ...]]:
    def norm(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, float) and v == 0:
            return 0.0  # -0.0 and 0.0 compare equal in Spark
        if isinstance(v, list):
            return tuple(norm(x) for x in v)
        if isinstance(v, dict):
            return tuple(sorted((k, norm(x)) for k, x in v.items()))
        return v
    return sorted((tuple(norm(v) for v in r.values()) for r in t.to_pylist()), key=lambda r: r[0])


def test_append_round_trips_every_type(store: Store) -> None:
    table = store.create_table("db.all", SCHEMA, sort_columns="id", dictionary_columns="code",
                               partition_by="region", bloom_columns="str")
    first = _data(0, 700)
    res = table.append(first)
    assert res.segment == "0" and res.rows == 700
    # a RecordBatchReader (streamed, in another column order) and an Arrow C stream
    second = _data(700, 1300)
    assert table.append(second.select(list(reversed(second.schema.names))).to_reader()).rows == 600

    class Capsule:
        def __init__(self, t: pa.Table) -> None:
            self.t = t

        def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
            return self.t.__arrow_c_stream__(requested_schema)

    assert table.append(Capsule(_data(1300, 1400))).segment == "2"
    got = table.scan().to_arrow()
    want = pa.concat_tables([_data(0, 700), second, _data(1300, 1400)]).cast(got.schema)
    assert _rows(got) == _rows(want)
    # one commit each: BEGIN and LOAD per append; the load writer's layout
    assert [i.operation for i in table.history()].count("LOAD") == 3
    entry = table.status.read().get("0")
    assert {p.split("/")[-2] for p in _files(table, "0")} == {"region=eu", "region=us",
                                                            "region=__HIVE_DEFAULT_PARTITION__"}
    assert entry.row_count == 700
    # the index prunes on the sort column, the dictionary column filters by value
    plan = table.scan(where="id = 5").plan
    assert {f.segment for f in plan.files} == {"0"}
    assert table.scan(where="code = 'c3' AND region = 'eu'").count() == sum(
        1 for i in range(1400) if i % 7 != 3 and i % 5 == 3 and i % 3 == 1)


def _files(table: Any, segment: str) -> list[str]:
    return [f.path for f in table.scan().plan.files if f.segment == segment]


def test_pandas_round_trip(store: Store) -> None:
    pd = pytest.importorskip("pandas")
    table = store.create_table("db.pd", "id long, name string, x double")
    frame = pd.DataFrame({"id": [1, 2, 3], "name": ["a", None, "c"], "x": [0.5, float("nan"), None]})
    table.append(frame)
    back = table.scan().to_pandas().sort_values("id")
    assert back["id"].tolist() == [1, 2, 3]


def test_bad_input_is_one_line_and_leaves_nothing(store: Store) -> None:
    table = store.create_table("db.bad", "id long not null, name string")
    with pytest.raises(UserError, match="column.s. nope the table does not"):
        table.append(pa.table({"id": [1], "nope": [2]}))
    with pytest.raises(UserError, match="cannot read rows from a list"):
        table.append([{"id": 1}])
    with pytest.raises(UserError, match="does not fit the table"):
        table.append(pa.table({"id": ["x"]}))
    with pytest.raises(UserError, match="bad record"):  # NOT NULL under the FAIL action
        table.append(pa.table({"id": pa.array([1, None], pa.int64())}))
    assert table.append(pa.table({"id": pa.array([], pa.int64())})).segment is None
    assert table.scan().count() == 0
    assert all(not e.readable for e in table.status.read().entries)
    with pytest.raises(UserError, match="read-only"):
        table.as_of(0).append(pa.table({"id": [1]}))
