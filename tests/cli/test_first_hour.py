"""A new user's first loads: files as pyarrow and pandas write them, and every input
mistake told in one line, exit 2, before Spark starts when no JVM is needed."""

from __future__ import annotations

import csv
import datetime as dt
import logging
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from carbonstore import Store
from tests.cli.conftest import RunCli

SCHEMA = "id long not null, price double, qty int, name string, ts timestamp, day date, ok boolean"
DUCK = {"id": "BIGINT", "price": "DOUBLE", "qty": "INTEGER", "name": "VARCHAR",
        "ts": "TIMESTAMPTZ", "day": "DATE", "ok": "BOOLEAN"}
PYARROW_SPELLINGS = ["--option", "nanValue=nan", "--option", "positiveInf=inf",
                     "--option", "negativeInf=-inf"]
FALLBACK = "reads its CSV through Spark's CSV reader"


def _orders(n: int) -> pa.Table:
    """Orders with what data frames hold: NaN, infinities, nulls, empty strings, UTC times."""
    rng = np.random.default_rng(7)
    price = rng.normal(50, 20, n).round(2)
    price[::17] = np.nan
    price[5::101] = np.inf
    price[7::103] = -np.inf
    names = [("" if i % 13 == 0 else None if i % 11 == 0 else f"cust, {i % 97} ë")
             for i in range(n)]
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    ts = [None if i % 19 == 0 else start + dt.timedelta(seconds=37 * i, microseconds=i % 1000)
          for i in range(n)]
    return pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "price": pa.array(price, mask=np.arange(n) % 23 == 0),
        "qty": pa.array(rng.integers(-5, 100, n), pa.int32()),
        "name": pa.array(names, pa.string()),
        "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
        "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 400) for i in range(n)]),
        "ok": pa.array([None if i % 7 == 0 else i % 2 == 0 for i in range(n)]),
    })


def _write_pandas_style(rows: pa.Table, path: Path) -> None:
    """``DataFrame.to_csv(index=False)``'s text: NaN and None empty, floats repr'd,
    ``True``/``False``, times as ``2024-01-01 00:00:37.000001+00:00``."""
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(rows.column_names)
        for r in rows.to_pylist():
            out.writerow([
                "" if v is None or (isinstance(v, float) and math.isnan(v))
                else repr(v) if isinstance(v, float) else str(v)
                for v in r.values()
            ])


def _duckdb_rows(path: Path) -> list[dict[str, object]]:
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    got = con.execute(
        "SELECT * FROM read_csv(?, header=true, columns=?) ORDER BY id", [str(path), DUCK]
    ).to_arrow_table()
    return _plain(got)


def _plain(rows: pa.Table) -> list[dict[str, object]]:
    """Rows with times as epoch microseconds and NaN as a marker (NaN != NaN)."""
    ts = pc.cast(pc.cast(rows.column("ts"), pa.timestamp("us", tz="UTC")), pa.int64())
    rows = rows.set_column(rows.schema.get_field_index("ts"), "ts", ts)
    return [{k: ("NaN" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in rows.select(list(DUCK)).to_pylist()]


def _table_rows(table: object) -> list[dict[str, object]]:
    from tests.spark.test_load import read_segment

    parts = [read_segment(table, e.load_name) for e in table.status.read().readable]  # type: ignore[attr-defined]
    return _plain(pa.concat_tables(parts).sort_by("id"))


@pytest.mark.parametrize("writer", ["pyarrow", "pandas"])
def test_data_frame_csvs_load_through_the_cli_as_duckdb_reads_them(  # type: ignore[no-untyped-def]
    run_cli: RunCli, spark, store: Store, tmp_path: Path, writer: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rows = _orders(3000)
    path = tmp_path / f"orders_{writer}.csv"
    if writer == "pyarrow":
        pacsv.write_csv(rows, path)
        text = path.read_text()
        assert ",nan," in text and ",inf," in text and '""' in text and "Z," in text
    else:
        _write_pandas_style(rows, path)
        assert "+00:00," in path.read_text()
    run_cli(store, "create", "db.orders", "--schema", SCHEMA)
    caplog.set_level(logging.INFO, logger="carbonstore.spark.csv_load")
    code, out, err = run_cli(store, "load", "db.orders", "--input", str(path),
                             *PYARROW_SPELLINGS)
    assert code == 0, err
    assert "Success, 3000 rows" in out
    assert FALLBACK not in caplog.text and "CSV parsed by" in caplog.text  # the fast path
    assert _table_rows(store.table("db.orders")) == _duckdb_rows(path)


def test_nan_without_the_option_fails_at_once_naming_file_line_column_and_value(  # type: ignore[no-untyped-def]
    run_cli: RunCli, spark, store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "orders.csv"
    pacsv.write_csv(_orders(500), path)
    run_cli(store, "create", "db.orders", "--schema", SCHEMA)
    caplog.set_level(logging.INFO, logger="carbonstore.spark.csv_load")
    code, out, err = run_cli(store, "load", "db.orders", "--input", str(path))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    # the first non-finite price is inf, on row 5 (line 7; row 0 is null)
    assert f"{path} line 7, column price (double): 'inf' is not a double" in err
    assert "--option nanValue=nan --option positiveInf=inf --option negativeInf=-inf" in err
    assert "BAD_RECORDS_ACTION=FAIL" in err
    assert FALLBACK not in caplog.text  # no second read through Spark's reader
    assert store.table("db.orders").status.read().readable == []


@pytest.mark.parametrize("text", ["id,price\n", ""])
def test_an_empty_csv_loads_an_empty_segment_when_asked(  # type: ignore[no-untyped-def]
    run_cli: RunCli, spark, store: Store, tmp_path: Path, text: str
) -> None:
    path = tmp_path / "header.csv"
    path.write_text(text)
    run_cli(store, "create", "db.orders", "--schema", SCHEMA)
    code, out, err = run_cli(store, "load", "db.orders", "--input", str(path), "--allow-empty")
    assert code == 0, err
    assert "Success, 0 rows" in out


def _csv(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _parquet(tmp_path: Path, name: str, rows: int) -> str:
    path = tmp_path / name
    pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64())}), path)
    return str(path)


MISTAKES = [
    # (table schema, input maker, extra arguments, what the one line says)
    (SCHEMA, lambda d: str(d / "missing.csv"), [], "missing.csv does not exist"),
    (SCHEMA, lambda d: str(d / "nothing*.csv"), [], "the pattern matches no file; quote it"),
    ("id long not null, tags array<string>", lambda d: _csv(d, "a.csv", "id\n1\n"), [],
     "CSV cannot hold the nested column(s) tags"),
    (SCHEMA, lambda d: _csv(d, "a.csv", "price,qty\n1.5,2\n"), [],
     "the input has no column 'id', which is NOT NULL (the header of "),
    (SCHEMA, lambda d: _csv(d, "a.csv", "id,price\n1,2.5\n"), ["--format", "parquet"],
     "a.csv is not a parquet file: it looks like CSV text (first line 'id,price')"),
    (SCHEMA, lambda d: _csv(d, "a.parquet", "id,price\n1,2.5\n"), [],
     "a.parquet is not a parquet file: it looks like CSV text"),
    (SCHEMA, lambda d: _csv(d, "a.csv", "id,price\n1,2.5\n"), ["--format", "orc"],
     "a.csv is not a orc file: it looks like CSV text"),
    (SCHEMA, lambda d: _csv(d, "a.csv", "id,price\n1,2.5\n"), ["--format", "json"],
     "a.csv is not a json file: it looks like CSV text (first line 'id,price')"),
    (SCHEMA, lambda d: _parquet(d, "a.parquet", 3), ["--format", "csv"],
     "a.parquet is a parquet file, not csv"),
    (SCHEMA, lambda d: _csv(d, "a.csv", ""), [],
     "the input holds no rows: {d}/a.csv is empty (0 bytes); nothing was loaded (load with "
     "--allow-empty"),
    (SCHEMA, lambda d: _csv(d, "a.csv", "id,price\n"), [],
     "the input holds no rows: {d}/a.csv holds only its header line"),
    (SCHEMA, lambda d: _parquet(d, "a.parquet", 0), [], "a.parquet is a Parquet file of 0 rows"),
    (SCHEMA, lambda d: _csv(d, "a.csv", "id;price\n1;2.5\n"), [],
     "names none of the columns of db.orders (id, price, qty, name, ts, day, ok); it looks "
     "';'-delimited: load with --option 'sep=;'"),
    (SCHEMA, lambda d: _csv(d, "a.csv", "1,2.5\n2,3.5\n"), [],
     "if the file has no header line, load with --option header=false"),
    (SCHEMA, lambda d: _csv(d, "a.csv", "id\n1\n"), ["--option", "nanvalu=nan"],
     "unknown load option 'nanvalu'"),
]


@pytest.mark.parametrize(("schema", "make", "extra", "says"), MISTAKES,
                         ids=[m[3].split(":")[0][:40] for m in MISTAKES])
def test_input_mistakes_are_one_line_before_spark_starts(  # type: ignore[no-untyped-def]
    run_cli: RunCli, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    schema, make, extra, says,
) -> None:
    import carbonstore.spark.session as session

    def no_spark(**_: object) -> None:
        raise AssertionError("Spark started")

    monkeypatch.setattr(session, "get_spark", no_spark)
    store.create_table("db.orders", schema)
    code, out, err = run_cli(store, "load", "db.orders", "--input", make(tmp_path), *extra)
    assert (code, out) == (2, ""), err
    assert len(err.strip().splitlines()) == 1, err
    assert says.format(d=tmp_path) in err


def test_spark_csv_option_names_are_accepted_before_spark_starts(  # type: ignore[no-untyped-def]
    run_cli: RunCli, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import carbonstore.spark.session as session

    class Started(Exception):
        pass

    def started(**_: object) -> None:
        raise Started

    monkeypatch.setattr(session, "get_spark", started)
    monkeypatch.setenv("CARBONSTORE_DEBUG", "1")  # the CLI re-raises what it did not expect
    store.create_table("db.orders", SCHEMA)
    path = _csv(tmp_path, "a.csv", "id|price\n1|nan\n")
    options = ["nanValue=nan", "positiveInf=inf", "negativeInf=-inf", "nullValue=NULL",
               "emptyValue=", "dateFormat=yyyy-MM-dd", "timestampFormat=yyyy-MM-dd HH:mm:ss",
               "sep=|", "quote='", "escape=\\", "multiLine=false", "encoding=UTF-8",
               "ignoreLeadingWhiteSpace=true", "lineSep=\n", "comment=#"]
    with pytest.raises(Started):
        run_cli(store, "load", "db.orders", "--input", path,
                *[a for o in options for a in ("--option", o)])


@pytest.mark.spark  # a real process: the error comes before the JVM could start
def test_a_missing_input_fails_in_a_real_process_within_seconds(store: Store, tmp_path: Path) -> None:
    store.create_table("db.orders", SCHEMA)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    begin = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", "--store", store.location, "load", "db.orders",
         "--input", str(tmp_path / "missing.csv")],
        capture_output=True, text=True, timeout=120, env=env, check=False)
    took = time.monotonic() - begin
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"carbonstore: error: input {tmp_path / 'missing.csv'} does not exist"]
    assert took < 10, took


def test_a_bad_record_found_by_spark_names_file_line_column_and_value(  # type: ignore[no-untyped-def]
    run_cli: RunCli, spark, store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "days.csv"
    path.write_text("id,day,qty\n1,2024-01-01,3\n2,2024-1-2,4\n3,2024-13-45,5\n4,2024-01-04,6\n")
    run_cli(store, "create", "db.orders", "--schema", SCHEMA)
    code, out, err = run_cli(store, "load", "db.orders", "--input", str(path))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "1 bad record(s)" in err
    assert f"the first is at {path} line 4, column day (date): '2024-13-45' is not a date" in err


def test_bloom_takes_backticked_names_as_schema_does(run_cli: RunCli, store: Store) -> None:
    code, out, err = run_cli(store, "create", "db.names", "--schema", "id long, `名前` string",
                             "--bloom", "`名前`", "--sort-columns", "`id`")
    assert code == 0, err
    schema = store.table("db.names").schema
    assert (schema.bloom_columns, schema.sort_columns) == (["名前"], ["id"])


def test_custom_compaction_of_one_segment_names_the_segment(
    run_cli: RunCli, store: Store, table: object
) -> None:
    code, out, err = run_cli(store, "compact", "db.sales", "--type", "custom", "--segments", "0",
                             "--engine", "local")
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
    assert "got only segment 0: pass two or more ids" in err


def test_the_load_bar_draws_nothing_on_a_pipe(capsys: pytest.CaptureFixture[str]) -> None:
    from carbonstore.progress import load_progress

    with load_progress("loading into db.t", files=2, total_bytes=1000) as update:
        update(10, 500)
    assert capsys.readouterr() == ("", "")


def test_the_load_bar_shows_files_bytes_rows_and_percent(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import carbonstore.progress as progress

    monkeypatch.setattr(progress, "progress_enabled", lambda **_: True)
    monkeypatch.setenv("COLUMNS", "100")
    with progress.load_progress("loading into db.t", files=2, total_bytes=2_000_000) as update:
        update(12_345, 1_000_000)
        time.sleep(0.3)  # a refresh
    err = capsys.readouterr().err
    assert "loading into db.t" in err and "50%" in err
    assert "12,345 rows, 1.0 MB/2.0 MB, 2 files" in err


def test_steps_inside_a_load_draw_no_second_bar(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import carbonstore.progress as progress

    monkeypatch.setattr(progress, "progress_enabled", lambda **_: True)
    monkeypatch.setenv("COLUMNS", "100")
    with progress.load_progress("loading into db.t", files=1, total_bytes=10):
        with progress.progress(3, "merging 3 task indexes") as step:
            step(3)
    with progress.progress(3, "compacting db.t") as step:  # after the load: drawn again
        step(3)
    err = capsys.readouterr().err
    assert "merging" not in err and "compacting db.t" in err


@pytest.mark.spark  # the load in the child process starts Spark
def test_a_load_on_a_terminal_draws_one_bar_and_not_sparks(store: Store, tmp_path: Path) -> None:
    from tests.reliability.test_progress import _stderr_on_a_terminal

    store.create_table("db.orders", SCHEMA)
    for f in range(2):
        pacsv.write_csv(_orders(5_000), tmp_path / f"part-{f}.csv")
    code, err = _stderr_on_a_terminal(
        ["--store", store.location, "load", "db.orders", "--input", str(tmp_path / "*.csv"),
         *PYARROW_SPELLINGS])
    text = err.decode(errors="replace")
    assert code == 0, text
    assert "loading into db.orders" in text and "100%" in text
    assert "10,000 rows, " in text and "B, 2 files" in text  # rows, bytes read/total, files
    assert "[Stage " not in text  # Spark's console bar is off while ours draws
