"""Files written with pyarrow: NaN, -0.0, nulls, strings, decimals, dates, timestamps, blooms."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from carbonstore.errors import UserError
from carbonstore.indexfiles._gen.carbonindex.ttypes import ValueKind
from carbonstore.indexfiles.footer import read_file_index
from carbonstore.indexfiles.indexfile import build_task_index
from carbonstore.indexfiles.inspect import inspect_path

D = decimal.Decimal


@pytest.fixture
def written(tmp_path: Path) -> str:
    n = 40
    t = pa.table(
        {
            "f": pa.array(
                [math.nan if i % 10 == 3 else float(i - 20) for i in range(n)], pa.float64()
            ),
            "z": pa.array([0.0 if i % 2 else -0.0 for i in range(n)], pa.float32()),
            "allnan": pa.array([math.nan] * n, pa.float64()),
            "s": pa.array([None if i % 7 == 0 else f"s{i:03d}" for i in range(n)], pa.string()),
            "b": pa.array([bytes([i % 3, 0]) for i in range(n)], pa.binary()),
            "d": pa.array([D(i) / 100 - D(1) for i in range(n)], pa.decimal128(9, 2)),
            "big": pa.array([D(10) ** 25 + i for i in range(n)], pa.decimal128(38, 0)),
            "dt": pa.array(
                [dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in range(n)], pa.date32()
            ),
            "ts": pa.array(
                [dt.datetime(2021, 5, 1, 0, 0, i) for i in range(n)], pa.timestamp("ms", tz="UTC")
            ),
            "ns": pa.array([1_000_000_001 * (i + 1) for i in range(n)], pa.timestamp("ns")),
            "u": pa.array(list(range(n)), pa.uint64()),
            "nul": pa.array([None] * n, pa.int32()),
            "lst": pa.array([[i] for i in range(n)], pa.list_(pa.int64())),
        }
    )
    path = str(tmp_path / "w.parquet")
    pq.write_table(
        t, path, row_group_size=20, write_page_index=True, max_rows_per_page=10, write_statistics=True,
        bloom_filter_options={"s": {"ndv": 64, "fpp": 0.01}, "d": True, "dt": True},
    )  # fmt: skip
    return path


def _chunk(fi, name: str, rg: int = 0):  # type: ignore[no-untyped-def]
    i = [c.name for c in fi.columns].index(name)
    return fi.columns[i], fi.row_groups[rg].chunks[i]


def test_statistics_rules(written: str) -> None:
    fi = read_file_index(pafs.LocalFileSystem(), written)
    desc, c = _chunk(fi, "f")
    assert (c.min, c.max) == (-20.0, -1.0)  # NaN excluded
    assert c.pages is not None and c.pages.min[0] == -20.0
    _, z = _chunk(fi, "z")
    assert math.copysign(1, z.min) == -1 and math.copysign(1, z.max) == 1  # type: ignore[arg-type]
    _, s = _chunk(fi, "s")
    assert (s.min, s.max, s.null_count) == (b"s001", b"s019", 3)
    desc, d = _chunk(fi, "d")
    assert desc.kind == ValueKind.INT64 and (d.min, d.max) == (-100, -81)
    desc, big = _chunk(fi, "big")
    assert desc.kind == ValueKind.BIGINT and big.min == 10**25
    _, day = _chunk(fi, "dt", 1)
    assert day.min == (dt.date(2020, 1, 21) - dt.date(1970, 1, 1)).days
    _, ts = _chunk(fi, "ts")
    assert ts.min == 1619827200 * 1_000_000 and ts.min_exact
    _, ns = _chunk(fi, "ns")
    assert ns.min == 1_000_000 and ns.min_exact is False  # 1_000_000_001 ns rounded down
    assert ns.max == 20_000_001  # 20_000_000_020 ns rounded up
    desc, u = _chunk(fi, "u")
    assert (u.min, u.max) == (0, 19)
    _, nul = _chunk(fi, "nul")
    assert nul.min is None and nul.null_count == 20
    assert nul.pages is not None and all(nul.pages.null_pages)
    desc, lst = _chunk(fi, "lst.list.element")
    assert desc.nested and lst.min is None


def test_inspect_json(written: str) -> None:
    fs = pafs.LocalFileSystem()
    out = inspect_path(fs, written, {"s": "s005", "d": "-0.95", "dt": "2020-01-03"})
    json.dumps(out)  # JSON-ready
    (f,) = out["files"]
    assert f["num_rows"] == 40 and len(f["row_groups"]) == 2
    cols = {c["path"]: c for c in f["row_groups"][0]["columns"]}
    assert (
        cols["f"]["min"] == -20.0 and cols["f"]["nan_count"] is None or cols["f"]["nan_count"] >= 0
    )
    assert cols["allnan"]["min"] in ("NaN", None)
    assert cols["z"]["min"] == 0.0 and math.copysign(1, cols["z"]["min"]) == -1
    assert cols["s"]["min"] == "s001" and cols["s"]["bloom"]["might_contain"] is True
    assert cols["b"]["min"] == {"hex": "0000"}
    assert cols["d"]["min"] == "-1.00" and cols["d"]["bloom"]["might_contain"] is True
    assert cols["big"]["min"] == str(10**25)
    assert cols["dt"]["min"] == "2020-01-01" and cols["dt"]["bloom"]["might_contain"] is True
    assert cols["ts"]["min"].startswith("2021-05-01T00:00:00")
    assert cols["nul"]["pages"]["null_pages"] == [True, True]
    pages = cols["s"]["pages"]
    assert pages["count"] == 2 and pages["first_row_index"] == [0, 10]
    assert pages["boundary_order"] in ("ASCENDING", "UNORDERED")
    assert cols["lst.list.element"]["min"] is None
    miss = inspect_path(fs, written, {"s": "zzz-not-there"})
    flags = [
        c["bloom"]["might_contain"]
        for rg in miss["files"][0]["row_groups"]
        for c in rg["columns"]
        if c["path"] == "s"
    ]
    assert flags == [False, False]


def test_inspect_index_file_matches_parquet(written: str, tmp_path: Path) -> None:
    fs = pafs.LocalFileSystem()
    idx = str(tmp_path / "0-x.carbonindex")
    build_task_index(fs, str(tmp_path), ["w.parquet"], idx)
    a = inspect_path(fs, written, {"s": "s005"})
    b = inspect_path(fs, idx, {"s": "s005"})
    a["files"][0]["path"] = "w.parquet"
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_inspect_bad_probe(written: str) -> None:
    with pytest.raises(UserError, match="does not fit column d"):
        inspect_path(pafs.LocalFileSystem(), written, {"d": "not-a-number"})
