"""Two OS processes adding overlapping values to one dictionary at the same time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

from carbonstore import Store, Table
from carbonstore.dictionary import clear_cache, load_dictionary

WORKER = textwrap.dedent(
    """
    import json, random, sys, time
    from carbonstore import Store
    from carbonstore.store import load_conf
    from carbonstore.dictionary import add_values
    location, seed, start, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    conf = load_conf(None).with_overrides({"carbon.lock.retry.timeout.sec": "20"})
    table = Store(location, conf=conf).table("t")
    rng = random.Random(seed)
    seen = {}
    while time.time() < start:
        time.sleep(0.001)
    for i in range(25):
        values = [f"v{rng.randrange(120):03d}" for _ in range(15)] + [None]
        d = add_values(table, "city", values, segment_id=f"{seed}.{i}")
        for v in set(values) - {None}:
            s = d.surrogate_of(v)
            assert s is not None and seen.setdefault(v, s) == s, (v, s, seen.get(v))
    with open(out, "w") as f:
        json.dump(seen, f)
    """
)


def test_two_processes_end_with_one_consistent_dictionary(table: Table, store: Store, tmp_path: object) -> None:
    start = time.time() + 1.5  # both interpreters are up and importing by then
    outs = [os.path.join(str(tmp_path), f"seen{i}.json") for i in range(2)]
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, store.location, str(seed), str(start), out],
                         stderr=subprocess.PIPE, text=True)
        for seed, out in zip((1, 2), outs, strict=True)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    clear_cache()
    d = load_dictionary(table, "city")
    values = d.values.to_pylist()
    assert len(values) == len(set(values))  # no value twice
    entries = d.meta.entries
    assert entries[0].min_surrogate == 2
    for a, b in zip(entries, entries[1:], strict=False):  # no surrogate reused or skipped
        assert b.min_surrogate == a.max_surrogate + 1 and b.start_offset == a.end_offset
    segs = {e.segment_id.split(".")[0] for e in entries}
    assert segs == {"1", "2"}  # both processes committed values
    for out in outs:
        with open(out) as f:
            seen = json.load(f)
        for v, s in seen.items():  # every surrogate a process used is still its value
            assert d.surrogate_of(v) == s
    assert os.path.getsize(d.files.dict_path) == d.meta.committed_end
