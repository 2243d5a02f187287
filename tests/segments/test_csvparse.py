"""CSV parsed with pyarrow in load tasks: splits, value forms, fallback, Spark's sort order.

The expected values are what Spark's CSV reader gives for the same text (the table
schema, PERMISSIVE, UTC); tests/spark/test_csv_tasks.py checks them against Spark itself.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore.segments.csvparse import (
    BadValue,
    CsvScan,
    CsvSplit,
    NeedsSparkParser,
    pack_splits,
    read_splits,
    sort_like_spark,
)
from carbonstore.segments.writer import ColumnSpec, arrow_schema
from carbonstore.store.schema import parse_schema_string

FS = pafs.LocalFileSystem()


def _scan(ddl: str, *, header: bool = False, **kw: str) -> CsvScan:
    cols = tuple(ColumnSpec.from_column(c) for c in parse_schema_string(ddl))
    return CsvScan(
        file_columns=tuple(c.name for c in cols), columns=cols, header=header, **kw
    )


def _read(scan: CsvScan, path: Path, splits: list[CsvSplit] | None = None) -> pa.Table:
    parts = splits or [CsvSplit(str(path), 0, -1)]
    return pa.Table.from_batches(list(read_splits(scan, parts, FS)), arrow_schema(scan.columns))


line_text = st.text(alphabet="abcxyz0189 ;é東", min_size=1, max_size=30).filter(
    lambda s: s.strip() != ""
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(line_text, min_size=1, max_size=40),
    crlf=st.booleans(),
    max_bytes=st.integers(1, 400),
    header=st.booleans(),
)
def test_splits_hold_every_line_once(
    tmp_path: Path, lines: list[str], crlf: bool, max_bytes: int, header: bool
) -> None:
    nl = "\r\n" if crlf else "\n"
    path = tmp_path / "in.csv"
    path.write_bytes(((("s" + nl) if header else "") + nl.join(lines) + nl).encode())
    scan = _scan("s string", header=header)
    tasks = pack_splits([(str(path), path.stat().st_size)], max_bytes=max_bytes, open_cost=0)
    splits = [s for t in tasks for s in t]
    assert sum((s.end if s.end >= 0 else path.stat().st_size) - s.start for s in splits) == (
        path.stat().st_size
    )
    got = [v for s in splits for v in _read(scan, path, [s]).column("s").to_pylist()]
    assert sorted(got) == sorted(lines)


def test_tasks_are_packed_like_spark() -> None:
    files = [("a", 300), ("b", 10), ("c", 10), ("d", 250)]
    tasks = pack_splits(files, max_bytes=100, open_cost=20)
    # a and d are cut at 100 bytes; pieces go largest first; a task takes pieces while their
    # bytes plus 20 per opened piece stay within 100
    assert [[(s.path, s.start, s.end) for s in t] for t in tasks] == [
        [("a", 0, 100)], [("a", 100, 200)], [("a", 200, -1)], [("d", 0, 100)],
        [("d", 100, 200)], [("d", 200, -1), ("b", 0, -1)], [("c", 0, -1)],
    ]


FALLBACK = object()
BAD = object()  # a bad record to Spark: the task names it (BadValue)

CASES = [
    # type, text, Spark's value (FALLBACK: the task leaves it to Spark's reader)
    ("double", "1.5", 1.5),
    ("double", "-0.0", -0.0),
    ("double", "1e5", 1e5),
    ("double", "NaN", math.nan),
    ("double", "+NaN", math.nan),
    ("double", "Inf", math.inf),
    ("double", "-Inf", -math.inf),
    ("double", "Infinity", math.inf),
    ("double", "nan", BAD),  # a bad record to Spark (nanValue is NaN)
    ("double", "inf", BAD),
    ("double", "-inf", BAD),
    ("double", "abc", BAD),
    ("double", "1,5", FALLBACK),  # two fields
    ("double", "1e400", FALLBACK),  # infinite to Spark, text not a Spark spelling
    ("double", "1.5d", FALLBACK),  # Spark reads 1.5
    ("double", " 1.5", FALLBACK),
    ("float", "NaN", math.nan),
    ("float", "1e40", FALLBACK),
    ("long", "9223372036854775807", 9223372036854775807),
    ("long", "9223372036854775808", FALLBACK),
    ("int", "007", 7),
    ("int", "-0", 0),
    ("int", "+5", FALLBACK),  # Spark reads 5
    ("byte", "128", BAD),
    ("short", "-32769", BAD),
    ("int", "abc", BAD),
    ("int", "1.5", BAD),
    ("long", "12x", BAD),
    ("boolean", "TRUE", True),
    ("boolean", "false", False),
    ("boolean", "1", BAD),
    ("boolean", "yes", BAD),
    ("boolean", "tRuE", FALLBACK),  # Spark reads True
    ("decimal(10,2)", "1.5", Decimal("1.50")),
    ("decimal(10,2)", "1e2", Decimal("100.00")),
    ("decimal(10,2)", "1.234", FALLBACK),  # Spark rounds to 1.23
    ("date", "2024-01-01", dt.date(2024, 1, 1)),
    ("date", "2024-02-30", FALLBACK),
    ("date", "2024-1-1", FALLBACK),  # Spark reads 2024-01-01
    ("timestamp", "2024-01-01 10:00:00", dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC)),
    ("timestamp", "2024-01-01T10:00:00.123456",
     dt.datetime(2024, 1, 1, 10, 0, 0, 123456, tzinfo=dt.UTC)),
    ("timestamp", "2024-01-01", dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
    ("timestamp", "2024-01-01 10:00", dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC)),
    ("timestamp", "2024-01-01T10:00:00+01:00", dt.datetime(2024, 1, 1, 9, tzinfo=dt.UTC)),
    ("timestamp", "2024-01-01T10:00:00Z", dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC)),
    ("timestamp", "2024-01-01 10:00:00.123000Z",
     dt.datetime(2024, 1, 1, 10, 0, 0, 123000, tzinfo=dt.UTC)),
    ("timestamp", "2024-01-01T10:00:00.5-0130",
     dt.datetime(2024, 1, 1, 11, 30, 0, 500000, tzinfo=dt.UTC)),
    ("timestamp", "2024-01-01 10:00:00+00:00", dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC)),
    ("timestamp", "2024-01-01T10:00Z", FALLBACK),  # a bad record to Spark: no seconds
    ("timestamp", "2024-01-01 24:00:00", FALLBACK),
    ("string", " two  spaces ", " two  spaces "),
    ("string", "Zoë 東京", "Zoë 東京"),
    ("string", "", None),
    ("string", "C:\\temp", FALLBACK),  # the escape character
    ("string", '"quoted"', "quoted"),
    ("string", '"a,b"', "a,b"),
    ("string", '" x "', " x "),
    ("int", '"5"', 5),
    ("string", '""', None),  # a quoted empty string: null, as the null text is empty
    ("int", '""', None),
    ("string", '"a""b"', FALLBACK),  # a doubled quote
    ("string", 'a"b', FALLBACK),  # a quote inside a field
    ("string", ' "a"', FALLBACK),  # a quote after a space
    ("string", '"a" ', FALLBACK),
    ("int", "", None),
]


@pytest.mark.parametrize(("type_", "text", "want"), CASES)
def test_value_forms(tmp_path: Path, type_: str, text: str, want: object) -> None:
    path = tmp_path / "v.csv"
    path.write_text(f"1,{text}\n2,{text}\n", encoding="utf-8")
    scan = _scan(f"k int, v {type_}")
    if want is BAD:
        with pytest.raises(BadValue) as bad:
            _read(scan, path)
        assert (bad.value.path, bad.value.line, bad.value.column) == (str(path), 1, "v")
        assert bad.value.value == text
        return
    if want is FALLBACK:
        with pytest.raises(NeedsSparkParser) as err:
            _read(scan, path)
        assert not isinstance(err.value, BadValue)
        return
    got = _read(scan, path).column("v").to_pylist()
    if isinstance(want, float) and math.isnan(want):
        assert all(isinstance(v, float) and math.isnan(v) for v in got)
    else:
        assert got == [want, want]
        if isinstance(want, float):
            assert [math.copysign(1, v) for v in got] == [math.copysign(1, want)] * 2


def test_null_value_and_extra_and_missing_columns(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("name,junk,id\n\\N,x,1\n,y,2\nann,z,3\n")
    cols = tuple(
        ColumnSpec.from_column(c)
        for c in parse_schema_string("id int not null, name string, extra double")
    )
    scan = CsvScan(file_columns=("name", "__extra_1", "id"), columns=cols, header=True,
                   escape="", null_value="\\N")
    got = _read(scan, path)
    assert got.schema.names == ["id", "name", "extra"]
    assert got.to_pylist() == [
        {"id": 1, "name": None, "extra": None},
        {"id": 2, "name": None, "extra": None},
        {"id": 3, "name": "ann", "extra": None},
    ]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("1,a\n2\n", "fewer fields"),
        ("1,a\n2,b,c\n", "more fields"),
        ("\ufeff1,a\n", "byte-order mark"),
        ('1,"a\nb"\n', "a line break inside quotes"),
        ('1,"a\n', "an unclosed quote"),
    ],
)
def test_shapes_only_spark_decides(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "in.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(NeedsSparkParser):
        _read(_scan("k int, s string"), path)


def test_invalid_utf8_is_left_to_spark(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(b"1,ok\n2,\xff\xfe\n")
    with pytest.raises(NeedsSparkParser):
        _read(_scan("k int, s string"), path)


def test_sort_like_spark_puts_nulls_first_and_nan_last() -> None:
    t = pa.table({
        "x": pa.array([2.0, None, math.nan, -1.0, math.inf], pa.float64()),
        "s": pa.array(["b", "a", None, "é", "a"]),
    })
    got = sort_like_spark(t, ["x"]).column("x").to_pylist()
    assert got[0] is None and got[1:4] == [-1.0, 2.0, math.inf] and math.isnan(got[4])
    assert sort_like_spark(t, ["s", "x"]).column("s").to_pylist() == [None, "a", "a", "b", "é"]


field_text = st.text(alphabet="ab ,;é東\t", min_size=1, max_size=8)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(field_text, st.booleans(), field_text, st.booleans()),
                     min_size=1, max_size=20))
def test_fields_wrapped_in_quotes_read_as_their_text(
    tmp_path: Path, rows: list[tuple[str, bool, str, bool]]
) -> None:
    """A field that holds the delimiter must be quoted; any other field may be."""
    def cell(text: str, quote: bool) -> str:
        return f'"{text}"' if quote or "," in text else text

    path = tmp_path / "q.csv"
    path.write_text("".join(f"{cell(a, qa)},{cell(b, qb)}\n" for a, qa, b, qb in rows),
                    encoding="utf-8")
    got = _read(_scan("a string, b string"), path).to_pylist()
    assert got == [{"a": a, "b": b} for a, _, b, _ in rows]


SPECIAL = [  # with nanValue=nan, positiveInf=inf, negativeInf=-inf (pyarrow's and pandas's)
    ("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf), ("NaN", math.nan),
    ("Infinity", math.inf), ("-Infinity", -math.inf), ("2.5", 2.5), ("Inf", BAD),
    ("-Inf", BAD), ("NAN", BAD),
]


@pytest.mark.parametrize(("text", "want"), SPECIAL)
def test_nan_and_infinity_texts_are_options(tmp_path: Path, text: str, want: object) -> None:
    path = tmp_path / "v.csv"
    path.write_text(f"1,{text}\n", encoding="utf-8")
    scan = _scan("k int, v double", nan_value="nan", positive_inf="inf", negative_inf="-inf")
    if want is BAD:
        with pytest.raises(BadValue):
            _read(scan, path)
        return
    (got,) = _read(scan, path).column("v").to_pylist()
    assert (math.isnan(got) and math.isnan(want)) if isinstance(want, float) and math.isnan(
        want) else got == want


def test_bad_value_names_file_line_column_and_value_in_any_split(tmp_path: Path) -> None:
    path = tmp_path / "orders.csv"
    lines = ["id,price,qty", *(f"{i},{i / 2},{i}" for i in range(1, 300))]
    lines[250] = "250,nan,7"
    lines[260] = ""  # an empty line before the bad one would shift a row count, not lines
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    scan = _scan("id long, price double, qty int", header=True)
    size = path.stat().st_size
    splits = [s for t in pack_splits([(str(path), size)], max_bytes=1000, open_cost=0)
              for s in t]
    assert len(splits) > 2
    found = []
    for split in splits:
        try:
            _read(scan, path, [split])
        except BadValue as bad:
            found.append(bad)
    assert [(b.line, b.column, b.value) for b in found] == [(251, "price", "nan")]
    message = str(found[0])
    assert f"{path} line 251, column price (double): 'nan'" in message
    assert "nanValue=nan" in message and "\n" not in message
