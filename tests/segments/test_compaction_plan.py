"""Compaction planning on in-memory tablestatus snapshots (no files)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.errors import CompactionError, UserError
from carbonstore.segments import compaction_plan
from carbonstore.segments.compaction import (
    plan_compaction,
    plan_custom,
    plan_major,
    plan_minor,
    segment_level,
)
from carbonstore.store import checkpoint_arrow, load_conf
from carbonstore.store.checkpoint_arrow import encode_checkpoint, entries_table
from carbonstore.store.entry_view import EntryView
from carbonstore.store.records import replace
from carbonstore.store.tablestatus import (
    COMPACTED,
    FAILURE,
    IN_PROGRESS,
    MARKED_FOR_DELETE,
    PARTIAL_SUCCESS,
    SUCCESS,
    LoadEntry,
    TableStatusSnapshot,
)

NOW = 1_800_000_000_000
DAY = 24 * 3600 * 1000
MB = 1024 * 1024


def entry(name: str, status: str = SUCCESS, *, size: int = MB, age_days: float = 0,
          major: bool = False) -> LoadEntry:
    return LoadEntry(
        load_name=name, status=status, load_start_time=int(NOW - age_days * DAY),
        timestamp=NOW, data_size=size, row_count=10, major_compacted=major,
    )


def snap(*entries: LoadEntry) -> TableStatusSnapshot:
    return TableStatusSnapshot(tuple(entries), "v")


def conf(**kv: str):  # type: ignore[no-untyped-def]
    return load_conf(None).with_overrides({f"carbon.{k.replace('_', '.')}": v for k, v in kv.items()})


@pytest.mark.parametrize(("name", "level"), [("0", 0), ("12", 0), ("3.1", 1), ("3.2", 2)])
def test_segment_level(name: str, level: int) -> None:
    assert segment_level(name) == level


def test_minor_default_needs_four_level0_segments() -> None:
    c = load_conf(None)
    assert plan_minor(snap(*(entry(str(i)) for i in range(3))), c, now=NOW) is None
    g = plan_minor(snap(*(entry(str(i)) for i in range(5))), c, now=NOW)
    assert g is not None and g.sources == ("0", "1", "2", "3") and g.output == "0.1"
    assert not g.major


def test_minor_second_level_and_threshold_one_never_merges() -> None:
    c = load_conf(None)
    s = snap(entry("0", COMPACTED), entry("0.1"), entry("4.1"), entry("8.1"), entry("12"))
    g = plan_minor(s, c, now=NOW)
    assert g is not None and g.sources == ("0.1", "4.1", "8.1") and g.output == "0.2"
    # "2,1": level-1 segments never merge further (CarbonData treats 1 as "no merge").
    c21 = conf(compaction_level_threshold="2,1")
    assert plan_minor(snap(entry("0.1"), entry("2.1")), c21, now=NOW) is None


def test_minor_skips_last_level_major_big_and_unreadable() -> None:
    c = conf(compaction_level_threshold="2,2", minor_compaction_size="2")
    s = snap(
        entry("0.2"), entry("1", major=True), entry("2", size=3 * MB), entry("3", FAILURE),
        entry("4", IN_PROGRESS), entry("5", MARKED_FOR_DELETE), entry("6"), entry("7", PARTIAL_SUCCESS),
    )
    g = plan_minor(s, c, now=NOW)
    assert g is not None and g.sources == ("6", "7") and g.output == "6.1"


def test_minor_preserve_and_allowed_days() -> None:
    s = snap(*(entry(str(i), age_days=10 - i) for i in range(6)))
    g = plan_minor(s, conf(compaction_level_threshold="4,3", compaction_preserve_segments="2"), now=NOW)
    assert g is not None and g.sources == ("0", "1", "2", "3")
    assert plan_minor(s, conf(compaction_preserve_segments="3"), now=NOW) is None
    # Only segments loaded in the last 7 days: 3,4,5 are new enough -> threshold 4 not reached.
    assert plan_minor(s, conf(allowed_compaction_days="7"), now=NOW) is None
    g = plan_minor(s, conf(allowed_compaction_days="7", compaction_level_threshold="3"), now=NOW)
    assert g is not None and g.sources == ("3", "4", "5")


def test_minor_segment_order_is_numeric() -> None:
    s = snap(*(entry(str(i)) for i in (10, 2, 9, 11)))
    g = plan_minor(s, conf(compaction_level_threshold="2"), now=NOW)
    assert g is not None and g.sources == ("2", "9") and g.output == "2.1"


def test_major_size_threshold() -> None:
    c = conf(major_compaction_size="10")
    s = snap(entry("0", size=3 * MB), entry("1", size=3 * MB), entry("2", size=3 * MB),
             entry("3", size=3 * MB))
    g = plan_major(s, c, now=NOW)
    assert g is not None and g.sources == ("0", "1", "2") and g.output == "0.1" and g.major
    # A segment larger than the threshold breaks the run; a run of one is never merged.
    s = snap(entry("0", size=3 * MB), entry("1", size=20 * MB), entry("2", size=3 * MB),
             entry("3", size=3 * MB))
    g = plan_major(s, c, now=NOW)
    assert g is not None and g.sources == ("2", "3")
    assert plan_major(snap(entry("0"), entry("1", size=20 * MB)), c, now=NOW) is None
    # Major re-merges minor output and major output alike.
    g = plan_major(snap(entry("0.1", major=True), entry("5")), c, now=NOW)
    assert g is not None and g.output == "0.2"


def test_custom_exact_ids() -> None:
    s = snap(*(entry(str(i)) for i in range(5)))
    g = plan_custom(s, ["3", "1", "2"])
    assert g.sources == ("1", "2", "3") and g.output == "1.1" and g.compaction_type == "custom"


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([], "Segment ids should not be empty"),
        (None, "Segment ids should not be empty"),
        (["1", "9"], "segment 9 does not exist"),
        (["0", "1"], "segment 0 is already compacted into 0.1"),
        (["2", "3"], "segment 3 has status 'Failure'"),
        (["4", "2"], "segment 4 has status 'Marked for Delete'"),
        (["2", "2"], "name a segment twice"),
    ],
)
def test_custom_errors(ids: list[str] | None, message: str) -> None:
    s = snap(entry("0", COMPACTED).with_status(COMPACTED, merged_load_name="0.1"), entry("0.1"),
             entry("1"), entry("2"), entry("3", FAILURE), entry("4", MARKED_FOR_DELETE))
    with pytest.raises(CompactionError, match=message) as info:
        plan_custom(s, ids)
    assert isinstance(info.value, UserError)


def test_unknown_type() -> None:
    with pytest.raises(CompactionError, match="unknown compaction type"):
        plan_compaction(snap(), load_conf(None), "huge")  # type: ignore[arg-type]


# ---- planning from the status columns (a big table's checkpoint) ---------------------------

_ENTRY = st.tuples(st.integers(0, 60), st.integers(0, 3),
                   st.sampled_from([SUCCESS, SUCCESS, PARTIAL_SUCCESS, COMPACTED, FAILURE,
                                    MARKED_FOR_DELETE, IN_PROGRESS]),
                   st.integers(0, 3), st.integers(0, 3), st.booleans(), st.booleans())


def _arrow_snap(entries: list[LoadEntry], overlay: int = 0) -> TableStatusSnapshot:
    """A snapshot read from a checkpoint; ``overlay``: the first ``overlay`` entries were
    different in the checkpoint and the rest not in it (the versions since changed and
    added them)."""
    if not overlay:
        _, base = encode_checkpoint(entries_table(entries), table_id="t", version=50)
        return TableStatusSnapshot(EntryView(base), 50, 0, "t")
    old = [replace(e, status=SUCCESS, data_size=7, visibility=True) for e in entries[:overlay]]
    _, base = encode_checkpoint(entries_table(old), table_id="t", version=50)
    return TableStatusSnapshot(EntryView(base).apply(entries, ()), 53, 0, "t")


@settings(max_examples=60, deadline=None)
@given(raw=st.lists(_ENTRY, max_size=40, unique_by=lambda x: (x[0], x[1])),
       preserve=st.integers(0, 2), days=st.sampled_from([0, 2]), thresholds=st.sampled_from(["4,3", "2,2", "3"]))
def test_columns_plan_what_entries_plan(raw, preserve, days, thresholds) -> None:  # type: ignore[no-untyped-def]
    """Planning from the columns (what a table of 2,000 entries or more does) and from the
    entries give the same MINOR and MAJOR merge, on tables in any order."""
    entries = [LoadEntry(load_name=f"{n}.{lvl}" if lvl else str(n), status=status,
                         load_start_time=int(NOW - age * DAY), timestamp=NOW, data_size=size * MB,
                         row_count=10, major_compacted=major, visibility=visible)
               for n, lvl, status, size, age, major, visible in raw]
    conf = load_conf(None).with_overrides({"carbon.compaction.preserve.segments": str(preserve),
                                "carbon.allowed.compaction.days": str(days),
                                "carbon.compaction.level.threshold": thresholds,
                                "carbon.major.compaction.size": "5",
                                "carbon.minor.compaction.size": "2"})
    plain = snap(*entries)
    for plan in (plan_minor, plan_major):
        want = plan(plain, conf, now=NOW)
        compaction_plan._COLUMNS_FROM, saved = 0, compaction_plan._COLUMNS_FROM
        try:
            for overlay in (0, len(entries) // 2):
                assert plan(_arrow_snap(entries, overlay), conf, now=NOW) == want
        finally:
            compaction_plan._COLUMNS_FROM = saved


def test_a_big_tables_plan_builds_no_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """5,000 readable segments read from a checkpoint: MINOR and MAJOR planning build no
    entry (before: every one, each plan; auto-compaction plans after every load)."""
    entries = [LoadEntry(load_name=str(i), status=SUCCESS, load_start_time=NOW, timestamp=NOW,
                         data_size=MB, row_count=1, major_compacted=i < 4990) for i in range(5000)]
    built: list[int] = []
    real = checkpoint_arrow.build_plain
    monkeypatch.setattr(checkpoint_arrow, "build_plain", lambda *c: built.append(len(c[0])) or real(*c))
    conf = load_conf(None)
    got = plan_minor(_arrow_snap(entries), conf, now=NOW)
    assert got is not None and got.sources == ("4990", "4991", "4992", "4993")
    assert plan_major(_arrow_snap(entries), conf, now=NOW) is not None
    assert built == []
