"""The data source writer: columns match the table by name and type before any segment
exists; save modes; user errors reach PySpark users as their one line first."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

from carbonstore import Store


@pytest.fixture
def t2(store: Store) -> object:
    return store.create_table("shop.t2", "sel int, frm string, amount decimal(10,2)")


def _write(spark: object, store: Store, ddl: str, rows: list[tuple[object, ...]], mode: str = "append") -> None:
    df = spark.createDataFrame(rows, ddl)  # type: ignore[attr-defined]
    df.write.format("carbonstore").mode(mode).option("store", store.location).save("shop.t2")


@pytest.mark.parametrize(("ddl", "row", "says"), [
    ("a_wrong int, frm string, amount decimal(10,2)", (1, "x", None), "unknown column.*a_wrong.*missing column.*sel"),
    ("sel int, frm string", (1, "x"), "missing column.*amount"),
    ("sel int, frm string, amount decimal(10,2), extra int", (1, "x", None, 3), "unknown column.*extra"),
    ("sel string, frm string, amount decimal(10,2)", ("1", "x", None), "column sel is string, the table's is int"),
    ("sel int, frm int, amount decimal(10,2)", (1, 2, None), "column frm is int, the table's is string"),
    ("sel date, frm string, amount decimal(10,2)", (None, "x", None), "column sel is date"),
])
def test_mismatched_columns_fail_before_any_segment(
    spark: object, store: Store, t2: object, ddl: str, row: tuple[object, ...], says: str
) -> None:
    with pytest.raises(AnalysisException, match=f"SchemaError: cannot write to shop.t2: .*{says}") as info:
        _write(spark, store, ddl, [row])
    message = str(info.value)
    assert "Traceback" not in message.split("SchemaError")[0]  # the carbonstore line comes first
    assert t2.status.read().entries == ()  # type: ignore[attr-defined]


def test_columns_match_by_name_in_any_order_and_case(spark: object, store: Store, t2: object) -> None:
    import decimal

    _write(spark, store, "FRM string, amount decimal(12,3), Sel long", [("x", decimal.Decimal("1.25"), 7)])
    got = spark.read.format("carbonstore").option("store", store.location).load("shop.t2").collect()  # type: ignore[attr-defined]
    assert [tuple(r) for r in got] == [(7, "x", decimal.Decimal("1.25"))]


@pytest.mark.parametrize("mode", ["error", "errorifexists", "ignore"])
def test_modes_other_than_append_and_overwrite_are_refused(
    spark: object, store: Store, t2: object, mode: str
) -> None:
    with pytest.raises(AnalysisException, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        _write(spark, store, "sel int, frm string, amount decimal(10,2)", [(1, "x", None)], mode)
    assert t2.status.read().entries == ()  # type: ignore[attr-defined]


def test_overwrite_replaces_the_rows(spark: object, store: Store, t2: object) -> None:
    ddl = "sel int, frm string, amount decimal(10,2)"
    _write(spark, store, ddl, [(1, "a", None), (2, "b", None)])
    _write(spark, store, ddl, [(3, "c", None)], "overwrite")
    got = spark.read.format("carbonstore").option("store", store.location).load("shop.t2").collect()  # type: ignore[attr-defined]
    assert [r.sel for r in got] == [3]
