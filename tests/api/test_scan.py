"""``Table.scan``: the rows of the Spark read, in this process, without a JVM."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store, Table
from carbonstore.errors import ExpressionError, UserError
from tests.api.scan_table import build, rows

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Table:
    return build(Store(str(tmp_path_factory.mktemp("scan") / "s")))


def _expected(where: Any = None) -> list[int]:
    """The live ids of scan_table.build, by construction (a Python predicate on the id)."""
    out = []
    for i in range(3500):
        if 100 <= i < 400 or (i < 2500 and i % 13 and i % 40 == 7) or i > 3300:
            continue
        out.append(i)
    return out if where is None else [i for i in out if where(i)]


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row.values())


def _sorted_rows(data: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((_key(r) for r in data.to_pylist()), key=lambda r: r[0])


def test_full_scan_is_the_live_rows_of_every_schema_version(table: Table) -> None:
    got = table.scan().to_arrow()
    assert got.schema.names == ["id", "name", "city", "score", "day", "extra"]
    assert got.schema.field("id").nullable is False
    assert sorted(got.column("id").to_pylist()) == _expected()
    want = pa.concat_tables([rows(0, 2500, with_gone=True).drop_columns(["gone"]).append_column(
        "extra", pa.nulls(2500, pa.int32())), rows(2500, 3500, with_gone=False)])
    live = set(_expected())
    want = want.filter(pa.array([i in live for i in want.column("id").to_pylist()]))
    assert _sorted_rows(got) == _sorted_rows(want.cast(got.schema))


def test_scan_filters_projects_and_travels(table: Table) -> None:
    got = table.scan(where="id < 600 AND city = 'b'", columns=["ID", "name"]).to_arrow()
    assert got.schema.names == ["id", "name"]
    assert sorted(got.column("id").to_pylist()) == _expected(lambda i: i < 600 and i % 4 == 2)
    # after the first two appends, before any delete
    second = [i.version for i in table.history() if i.operation == "LOAD"][1]
    old = table.scan(as_of=second, where="id >= 2400").to_arrow()
    assert "gone" in old.schema.names and "extra" not in old.schema.names
    assert sorted(old.column("id").to_pylist()) == list(range(2400, 2500))
    # the dictionary column compared by value, NaN greatest (Spark)
    nan = table.scan(where="score > 38 AND name = 'n9'").to_arrow()
    assert {r["id"] % 9 == 0 or r["score"] > 38 for r in nan.to_pylist()} == {True}
    assert any(math.isnan(r["score"]) for r in nan.to_pylist())


def test_streaming_batches_and_duckdb(table: Table) -> None:
    reader = table.scan(where="id < 3000", batch_rows=100).to_batches()
    assert isinstance(reader, pa.RecordBatchReader)
    sizes = [b.num_rows for b in reader]
    assert max(sizes) <= 100 and sum(sizes) == len(_expected(lambda i: i < 3000))
    import duckdb

    con = duckdb.connect()
    rel = table.scan(where="extra IS NOT NULL").to_duckdb(con, name="live")
    assert rel.aggregate("count(*)").fetchone()[0] == len(
        _expected(lambda i: i >= 2500 and i % 3 == 0))
    assert con.sql("SELECT min(id) FROM live").fetchone()[0] == 2502


def test_conditions_outside_the_evaluator_are_refused_in_one_line(table: Table) -> None:
    with pytest.raises(UserError, match=r"id % 2 = 0.*not a condition the index evaluator "
                       r"binds.*run it in Spark: carbonstore\.spark\.api\.to_spark") as err:
        table.scan(where="id % 2 = 0 AND city = 'a'")
    assert "\n" not in str(err.value)
    with pytest.raises(ExpressionError, match="scan of db.scan: .*nope"):
        table.scan(where="nope = 1")
    with pytest.raises(UserError, match="no column 'nope'; the table has id, name"):
        table.scan(columns=["nope"])


# ---- the Spark read is the oracle ------------------------------------------------------------
_LEAVES = st.one_of(
    st.builds("id {} {}".format, st.sampled_from(["=", "<", "<=", ">", ">=", "<>"]),
              st.integers(-5, 3600)),
    st.builds("score {} {}".format, st.sampled_from(["<", ">=", "=", "<>"]),
              st.sampled_from(["-10.5", "0", "5.5", "38.5", "1e9"])),
    st.builds("name = 'n{}'".format, st.integers(0, 45)),
    st.builds("name IN ('n{}', 'n{}')".format, st.integers(0, 45), st.integers(0, 45)),
    st.builds("name LIKE 'n{}%'".format, st.integers(0, 9)),
    st.sampled_from(["name IS NULL", "city IS NULL", "city = 'a'", "city IN ('b', 'c')",
                     "city <> 'c'", "extra IS NULL", "extra IS NOT NULL", "isnan(score)",
                     "score IS NULL"]),
    st.builds("extra {} {}".format, st.sampled_from(["=", "<", ">="]), st.integers(0, 7)),
    st.builds("day {} DATE '2024-01-{:02d}'".format, st.sampled_from(["=", "<", ">="]),
              st.integers(1, 30)),
)
_WHERE = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.builds("({}) AND ({})".format, inner, inner),
        st.builds("({}) OR ({})".format, inner, inner),
        st.builds("NOT ({})".format, inner)),
    max_leaves=4)


@pytest.mark.spark
@settings(max_examples=int(os.environ.get("CARBONSTORE_SCAN_EXAMPLES", "10")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(where=_WHERE)
def test_scan_equals_the_spark_read(spark: Any, table: Table, where: str) -> None:
    from carbonstore.spark.api import to_spark

    table.store.conf.values["carbon.read.local.rows"] = "0"  # Spark reads and filters
    want = to_spark(table, spark, where=where).toArrow()
    got = table.scan(where=where).to_arrow()
    assert got.schema.names == want.schema.names
    assert _sorted_rows(got) == _sorted_rows(want.cast(got.schema)), where


# ---- no JVM ----------------------------------------------------------------------------------
_NO_JVM = textwrap.dedent("""
    import sys, tempfile
    from carbonstore import Store
    from tests.api.scan_table import build
    t = build(Store(tempfile.mkdtemp() + "/s"))
    n = t.scan(where="city = 'a' AND id < 1000").count()
    batches = sum(b.num_rows for b in t.scan(batch_rows=500).to_batches())
    heavy = sorted(m for m in ("pyspark", "py4j") if m in sys.modules)
    print(n, batches, heavy)
""")


def test_scan_and_append_run_without_java(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not (Path(p) / "java").exists())
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", _NO_JVM], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    want = len(_expected(lambda i: i < 1000 and i % 4 == 1))
    assert out.stdout.split("\n")[0] == f"{want} {len(_expected())} []"
