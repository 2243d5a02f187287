"""Text cast to a double, a boolean or a date in UPDATE SET as Spark 4 (ANSI) casts it, without
Spark: the expected values were taken from Spark itself (tests/spark/test_wrong_answers_dml_casts.py
compares every one of them, and random text, with a live Spark session)."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.errors import UserError
from carbonstore.expressions.expr import AlwaysTrue
from carbonstore.segments.dml import scan_rows
from carbonstore.segments.spark_casts import to_boolean, to_date, to_double
from tests.indexfiles.segbuild import add_segments

DOUBLES = {"1.5d": 1.5, "2F": 2.0, "1e3d": 1000.0, "0x1p3": 8.0, "0x1.8p1d": 3.0, "1.": 1.0,
           ".5": 0.5, "+.5e-1": 0.05, "1e400": math.inf, "-1e400": -math.inf, "1e-400": 0.0,
           "inf": math.inf, "-INF": -math.inf, "+Infinity": math.inf, " infinity ": math.inf,
           "\t1.5\n": 1.5, "\x001.5\x1f": 1.5, "-0.0d": -0.0}
NOT_DOUBLES = ["1_000", "", " ", "-nan", "\x7f1.5", "\u16801.5", "1.5dd", "d", ".d", "1e", "0x1.8", "0x", "\xa01.5", "NaNd",
               "InfinityD", "١"]
BOOLEANS = {" TRUE ": True, " f ": False, "yes": True, "Y": True, "no": False, "1": True,
            "0": False, "\ttrue\n": True, "\x0btrue\x0c": True, "tRuE": True}
NOT_BOOLEANS = ["2", "on", "", "truee", "\xa0true"]
DATES = {"2024": dt.date(2024, 1, 1), "2024-1": dt.date(2024, 1, 1), "2024-1-5": dt.date(2024, 1, 5),
         "2024-01-05T12:00": dt.date(2024, 1, 5), "2024-01-05 garbage": dt.date(2024, 1, 5),
         "2024-01-05T": dt.date(2024, 1, 5), "2024-1 ": dt.date(2024, 1, 1), "2024 ": dt.date(2024, 1, 1),
         "+2024-01-05": dt.date(2024, 1, 5), " 2024-01-05 ": dt.date(2024, 1, 5),
         "2024-01-5": dt.date(2024, 1, 5), "0001-01-01": dt.date(1, 1, 1)}
NOT_DATES = ["2024-", "2024-01-", "2024-02-30", "2024-13-01", "2024-001-01", "2024/01/05",
             "20240105", "999-01-01", "2024-01-05garbage", "１２３４-01-01"]


@pytest.mark.parametrize(("text", "want"), DOUBLES.items())
def test_text_to_double_is_javas(text: str, want: float) -> None:
    got = to_double(text)
    assert got == want and math.copysign(1, got) == math.copysign(1, want)


@pytest.mark.parametrize("text", NOT_DOUBLES)
def test_text_spark_cannot_read_as_a_double_fails(text: str) -> None:
    with pytest.raises(ValueError, match="CAST_INVALID_INPUT"):
        to_double(text)


@pytest.mark.parametrize("text", ["nan", "+NaN", "-NaN", " NaN ", "NaN"])
def test_nan_words_are_nan(text: str) -> None:
    assert math.isnan(to_double(text))


@pytest.mark.parametrize(("text", "want"), BOOLEANS.items())
def test_text_to_boolean_is_sparks(text: str, want: bool) -> None:
    assert to_boolean(text) is want


@pytest.mark.parametrize("text", NOT_BOOLEANS)
def test_text_spark_cannot_read_as_a_boolean_fails(text: str) -> None:
    with pytest.raises(ValueError, match="CAST_INVALID_INPUT"):
        to_boolean(text)


@pytest.mark.parametrize(("text", "want"), DATES.items())
def test_text_to_date_is_sparks(text: str, want: dt.date) -> None:
    assert to_date(text) == (want - dt.date(1970, 1, 1)).days


@pytest.mark.parametrize("text", NOT_DATES)
def test_text_spark_cannot_read_as_a_date_fails(text: str) -> None:
    with pytest.raises(ValueError, match="CAST_INVALID_INPUT"):
        to_date(text)


def test_dates_outside_the_stored_years_are_refused() -> None:
    for text in ("0000-01-01", "10000-01-01", "-2024-01-05"):
        with pytest.raises(ValueError, match="years 1 to 9999"):
            to_date(text)


def test_update_stores_sparks_casts_and_a_bad_text_changes_nothing(tmp_path: Path) -> None:
    t = Store(str(tmp_path / "store")).create_table(
        "db.c", "id long not null, s string, d double, b boolean, day date, l long")
    texts = ["1.5d", " TRUE ", "2024-1", None]
    add_segments(t, [pa.table({"id": pa.array(range(4), pa.int64()), "s": texts,
                               "d": pa.array([None] * 4, pa.float64()), "b": pa.array([None] * 4, pa.bool_()),
                               "day": pa.array([None] * 4, pa.date32()),
                               "l": pa.array([None] * 4, pa.int64())})])
    t.update({"d": "cast(s AS double)", "l": "cast(cast(9.223372036854775807E18 AS double) AS bigint)"},
             where="id IN (0, 3)")
    t.update({"b": "cast(s AS boolean)"}, where="id IN (1, 3)")
    t.update({"day": "cast(s AS date)"}, where="id IN (2, 3)")
    rows = scan_rows(Store(t.store.location).table("db.c"), AlwaysTrue(), with_rows=True).rows.sort_by("id")
    assert rows.column("d").to_pylist() == [1.5, None, None, None]
    assert rows.column("b").to_pylist() == [None, True, None, None]
    assert rows.column("day").to_pylist() == [None, None, dt.date(2024, 1, 1), None]
    assert rows.column("l").to_pylist() == [2**63 - 1, None, None, 2**63 - 1]
    before = t.status.read().version
    with pytest.raises(UserError) as err:
        t.update({"day": "cast(s AS date)"}, where="id >= 0")  # '1.5d' is no date: Spark fails
    assert "\n" not in str(err.value) and "CAST_INVALID_INPUT" in str(err.value)
    assert t.status.read().version == before
