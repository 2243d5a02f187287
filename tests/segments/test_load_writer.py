"""The executor-side writer and the driver commit, without Spark: batches in, segment out."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from carbonstore import Store
from carbonstore.errors import BadRecordError, UserError
from carbonstore.indexfiles.indexfile import load_index, read_index
from carbonstore.segments.badrecords import BAD_COLUMN, RAW_COLUMN
from carbonstore.segments.commit import abort_segment, begin_segment, commit_segment
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import write_task
from carbonstore.store.tablestatus import (
    FAILURE,
    IN_PROGRESS,
    MARKED_FOR_DELETE,
    PARTIAL_SUCCESS,
    SUCCESS,
)

SCHEMA = (
    "id long not null, b boolean, i8 byte, i16 short, i32 int, f float, d double, "
    "dec decimal(20,4), s string, bin binary, day date, ts timestamp"
)


def _rows() -> pa.Table:
    utc = dt.UTC
    return pa.table(
        {
            "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
            "b": [True, False, None, True, False],
            "i8": pa.array([-128, 127, None, 0, 1], pa.int8()),
            "i16": pa.array([-32768, 32767, None, 0, 1], pa.int16()),
            "i32": pa.array([-(2**31), 2**31 - 1, None, 0, 1], pa.int32()),
            "f": pa.array([math.nan, -0.0, None, 1.5, float("inf")], pa.float32()),
            "d": pa.array([math.nan, -0.0, None, -1e308, math.nan], pa.float64()),
            "dec": pa.array(
                [Decimal("-9999999999999999.9999"), Decimal("0.0001"), None, Decimal(0),
                 Decimal("12.5")],
                pa.decimal128(20, 4),
            ),
            "s": ["héllo ✓", "", None, "日本語", "x" * 300],
            "bin": [b"\x00\xff", b"", None, b"abc", b"z"],
            "day": [dt.date(1, 1, 1), dt.date(9999, 12, 31), None, dt.date(1970, 1, 1),
                    dt.date(2024, 2, 29)],
            "ts": pa.array(
                [dt.datetime(1900, 1, 1, tzinfo=utc), dt.datetime(2262, 1, 1, tzinfo=utc), None,
                 dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=utc),
                 dt.datetime(1970, 1, 1, tzinfo=utc)],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )


@pytest.fixture
def table(store: Store):  # type: ignore[no-untyped-def]
    return store.create_table("db.t", SCHEMA, properties={"bloom_columns": "s"})


def _load(table, batches, options=None, overwrite=False):  # type: ignore[no-untyped-def]
    opts = parse_load_options(table, options)
    entry, lock = begin_segment(table, overwrite=overwrite)
    try:
        settings = write_settings(table, entry.load_name, opts)
        results = [write_task(b, settings, task_id=f"{i:05d}") for i, b in enumerate(batches)]
        return commit_segment(
            table, entry.load_name, results, overwrite=overwrite, action=opts.action,
            bad_record_dir=settings.bad_record_dir,
        )
    finally:
        if lock is not None:
            lock.release()


def test_round_trip_every_type(table) -> None:  # type: ignore[no-untyped-def]
    data = _rows()
    entry = _load(table, [data.to_batches()])
    assert entry.status == SUCCESS and entry.row_count == 5
    seg = table.paths.segment_dir(entry.load_name)
    files = sorted(p for p in table.store.sfs.list_dir(seg) if p.base_name.endswith(".parquet"))
    assert len(files) == 1
    back = pq.read_table(files[0].path)
    assert back.schema.field("id").nullable is False
    assert back.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert back.schema.field("dec").type == pa.decimal128(20, 4)
    for name in data.column_names:
        want, got = data.column(name).to_pylist(), back.column(name).to_pylist()
        if name in ("f", "d"):
            assert [repr(x) for x in got] == [repr(x) for x in want]  # NaN and -0.0 intact
        else:
            assert got == want, name


def test_index_has_nan_counts_pages_and_bloom(table) -> None:  # type: ignore[no-untyped-def]
    entry = _load(table, [_rows().to_batches()])
    seg = table.paths.segment_dir(entry.load_name)
    names = [p.base_name for p in table.store.sfs.list_dir(seg)]
    assert sum(n.endswith(".carbonindex") for n in names) == 1
    assert entry.segment_file in names and entry.segment_file.endswith(".carbonindexmerge")
    merged = read_index(table.store.sfs.fs, f"{seg}/{entry.segment_file}", with_blooms=True)
    assert merged.kind == "merge"
    arrays = load_index(table.store.sfs.fs, f"{seg}/{entry.segment_file}")
    d = arrays.column("d")
    assert list(d.nan_count) == [2]
    assert arrays.bloom_bitset(0, "s") is not None
    assert entry.index_size > 0 and entry.data_size > 0


def test_rolls_files_and_row_groups(store: Store) -> None:
    conf = store.conf.with_overrides(
        {"carbon.blocklet.size.in.mb": "0.01", "carbon.table.block.size.in.mb": "0.02",
         "carbon.page.rows": "100"}
    )
    s2 = Store(store.location, conf=conf)
    t = s2.create_table("db.roll", "k int not null, v double")
    batches = [
        pa.record_batch({"k": pa.array(range(i * 1000, (i + 1) * 1000), pa.int32()),
                         "v": pa.array([math.nan if j % 7 == 0 else float(j) for j in range(1000)])})
        for i in range(10)
    ]
    entry = _load(t, [batches])
    assert entry.row_count == 10_000
    seg = t.paths.segment_dir(entry.load_name)
    files = [p.path for p in s2.sfs.list_dir(seg) if p.base_name.endswith(".parquet")]
    assert len(files) > 1
    # the last file a task rolls to may hold a single row group; the first full one has more
    assert max(pq.ParquetFile(f).metadata.num_row_groups for f in files) >= 2
    arrays = load_index(s2.sfs.fs, f"{seg}/{entry.segment_file}")
    v = arrays.column("v")
    assert int(v.nan_count.sum()) == sum(1 for i in range(10) for j in range(1000) if j % 7 == 0)
    assert int(v.pages.nan_count.sum()) == int(v.nan_count.sum())
    assert int(v.pages.row_count.max()) <= 100


def _bad_batch(with_flag: bool = True) -> pa.RecordBatch:
    """Row 2 breaks NOT NULL, row 3 did not parse. Without the flag column the raw line
    alone marks the unparsed row (a CSV scan's rows go to the writer as they are)."""
    columns = {
        "id": pa.array([1, None, 3, 4], pa.int64()),
        "s": ["a", "b", None, "d"],
        BAD_COLUMN: [False, False, True, False],
        RAW_COLUMN: [None, None, "3,zz,not-a-number", None],
    }
    if not with_flag:
        del columns[BAD_COLUMN]
    return pa.record_batch(columns)


@pytest.mark.parametrize("with_flag", [True, False])
@pytest.mark.parametrize(
    ("action", "rows", "status"),
    [("FORCE", 3, PARTIAL_SUCCESS), ("IGNORE", 2, PARTIAL_SUCCESS),
     ("REDIRECT", 2, PARTIAL_SUCCESS)],
)
def test_bad_record_actions(table, tmp_path, action, rows, status, with_flag) -> None:  # type: ignore[no-untyped-def]
    opts = {"BAD_RECORDS_ACTION": action.lower(), "bad_record_path": str(tmp_path / "bad")}
    entry = _load(table, [[_bad_batch(with_flag)]], opts)
    assert (entry.status, entry.row_count, entry.bad_record_count) == (status, rows, 2)
    if action == "REDIRECT":
        folder = tmp_path / "bad" / "db" / "t" / entry.load_name
        lines = [ln for f in folder.iterdir() for ln in f.read_text().splitlines()]
        assert sorted(lines) == sorted(["3,zz,not-a-number", lines[0] if "zz" not in lines[0]
                                        else lines[1]])
        assert len(lines) == 2 and "3,zz,not-a-number" in lines


def test_fail_leaves_nothing(table) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BadRecordError, match="2 bad record"):
        _load(table, [[_bad_batch()]])
    snap = table.status.read()
    assert [e.status for e in snap.entries] == [FAILURE]
    assert not table.store.sfs.exists(table.paths.segment_dir("0"))
    assert "2 bad record" in snap.entries[0].extra["failureReason"]


def test_all_bad_fails(table) -> None:  # type: ignore[no-untyped-def]
    batch = pa.record_batch({"id": pa.array([None, None], pa.int64())})
    with pytest.raises(BadRecordError, match="all 2 record"):
        _load(table, [[batch]], {"bad_records_action": "ignore"})


def test_redirect_needs_path(table) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BadRecordError, match="BAD_RECORD_PATH"):
        parse_load_options(table, {"Bad_Records_Action": "Redirect"})
    with pytest.raises(UserError, match="unknown load option"):
        parse_load_options(table, {"nope": "1"})


def test_overwrite_marks_old_segments_in_same_update(table) -> None:  # type: ignore[no-untyped-def]
    _load(table, [_rows().to_batches()])
    _load(table, [_rows().to_batches()])
    e = _load(table, [_rows().to_batches()], overwrite=True)
    snap = table.status.read()
    assert [x.status for x in snap.entries] == [MARKED_FOR_DELETE, MARKED_FOR_DELETE, SUCCESS]
    assert [x.load_name for x in snap.readable] == [e.load_name] == ["2"]


def test_abort_removes_folder(table) -> None:  # type: ignore[no-untyped-def]
    entry, lock = begin_segment(table)
    assert lock is not None and table.status.read().get(entry.load_name).status == IN_PROGRESS
    settings = write_settings(table, entry.load_name, parse_load_options(table, None))
    write_task(_rows().to_batches(), settings, task_id="00000")
    abort_segment(table, entry.load_name, reason="boom")
    lock.release()
    assert table.status.read().get(entry.load_name).status == FAILURE
    assert not table.store.sfs.exists(table.paths.segment_dir(entry.load_name))
