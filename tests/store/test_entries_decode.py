"""Every decoded entry is checked the same way, whichever decoder path takes it.

The entries this product writes take a fast path (known keys, integers, no deltas); any
other entry takes the full decoder. Adding an unknown key forces the full decoder, so an
entry decoded both ways must give the same entry (plus the key) or the same refusal.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.store.entries import ALL_STATUSES, LoadEntry, decode_entries
from carbonstore.store.records import replace

_ANY = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**62), st.text(max_size=6), st.floats(allow_nan=False),
                 st.lists(st.integers(), max_size=2))
_VALUES: dict[str, Any] = {
    "loadName": st.one_of(st.sampled_from(["0", "12", "3.1", "a", "", "1.", "../x"]), _ANY),
    "loadStatus": st.one_of(st.sampled_from(ALL_STATUSES), _ANY),
    "loadStartTime": st.one_of(st.integers(0, 2**45), st.sampled_from(["17", " 5", "x", ""]), _ANY),
    "timestamp": st.one_of(st.integers(0, 2**45), _ANY),
    "dataSize": st.one_of(st.integers(0, 2**40), st.just("123"), _ANY),
    "indexSize": st.one_of(st.integers(0, 2**40), _ANY),
    "rowCount": st.one_of(st.integers(0, 2**40), _ANY),
    "badRecordCount": st.one_of(st.integers(0, 9), _ANY),
    "mergedLoadName": st.one_of(st.sampled_from(["1.1", "x", "2"]), _ANY),
    "modificationOrDeletionTimestamp": st.one_of(st.integers(0, 2**45), _ANY),
    "visibility": st.one_of(st.sampled_from(["true", "false", "TRUE", "yes"]), _ANY),
    "majorCompacted": st.one_of(st.sampled_from(["true", "false", "False"]), _ANY),
    "fileFormat": st.one_of(st.sampled_from(["parquet", "orc"]), _ANY),
    "segmentFile": st.one_of(st.sampled_from(["0_1.carbonindexmerge", "../x", "a/b", "c:d", ".."]), _ANY),
    "deleteDeltas": st.one_of(st.just([]), st.just([{"dataFile": "p.parquet", "deltaFile": "p.d", "deletedRows": 2}]),
                              _ANY),
}
_GOOD = {"loadName": "7", "loadStatus": "Success", "loadStartTime": 1, "timestamp": 2, "dataSize": 3,
         "indexSize": 4, "rowCount": 5, "badRecordCount": 0, "mergedLoadName": None,
         "modificationOrDeletionTimestamp": None, "visibility": "true", "majorCompacted": "false",
         "fileFormat": "parquet", "segmentFile": "7_1.carbonindexmerge"}


def _decode(obj: dict[str, Any]) -> LoadEntry | str:
    try:
        return LoadEntry.from_json(obj)
    except ValueError as err:
        return f"refused: {err}"


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({}, optional=_VALUES), st.sampled_from([_GOOD, {}]))
def test_fast_and_full_decoder_agree(changes: dict[str, Any], base: dict[str, Any]) -> None:
    obj = {**base, **changes}
    fast = _decode(obj)
    full = _decode({**obj, "unknownKey": 1})  # an unknown key: the full decoder
    if isinstance(full, LoadEntry):
        assert full.extra == {"unknownKey": 1}
        assert isinstance(fast, LoadEntry)
        assert fast == replace(full, extra={})
    else:
        assert fast == full


def test_written_entries_round_trip() -> None:
    e = LoadEntry(load_name="3.1", status="Compacted", load_start_time=5, timestamp=None, row_count=9,
                  merged_load_name="3.2", visibility=False, major_compacted=True, segment_file="s")
    assert decode_entries([e.to_json()]) == (e,)


@pytest.mark.parametrize("key, value", [("segmentFile", "../escape"), ("loadName", "1/2"),
                                        ("loadStatus", "Done"), ("rowCount", 1.5), ("visibility", "maybe")])
def test_damaged_plain_entries_are_refused(key: str, value: Any) -> None:
    with pytest.raises(ValueError):
        LoadEntry.from_json({**_GOOD, key: value})


def test_readable_in_order_is_sorted_and_shared_safely() -> None:
    from carbonstore.store.versions import TableStatusSnapshot

    names = ["10", "2", "1.1", "3", "0"]
    entries = tuple(LoadEntry(load_name=n, status="Success" if n != "3" else "Compacted", load_start_time=1)
                    for n in names)
    snap = TableStatusSnapshot(entries, 4)
    first = snap.readable_in_order()
    assert [e.load_name for e in first] == ["0", "1.1", "2", "10"]
    first.clear()  # a caller's list is its own
    again = TableStatusSnapshot(entries, 4).readable_in_order()
    assert [e.load_name for e in again] == ["0", "1.1", "2", "10"]
    other = TableStatusSnapshot(entries[:2], 5).readable_in_order()
    assert [e.load_name for e in other] == ["2", "10"]


def _decode_list(raw: list[Any]) -> tuple[LoadEntry, ...] | str:
    try:
        return decode_entries(raw)
    except ValueError as err:
        return f"refused: {err}"


def _decode_each(raw: list[Any]) -> tuple[LoadEntry, ...] | str:
    """The oracle: entry by entry through ``LoadEntry.from_json``, then the duplicate check."""
    try:
        out = tuple(LoadEntry.from_json(o) for o in raw)
    except ValueError as err:
        return f"refused: {err}"
    names = [e.load_name for e in out]
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    return out if dup is None else f"refused: loadName {dup} appears twice"


_ENTRY = st.builds(lambda base, changes: {**base, **changes},
                   st.sampled_from([_GOOD, {**_GOOD, "segmentFile": None, "timestamp": None}]),
                   st.fixed_dictionaries({}, optional=_VALUES))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    _ENTRY.map(lambda o: {**o, "loadName": o["loadName"]}),
    st.integers(0, 40).map(lambda i: {**_GOOD, "loadName": str(i), "segmentFile": f"{i}_1.carbonindexmerge"}),
    st.integers(0, 40).map(lambda i: {**_GOOD, "loadName": f"{i}.1", "mergedLoadName": None}),
    st.sampled_from([{**_GOOD, "loadName": "1\n2"}, {**_GOOD, "mergedLoadName": "3\n"},
                     {**_GOOD, "segmentFile": "a\x00b"}, {**_GOOD, "segmentFile": ""},
                     {**_GOOD, "extraKey": 1}, [1], "x", {**_GOOD, "loadStatus": ["Success"]},
                     {**_GOOD, "visibility": {}}, {**_GOOD, "deleteDeltas": ""},
                     {**_GOOD, "fileFormat": ""}, {**_GOOD, "fileFormat": None}]),
), max_size=12))
def test_whole_list_decoder_agrees_with_entry_by_entry(raw: list[Any]) -> None:
    """Plain lists are checked key by key over the whole list and built without the
    dataclass __init__; every entry and every refusal must be the entry-by-entry one."""
    got, want = _decode_list(raw), _decode_each(raw)
    assert got == want
    if isinstance(got, tuple):
        again = decode_entries(raw)
        extras = {id(e.extra) for e in (*got, *again)}
        assert len(extras) == 2 * len(got)  # a fresh extra dict per entry, never shared
        for e in got:
            assert type(e) is LoadEntry
            assert [getattr(e, s) for s in LoadEntry.__slots__]  # every slot is set


def test_an_empty_file_format_reads_as_parquet_in_every_decoder() -> None:
    rows = [{**_GOOD, "loadName": str(i), "fileFormat": f} for i, f in enumerate(["", None, "orc"])]
    want = [LoadEntry.from_json(o).file_format for o in rows]
    assert want == ["parquet", "parquet", "orc"]
    assert [e.file_format for e in decode_entries(rows)] == want
    assert [e.file_format for e in decode_entries([rows[0]])] == want[:1]


def test_whole_list_entries_are_frozen_and_replaceable() -> None:
    (e,) = decode_entries([dict(_GOOD)])
    with pytest.raises(AttributeError):
        e.status = "Failure"  # type: ignore[misc]
    assert replace(e, status="Compacted").status == "Compacted"
    assert e == LoadEntry.from_json({**_GOOD, "unknownKey": 1}).__class__(**{
        s: getattr(e, s) for s in LoadEntry.__slots__})
    assert hash(e.load_name) and e.extra == {} and e.delete_deltas == ()
    import copy
    import pickle

    assert pickle.loads(pickle.dumps(e)) == e == copy.deepcopy(e)  # Spark ships entries pickled


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 3), st.booleans()), max_size=30,
                unique_by=lambda t: t[:2]))
def test_readable_in_order_is_segment_order(names: list[tuple[int, int, bool]]) -> None:
    from carbonstore.store.entries import segment_sort_key
    from carbonstore.store.versions import TableStatusSnapshot

    entries = tuple(LoadEntry(load_name=f"{major}.{minor}" if minor else str(major), status="Success",
                              load_start_time=0, visibility=visible) for major, minor, visible in names)
    want = sorted((e for e in entries if e.readable), key=lambda e: segment_sort_key(e.load_name))
    assert TableStatusSnapshot(entries).readable_in_order() == want


def _swapped(key: str, new_key: str, value: Any) -> dict[str, Any]:
    """_GOOD with ``key`` replaced by ``new_key``: the same number of keys, another set."""
    out = {k: v for k, v in _GOOD.items() if k != key}
    out[new_key] = value
    return out


_DELTA = [{"dataFile": "p.parquet", "deltaFile": "p.d", "deletedRows": 2}]


@pytest.mark.parametrize("entry", [
    _swapped("timestamp", "unknownKey", 1),  # an unknown key in place of a plain one
    _swapped("timestamp", "deleteDeltas", _DELTA),  # deltas in place of a plain key
    _swapped("timestamp", "deleteDeltas", "not a list"),
    _swapped("loadName", "deleteDeltas", []),  # no loadName: refused
    _swapped("segmentFile", "unknownKey", "../x"),
    {**_GOOD, "loadName": "1/2"}, {**_GOOD, "segmentFile": "../x"}, {**_GOOD, "rowCount": "7"},
])
@pytest.mark.parametrize("size", [1, 3])
def test_lists_of_entries_with_as_many_keys_as_a_plain_one(entry: dict[str, Any], size: int) -> None:
    """Entries with as many keys as this product writes take the whole-list path by key
    count; any other key set, or a damaged value, must decode (or be refused) exactly as
    entry by entry, wherever in the list the entry is."""
    for at in range(size):
        raw = [{**_GOOD, "loadName": str(10 + i)} for i in range(size)]
        raw[at] = {**entry, **({"loadName": str(10 + at)} if entry.get("loadName") == "7" else {})}
        assert _decode_list(raw) == _decode_each(raw)
