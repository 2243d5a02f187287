"""Partitioned and bucketed tables end to end without Spark: write, commit, prune, read.

The oracle: DuckDB over the same logical rows. A plan's files, read whole and filtered by
the same condition, must give exactly the oracle's answer (pruning is inclusive).
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.errors import SchemaError, UserError
from carbonstore.expressions.expr import col
from carbonstore.pruning.plan import prune
from carbonstore.segments.commit import begin_segment, commit_segment
from carbonstore.segments.compaction import compact
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import write_task
from carbonstore.store.partitioning import NULL_PARTITION
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import MARKED_FOR_DELETE, SUCCESS

LINEITEM = (
    "l_orderkey long not null, l_partkey int, l_quantity int, l_extendedprice decimal(12,2), "
    "l_returnflag string, l_shipdate date, l_shipmode string, l_comment string"
)
MODES = ["AIR", "MAIL", "SHIP", "TRUCK", "RAIL", "FOB", "REG AIR"]
DAY0 = dt.date(1995, 3, 10)


def lineitem(n: int, *, seed: int, days: Sequence[int] = range(8), key0: int = 0) -> pa.Table:
    rnd = random.Random(seed)
    return pa.table({
        "l_orderkey": pa.array([key0 + i for i in range(n)], pa.int64()),
        "l_partkey": pa.array([rnd.randrange(200) for _ in range(n)], pa.int32()),
        "l_quantity": pa.array([rnd.randrange(1, 51) for _ in range(n)], pa.int32()),
        "l_extendedprice": pa.array([Decimal(rnd.randrange(100, 10**7)) / 100 for _ in range(n)],
                                    pa.decimal128(12, 2)),
        "l_returnflag": [rnd.choice("ANR") for _ in range(n)],
        "l_shipdate": pa.array([DAY0 + dt.timedelta(days=rnd.choice(list(days))) for _ in range(n)],
                               pa.date32()),
        "l_shipmode": [rnd.choice(MODES) for _ in range(n)],
        "l_comment": [None if rnd.random() < 0.05 else f"c{rnd.randrange(10**6)}" for _ in range(n)],
    })


def load(table: Table, data: pa.Table, *, tasks: int = 2, options: dict[str, str] | None = None,  # type: ignore[no-untyped-def]
         chunk: int = 997):
    opts = parse_load_options(table, options)
    entry, lock = begin_segment(table)
    try:
        s = write_settings(table, entry.load_name, opts)
        step = -(-data.num_rows // tasks)
        results = [write_task(data.slice(i * step, step).to_batches(max_chunksize=chunk), s,
                              task_id=f"{i:05d}") for i in range(tasks)]
        return commit_segment(table, entry.load_name, results, partitioning=s.partitioning,
                              overwrite_partitions=s.overwrite_partitions)
    finally:
        if lock is not None:
            lock.release()


def read_plan(table: Table, where: str | None) -> tuple[pa.Table, dict]:  # type: ignore[type-arg]
    plan = prune(table, where)
    files = [pq.read_table(plan.absolute(f.path)) for f in plan.files]
    data = pa.concat_tables(files) if files else None
    return data, plan.to_json()


def query(data: pa.Table | None, where: str | None, schema_of: pa.Table) -> list[tuple]:  # type: ignore[type-arg]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", data if data is not None else schema_of.slice(0, 0))
    sql = "SELECT * FROM t" + (f" WHERE {where}" if where else "")
    rows = con.execute(sql).to_arrow_table().to_pylist()  # arrow: no pytz for TIMESTAMPTZ
    return sorted((tuple(r.values()) for r in rows), key=repr)


def check(table: Table, rows: pa.Table, where: str | None) -> dict:  # type: ignore[type-arg]
    got, plan = read_plan(table, where)
    assert query(got, where, rows) == query(rows, where, rows), where
    levels = plan["levels"]
    for name, lv in levels.items():
        assert lv["total"] == lv["kept"] + sum(v for k, v in lv.items() if k.startswith("dropped_by_")), name
    return plan


def files_of(plan: dict) -> list[str]:  # type: ignore[type-arg]
    return [f["path"] for f in plan["files"]]


@pytest.fixture
def lineitem_table(store: Store) -> tuple[Table, pa.Table]:
    t = store.create_table("tpch.lineitem", LINEITEM, properties={"partition_by": "day(l_shipdate)"})
    a, b = lineitem(3000, seed=1), lineitem(2000, seed=2, key0=10_000)
    load(t, a)
    load(t, b, tasks=3)
    return t, pa.concat_tables([a, b])


def test_one_day_predicate_reads_only_that_partitions_files(lineitem_table) -> None:  # type: ignore[no-untyped-def]
    t, rows = lineitem_table
    seg = t.paths.segment_dir("0")
    assert {p.base_name for p in t.store.sfs.list_dir(seg) if not p.is_file} == {
        f"l_shipdate_day={DAY0 + dt.timedelta(days=d)}" for d in range(8)}
    plan = check(t, rows, "l_shipdate = DATE '1995-03-12'")
    assert files_of(plan) and all("/l_shipdate_day=1995-03-12/" in p for p in files_of(plan))
    files = plan["levels"]["files"]
    # every other partition's file is dropped by its partition, before any statistics
    assert files["kept"] == 5 and files["dropped_by_partition"] == files["total"] - 5
    assert plan["levels"]["row_groups"]["dropped_by_partition"] == files["dropped_by_partition"]
    # a range of days: exactly those partitions
    plan = check(t, rows, "l_shipdate >= DATE '1995-03-12' AND l_shipdate < DATE '1995-03-14'")
    assert {p.split("/")[-2] for p in files_of(plan)} == {
        "l_shipdate_day=1995-03-12", "l_shipdate_day=1995-03-13"}


PREDICATES = [
    None,
    "l_shipdate = DATE '1995-03-10'",
    "l_shipdate <> DATE '1995-03-10'",
    "l_shipdate < DATE '1995-03-11' OR l_shipdate > DATE '1995-03-16'",
    "l_shipdate IN (DATE '1995-03-11', DATE '1995-03-15', DATE '2001-01-01')",
    "l_shipdate NOT IN (DATE '1995-03-11', DATE '1995-03-15')",
    "l_shipdate IS NULL",
    "l_shipdate IS NOT NULL AND l_quantity > 45",
    "l_shipdate = DATE '1995-03-13' AND l_shipmode = 'AIR'",
    "l_shipdate BETWEEN DATE '1995-03-09' AND DATE '1995-03-10'",
    "NOT (l_shipdate >= DATE '1995-03-11')",
    "l_orderkey = 10042 OR l_shipdate = DATE '1995-03-17'",
]


@pytest.mark.parametrize("where", PREDICATES)
def test_answers_equal_duckdb(lineitem_table, where: str | None) -> None:  # type: ignore[no-untyped-def]
    t, rows = lineitem_table
    check(t, rows, where)


HOSTILE = ["a/b", "..", ".", "x=1", "50%", "日本語", "a\\b", "tab\there", "", NULL_PARTITION,
           "__HIVE_DEFAULT_PARTITION__x", "-", "C:", "new\nline", "😀", "%2F", None, "a" * 60]


def test_hostile_partition_values_round_trip(store: Store) -> None:
    t = store.create_table("h", "id long, s string, d date", properties={"partition_by": "s, d"})
    n = len(HOSTILE) * 3
    data = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "s": [HOSTILE[i % len(HOSTILE)] for i in range(n)],
        "d": pa.array([None if i % 5 == 0 else DAY0 for i in range(n)], pa.date32()),
    })
    load(t, data)
    seg = t.paths.segment_dir("0")
    for info in t.store.sfs.list_dir(seg):  # one folder level per field, inside the segment
        if not info.is_file:
            assert info.base_name.startswith("s=") and "/" not in info.base_name
    got, _ = read_plan(t, None)
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == data.to_pylist()
    parts = t.partitions()
    assert {p.values["s"] for p in parts} == set(HOSTILE)
    assert sum(p.rows for p in parts) == n
    for value in HOSTILE:  # through the expression API: no SQL string escaping in the way
        expr = col("s").is_null() if value is None else col("s") == value
        plan = prune(t, expr)
        got = pa.concat_tables([pq.read_table(plan.absolute(f.path)) for f in plan.files])
        assert sorted(r["id"] for r in got.to_pylist() if r["s"] == value) == [
            r["id"] for r in data.to_pylist() if r["s"] == value], value
        want = {p.partition.split("/")[0] for p in parts if p.values["s"] == value}
        assert {f.path.split("/")[-3] for f in plan.files} == want, value


def test_bucketed_table_keeps_one_bucket_file_per_segment(store: Store) -> None:
    t = store.create_table("b", LINEITEM, properties={"bucket_number": "8",
                                                      "bucket_columns": "l_orderkey"})
    data = [lineitem(1500, seed=s) for s in range(3)]  # the same keys in every segment
    for d in data:
        load(t, d, tasks=1)
    rows = pa.concat_tables(data)
    for e in t.status.read().readable:  # one task: exactly one file per non-empty bucket
        names = [p.base_name for p in t.store.sfs.list_dir(t.paths.segment_dir(e.load_name))
                 if p.base_name.endswith(".parquet")]
        assert sorted(n[-15:-8] for n in names) == [f"_b{b:05d}" for b in range(8)]
    for key in (0, 5, 777, 1499):
        plan = check(t, rows, f"l_orderkey = {key}")
        lv = plan["levels"]["files"]
        assert lv["dropped_by_partition"] == lv["total"] - 3  # one bucket file per segment left
        assert sorted(f["segment"] for f in plan["files"]) == ["0", "1", "2"]
    check(t, rows, "l_orderkey = 99999")
    plan = check(t, rows, "l_orderkey IN (5, 6)")
    assert plan["levels"]["files"]["dropped_by_partition"] >= 24 - 6
    check(t, rows, "l_orderkey = 5 OR l_quantity = 3")
    check(t, rows, "l_orderkey > 5")


def test_bucket_transform_and_multi_column_buckets(store: Store) -> None:
    t = store.create_table("m", "k int, s string, v long", properties={
        "partition_by": "bucket(4, s), truncate(10, k)", "bucket_number": "3",
        "bucket_columns": "k, s"})
    rnd = random.Random(5)
    data = pa.table({"k": pa.array([rnd.randrange(-50, 50) for _ in range(800)], pa.int32()),
                     "s": [rnd.choice(["x", "y", "zz", "日本", None]) for _ in range(800)],
                     "v": pa.array(range(800), pa.int64())})
    load(t, data)
    for where in ("s = 'zz'", "s IN ('x', '日本')", "k = -7 AND s = 'y'", "k >= 0 AND k < 10",
                  "k = 3", "s IS NULL AND k = 3", "k IN (1, 2) AND s IN ('x', 'y')"):
        check(t, data, where)
    plan = check(t, data, "k = -7 AND s = 'y'")
    assert len(files_of(plan)) == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    day=st.integers(-2, 10), qty=st.integers(0, 52), key=st.integers(0, 13_000),
    mode=st.sampled_from([*MODES, "NONE"]), shape=st.integers(0, 5),
)
def test_property_pruning_is_sound(lineitem_table, day: int, qty: int, key: int, mode: str, shape: int) -> None:  # type: ignore[no-untyped-def]
    t, rows = lineitem_table
    d = f"DATE '{DAY0 + dt.timedelta(days=day)}'"
    where = [
        f"l_shipdate = {d} AND l_quantity < {qty}",
        f"l_shipdate > {d} OR l_shipmode = '{mode}'",
        f"l_shipdate <= {d} AND l_orderkey = {key}",
        f"NOT (l_shipdate = {d}) AND l_shipmode = '{mode}'",
        f"l_shipdate IN ({d}, DATE '1995-03-12') AND l_quantity >= {qty}",
        f"(l_shipdate < {d} AND l_quantity = {qty}) OR l_orderkey = {key}",
    ][shape]
    check(t, rows, where)


def test_dynamic_partition_overwrite_replaces_exactly_the_touched_partitions(store: Store) -> None:
    t = store.create_table("o", LINEITEM, properties={"partition_by": "l_shipmode, month(l_shipdate)"})
    first = lineitem(2000, seed=3, days=[0, 30, 60])  # March, April, May
    second = lineitem(500, seed=4, days=[0], key0=50_000)
    load(t, first)
    load(t, second)
    before_version = t.status.read().version
    before = t.partitions()
    new = lineitem(300, seed=5, days=[30], key0=90_000)  # April only
    new = new.filter(pa.compute.is_in(new["l_shipmode"], pa.array(["AIR", "SHIP"])))
    entry = load(t, new, options={"overwrite_partitions": "true"})
    assert entry.status == SUCCESS
    touched = {"l_shipmode=AIR/l_shipdate_month=1995-04", "l_shipmode=SHIP/l_shipdate_month=1995-04"}
    snap = t.status.read()
    old = snap.get("0")
    assert old.status == SUCCESS and sorted(old.extra["removedPartitions"]) == sorted(touched)
    assert snap.get("1").status == SUCCESS and "removedPartitions" not in snap.get("1").extra
    old_rows = pa.concat_tables([first, second])
    replaced = [m in ("AIR", "SHIP") and d.month == 4 for m, d in
                zip(old_rows["l_shipmode"].to_pylist(), old_rows["l_shipdate"].to_pylist(), strict=True)]
    kept = old_rows.filter(pa.array([not r for r in replaced]))
    expected = pa.concat_tables([kept, new])
    for where in (None, "l_shipmode = 'AIR'", "l_shipdate >= DATE '1995-04-01' AND l_shipdate < DATE '1995-05-01'"):
        check(t, expected, where)
    after = {p.partition: p for p in t.partitions()}
    for p in before:
        if p.partition in touched:
            assert after[p.partition].segments == (entry.load_name,)
        else:
            assert after[p.partition].rows == p.rows
    # time travel: the version before the overwrite still reads the replaced files
    old_t = t.as_of(before_version)
    check(old_t, pa.concat_tables([first, second]), None)
    assert {p.partition: p.rows for p in old_t.partitions()} == {p.partition: p.rows for p in before}
    # a segment whose every partition is replaced is marked for delete in the same version
    again = lineitem(100, seed=6, days=[0], key0=95_000)
    modes = sorted(set(second["l_shipmode"].to_pylist()))
    again = again.set_column(again.schema.get_field_index("l_shipmode"), "l_shipmode",
                             pa.array([modes[i % len(modes)] for i in range(100)]))
    load(t, again, options={"overwrite_partitions": "true"})
    assert t.status.read().get("1").status == MARKED_FOR_DELETE
    # compaction leaves the replaced rows out and keeps partitioning
    rows_now, _ = read_plan(t, None)
    compact(t, "major")
    merged = [e for e in t.status.read().readable]
    assert len(merged) == 1 and "partitioning" in merged[0].extra
    got, _ = read_plan(t, None)
    assert query(got, None, rows_now) == query(rows_now, None, rows_now)


def test_overwrite_partitions_refusals(store: Store) -> None:
    plain = store.create_table("p", "id long")
    with pytest.raises(UserError, match="not partitioned"):
        parse_load_options(plain, {"overwrite_partitions": "true"})
    t = store.create_table("q", LINEITEM, properties={"partition_by": "day(l_shipdate)"})
    load(t, lineitem(100, seed=1))
    t = t.set_partition_spec("month(l_shipdate)")
    with pytest.raises(UserError, match="was written with partition spec 'day\\(l_shipdate\\)'"):
        load(t, lineitem(10, seed=2), options={"overwrite_partitions": "true"})
    assert [e.load_name for e in t.status.read().readable] == ["0"]  # nothing changed


def test_partition_spec_changes_for_new_data_only(store: Store) -> None:
    t = store.create_table("e", LINEITEM, properties={"partition_by": "day(l_shipdate)"})
    a = lineitem(1000, seed=7)
    load(t, a)
    t = t.set_partition_spec("l_returnflag, month(l_shipdate)", buckets=4, bucket_columns="l_orderkey")
    b = lineitem(1000, seed=8, key0=5000)
    load(t, b)
    snap = t.status.read()
    assert [f["transform"] for f in snap.get("0").extra["partitioning"]["fields"]] == ["day"]
    assert snap.get("1").extra["partitioning"]["buckets"] == 4
    rows = pa.concat_tables([a, b])
    for where in (None, "l_shipdate = DATE '1995-03-12'", "l_returnflag = 'R'", "l_orderkey = 5005",
                  "l_orderkey = 5 AND l_returnflag = 'A'"):
        check(t, rows, where)
    plan = check(t, rows, "l_shipdate = DATE '1995-03-12' AND l_returnflag = 'N'")
    segs = {f["segment"]: f["path"].split("/")[3:-1] for f in plan["files"]}
    assert segs["0"] == ["l_shipdate_day=1995-03-12"]
    assert segs["1"] == ["l_returnflag=N", "l_shipdate_month=1995-03"]
    t = t.set_partition_spec("", buckets=0)
    load(t, lineitem(10, seed=9, key0=9000))
    assert "partitioning" not in t.status.read().get("2").extra
    with pytest.raises(SchemaError, match="no column"):
        t.set_partition_spec("nope")


def test_row_count_excludes_replaced_partitions(store: Store) -> None:
    t = store.create_table("c", LINEITEM, properties={"partition_by": "day(l_shipdate)"})
    a = lineitem(1000, seed=1)
    load(t, a)
    new = lineitem(50, seed=2, days=[3], key0=7000)
    load(t, new, options={"overwrite_partitions": "true"})
    want = sum(d != DAY0 + dt.timedelta(days=3) for d in a["l_shipdate"].to_pylist()) + 50
    assert t.status.read().get("0").extra["removedRows"] == 1000 + 50 - want
    live = a.filter(pa.array([d != DAY0 + dt.timedelta(days=3) for d in a["l_shipdate"].to_pylist()]))
    plan = check(t, pa.concat_tables([live, new]), None)
    assert plan["levels"]["rows"]["total"] == plan["levels"]["rows"]["kept"] == want
    plan = check(t, pa.concat_tables([a, new]), "l_orderkey = -1")
    assert plan["levels"]["rows"]["total"] == want


def test_orphan_files_in_partition_folders_are_removed_at_commit(store: Store) -> None:
    t = store.create_table("x", LINEITEM, properties={"partition_by": "day(l_shipdate)"})
    opts = parse_load_options(t, {})
    entry, lock = begin_segment(t)
    try:
        s = write_settings(t, entry.load_name, opts)
        data = lineitem(200, seed=1)
        lost = write_task(data.to_batches(), s, task_id="00000-0")  # a failed attempt's files
        kept = write_task(data.to_batches(), s, task_id="00000-1")
        commit_segment(t, entry.load_name, [kept], partitioning=s.partitioning)
    finally:
        if lock is not None:
            lock.release()
    seg = t.paths.segment_dir(entry.load_name)
    for name in lost.files:
        assert not t.store.sfs.exists(f"{seg}/{name}")
    for name in kept.files:
        assert t.store.sfs.exists(f"{seg}/{name}")
    check(t, data, None)


def test_compaction_aborts_when_an_overwrite_replaced_a_source_meanwhile(store: Store) -> None:
    from carbonstore.errors import CompactionError
    from carbonstore.segments.compaction_merge import merge_local

    t = store.create_table("y", LINEITEM, properties={"partition_by": "day(l_shipdate)"})
    a, b = lineitem(300, seed=1), lineitem(300, seed=2, key0=1000)
    load(t, a)
    load(t, b)
    c = lineitem(20, seed=3, days=[2], key0=5000)

    def merger(table, sources, output_id):  # type: ignore[no-untyped-def]
        out = merge_local(table, sources, output_id)
        load(table, c, options={"overwrite_partitions": "true"})
        return out

    with pytest.raises(CompactionError, match="overwritten while it was being compacted"):
        compact(t, "custom", segment_ids=["0", "1"], merger=merger)
    day2 = DAY0 + dt.timedelta(days=2)
    rest = pa.concat_tables([a, b]).filter(pa.array(
        [d != day2 for d in pa.concat_tables([a, b])["l_shipdate"].to_pylist()]))
    check(t, pa.concat_tables([rest, c]), None)


def test_index_rebuild_of_a_partitioned_segment(store: Store) -> None:
    from carbonstore.segments.rebuild import rebuild_indexes

    t = store.create_table("r", LINEITEM, properties={"partition_by": "day(l_shipdate)",
                                                      "bucket_number": "2",
                                                      "bucket_columns": "l_orderkey"})
    data = lineitem(500, seed=1)
    entry = load(t, data)
    seg = t.paths.segment_dir(entry.load_name)
    t.store.sfs.delete_file(f"{seg}/{entry.segment_file}")  # damage: the merge index is gone
    for name in [p.base_name for p in t.store.sfs.list_dir(seg) if p.base_name.endswith(".carbonindex")]:
        t.store.sfs.delete_file(f"{seg}/{name}")
    [result] = rebuild_indexes(t)
    assert result.rows == 500 and result.files == sum(p.files for p in t.partitions()) > 8
    plan = check(t, data, "l_shipdate = DATE '1995-03-12' AND l_orderkey = 7")
    assert plan["levels"]["files"].get("dropped_by_partition", 0) > 0


def test_explain_names_the_partition_reason(lineitem_table) -> None:  # type: ignore[no-untyped-def]
    t, _ = lineitem_table
    text = prune(t, "l_shipdate = DATE '1995-03-12'", explain=True).explain()
    assert "its partition proves no row matches" in text
    assert "l_shipdate_day=1995-03-11" in text and "read segment 0" in text


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ops=st.lists(st.tuples(st.sampled_from(["load", "overwrite", "compact"]),
                              st.integers(0, 10_000), st.lists(st.integers(0, 4), min_size=1, max_size=3)),
                    min_size=1, max_size=5))
def test_property_loads_overwrites_and_compactions_match_a_model(tmp_path_factory, ops) -> None:  # type: ignore[no-untyped-def]
    store = Store(str(tmp_path_factory.mktemp("model") / "store"))
    t = store.create_table("m", LINEITEM, properties={"partition_by": "day(l_shipdate), l_returnflag",
                                                      "bucket_number": "3", "bucket_columns": "l_orderkey"})
    model = lineitem(1, seed=0).slice(0, 0)
    for n, (op, seed, days) in enumerate(ops):
        if op == "compact":
            if len(t.status.read().readable) > 1:
                compact(t, "major")
            continue
        new = lineitem(40, seed=seed, days=days, key0=n * 100)
        if op == "overwrite" and model.num_rows:
            load(t, new, tasks=2, options={"overwrite_partitions": "true"})
            touched = set(zip(new["l_shipdate"].to_pylist(), new["l_returnflag"].to_pylist(), strict=True))
            keep = [k not in touched for k in zip(model["l_shipdate"].to_pylist(),
                                                   model["l_returnflag"].to_pylist(), strict=True)]
            model = pa.concat_tables([model.filter(pa.array(keep, pa.bool_())), new])
        else:
            load(t, new, tasks=2)
            model = pa.concat_tables([model, new])
        for where in (None, "l_shipdate = DATE '1995-03-11'", "l_returnflag = 'A' AND l_orderkey = 105",
                      "l_shipdate > DATE '1995-03-12' OR l_quantity < 5"):
            plan = check(t, model, where)
            if where is None:
                assert plan["levels"]["rows"]["total"] == model.num_rows


def test_identity_partitions_of_every_type_prune_exactly(store: Store) -> None:
    utc = dt.UTC
    t = store.create_table("i", "b boolean, y byte, n int, l long, m decimal(9,3), d date, "
                                "ts timestamp, s string, v long",
                           properties={"partition_by": "b, y, n, l, m, d, ts, s"})
    vals = {
        "b": pa.array([True, False, None], pa.bool_()),
        "y": pa.array([-128, 127, None], pa.int8()),
        "n": pa.array([-(2**31), 7, None], pa.int32()),
        "l": pa.array([-(2**63), 2**63 - 1, None], pa.int64()),
        "m": pa.array([Decimal("-1.500"), Decimal("123456.789"), None], pa.decimal128(9, 3)),
        "d": pa.array([dt.date(1, 1, 1), dt.date(1969, 12, 31), None], pa.date32()),
        "ts": pa.array([dt.datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=utc),
                        dt.datetime(2024, 2, 29, 23, 59, 59, tzinfo=utc), None],
                       pa.timestamp("us", tz="UTC")),
        "s": pa.array(["x y", "a:b", None]),
    }
    data = pa.table({**vals, "v": pa.array([1, 2, 3], pa.int64())})
    load(t, data, tasks=1)
    assert len(t.partitions()) == 3
    for where in ("b = true", "b IS NULL", "y = -128", "n = 7", "l = -9223372036854775808",
                  "m = -1.5", "m = 123456.789", "d = DATE '0001-01-01'", "d > DATE '1900-01-01'",
                  "ts = TIMESTAMP '1900-01-01 00:00:00.000001'", "ts > TIMESTAMP '2024-02-29 23:59:58'",
                  "s = 'a:b'", "s IS NULL AND v = 3"):
        plan = check(t, data, where)
        assert len(plan["files"]) == 1, where


def test_year_month_hour_and_truncate_prune_soundly(store: Store) -> None:
    t = store.create_table("tr", "ts timestamp, d date, k long, s string",
                           properties={"partition_by": "year(d), month(ts), hour(ts), truncate(100, k), truncate(2, s)"})
    rnd = random.Random(3)
    utc = dt.UTC
    n = 600
    data = pa.table({
        "ts": pa.array([None if rnd.random() < 0.05 else
                        dt.datetime(1969, 12, 1, tzinfo=utc) + dt.timedelta(minutes=rnd.randrange(200_000))
                        for _ in range(n)], pa.timestamp("us", tz="UTC")),
        "d": pa.array([dt.date(1968, 1, 1) + dt.timedelta(days=rnd.randrange(1500)) for _ in range(n)]),
        "k": pa.array([rnd.randrange(-1000, 1000) for _ in range(n)], pa.int64()),
        "s": pa.array([rnd.choice(["", "a", "ab", "abc", "abd", "b", "日本語", "日本"]) for _ in range(n)]),
    })
    load(t, data, tasks=2)
    for where in ("ts >= TIMESTAMP '1970-01-01 00:00:00' AND ts < TIMESTAMP '1970-01-01 01:00:00'",
                  "ts < TIMESTAMP '1969-12-15 10:30:00'", "ts IS NULL",
                  "d BETWEEN DATE '1969-06-01' AND DATE '1970-02-01'", "d > DATE '1971-06-30'",
                  "k = -101", "k >= 100 AND k < 200", "k < -900 OR k = 5",
                  "s = 'ab'", "s = 'abc'", "s LIKE 'ab%'", "s = ''", "s > 'abc'", "s IN ('日本', 'b')",
                  "s < 'ab'"):
        check(t, data, where)
    plan = check(t, data, "k >= 100 AND k < 200")
    assert {p.split("/")[6] for p in files_of(plan)} == {"k_trunc=100"}
