"""Damaged index files (task index, merge index, index snapshot): never a plan from them.

Oracle, for every damage: each of seven filtered reads (the pruning plan, then the rows the
read path returns, filtered exactly) either answers exactly what the undamaged table
answers, or fails with a CorruptIndexError whose one-line message names the damaged file and
``carbonstore index rebuild``. Any other exception is counted as a traceback and fails the
test. On top of that, a full read of a damaged task or merge index (header and bloom region)
must refuse it, so no damage goes undetected, and a damaged snapshot must be refused
(``snapshot_errors``) and planning must fall back to the merge indexes.

Damages: truncation at random points, deletion, an empty file, random bit flips, a file of
the other kind in its place, and valid-looking tampering (a re-encoded Thrift header with
changed min/max under the stale checksum). A forgery that is re-signed with a recomputed
checksum is out of scope (docs/reliability.md); the row-count and segment-id checks still
catch one that describes other data.

``test_issue_experiment`` is issue 22's experiment: 5 loads x 100 rows, snapshot off, bit
0x04 flipped at every 3rd byte of a segment's merge index, 7 filtered reads after each flip.
The counts of every run are printed at the end of the module (``-s``) and recorded in
docs/reliability.md. The longer runs are marked ``slow``.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from carbonstore import Store
from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles import tio
from carbonstore.indexfiles._gen.carbonindex.ttypes import IndexHeader
from carbonstore.indexfiles.indexfile import encode_index, read_index
from carbonstore.indexfiles.snapshot import (
    SnapshotFile,
    decode_snapshot,
    frame_snapshot,
    snapshot_table,
)
from carbonstore.pruning.cache import COUNTERS, clear_cache
from carbonstore.pruning.plan import prune
from carbonstore.pruning.table_index import refresh_if_lagging, refresh_index_snapshot
from carbonstore.segments.rebuild import rebuild_indexes
from carbonstore.store import load_conf
from carbonstore.store.table import Table
from tests.reliability.workload import load, scan

SCHEMA = "id long not null, load_id int, x double, city string"
CITIES = ("oslo", "lima", "pune", "kyiv", "nice")
LOADS, ROWS = 5, 100

Row = dict[str, Any]
READS: list[tuple[str, Callable[[Row], bool]]] = [
    ("load_id = 4", lambda r: r["load_id"] == 4),
    ("load_id = 0", lambda r: r["load_id"] == 0),
    ("id between 120 and 180", lambda r: 120 <= r["id"] <= 180),
    ("x > 100", lambda r: r["x"] is not None and (math.isnan(r["x"]) or r["x"] > 100)),
    ("x is null", lambda r: r["x"] is None),
    ("city = 'lima'", lambda r: r["city"] == "lima"),
    ("id >= 450 or load_id = 1", lambda r: r["id"] >= 450 or r["load_id"] == 1),
]

LOCAL = pafs.LocalFileSystem()
#: What every run of this module tried and saw (printed at the end, see the docstring).
TALLY: Counter[str] = Counter()


def _rows(load_id: int) -> pa.Table:
    ids = list(range(load_id * ROWS, (load_id + 1) * ROWS))
    xs = [None if i % 11 == 0 else (math.nan if i % 7 == 0 else i * 0.5) for i in ids]
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "load_id": pa.array([load_id] * ROWS, pa.int32()),
        "x": pa.array(xs, pa.float64()),
        "city": pa.array([CITIES[i % len(CITIES)] for i in ids]),
    })


def _make(root: Path, name: str, properties: dict[str, str]) -> Table:
    # The snapshot is only written when asked for (lag far above the 5 segments).
    conf = load_conf(None).with_overrides({"carbon.index.snapshot.max.lag": "1000"})
    t = Store(str(root), conf=conf).create_table(name, SCHEMA, properties=properties)
    for k in range(LOADS):
        load(t, _rows(k), tasks=2)
    return t


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Table]]:
    root = tmp_path_factory.mktemp("damage") / "store"
    # "exp": the issue's table (no bloom); "t": a bloom column, so bloom bitsets are read too.
    made = {"exp": _make(root, "db.exp", {}), "t": _make(root, "db.t", {"bloom_columns": "city"})}
    for t in made.values():
        _baseline(t)  # before any damage
    yield made
    print(f"\nindex damage tally: {dict(sorted(TALLY.items()))}")


def _answers(table: Table) -> list[list[int] | CorruptIndexError]:
    out: list[list[int] | CorruptIndexError] = []
    for where, pred in READS:
        clear_cache()  # every read as a fresh process: nothing cached from before the damage
        TALLY["reads"] += 1
        try:
            rows = scan(table, where).to_pylist()
        except CorruptIndexError as err:
            out.append(err)
            continue
        except Exception:
            TALLY["tracebacks"] += 1
            raise
        out.append(sorted(r["id"] for r in rows if pred(r)))
    return out


_BASELINE: dict[str, list[Any]] = {}


def _baseline(table: Table) -> list[Any]:
    if table.name not in _BASELINE:
        got = _answers(table)
        assert not any(isinstance(a, Exception) for a in got)
        assert got[0] == list(range(400, 500))  # load_id = 4: all 100 rows
        _BASELINE[table.name] = got
    return _BASELINE[table.name]


def _judge(table: Table, victim: Path, *, must_fail: bool) -> int:
    """Run the seven reads against the damaged table; returns how many failed (cleanly)."""
    before = _baseline(table)
    after = _answers(table)
    failed = 0
    TALLY["cases"] += 1
    for (where, _), want, got in zip(READS, before, after, strict=True):
        if isinstance(got, CorruptIndexError):
            msg = str(got)
            assert victim.name in msg and "carbonstore index rebuild" in msg, msg
            assert "\n" not in msg
            failed += 1
            continue
        if got != want:
            TALLY["wrong_answers"] += 1
        assert got == want, f"{victim.name}: {where} answered {len(got)} ids instead of {len(want)}"
    TALLY["failed_reads"] += failed
    if must_fail:
        assert failed, f"{victim.name}: damaged, yet every read answered"
    return failed


def _seg_dir(table: Table, sid: str) -> Path:
    return Path(table.paths.segment_dir(sid))


def _merge(table: Table, sid: str = "4") -> Path:
    return _seg_dir(table, sid) / (table.status.read().get(sid).segment_file or "")


def _task(table: Table, sid: str = "4") -> Path:
    return sorted(_seg_dir(table, sid).glob("*.carbonindex"))[0]


def _snapshot(table: Table) -> Path:
    if not list(Path(table.paths.index_snapshot_dir).glob("*.carbonsnap")):
        refresh_index_snapshot(table)
    return sorted(Path(table.paths.index_snapshot_dir).glob("*.carbonsnap"))[-1]


class _Damaged:
    """Put ``data`` (None: delete) at ``path`` for the duration of the block, then restore."""

    def __init__(self, path: Path, data: bytes | None) -> None:
        self.path, self.data = path, data
        self.original = path.read_bytes()

    def __enter__(self) -> None:
        if self.data is None:
            self.path.unlink()
        else:
            self.path.write_bytes(self.data)

    def __exit__(self, *exc: object) -> None:
        self.path.write_bytes(self.original)
        clear_cache()


def _fully_refused(path: Path) -> None:
    """A full read (header and bloom region) of a damaged task/merge index refuses it."""
    with pytest.raises(CorruptIndexError, match=path.name.replace(".", r"\.")):
        read_index(LOCAL, str(path), with_blooms=True)


def _no_snapshot(table: Table) -> None:
    """Index cases plan from the merge indexes: no snapshot may stand in for them."""
    for p in Path(table.paths.index_snapshot_dir).glob("*.carbonsnap"):
        p.unlink()


def _flip(data: bytes, pos: int, bit: int) -> bytes:
    b = bytearray(data)
    b[pos] ^= bit
    return bytes(b)


def _damage_index(table: Table, path: Path, data: bytes | None, *, planned: bool) -> None:
    """One case on a task or merge index: reads judged, then a full read must refuse it."""
    _no_snapshot(table)
    with _Damaged(path, data):
        _judge(table, path, must_fail=planned)
        if data is not None:
            _fully_refused(path)


def _full_read_refuses_snapshot(path: Path) -> None:
    """Every section of the (damaged) snapshot read and checked, as a writer copying its
    chunks does: refused."""
    data = path.read_bytes()
    with pytest.raises((CorruptIndexError, ValueError, KeyError, TypeError, pa.ArrowException)):
        decode_snapshot(path.name, data, bloom_source=lambda *_: None, counters=Counter()).load_all()  # type: ignore[arg-type,return-value]


def _damage_snapshot(table: Table, data_of: Callable[[bytes], bytes | None]) -> None:
    """One case on the index snapshot: refused, planning falls back, answers unchanged."""
    path = _snapshot(table)
    data = data_of(path.read_bytes())
    with _Damaged(path, data):
        COUNTERS.clear()
        _judge(table, path, must_fail=False)
        if data is not None:
            if not COUNTERS["snapshot_errors"]:  # (format 8: a section no read needs - the
                _full_read_refuses_snapshot(path)  # byte ranges, the rest of each file - is
            TALLY["snapshots_refused"] += 1  # verified where it is read: the writer's copy)
    for extra in Path(table.paths.index_snapshot_dir).glob("*.carbonsnap"):
        if extra != path:  # the rewrite planning made: drop it, the next case damages ``path``
            extra.unlink()
    clear_cache()


# ---- issue 22's experiment ------------------------------------------------------------------
def test_issue_experiment(tables: dict[str, Table]) -> None:
    t = tables["exp"]
    path = _merge(t)
    data = path.read_bytes()
    wrong = TALLY["wrong_answers"]
    for pos in range(0, len(data), 3):
        _damage_index(t, path, _flip(data, pos, 0x04), planned=True)
    assert TALLY["wrong_answers"] == wrong == 0


# ---- task and merge index: truncation, deletion, empty, bit flips ---------------------------
KINDS = {"merge": _merge, "task": _task}


def _cuts(size: int, n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return sorted(rng.sample(range(size), min(n, size)))


def _flips(size: int, n: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randrange(size), 1 << rng.randrange(8)) for _ in range(n)]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", ["exp", "t"])
def test_truncated_deleted_empty(tables: dict[str, Table], name: str, kind: str) -> None:
    t = tables[name]
    path = KINDS[kind](t)
    data = path.read_bytes()
    planned = kind == "merge"  # a task index is only an input of the merge index
    for cut in _cuts(len(data), 15, seed=1):
        _damage_index(t, path, data[:cut], planned=planned)
    _damage_index(t, path, None, planned=planned)
    _damage_index(t, path, b"", planned=planned)
    _damage_index(t, path, data + b"\x00", planned=planned)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", ["exp", "t"])
def test_random_bit_flips(tables: dict[str, Table], name: str, kind: str) -> None:
    t = tables[name]
    path = KINDS[kind](t)
    data = path.read_bytes()
    for pos, bit in _flips(len(data), 25, seed=2):
        _damage_index(t, path, _flip(data, pos, bit), planned=kind == "merge")


@pytest.mark.long
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_truncation_and_many_flips(tables: dict[str, Table], kind: str) -> None:
    t = tables["t"]
    path = KINDS[kind](t)
    data = path.read_bytes()
    for cut in range(len(data)):
        _damage_index(t, path, data[:cut], planned=kind == "merge")
    for pos, bit in _flips(len(data), 1500, seed=3):
        _damage_index(t, path, _flip(data, pos, bit), planned=kind == "merge")


# ---- files of another kind and valid-looking tampering --------------------------------------
def test_a_file_of_another_kind_in_its_place(tables: dict[str, Table]) -> None:
    t = tables["t"]
    merge, task = _merge(t), _task(t)
    other_segment = _merge(t, "2")  # same row count, valid checksums: its segment id differs
    parquet = sorted(_seg_dir(t, "4").glob("*.parquet"))[0]
    snapshot = _snapshot(t).read_bytes()
    _no_snapshot(t)
    cases = [(merge, task.read_bytes(), True), (task, merge.read_bytes(), True),
             (merge, snapshot, True), (merge, parquet.read_bytes(), True),
             (merge, other_segment.read_bytes(), False)]  # a whole file: refused by planning
    for victim, data, whole_read_refuses in cases:
        _no_snapshot(t)
        with _Damaged(victim, data):
            _judge(t, victim, must_fail=victim == merge)
            if whole_read_refuses:
                _fully_refused(victim)
    _damage_snapshot(t, lambda b: merge.read_bytes())


def _tampered(path: Path, *, resign: bool, column: str = "id") -> bytes:
    """The index with column ``column``'s row-group minimums raised above every value."""
    loaded = read_index(LOCAL, str(path), with_blooms=True)
    header: IndexHeader = loaded.header
    names = [c.name for c in header.columns]
    stats = header.column_data[names.index(column)].chunks
    n = len(stats.min.data) // 8
    stats.min.data = (10**9).to_bytes(8, "little", signed=True) * n
    stats.max.data = (10**9 + 1).to_bytes(8, "little", signed=True) * n
    forged = encode_index(header, loaded.bloom_region or b"", loaded.kind)
    if resign:
        return forged
    original = path.read_bytes()
    return forged[:32] + original[32:40] + forged[40:]  # the old header checksum kept


def test_tampered_statistics_under_a_stale_checksum(tables: dict[str, Table]) -> None:
    for name in ("exp", "t"):
        t = tables[name]
        for path in (_merge(t), _task(t)):
            data = _tampered(path, resign=False)
            _damage_index(t, path, data, planned=path.suffix == ".carbonindexmerge")


def test_resigned_index_of_other_data_is_caught_by_its_row_counts(tables: dict[str, Table]) -> None:
    """A re-signed forgery is out of scope, but one that drops a file still fails."""
    t = tables["t"]
    path = _merge(t)
    loaded = read_index(LOCAL, str(path), with_blooms=True)
    header = loaded.header
    header.files[1].num_rows = 0  # one file claims no rows: the counts disagree
    _no_snapshot(t)
    with _Damaged(path, encode_index(header, loaded.bloom_region or b"", "merge")):
        _judge(t, path, must_fail=True)


def test_resigned_index_pointing_outside_its_segment_is_refused(tables: dict[str, Table]) -> None:
    """A data file path that leaves the segment folder is never read, even re-signed: here
    it names segment 3's file, which would read those rows twice."""
    t = tables["t"]
    path = _merge(t)
    loaded = read_index(LOCAL, str(path), with_blooms=True)
    header = loaded.header
    other = sorted(_seg_dir(t, "3").glob("*.parquet"))[0]
    header.files[0].path = f"../{other.parent.name}/{other.name}"
    forged = encode_index(header, loaded.bloom_region or b"", "merge")
    _no_snapshot(t)
    with _Damaged(path, forged):
        with pytest.raises(CorruptIndexError, match="leaves its segment folder"):
            read_index(LOCAL, str(path))
        assert _judge(t, path, must_fail=True) == len(READS)


# ---- the index snapshot ---------------------------------------------------------------------
def test_snapshot_truncated_deleted_empty_flipped(tables: dict[str, Table]) -> None:
    t = tables["t"]
    size = len(_snapshot(t).read_bytes())
    for cut in _cuts(size, 15, seed=4):
        _damage_snapshot(t, lambda b, cut=cut: b[:cut])  # type: ignore[misc]
    _damage_snapshot(t, lambda b: None)
    _damage_snapshot(t, lambda b: b"")
    for pos, bit in _flips(size, 25, seed=5):
        _damage_snapshot(t, lambda b, pos=pos, bit=bit: _flip(b, pos, bit))  # type: ignore[misc]


def _snapshot_tampered(data: bytes, *, resign: bool, column: str) -> bytes:
    name = "x.carbonsnap"
    t = snapshot_table(name, data)
    target = next(n for n in t.column_names if n.startswith("bounds.") and n.endswith(column))
    arr = t.column(target)
    fake = pa.array([10**9] * len(arr), arr.type) if "lo:" in target else pa.array(
        [10**9 + len(arr)] * len(arr), arr.type)
    t = t.set_column(t.schema.get_field_index(target), target, fake)
    framed = frame_snapshot(t)
    return framed if resign else framed[:24] + data[24:32] + framed[32:]


def test_snapshot_tampering(tables: dict[str, Table]) -> None:
    t = tables["t"]
    # bounds changed under the stale checksum: refused
    lo_id = f"lo:{t.schema.column('id').column_id}"  # segment bounds are keyed by column id
    _damage_snapshot(t, lambda b: _snapshot_tampered(b, resign=False, column=lo_id))
    # re-signed, but its row counts disagree with the tablestatus: ignored by planning (which
    # never writes), rewritten by the writers' step
    path = _snapshot(t)
    with _Damaged(path, _snapshot_tampered(path.read_bytes(), resign=True, column="num_rows")):
        COUNTERS.clear()
        _judge(t, path, must_fail=False)
        assert COUNTERS.get("snapshot_writes", 0) == 0
        assert refresh_if_lagging(t) is not None
        assert COUNTERS["snapshot_writes"] == 1
    for extra in Path(t.paths.index_snapshot_dir).glob("*.carbonsnap"):
        if extra != path:
            extra.unlink()


def _sections(data: bytes) -> tuple[int, dict[str, tuple[int, int, int]]]:
    """The section table of snapshot bytes: (base offset, name -> (offset, length, xxh64))."""
    f = SnapshotFile("x.carbonsnap", lambda off, n: data[off:off + n], len(data))
    return f.base, f.sections


def _redirect(data: bytes, entries: dict[str, tuple[int, int, int]], blobs: list[bytes]) -> bytes:
    """Snapshot bytes with directory ``entries`` over sections ``blobs``, the prefix re-signed
    (a valid prefix and directory: only the sections' own checksums can tell)."""
    import struct

    import orjson
    import xxhash

    base, _ = _sections(data)
    d = orjson.loads(data[32:base])
    d["sections"] = {k: list(v) for k, v in entries.items()}
    d["length"] = sum(len(b) for b in blobs)
    directory = orjson.dumps(d)
    first = data[:16] + struct.pack("<Q", len(directory))
    h = xxhash.xxh64(first)
    h.update(directory)
    return b"".join([first, struct.pack("<Q", h.intdigest()), directory, *blobs])


def test_snapshot_every_section_flipped_cut_or_swapped(tables: dict[str, Table]) -> None:
    """Since format 6 each section is checked when a plan first reads it: a flip at the start, middle
    and end of every section, the file cut inside every section, and sections swapped under a
    re-signed directory are each refused, with the answers unchanged."""
    t = tables["t"]
    data = _snapshot(t).read_bytes()
    base, sections = _sections(data)
    # core, one chunk: rows, rgpos, paths, files + 4 per column (statistics, bloom references,
    # pages' statistics, pages' byte ranges)
    assert {"core", "rows#0", "paths#0"} < set(sections) and len(sections) == 5 + 4 * 4, sorted(sections)
    for _name, (off, n, _) in sorted(sections.items()):
        for pos in (base + off, base + off + n // 2, base + off + n - 1):
            _damage_snapshot(t, lambda b, pos=pos: _flip(b, pos, 0x10))  # type: ignore[misc]
        _damage_snapshot(t, lambda b, cut=base + off + n // 2: b[:cut])  # type: ignore[misc]
        TALLY["snapshot_sections_damaged"] += 1
    # every pair of sections exchanged: each name now points at the other's bytes, under its
    # own checksum
    names = sorted(sections)
    blobs = {k: data[base + o:base + o + n] for k, (o, n, _) in sections.items()}
    for a, b in zip(names, names[1:] + names[:1], strict=True):
        order = [b if k == a else a if k == b else k for k in names]
        pos, entries, parts = 0, {}, []
        for k, src in zip(names, order, strict=True):
            entries[k] = (pos, len(blobs[src]), sections[k][2])
            parts.append(blobs[src])
            pos += len(blobs[src])
        _damage_snapshot(t, lambda _b, e=entries, p=parts: _redirect(data, e, p))  # type: ignore[misc]
        # ... and the same swap with the checksums following the bytes (a consistent
        # directory over misplaced sections): the structure checks refuse it
        entries = {k: (o, n, sections[src][2]) for (k, (o, n, _)), src in zip(entries.items(), order, strict=True)}
        _damage_snapshot(t, lambda _b, e=entries, p=parts: _redirect(data, e, p))  # type: ignore[misc]


@pytest.mark.long
def test_snapshot_many_flips_and_cuts(tables: dict[str, Table]) -> None:
    t = tables["t"]
    size = len(_snapshot(t).read_bytes())
    for cut in _cuts(size, 300, seed=6):
        _damage_snapshot(t, lambda b, cut=cut: b[:cut])  # type: ignore[misc]
    for pos, bit in _flips(size, 600, seed=7):
        _damage_snapshot(t, lambda b, pos=pos, bit=bit: _flip(b, pos, bit))  # type: ignore[misc]


# ---- format 1 files, recovery, the CLI ------------------------------------------------------
def test_format_1_index_needs_a_rebuild(tables: dict[str, Table]) -> None:
    """Files written before checksums (format 1) are refused until rebuilt, never trusted."""
    t = tables["exp"]
    _no_snapshot(t)
    path = _merge(t)
    data = path.read_bytes()
    hlen = int.from_bytes(data[16:24], "little")
    header = tio.decode(IndexHeader(), data[40 : 40 + hlen])
    header.format_version = 1
    hb = tio.encode(header)
    v1 = (data[:8] + (1).to_bytes(4, "little") + bytes(4) + len(hb).to_bytes(8, "little") + hb
          + len(hb).to_bytes(8, "little") + b"CIDX")
    with _Damaged(path, v1):
        with pytest.raises(CorruptIndexError, match=r"format 1 has no checksums.*index rebuild"):
            read_index(LOCAL, str(path))
        _judge(t, path, must_fail=True)


def test_rebuild_after_a_bit_flip_restores_the_answers(tmp_path: Path) -> None:
    t = _make(tmp_path / "store", "db.r", {"bloom_columns": "city"})
    before = _answers(t)
    path = _merge(t)
    path.write_bytes(_flip(path.read_bytes(), 50, 0x04))  # in the header
    clear_cache()
    with pytest.raises(CorruptIndexError, match=rf"{path.name}.*index rebuild db\.r --segments 4"):
        prune(t, "load_id = 4")
    rebuild_indexes(t, ["4"])
    assert _answers(t) == before


def _cli(store: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "carbonstore.cli", "--store", store, *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_cli_prune_on_damaged_indexes(tables: dict[str, Table]) -> None:
    t = tables["exp"]
    _no_snapshot(t)
    store = t.store.location
    args = ("prune", "db.exp", "--where", "load_id = 4", "--json")
    good = _cli(store, *args)
    assert good.returncode == 0, good.stderr
    path = _merge(t)
    data = path.read_bytes()
    for damaged in (_flip(data, 100, 0x04), data[: len(data) // 2], None, _task(t).read_bytes()):
        with _Damaged(path, damaged):
            got = _cli(store, *args)
        TALLY["cli_cases"] += 1
        assert got.returncode != 0 and not got.stdout
        lines = got.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in got.stderr, got.stderr
        assert path.name in lines[0] and "carbonstore index rebuild db.exp --segments 4" in lines[0]
    after = json.loads(_cli(store, *args).stdout)
    want = json.loads(good.stdout)
    for plan in (after, want):
        del plan["planning_ms"]
    assert after == want
