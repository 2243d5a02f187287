"""The readable entries' key bytes (what a plan and the snapshot's lag check compare): from a
checkpoint's columns with the entries changed or added since put in at their places, equal
to the bytes of the entries' names and merge index names in segment order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.store.arrow_numpy import strings_bytes
from carbonstore.store.checkpoint_arrow import checkpoint_bytes, decode_checkpoint, entries_table
from carbonstore.store.entry_view import EntryView
from carbonstore.store.readable import _SPLICED, ReadableEntries
from carbonstore.store.tablestatus import COMPACTED, MARKED_FOR_DELETE, SUCCESS, LoadEntry


def _entry(name: str, status: str = SUCCESS, merge: int | None = 1) -> LoadEntry:
    return LoadEntry(load_name=name, status=status, load_start_time=1, row_count=len(name),
                     segment_file=None if merge is None else f"{name.replace('.', '_')}_{merge}.carbonindexmerge")


# one change over the checkpoint: (kind, which entry, a merge index number or none)
_CHANGE = st.tuples(st.sampled_from(["merge", "drop", "mark", "compact", "load", "remove"]),
                    st.integers(0, 10**6), st.one_of(st.none(), st.integers(2, 99999)))


def _bytes(kb: tuple[object, bytes]) -> tuple[list[int], bytes]:
    lengths, data = kb
    return lengths.tolist(), bytes(data)  # type: ignore[attr-defined]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.lists(_CHANGE, max_size=_SPLICED + 8), st.booleans())
def test_key_bytes_are_the_names_bytes_with_any_changes(n: int, changes: list, none_merges: bool) -> None:
    base = [_entry(str(i), merge=None if none_merges and i % 3 == 0 else 1) for i in range(n)]
    data, _ = checkpoint_bytes(entries_table(base), table_id="t", version=1)
    view = EntryView(decode_checkpoint(data, table_id="t", version=1))  # as a reader has it
    for kind, pick, merge in changes:
        names = view.names()
        if not names and kind != "load":
            continue
        name = names[pick % len(names)] if names else ""
        if kind == "merge":
            upserts, removes = [_entry(name, merge=merge)], []
        elif kind == "drop":
            upserts, removes = [_entry(name, MARKED_FOR_DELETE)], []
        elif kind == "mark":
            upserts, removes = [_entry(name, COMPACTED)], []
        elif kind == "compact":  # a compacted segment's id sorts between the loads'
            upserts, removes = [_entry(f"{name.split('.')[0]}.{pick % 3 + 1}", merge=merge)], []
        elif kind == "load":
            upserts, removes = [_entry(str(n + pick % 50), merge=merge)], []
        else:
            upserts, removes = [], [name]
        view = view.apply(upserts, removes)
    entries = ReadableEntries(view)
    key = entries.key_bytes()  # before the names are built
    assert [_bytes(kb) for kb in key] == [_bytes(strings_bytes(entries.names)), _bytes(strings_bytes(entries.files))]
    want = sorted((e for e in view if e.readable), key=lambda e: tuple(int(x) for x in e.load_name.split(".")))
    assert entries.names == tuple(e.load_name for e in want)
    assert entries.files == tuple(e.segment_file or "" for e in want)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=30, unique=True), st.booleans(),
       st.lists(st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(
           ["07", "007", "0", "-1", "+1", "1.1", "x", "", "١", "9" * 19, " 1"])), max_size=20))
def test_positions_by_value_are_the_map_s(ids: list[int], dotted: bool, asked: list[str]) -> None:
    """A checkpoint's rows of a few names, found by value where every load name is a plain
    number, are what the map of every name gives: "07" is not segment 7."""
    names = [str(i) for i in sorted(ids)] + (["3.1"] if dotted else [])
    data, _ = checkpoint_bytes(entries_table([_entry(n) for n in names]), table_id="t", version=1)
    some = names[:: max(1, len(names) // 5)]
    asked = [*asked, *some, *("0" + n for n in some)]  # and "07" where 7 is a segment
    small = decode_checkpoint(data, table_id="t", version=1)
    got = {}
    for k in range(0, len(asked), 16):  # (16 at a time: by value where the names allow)
        got.update(small.positions(asked[k:k + 16]))
    by_map = decode_checkpoint(data, table_id="t", version=1)
    by_map.index()
    assert got == by_map.positions(asked) == {n: names.index(n) for n in asked if n in names}
    assert [small.position(n) for n in asked] == [names.index(n) if n in names else None for n in asked]
