"""CSV loads parsed by pyarrow in the load tasks, checked against Spark's own CSV reader."""

from __future__ import annotations

import itertools
import logging
import math
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from carbonstore import Store  # noqa: E402
from carbonstore.segments.badrecords import RAW_COLUMN  # noqa: E402
from carbonstore.segments.load import parse_load_options  # noqa: E402
from carbonstore.spark.load_job import load, read_source  # noqa: E402
from carbonstore.store.tablestatus import PARTIAL_SUCCESS, SUCCESS  # noqa: E402
from tests.segments.test_csvparse import BAD, CASES, FALLBACK, SPECIAL  # noqa: E402
from tests.spark.test_load import read_segment, segment_files  # noqa: E402

LOGGER = "carbonstore.spark.csv_load"


def _spark_store(store: Store) -> Store:
    """The same store read through Spark's CSV reader only."""
    return Store(store.location,
                 conf=store.conf.with_overrides({"carbon.load.csv.parser": "spark"}))


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                     math.copysign(1, b))
    return a == b


def test_value_forms_are_read_as_spark_reads_them(spark, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    by_type: dict[str, list[tuple[str, object]]] = defaultdict(list)
    for type_, text, want in CASES:
        by_type[type_].append((text, want))
    checked = 0
    for n, (type_, cases) in enumerate(by_type.items()):
        table = store.create_table(f"db.forms{n}", f"k int, v {type_}")
        path = tmp_path / f"forms{n}.csv"
        path.write_text("".join(f"{i},{text}\n" for i, (text, _) in enumerate(cases)),
                        encoding="utf-8")
        opts = parse_load_options(table, {"header": "false"})
        got = read_source(spark, table, [str(path)], "csv", opts).toArrow().to_pylist()
        spark_reads = {r["k"]: (r["v"], r.get(RAW_COLUMN)) for r in got}
        for i, (text, want) in enumerate(cases):
            if want is FALLBACK:
                continue
            value, raw = spark_reads[i]
            if want is BAD:
                assert raw is not None, f"{type_} {text!r}: Spark reads {value!r}, not bad"
                checked += 1
                continue
            assert raw is None, f"{type_} {text!r}: Spark takes it for a bad record"
            assert _same(value, want), f"{type_} {text!r}: Spark reads {value!r}, tasks {want!r}"
            checked += 1
    assert checked >= 25


def test_nan_and_infinity_options_are_read_as_spark_reads_them(  # type: ignore[no-untyped-def]
    spark, store: Store, tmp_path: Path
) -> None:
    table = store.create_table("db.special", "k int, v double")
    path = tmp_path / "special.csv"
    path.write_text("".join(f"{i},{text}\n" for i, (text, _) in enumerate(SPECIAL)))
    opts = parse_load_options(table, {"header": "false", "nanValue": "nan",
                                      "POSITIVEINF": "inf", "negativeinf": "-inf"})
    got = {r["k"]: r for r in
           read_source(spark, table, [str(path)], "csv", opts).toArrow().to_pylist()}
    for i, (text, want) in enumerate(SPECIAL):
        if want is BAD:
            assert got[i][RAW_COLUMN] is not None, text
        else:
            assert got[i][RAW_COLUMN] is None and _same(got[i]["v"], want), (text, got[i])


ROWS = [
    "id,qty,price,flag,day,ts,amount,name",
    "3,-7,NaN,true,2024-02-29,2024-02-29 23:59:59.999999,12.5,Zoë 東京",
    "1,,-0.0,FALSE,1970-01-01,1970-01-01,0,",
    "2,2147483647,Infinity,,2038-01-19,2038-01-19T03:14:07,-99999.99, two  spaces ",
    "5,-2147483648,-Inf,True,0001-01-01,2024-01-01 10:00,,x",
    "4,0,1e300,false,9999-12-31,,1e2,semi;colon",
]
SCHEMA = ("id long not null, qty int, price double, flag boolean, day date, ts timestamp, "
          "amount decimal(7,2), name string")


def _write_inputs(folder: Path, copies: int) -> None:
    folder.mkdir()
    for f in range(copies):
        body = [ROWS[0]] + [
            f"{int(line.split(',', 1)[0]) + 10 * f},{line.split(',', 1)[1]}" for line in ROWS[1:]
        ]
        (folder / f"part-{f}.csv").write_text("\n".join(body) + "\n", encoding="utf-8")


def _rows(table) -> list[tuple[str, ...]]:  # type: ignore[no-untyped-def]
    seg = table.status.read().readable[-1].load_name
    return sorted(tuple(repr(v) for v in r.values())
                  for r in read_segment(table, seg).to_pylist())


def test_load_parses_csv_in_tasks_as_spark_would(spark, store: Store, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    _write_inputs(tmp_path / "in", copies=3)
    caplog.set_level(logging.INFO, logger=LOGGER)
    fast = store.create_table("db.fast", SCHEMA, properties={"sort_columns": "price",
                                                             "sort_scope": "local_sort"})
    entry = load(fast, str(tmp_path / "in"), spark=spark)
    assert "CSV parsed by" in caplog.text and "Spark's CSV reader" not in caplog.text
    assert (entry.status, entry.row_count, entry.bad_record_count) == (SUCCESS, 15, 0)

    slow = _spark_store(store).create_table("db.slow", SCHEMA, properties={
        "sort_columns": "price", "sort_scope": "local_sort"})
    caplog.clear()
    load(slow, str(tmp_path / "in"), spark=spark)
    assert "CSV parsed by" not in caplog.text
    assert _rows(fast) == _rows(slow)

    files = segment_files(fast, entry.load_name)
    assert len(files["carbonindex"]) >= 1 and len(files["carbonindexmerge"]) == 1
    for f in files["parquet"]:  # LOCAL_SORT as Spark sorts: nulls first, NaN last
        prices = pq.read_table(f).column("price").to_pylist()
        nan = [p for p in prices if p is not None and math.isnan(p)]
        numbers = [p for p in prices if p is not None and not math.isnan(p)]
        assert prices == [p for p in prices if p is None] + sorted(numbers) + nan


def test_a_bad_record_sends_the_load_to_spark_with_nothing_left_behind(spark, store: Store, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "in"
    folder.mkdir()
    for f in range(2):
        lines = [f"{i},{i * 0.5}" for i in range(f * 500, f * 500 + 500)]
        if f == 1:
            lines[10] = "510,not a number"
        (folder / f"p{f}.csv").write_text("id,v\n" + "\n".join(lines) + "\n")
    caplog.set_level(logging.INFO, logger=LOGGER)
    table = store.create_table("db.fb", "id int not null, v double")
    entry = load(table, str(folder), spark=spark, options={"bad_records_action": "force"})
    assert "Spark's CSV reader" in caplog.text and "CSV parsed by" not in caplog.text
    assert (entry.status, entry.row_count, entry.bad_record_count) == (PARTIAL_SUCCESS, 1000, 1)
    rows = read_segment(table, entry.load_name).to_pylist()  # every file of the folder
    assert sorted(r["id"] for r in rows) == list(range(1000))
    assert [r["v"] for r in rows if r["id"] == 510] == [None]


def test_not_null_violations_are_redirected_by_tasks(spark, store: Store, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "in.csv"
    path.write_text("id,name\n1,a\n,b\n3,c\n")
    caplog.set_level(logging.INFO, logger=LOGGER)
    got = {}
    for name, target in (("fast", store), ("slow", _spark_store(store))):
        table = target.create_table(f"db.{name}", "id int not null, name string")
        entry = load(table, str(path), spark=spark, options={
            "bad_records_action": "redirect", "bad_record_path": str(tmp_path / "bad")})
        folder = tmp_path / "bad" / "db" / name / entry.load_name
        redirected = [ln for f in folder.iterdir() for ln in f.read_text().splitlines()]
        got[name] = (entry.status, entry.row_count, entry.bad_record_count, redirected,
                     _rows(table))
    assert "CSV parsed by" in caplog.text
    assert got["fast"] == got["slow"]
    assert got["fast"][:3] == (PARTIAL_SUCCESS, 2, 1)


@pytest.mark.parametrize("name", ["missing.csv", "none-*.csv"])
def test_missing_input_is_refused_before_a_segment(spark, store: Store, tmp_path: Path, name: str) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.errors import UserError

    table = store.create_table("db.miss", "id int")
    with pytest.raises(UserError, match="does not exist"):
        load(table, str(tmp_path / name), spark=spark)
    assert len(table.status.read().entries) == 0


# Texts per column type that both parsers read alike ...
CLEAN = {
    "qty": ["0", "-7", "2147483647", "", "007"],
    "price": ["1.5", "NaN", "-Inf", "", "-0.0", "1e-3", "Infinity"],
    "flag": ["true", "FALSE", "True", ""],
    "day": ["2024-02-29", "1970-01-01", ""],
    "ts": ["2024-01-01 10:00:00", "2024-01-01T10:00:00.5", "2024-01-01", ""],
    "amount": ["12.5", "1e2", "-0.01", "", "99999.99"],
    "name": ["Zoë", '"a,b"', "", "x y", '"q"', "東京"],
}
# ... and forms only Spark decides, or bad ones.
AWKWARD = {
    "qty": ["+5", "x", "1.0"],
    "price": ["nan", "1e400", "abc"],
    "flag": ["1", "yes"],
    "day": ["2024-1-1", "2024-02-30"],
    "ts": ["x", "2024-01-01T10:00:00+02:00"],
    "amount": ["1.234"],
    "name": ["a\\b", '""'],
}


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


_TABLES = itertools.count()


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_whole_loads_agree_with_spark(spark, store: Store, tmp_path_factory, data) -> None:  # type: ignore[no-untyped-def]
    """Random files of clean and awkward values: a load with task parsing (or its fallback)
    ends exactly as a load through Spark's reader - status, counts and rows."""
    folder = tmp_path_factory.mktemp("whole")
    n_files = data.draw(st.integers(1, 3))
    clean = data.draw(st.booleans())
    pool = CLEAN if clean else {c: CLEAN[c] + AWKWARD[c] for c in CLEAN}
    names = ["id", *data.draw(st.permutations(list(CLEAN)))]
    next_id = 0
    for f in range(n_files):
        n = data.draw(st.integers(1, 40))
        lines = [",".join(names)]
        for _ in range(n):
            cells = [str(next_id)] + [data.draw(st.sampled_from(pool[c])) for c in names[1:]]
            lines.append(",".join(cells))
            next_id += 1
        (folder / f"p{f}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    split = data.draw(st.sampled_from(["200", "128MB"]))
    spark.conf.set("spark.sql.files.maxPartitionBytes", split)
    spark.conf.set("spark.sql.files.openCostInBytes", "0")
    seen = _Messages()
    logging.getLogger(LOGGER).addHandler(seen)
    logging.getLogger(LOGGER).setLevel(logging.INFO)
    try:
        got = []
        k = next(_TABLES)
        for name, st_ in (("t", store), ("s", _spark_store(store))):
            table = st_.create_table(f"db.w{name}{k}", SCHEMA)
            entry = load(table, str(folder), spark=spark,
                         options={"bad_records_action": "force"})
            got.append((entry.status, entry.row_count, entry.bad_record_count, _rows(table)))
    finally:
        logging.getLogger(LOGGER).removeHandler(seen)
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("spark.sql.files.openCostInBytes")
    assert got[0] == got[1]
    if clean:  # the task parser read it, and nothing fell back
        assert any("CSV parsed by" in m for m in seen.messages), seen.messages


def test_dictionary_columns_load_through_tasks_as_through_spark(spark, store: Store, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    from carbonstore.dictionary.column import dictionary_column, load_dictionary

    _write_inputs(tmp_path / "in", copies=2)
    caplog.set_level(logging.INFO, logger=LOGGER)
    props = {"dictionary_include": "name"}
    got = {}
    for label, target in (("fast", store), ("slow", _spark_store(store))):
        caplog.clear()
        table = target.create_table(f"db.d{label}", SCHEMA, properties=props)
        entry = load(table, str(tmp_path / "in"), spark=spark)
        assert ("CSV parsed by" in caplog.text) is (label == "fast")
        values = load_dictionary(table, dictionary_column(table, "name")).values
        got[label] = (entry.status, entry.row_count,
                      sorted(v for v in values.to_pylist() if v is not None))
        raw = read_segment(table, entry.load_name)
        assert pa.types.is_integer(raw.schema.field("name").type)  # stored as surrogates
    assert got["fast"] == got["slow"]
    assert got["fast"][1] == 10 and "Zoë 東京" in got["fast"][2]
