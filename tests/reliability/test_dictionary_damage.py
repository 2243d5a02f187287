"""Adversarial suite for a global dictionary's files: .dict, .dictmeta, .sortindex, records.

A pristine table (two dictionary columns, three loads, chunks of three values) is copied
for each case; one damage is applied: truncation, deletion, random bit flips, or
valid-looking tampering (checkpoint edits with a recomputed checksum, swapped or duplicated
commit records, values swapped inside a chunk, a consistent but wrong sort index, a schema
whose column id changed). Then the filtered reads and the ``dictionary`` command run.

Oracle: each answer equals the pristine table's, or the operation fails with a
``CarbonStoreError`` whose one-line message names the damaged column's dictionary files.
Anything else is a wrong answer (a different result, exit 0) or a traceback (an exception
that is not ours, or a multi-line error). The short run is in CI; ``-m slow`` runs more.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.cli import main
from carbonstore.dictionary import clear_cache, prepare_dictionaries
from carbonstore.dictionary.codec import encode_chunk
from carbonstore.errors import CarbonStoreError
from carbonstore.pruning.cache import clear_cache as clear_index_cache
from carbonstore.segments.commit import begin_segment, commit_segment
from carbonstore.segments.load import parse_load_options, write_settings
from carbonstore.segments.writer import write_task
from carbonstore.store import load_conf
from carbonstore.store.checksums import with_checksum
from tests.reliability.workload import scan

SCHEMA = "id long not null, city string, code int"
OVERRIDES = {"carbon.dictionary.chunk.size": "3", "carbon.lock.retry.timeout.sec": "5"}
QUERIES: dict[str, Callable[[dict], bool]] = {
    "city = 'c3'": lambda r: r["city"] == "c3",
    "city IN ('c1', 'c7', 'zz')": lambda r: r["city"] in ("c1", "c7"),
    "code = 105": lambda r: r["code"] == 105,
    "city = 'c11' OR code = 101": lambda r: r["city"] == "c11" or r["code"] == 101,
}


def _conf() -> object:
    return load_conf(None).with_overrides(OVERRIDES)


def _rows(first: int, count: int, cities: int) -> pa.Table:
    ids = list(range(first, first + count))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "city": pa.array([None if i % 13 == 0 else f"c{i % cities}" for i in ids]),
        "code": pa.array([100 + i % (cities // 2 + 1) for i in ids], pa.int32()),
    })


def _load(table: object, data: pa.Table) -> None:
    entry, lock = begin_segment(table)
    try:
        seg = entry.load_name
        prepare_dictionaries(table, {c: data.column(c) for c in ("city", "code")}, seg)
        settings = write_settings(table, seg, parse_load_options(table, None))
        commit_segment(table, seg, [write_task(data.to_batches(), settings, task_id="00000")])
    finally:
        if lock is not None:
            lock.release()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, object]:
    location = str(tmp_path_factory.mktemp("dictdamage") / "store")
    table = Store(location, conf=_conf()).create_table(
        "t", SCHEMA, properties={"dictionary_include": "city,code"}
    )
    _load(table, _rows(0, 60, 6))
    _load(table, _rows(60, 60, 12))
    _load(table, _rows(120, 40, 16))
    return location, _answers(location)


# ---- answers --------------------------------------------------------------------------------


def _answers(location: str) -> dict[str, object]:
    """Each read's answer, or the error it raised (each read judged on its own)."""
    clear_cache()
    clear_index_cache()
    table = Store(location, conf=_conf()).table("t")
    out: dict[str, object] = {}
    for where, keep in QUERIES.items():
        try:
            rows = scan(table, where).to_pylist()
            out[where] = sorted(r["id"] for r in rows if keep(r))
        except Exception as err:  # noqa: BLE001 - judged by the caller
            out[where] = err
    try:
        out["all"] = sorted((r["id"], r["city"], r["code"]) for r in scan(table).to_pylist())
    except Exception as err:  # noqa: BLE001
        out["all"] = err
    return out


def _command(location: str) -> tuple[int, str, str]:
    clear_cache()
    clear_index_cache()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["--store", location, "dictionary", "t", "city", "--lookup", "c3",
                   "--lookup", "zz", "--key", "5", "--json"])
    return rc, out.getvalue(), err.getvalue()


def _command_answer(stdout: str) -> object:
    doc = json.loads(stdout)
    return doc["size"], doc["lookups"], doc["keys"]


# ---- damages ------------------------------------------------------------------------------


def _dictionary_files(location: str) -> dict[str, list[Path]]:
    """kind -> files of the city column (dict, dictmeta, sortindex, record, log)."""
    table = Store(location, conf=_conf()).table("t")
    cid = table.schema.column("city").column_id
    folder = Path(table.paths.dictionary_dir)
    log = folder / f"{cid}.dictlog"
    return {
        "dict": [folder / f"{cid}.dict"],
        "dictmeta": [folder / f"{cid}.dictmeta"],
        "sortindex": sorted(folder.glob(f"{cid}_*.sortindex"),
                            key=lambda p: int(p.stem.rsplit("_", 1)[1])),
        "record": sorted(log.glob("*.commit")),
        "log": [log],
    }


def _truncate(rng: random.Random, path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: rng.randrange(len(data))])


def _delete(rng: random.Random, path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() else path.unlink()


def _flip(rng: random.Random, path: Path) -> None:
    data = bytearray(path.read_bytes())
    for _ in range(rng.randint(1, 3)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


def _checkpoint_forged(rng: random.Random, path: Path) -> None:
    """Edit an entry of the checkpoint and recompute its checksum: valid-looking."""
    doc = orjson.loads(path.read_bytes())
    doc.pop("crc32", None)
    entries = doc["entries"]
    e = entries[rng.randrange(len(entries))]
    choice = rng.randrange(4)
    if choice == 0:
        entries.pop()  # a stale checkpoint
    elif choice == 1:
        e["crc32"] = (e["crc32"] + 1) & 0xFFFFFFFF
    elif choice == 2:
        e["startOffset"] += 1
        e["endOffset"] += 1
    else:
        e["maxSurrogate"] -= 1
        for later in entries[entries.index(e) + 1:]:
            later["minSurrogate"] -= 1
            later["maxSurrogate"] -= 1
    doc["crc32"] = zlib.crc32(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)) & 0xFFFFFFFF
    path.write_bytes(orjson.dumps(doc))


def _records_swapped(rng: random.Random, paths: list[Path]) -> None:
    a, b = rng.sample(paths, 2)
    da, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da)


def _record_duplicated(rng: random.Random, paths: list[Path]) -> None:
    src = rng.choice(paths)
    n = len(paths) + 1
    (src.parent / f"{n:010d}.commit").write_bytes(src.read_bytes())


def _chunk_values_swapped(rng: random.Random, path: Path) -> None:
    """Re-encode the first chunk with two values swapped: same length, valid Thrift."""
    data = path.read_bytes()
    (n,) = struct.unpack_from("<I", data, 0)
    from carbonstore.dictionary._gen.carbonstore_dictionary.ttypes import DictionaryChunk
    from carbonstore.dictionary.codec import decode_struct

    chunk = decode_struct(DictionaryChunk(), data[4 : 4 + n])
    values = [v.decode() for v in chunk.byte_arrays]
    if len(values) < 2:
        return
    values[0], values[1] = values[1], values[0]
    frame = encode_chunk(pa.array(values), 1)
    path.write_bytes(frame + data[4 + n:])


def _sortindex_permuted(rng: random.Random, path: Path) -> None:
    """Swap two ranks consistently: still a permutation with its inverse, wrong order."""
    from carbonstore.dictionary._gen.carbonstore_dictionary.ttypes import SortIndex
    from carbonstore.dictionary.codec import decode_struct, encode_struct

    si = decode_struct(SortIndex(), path.read_bytes())
    order = list(struct.unpack(f"<{si.dict_size}i", si.sorted_surrogates))
    ranks = list(struct.unpack(f"<{si.dict_size}i", si.ranks))
    i, j = rng.sample(range(si.dict_size), 2)
    order[i], order[j] = order[j], order[i]
    ranks[order[i] - 2], ranks[order[j] - 2] = i, j
    si.sorted_surrogates = struct.pack(f"<{si.dict_size}i", *order)
    si.ranks = struct.pack(f"<{si.dict_size}i", *ranks)
    path.write_bytes(encode_struct(si))


def _schema_id_changed(location: str) -> None:
    table = Store(location, conf=_conf()).table("t")
    doc = json.loads(Path(table.paths.schema).read_text())
    for col in doc["columns"]:
        if col["name"] == "city":
            col["columnId"] = "0000dead-0000-0000-0000-000000000000"
    del doc["checksum"]  # re-signed: an edit the checksum cannot see (damage fails it)
    Path(table.paths.schema).write_bytes(with_checksum(json.dumps(doc).encode()))


def _damage(rng: random.Random, location: str) -> str:
    """Apply one random damage; return its description."""
    files = _dictionary_files(location)
    kind = rng.choice(["dict", "dictmeta", "sortindex", "record", "record", "tamper", "log"])
    if kind == "log":
        _delete(rng, files["log"][0])
        return "log deleted"
    if kind == "tamper":
        how = rng.choice(["checkpoint", "swap", "dup", "chunk", "sortindex", "schema", "all"])
        if how == "checkpoint":
            _checkpoint_forged(rng, files["dictmeta"][0])
        elif how == "swap":
            _records_swapped(rng, files["record"])
        elif how == "dup":
            _record_duplicated(rng, files["record"])
        elif how == "chunk":
            _chunk_values_swapped(rng, files["dict"][0])
        elif how == "sortindex":
            _sortindex_permuted(rng, files["sortindex"][-1])
        elif how == "schema":
            _schema_id_changed(location)
        else:
            for kind_files in files.values():
                for p in kind_files:
                    if p.exists():
                        _delete(rng, p)
        return f"tamper {how}"
    path = rng.choice(files[kind])
    how = rng.choice(["truncate", "delete", "flip", "flip"])
    {"truncate": _truncate, "delete": _delete, "flip": _flip}[how](rng, path)
    return f"{kind} {path.name} {how}"


# ---- the suite ----------------------------------------------------------------------------


def _names_dictionary(msg: str, what: str) -> bool:
    """The message names a dictionary file (or the column's files by their folder); a
    schema naming another column id is refused by the indexes, which name the old one."""
    return "Metadata/dictionary" in msg or (what == "tamper schema" and ".carbonindex" in msg)


def run_cases(pristine: tuple[str, object], base: Path, seeds: range) -> dict[str, int]:
    location, expected = pristine
    _, expected_out, _ = _command(location)
    expected_cmd = _command_answer(expected_out)
    counts = {"cases": 0, "reads": 0, "same": 0, "errors": 0, "wrong": 0, "tracebacks": 0}
    failures: list[str] = []
    for seed in seeds:
        rng = random.Random(seed)
        case = str(base / f"case{seed}")
        shutil.copytree(location, case)
        what = _damage(rng, case)
        counts["cases"] += 1
        for read, got in _answers(case).items():
            counts["reads"] += 1
            if isinstance(got, CarbonStoreError):
                msg = str(got)
                if "\n" in msg or not _names_dictionary(msg, what):
                    counts["tracebacks"] += 1
                    failures.append(f"seed {seed} ({what}) {read}: unclear error {msg!r}")
                else:
                    counts["errors"] += 1
            elif isinstance(got, Exception):
                counts["tracebacks"] += 1
                failures.append(f"seed {seed} ({what}) {read}: {type(got).__name__}: {got}")
            elif got == expected[read]:
                counts["same"] += 1
            else:
                counts["wrong"] += 1
                failures.append(f"seed {seed} ({what}) {read}: different answer")
        counts["reads"] += 1
        try:
            rc, out, err = _command(case)
        except Exception as exc:  # noqa: BLE001
            counts["tracebacks"] += 1
            failures.append(f"seed {seed} ({what}) command: {type(exc).__name__}: {exc}")
        else:
            if rc == 0 and _command_answer(out) == expected_cmd:
                counts["same"] += 1
            elif rc == 0:
                counts["wrong"] += 1
                failures.append(f"seed {seed} ({what}) command: different answer")
            elif rc != 0 and (len(err.strip().splitlines()) != 1 or "Traceback" in err
                              or "dictionary" not in err):
                counts["tracebacks"] += 1
                failures.append(f"seed {seed} ({what}) command: {err!r}")
            else:
                counts["errors"] += 1
        shutil.rmtree(case)
    print(f"\ndictionary damage: {counts}")
    assert not failures, "\n".join(failures[:20])
    return counts


def test_dictionary_damage_short(pristine: tuple[str, object], tmp_path: Path) -> None:
    counts = run_cases(pristine, tmp_path, range(200))
    assert counts["wrong"] == 0 and counts["tracebacks"] == 0
    assert counts["errors"] and counts["same"]  # both outcomes occur: the suite can fail


@pytest.mark.long
def test_dictionary_damage_long(pristine: tuple[str, object], tmp_path: Path) -> None:
    counts = run_cases(pristine, tmp_path, range(1000, 3000))
    assert counts["wrong"] == 0 and counts["tracebacks"] == 0


@pytest.mark.parametrize("seed", range(8))
def test_every_bit_of_the_sortindex(pristine: tuple[str, object], tmp_path: Path, seed: int) -> None:
    """One flipped bit per case over a slice of the sort index: never ArrowIndexError."""
    location, expected = pristine
    case = str(tmp_path / "case")
    shutil.copytree(location, case)
    path = _dictionary_files(case)["sortindex"][-1]
    original = path.read_bytes()
    for pos in range(seed, len(original), 8):
        damaged = bytearray(original)
        damaged[pos] ^= 1 << (pos % 8)
        path.write_bytes(bytes(damaged))
        for read, got in _answers(case).items():
            if isinstance(got, Exception):
                assert isinstance(got, CarbonStoreError) and _names_dictionary(str(got), "sortindex flip"), got
            else:
                assert got == expected[read], read
    os.remove(path)
