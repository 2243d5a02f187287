"""String and CAST literals compared with typed columns are read as Spark reads them.

Spark (ANSI) casts a string compared with a column to the column's type (against a decimal
column both sides to DOUBLE) and fails the statement on text it cannot read ('5.5' as a
BIGINT, '20240105' as a DATE); ``CAST(3.65 AS DECIMAL(10, 1))`` is 3.7. The index must
never answer (count from the index, a pruned read) where Spark fails or reads another
value: every statement here equals the same statement over plain ``spark.read.parquet``
(read without parquet-java's row-group filter, which drops NaN rows), or fails where it
fails."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from carbonstore import Store
from carbonstore.segments.dml import delete_rows
from carbonstore.segments.writer import arrow_type
from carbonstore.spark.sql import run_statement
from carbonstore.store import load_conf
from tests.pruning.test_answers import TINY, add_segments

SCHEMA = ("id long not null, n int, sh short, s string, d date, ts timestamp, "
          "m decimal(10,2), x double, city string")


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "n": pa.array([None if i % 7 == 0 else i * 3 - 100 for i in ids], pa.int32()),
        "sh": pa.array([i % 300 - 150 for i in ids], pa.int16()),
        "s": [None if i % 13 == 0 else str(i) for i in ids],
        "d": [None if i % 17 == 0 else dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in ids],
        "ts": [None if i % 19 == 0 else base + dt.timedelta(hours=i * 7) for i in ids],
        "m": [None if i % 23 == 0 else decimal.Decimal(i).scaleb(-2) for i in ids],
        "x": [None if i % 29 == 0 else math.nan if i % 31 == 0 else i / 4 - 10 for i in ids],
        "city": [None if i % 10 == 0 else f"c{(i * 7) % 5}" for i in ids],
    })


@pytest.fixture(scope="module")
def literals(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Store]]:
    root = tmp_path_factory.mktemp("literals")
    store = Store(str(root / "store"), conf=load_conf(None).with_overrides(TINY))
    t = store.create_table("db.t", SCHEMA, properties={"dictionary_include": "city"})
    parts = [_rows(0, 120), _rows(120, 80), _rows(200, 60)]
    add_segments(t, parts, row_group_size=20)
    delete_rows(t, "id >= 130 AND id < 140")
    fields = [pa.field(c.name, arrow_type(c.type), nullable=c.nullable) for c in t.schema.columns]
    rows = pa.concat_tables(parts).cast(pa.schema(fields))
    ids = rows.column("id")
    rows = rows.filter(pc.invert(pc.and_(pc.greater_equal(ids, 130), pc.less(ids, 140))))
    pq.write_table(rows, root / "plain.parquet")
    spark.read.parquet(str(root / "plain.parquet")).createOrReplaceTempView("plain_lit")
    native = Store(store.location, conf=store.conf.with_overrides({"carbon.read.local.rows": "0"}))
    yield [store, native]


PREDICATES = [
    # an integral column against text: Spark casts the text to BIGINT (fails on '5.0')
    "id = ' +5 '", "id = '5.0'", "id = '5.5'", "id < '7.5'", "id = '1_0'", "n = '５'",
    "id IN ('5', '6.0')", "n = '3000000000'", "id = '99999999999999999999'", "n < '-9223372036854775809'",
    # a decimal column against text: both as doubles
    "m = '0.05'", "m = '0.05000000000000000001'", "m = '5e-2'", "m = 'x'",
    # CAST of a literal, as Spark computes it (rounded half up to the scale; an overflow fails)
    "m = CAST(0.05 AS DECIMAL)", "m <= CAST(0.395 AS DECIMAL(10,2))",
    "m <= CAST('0.395' AS DECIMAL(10,2))", "m = CAST(0.45 AS DECIMAL(1,1))",
    "sh = CAST(300 AS TINYINT)", "sh = CAST(-150 AS SMALLINT)", "id = CAST('5.7' AS INT)",
    "id = CAST(5.7 AS INT)", "x = CAST('1_0' AS DOUBLE)",
    # doubles against text
    "x = '1_0'", "x = '10'", "x > 'Infinity'", "x >= '５'",
    # dates and timestamps against text Spark reads, or fails on
    "d = '20240105'", "d = '2024-W01-5'", "d = DATE '20240105'", "d >= '2024-1-5'",
    "d < '2024-01-05 10:00'", "ts = '20240101T070000'", "ts = '2024-01-01 7:0:0'",
    "ts = TIMESTAMP '2024-01-01 07:00:00.1234567'", "ts < '2024-01-03T00:00:00+01:00'",
]
# the count: answered from the index where it decides; the rows: a native read
FORMS = [("SELECT count(*) FROM {t} WHERE {p}", 0), ("SELECT id FROM {t} WHERE {p}", 1)]


def _norm(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted(tuple(("nan",) if isinstance(v, float) and math.isnan(v) else (v,) for v in r)
                  for r in rows)


def _plain(spark: Any, statement: str) -> Any:
    spark.conf.set("spark.sql.parquet.filterPushdown", "false")
    try:
        return _norm(spark.sql(statement).collect())
    except Exception as err:  # noqa: BLE001 - Spark refuses the statement: so must we
        return err
    finally:
        spark.conf.unset("spark.sql.parquet.filterPushdown")


@pytest.mark.parametrize("predicate", PREDICATES)
def test_literals_read_as_spark_reads_them(
    spark: Any, literals: list[Store], predicate: str
) -> None:
    for form, which in FORMS:
        want = _plain(spark, form.format(t="plain_lit", p=predicate))
        statement = form.format(t="db.t", p=predicate)
        if isinstance(want, Exception):
            with pytest.raises(Exception):  # noqa: B017, PT011 - Spark's own error, any
                run_statement(spark, literals[which], statement).collect()
        else:
            got = _norm(run_statement(spark, literals[which], statement).collect())
            assert got == want, statement
