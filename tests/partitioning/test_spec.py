"""Partition specs, folder names and transforms (no table, no Spark)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.errors import SchemaError, UserError
from carbonstore.store.murmur3 import spark_hash
from carbonstore.store.partitioning import (
    NULL_PARTITION,
    PartitionField,
    PartitionSpec,
    bucket_ids,
    escape,
    field_bounds,
    field_values,
    parse_fields,
    parse_partition_path,
    partition_dir,
    unescape,
)
from carbonstore.store.schema import TableSchema, normalise_properties, parse_schema_string

DDL = "id long, region string, ts timestamp, d date, qty int, price double, amt decimal(10,2), raw binary"


def _schema(props: dict[str, str] | None = None) -> TableSchema:
    return TableSchema(database="db", table="t", columns=tuple(parse_schema_string(DDL)),
                       properties=normalise_properties(props or {}))


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_escape_round_trips_and_stays_one_safe_folder_name(text: str) -> None:
    out = escape(text)
    assert unescape(out) == text
    assert "/" not in out and "\\" not in out and "=" not in out and out not in (".", "..")
    assert not any(ord(c) < 0x20 or c == "\x7f" for c in out)
    assert out != NULL_PARTITION


@pytest.mark.parametrize("value, folder", [
    ("a/b", "a%2Fb"), ("..", "%2E%2E"), (".", "%2E"), ("x=1", "x%3D1"), ("50%", "50%25"),
    ("日本", "日本"), ("a\\b", "a%5Cb"), ("tab\there", "tab%09here"), ("", ""),
    (NULL_PARTITION, "%5F_HIVE_DEFAULT_PARTITION__"), ("a.b", "a.b"),
])
def test_escape_is_hive_style(value: str, folder: str) -> None:
    assert escape(value) == folder


@pytest.mark.parametrize("text, names", [
    ("region", ["region"]),
    ("region, day(ts)", ["region", "ts_day"]),
    ("year(d), month(ts), hour(ts)", ["d_year", "ts_month", "ts_hour"]),
    ("bucket(16, id), truncate(3, region)", ["id_bucket", "region_trunc"]),
    ("REGION, Day(TS)", ["region", "ts_day"]),
])
def test_parse_fields(text: str, names: list[str]) -> None:
    assert [f.name for f in parse_fields(text, _schema())] == names


@pytest.mark.parametrize("text, match", [
    ("nope", "no column 'nope'"),
    ("hour(d)", "hour\\(\\) needs a timestamp"),
    ("day(region)", "needs a date or timestamp"),
    ("bucket(id)", "needs a positive width"),
    ("bucket(0, id)", "needs a positive width"),
    ("truncate(3, ts)", "truncate\\(\\) needs an integer or string"),
    ("price", "cannot partition by double"),
    ("raw", "cannot partition by binary"),
    ("bucket(4, price)", "cannot use double"),
    ("region, region", "appears twice"),
    ("fancy(ts)", "unknown partition transform"),
    ("day(ts", "cannot read partition field"),
])
def test_bad_fields_are_refused(text: str, match: str) -> None:
    with pytest.raises(SchemaError, match=match):
        parse_fields(text, _schema())


def test_properties_are_checked_at_create(store) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SchemaError, match="bucket_number and bucket_columns go together"):
        store.create_table("t", "id long", properties={"bucket_number": "4"})
    with pytest.raises(SchemaError, match="between 1 and 100000"):
        store.create_table("t", "id long", properties={"bucket_number": "0", "bucket_columns": "id"})
    with pytest.raises(SchemaError, match="no column 'x'"):
        store.create_table("t", "id long", properties={"partition_by": "x"})
    assert not store.exists("t")
    t = store.create_table("t", "id long, s string", properties={
        "partition_by": "s", "bucket_number": "4", "bucket_columns": "id"})
    spec = PartitionSpec.from_properties(t.schema.properties, t.schema)
    assert spec.partition_text == "s" and spec.bucket_number == 4
    assert PartitionSpec.from_json(spec.to_json()) == spec


# Spark 4: SELECT hash(x) (Murmur3, seed 42); verified against Spark in test_spark.py too.
@pytest.mark.parametrize("arr, want", [
    (pa.array([0, 1, -1, 42], pa.int32()), [933211791, -559580957, -1604776387, 29417773]),
    (pa.array([0, 1, -1, 2**40], pa.int64()), [-1670924195, -1712319331, -939490007, -1596767687]),
    (pa.array(["", "a", "abcd", "abcde"]), [142593372, 1485273170, -396302900, 814637928]),
])
def test_spark_hash_known_values(arr: pa.Array, want: list[int]) -> None:
    assert spark_hash([arr]).tolist() == want


def test_bucket_ids_skip_nulls_and_are_in_range() -> None:
    ids = bucket_ids([pa.array([1, None, 3], pa.int64()), pa.array(["x", "y", None])], 7)
    assert all(0 <= b < 7 for b in ids.tolist())
    alone = bucket_ids([pa.array([3], pa.int64())], 7)
    assert ids[2] == alone[0]  # a null adds nothing to the running hash


UTC = dt.UTC


@pytest.mark.parametrize("field, values, texts", [
    (PartitionField(source="ts", transform="day"),
     pa.array([dt.datetime(2024, 1, 3, 23, 59, tzinfo=UTC), dt.datetime(1969, 12, 31, 23, tzinfo=UTC), None],
              pa.timestamp("us", tz="UTC")),
     ["2024-01-03", "1969-12-31", None]),
    (PartitionField(source="ts", transform="hour"),
     pa.array([dt.datetime(2024, 1, 3, 7, 30, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
     ["2024-01-03-07"]),
    (PartitionField(source="d", transform="month"),
     pa.array([dt.date(2024, 2, 29), dt.date(1900, 1, 1)]), ["2024-02", "1900-01"]),
    (PartitionField(source="d", transform="year"), pa.array([dt.date(2024, 2, 29)]), ["2024"]),
    (PartitionField(source="qty", transform="truncate", param=10),
     pa.array([15, -1, 0, None], pa.int32()), ["10", "-10", "0", None]),
    (PartitionField(source="region", transform="truncate", param=2),
     pa.array(["日本語", "a", None]), ["日本", "a", None]),
])
def test_transform_values(field: PartitionField, values: pa.Array, texts: list[str | None]) -> None:
    type_name = {"ts": "timestamp", "d": "date", "qty": "int", "region": "string"}[field.source]
    assert field_values(field, values, type_name) == texts


@pytest.mark.parametrize("field, text, type_name, bounds", [
    (PartitionField(source="ts", transform="day"), "1970-01-02", "timestamp",
     (86_400_000_000, 2 * 86_400_000_000 - 1, False)),
    (PartitionField(source="d", transform="month"), "1970-02", "date", (31, 58, False)),
    (PartitionField(source="d", transform="year"), "1971", "date", (365, 729, False)),
    (PartitionField(source="ts", transform="hour"), "1970-01-01-01", "timestamp",
     (3_600_000_000, 7_200_000_000 - 1, False)),
    (PartitionField(source="qty", transform="truncate", param=10), "-10", "int", (-10, -1, False)),
    (PartitionField(source="region", transform="truncate", param=2), "ab", "string", (b"ab", b"ac", True)),
    (PartitionField(source="region", transform="truncate", param=3), "ab", "string", (b"ab", b"ab", False)),
    (PartitionField(source="region"), "a/b", "string", (b"a/b", b"a/b", False)),
    (PartitionField(source="d"), "2024-01-03", "date", (19725, 19725, False)),
    (PartitionField(source="amt"), "12.50", "decimal", (1250, 1250, False)),
    (PartitionField(source="id", transform="bucket", param=4), "3", "long", None),
])
def test_field_bounds(field: PartitionField, text: str, type_name: str, bounds: object) -> None:
    assert field_bounds(field, text, type_name, 2 if type_name == "decimal" else 0) == bounds


def test_partition_paths_round_trip() -> None:
    fields = parse_fields("region, day(ts)", _schema())
    folder = partition_dir(fields, ["a/../b", None])
    assert folder == f"region=a%2F..%2Fb/ts_day={NULL_PARTITION}"
    key = parse_partition_path(fields, f"{folder}/part-0-x_b00003.parquet", buckets=4)
    assert key is not None and key.values == ("a/../b", None) and key.bucket == 3
    assert parse_partition_path(fields, "part-0.parquet") is None  # not of this spec
    assert parse_partition_path(fields, f"{folder}/part-0-x_b00009.parquet", buckets=4) is None


def test_long_partition_values_are_refused_with_the_fix() -> None:
    fields = parse_fields("region", _schema())
    with pytest.raises(UserError, match="truncate"):
        partition_dir(fields, ["x" * 300])
