"""TPC-H at scale factor 0.1: the 22 queries through ``carbonstore sql``'s path
(carbonstore.spark.sql.run_statement: per-occurrence planning, native reads) against the
official answers. Data, queries and answers come from DuckDB's tpch extension (PyPI
packages duckdb + duckdb-extension-tpch, offline); the tables are loaded in several
segments each (segment, row-group and page pruning take part)."""

from __future__ import annotations

import datetime as dt
import decimal
import glob
import os
import re
from collections.abc import Iterator

import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.store import load_conf
from tests.indexfiles.segbuild import add_segments

duckdb = pytest.importorskip("duckdb")
tpch_ext = pytest.importorskip("duckdb_extension_tpch")

SCALE = 0.1
TABLES = ("lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region")
_TYPES = {"BIGINT": "long", "INTEGER": "int", "VARCHAR": "string", "DATE": "date", "DOUBLE": "double"}


def _connect() -> object:
    path = glob.glob(os.path.join(os.path.dirname(tpch_ext.__file__), "extensions", "**",
                                  "*.duckdb_extension"), recursive=True)
    if not path:
        pytest.skip("duckdb_extension_tpch ships no extension file")
    con = duckdb.connect()
    con.execute(f"LOAD '{path[0]}'")
    return con


def _column_type(duck: str) -> str:
    m = re.fullmatch(r"DECIMAL\((\d+),(\d+)\)", duck)
    return f"decimal({m.group(1)},{m.group(2)})" if m else _TYPES[duck]


@pytest.fixture(scope="module")
def tpch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, object]]:
    con = _connect()
    con.execute(f"CALL dbgen(sf={SCALE})")  # type: ignore[attr-defined]
    store = Store(str(tmp_path_factory.mktemp("tpch") / "store"), conf=load_conf(None))
    for name in TABLES:
        cols = con.execute(f"DESCRIBE {name}").fetchall()  # type: ignore[attr-defined]
        schema = ", ".join(f"{c[0]} {_column_type(c[1])} NOT NULL" for c in cols)
        table = store.create_table(f"default.{name}", schema)
        data: pa.Table = con.execute(f"SELECT * FROM {name}").arrow()  # type: ignore[attr-defined]
        if not isinstance(data, pa.Table):
            data = data.read_all()
        parts = 3 if data.num_rows > 10_000 else 1
        step = -(-data.num_rows // parts)
        add_segments(table, [data.slice(i * step, step) for i in range(parts)],
                     row_group_size=50_000, page_rows=5_000)
    yield store, con


def _expected(con: object, n: int) -> tuple[list[str], list[list[str]]]:
    text = con.execute(  # type: ignore[attr-defined]
        f"SELECT answer FROM tpch_answers() WHERE scale_factor = {SCALE} AND query_nr = {n}"
    ).fetchone()[0]
    lines = [ln for ln in text.strip().splitlines() if ln]
    return lines[0].split("|"), [ln.split("|") for ln in lines[1:]]


def _same(got: object, want: str) -> bool:
    if got is None:
        return want in ("", "NULL")
    if isinstance(got, (int, float, decimal.Decimal)) and not isinstance(got, bool):
        w = float(want)
        return abs(float(got) - w) <= max(0.01, 1e-9 * abs(w))
    if isinstance(got, dt.date):
        return got.isoformat() == want
    return str(got) == want


def _rows_match(got: list[tuple[object, ...]], want: list[list[str]]) -> bool:
    return len(got) == len(want) and all(
        len(g) == len(w) and all(_same(a, b) for a, b in zip(g, w, strict=True))
        for g, w in zip(got, want, strict=True))


@pytest.mark.parametrize("n", range(1, 23))
def test_tpch_query(spark: object, tpch: tuple[Store, object], n: int) -> None:
    import sqlglot

    from carbonstore.spark.sql import run_statement

    store, con = tpch
    query = con.execute(f"SELECT query FROM tpch_queries() WHERE query_nr = {n}").fetchone()[0]  # type: ignore[attr-defined]
    statement = sqlglot.transpile(query, read="duckdb", write="spark")[0]
    got = [tuple(r) for r in run_statement(spark, store, statement).collect()]
    _, want = _expected(con, n)
    if not _rows_match(got, want):  # rows that tie in the ORDER BY may come in any order
        key = repr
        assert _rows_match(sorted(got, key=lambda r: [key(_norm(v)) for v in r]),
                           sorted(want, key=lambda r: [key(_norm_text(v)) for v in r])), \
            (n, got[:5], want[:5])


def _norm(v: object) -> object:
    if isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool):
        return round(float(v), 2)
    return v.isoformat() if isinstance(v, dt.date) else v


def _norm_text(v: str) -> object:
    try:
        return round(float(v), 2)
    except ValueError:
        return v
