"""Lock-free dictionary commits: real processes racing without (and with) the OS lock.

Correctness rests on the put-if-absent commit records alone (docs/dictionary.md): writers
that skip the courtesy lock must still end with one dictionary in which no value is
stored twice, no surrogate is reused, and every surrogate a writer was handed still
decodes to its value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from carbonstore.dictionary import add_values, clear_cache, load_dictionary
from carbonstore.dictionary.files import read_state
from carbonstore.store import Table

WORKER = textwrap.dedent(
    """
    import json, random, sys, time
    from carbonstore import Store
    from carbonstore.store import load_conf
    from carbonstore.dictionary import add_values, writer
    location, seed, start, out, rounds, lock = sys.argv[1:7]
    writer.COURTESY_LOCK = lock == "lock"
    conf = load_conf(None).with_overrides({"carbon.lock.retry.timeout.sec": "30",
                                           "carbon.dictionary.chunk.size": "7"})
    table = Store(location, conf=conf).table("t")
    rng = random.Random(int(seed))
    seen = {}
    while time.time() < float(start):
        time.sleep(0.001)
    for i in range(int(rounds)):
        values = [f"v{rng.randrange(400):03d}" for _ in range(rng.randrange(1, 25))] + [None]
        d = add_values(table, "city", values, segment_id=f"{seed}.{i}")
        for v in set(values) - {None}:
            s = d.surrogate_of(v)
            assert s is not None and seen.setdefault(v, s) == s, (v, s, seen.get(v))
    with open(out, "w") as f:
        json.dump(seen, f)
    """
)


def _race(table: Table, tmp: str, modes: list[str], rounds: int) -> None:
    start = time.time() + 2.0  # every interpreter is up and importing by then
    outs = [os.path.join(tmp, f"seen{i}.json") for i in range(len(modes))]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, table.store.location, str(seed), str(start), out,
             str(rounds), mode],
            stderr=subprocess.PIPE, text=True,
        )
        for seed, (out, mode) in enumerate(zip(outs, modes, strict=True), start=1)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    clear_cache()
    d = load_dictionary(table, "city")
    values = d.values.to_pylist()
    assert len(values) == len(set(values))  # no value twice
    entries = d.meta.entries
    assert entries[0].min_surrogate == 2
    for a, b in zip(entries, entries[1:], strict=False):  # no surrogate reused or skipped
        assert b.min_surrogate == a.max_surrogate + 1
        assert b.start_offset >= a.end_offset  # byte ranges never overlap
    state = read_state(d.files, "string")
    assert state.records == state.version == len(entries)
    seen_all: dict[str, int] = {}
    for out in outs:
        with open(out) as f:
            for v, s in json.load(f).items():
                assert d.surrogate_of(v) == s  # every surrogate a process used is still its value
                assert seen_all.setdefault(v, s) == s  # and every process got the same one
    assert set(seen_all) == set(values)  # nothing committed that no writer asked for


def test_four_lockless_processes_end_with_one_dictionary(table: Table, tmp_path: object) -> None:
    _race(table, str(tmp_path), ["nolock"] * 4, rounds=25)


def test_lock_holders_and_lockless_writers_mixed(table: Table, tmp_path: object) -> None:
    # Lock holders cut .dict tails while lock-less writers append: a committed range that
    # was cut is read from its record, never lost.
    _race(table, str(tmp_path), ["lock", "nolock", "lock", "nolock"], rounds=20)


@pytest.mark.long
def test_eight_lockless_processes_long(table: Table, tmp_path: object) -> None:
    _race(table, str(tmp_path), ["nolock"] * 6 + ["lock"] * 2, rounds=120)


DIE_AFTER_COMMIT = textwrap.dedent(
    """
    import os, sys
    from carbonstore import Store
    from carbonstore.store import load_conf
    from carbonstore.dictionary import writer

    def die(*args, **kwargs):
        os._exit(17)  # the record is committed; sort index and checkpoint never written

    writer.ColumnDictionary.write_sort_index = die
    table = Store(sys.argv[1], conf=load_conf(None)).table("t")
    writer.add_values(table, "city", ["c", "d"], segment_id="9")
    """
)


def test_writer_killed_after_its_commit_record(table: Table) -> None:
    add_values(table, "city", ["a", "b"], segment_id="0")
    proc = subprocess.run([sys.executable, "-c", DIE_AFTER_COMMIT, table.store.location],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 17, proc.stderr
    clear_cache()
    d = load_dictionary(table, "city")  # committed: the record is the truth, not the checkpoint
    assert d.values.to_pylist() == ["a", "b", "c", "d"]
    state = read_state(d.files, "string")
    assert state.version == 2 and state.checkpoint == 1  # version 2 read from its record
    assert not os.path.exists(d.files.sortindex_path(4))
    assert d.surrogate_of("c") == 4  # the sort index is computed
    add_values(table, "city", ["a"], segment_id="1")  # nothing new: the sort index is written
    assert os.path.exists(d.files.sortindex_path(4))


def test_killed_put_if_absent_leaves_a_temp_file_that_is_ignored(table: Table) -> None:
    d = add_values(table, "city", ["a"], segment_id="0")
    stray = d.files.record_path(2) + ".0123abcd.tmp"
    with open(stray, "wb") as f:
        f.write(b"half a record")
    clear_cache()
    assert load_dictionary(table, "city").values.to_pylist() == ["a"]
    assert add_values(table, "city", ["b"], segment_id="1").values.to_pylist() == ["a", "b"]
