"""Random damage over EVERY metadata kind of a table, and swapped files, read for real.

Kinds: the schema, schema log versions, tablestatus versions, tablestatus checkpoints, the
latest-version hint, task and merge index files, dictionary files, delete deltas,
statistics files (and their table cache), the index snapshot and bloom pack. Damages: one
bit flipped (the common case), a few bits flipped, a cut, an empty file, the file deleted,
the file swapped with another file of the same kind (or the nearest kind) of the same table,
and the file replaced by its counterpart of another table of the same columns and shape but
other rows.

Oracle, for every case: each read - the rows the data source reads (Python API, the read
path without a JVM) and six CLI reads - answers exactly what the undamaged table answers,
or fails in one line (the API: a ``CarbonStoreError`` of one line; the CLI: exit status 2,
one line on stderr, no traceback). The one documented exception: a deleted statistics file
is a segment without statistics, and ``stats`` says so.

CI: ``CASES`` seeded cases per kind (``CARBONSTORE_RANDOM_DAMAGE_CASES`` sets it); the long run (``long``) ``LONG_CASES``
per kind. The tally of each run is printed at the end of the module (``-s``) and recorded in
docs/reliability.md.
"""

from __future__ import annotations

import os
import random
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.errors import CarbonStoreError
from carbonstore.pruning.plan import prune
from carbonstore.segments.compaction import compact
from carbonstore.segments.dml import delete_rows
from carbonstore.store import load_conf
from carbonstore.store.alter import add_columns, alter_table, set_properties
from carbonstore.store.schema import Column, parse_type
from tests.reliability.test_metadata_damage import _normal
from tests.reliability.test_schema_damage import _forget, _rows, cli
from tests.reliability.workload import SCHEMA, load, rows

CASES = int(os.environ.get("CARBONSTORE_RANDOM_DAMAGE_CASES", "16"))  # a hunt: more
LONG_CASES = 300
#: What every run of this module tried and saw (printed at the end, see the docstring).
TALLY: Counter[str] = Counter()

CLI_READS = (
    ("show-segments", "db.t", "--json"),
    ("prune", "db.t", "--where", "city = 'lima' or id >= 3000", "--json"),
    ("stats", "db.t", "--json"),
    ("dictionary", "db.t", "city", "--json"),
    ("describe", "db.t"),
    ("history", "db.t", "--json"),
)


def _build(root: Path, first: int) -> None:
    """A table with every metadata kind: 26 loads (the first of two data files), two
    ALTERs (a schema log of two versions, one a default), a compaction, deletes in two
    files of one segment (two deltas of one position each) and in a later segment, a
    tablestatus past its first checkpoint (version 50), an index snapshot and a bloom pack."""
    conf = load_conf(None).with_overrides({"carbon.index.snapshot.max.lag": "0"})
    store = Store(str(root), conf=conf)
    t = store.create_table("db.t", SCHEMA, properties={"dictionary_include": "city",
                                                       "bloom_columns": "id"})
    load(t, rows(first, 40), tasks=2)
    for k in range(1, 4):
        load(t, rows(first + k * 1000, 20), tasks=1)
    alter_table(t, add_columns([Column(name="z", type=parse_type("int"), default="7")]),
                operation="ALTER ADD COLUMNS")
    alter_table(store.table("db.t"), set_properties({"page_rows": "5000"}),
                operation="ALTER SET TBLPROPERTIES")
    t = store.table("db.t")
    for k in range(4, 26):
        data = rows(first + k * 1000, 10)
        load(t, data.append_column("z", pa.array([k] * 10, pa.int32())), tasks=1)
    compact(t, "custom", segment_ids=["1", "2"])
    delete_rows(t, f"id = {first + 3}")
    delete_rows(t, f"id = {first + 25}")
    delete_rows(t, f"id = {first + 3005}")
    prune(t, "id >= 0")  # writes the index snapshot and the bloom pack
    assert t.status.read().version > 50, t.status.read().version


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two stores of one table each, ``db.t``: the one damaged and the other table."""
    roots = {}
    for name, first in (("t", 0), ("u", 500_000)):
        roots[name] = tmp_path_factory.mktemp(f"pristine_{name}") / "store"
        _build(roots[name], first)
    return roots


def _table_dir(root: Path) -> Path:
    return root / "db" / "t"


def _is_checkpoint(p: Path) -> bool:
    """A checkpoint's Arrow file (the version at its number is a delta, damaged as one)."""
    return p.parent.parent.name == "tablestatus_log" and p.name.endswith(".checkpoint.arrow")


#: kind -> which files of a table folder (relative paths) are of that kind
KINDS: dict[str, Callable[[Path], bool]] = {
    "schema": lambda p: p.as_posix() == "Metadata/schema",
    "schema_log": lambda p: p.parts[:2] == ("Metadata", "schema_log"),
    "tablestatus": lambda p: p.parts[:2] == ("Metadata", "tablestatus_log") and
    p.stem.isdigit() and not _is_checkpoint(p),
    "checkpoint": _is_checkpoint,
    "hint": lambda p: p.name == "_latest.json",
    "carbonindex": lambda p: p.suffix == ".carbonindex",
    "carbonindexmerge": lambda p: p.suffix == ".carbonindexmerge",
    "dictionary": lambda p: p.parts[:2] == ("Metadata", "dictionary"),
    "delta": lambda p: p.suffix == ".deletedelta",
    "stats": lambda p: p.parts[:2] == ("Metadata", "stats"),
    "snapshot": lambda p: p.parts[:2] == ("Metadata", "index"),
}
#: a kind with one file is swapped with a file of its nearest kind
NEAREST = {"schema": "schema_log", "hint": "tablestatus", "checkpoint": "tablestatus"}
DAMAGES = ("flip", "flip", "flip", "flip", "flips", "cut", "empty", "delete", "swap", "swap",
           "other table", "other table")


def _files(table_dir: Path, kind: str) -> list[Path]:
    match = KINDS[kind]
    return sorted(p.relative_to(table_dir) for p in table_dir.rglob("*")
                  if p.is_file() and ".tmp" not in p.name and "leases" not in p.parts
                  and match(p.relative_to(table_dir)))


def _damage(rng: random.Random, work: Path, other: Path, kind: str) -> str:
    """Damage one file of ``kind`` in table folder ``work``; returns what was done."""
    files = _files(work, kind)
    rel = rng.choice(files)
    path = work / rel
    how = rng.choice(DAMAGES)
    data = bytearray(path.read_bytes())
    if how in ("flip", "flips") and data:
        for _ in range(1 if how == "flip" else rng.randint(2, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
    elif how == "cut" and data:
        path.write_bytes(bytes(data[:rng.randrange(len(data))]))
    elif how == "empty" or not data:
        how = "empty"
        path.write_bytes(b"")
    elif how == "delete":
        path.unlink()
    elif how == "swap":
        peers = [f for f in files if f != rel] or _files(work, NEAREST.get(kind, kind))
        peers = [f for f in peers if f != rel]
        if not peers:
            return _damage(rng, work, other, kind)
        peer = work / rng.choice(peers)
        path.write_bytes(peer.read_bytes())
        peer.write_bytes(bytes(data))
        how = f"swap with {peer.relative_to(work)}"
    else:  # the other table's counterpart: same kind, same place in the sorted listing
        theirs = _files(other, kind)
        source = other / theirs[min(files.index(rel), len(theirs) - 1)]
        shutil.copyfile(source, path)
        how = f"other table's {source.relative_to(other)}"
    return f"{how} {rel}"


def _answers(root: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[int, str, str]]:
    """The answers of every read of ``db.t`` in the store at ``root``."""
    _forget()
    try:
        api: list[str] | str = _rows(Store(str(root)).table("db.t"))
    except CarbonStoreError as err:  # the schema deleted: no such table
        api = str(err)
    out = [(0, repr(api), "") if isinstance(api, list) else (2, "", api)]
    where = SimpleNamespace(store=SimpleNamespace(location=str(root)))
    for argv in CLI_READS:
        code, text, err = cli(capsys, where, *argv)  # type: ignore[arg-type]
        out.append((code, _normal(text).replace(str(root), "<store>"), err))
    return out


#: The documented limit (docs/reliability.md, "Limits"): the newest schema log version
#: deleted reads as the ALTER never made - here the newest one only set a table property,
#: which ``describe`` shows; every other read must still answer as before.
NEWEST_LOG = "delete Metadata/schema_log/00000000000000000003.json"


def _judge(want: list[tuple[int, str, str]], got: list[tuple[int, str, str]], what: str) -> str:
    """'same', 'refused' or 'limit'; fails the test on a changed answer or a traceback."""
    refused = False
    for argv, (code, out, err), (_, want_out, _) in zip(("api", *CLI_READS), got, want,
                                                        strict=True):
        if code == 0:
            if argv[0] == "stats" and what.startswith("delete Metadata/stats/segment_"):
                assert '"missingSegments": []' not in out, what  # says it has none
                continue
            if argv[0] == "describe" and what == NEWEST_LOG and out != want_out:
                assert "page_rows" not in out, out
                return "limit"
            assert out == want_out, f"{what}: {argv} answered differently with exit 0"
        else:
            assert code == 2, (what, argv, code, err)
            assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (what, argv, err)
            refused = True
    return "refused" if refused else "same"


_BASELINE: list[list[tuple[int, str, str]]] = []


def _run(kind: str, cases: int, pristine: dict[str, Path], tmp: Path,
         capsys: pytest.CaptureFixture[str]) -> None:
    if not _BASELINE:
        work = tmp / "baseline" / "store"
        shutil.copytree(pristine["t"], work)
        _BASELINE.append(_answers(work, capsys))
        assert all(code == 0 for code, _, _ in _BASELINE[0]), _BASELINE[0]
    other = _table_dir(pristine["u"])
    for i in range(cases):
        rng = random.Random(f"{kind}:{i}")
        work = tmp / f"{i}" / "store"
        shutil.copytree(pristine["t"], work)
        if kind.startswith("carbonindex") and i % 2:  # planned from the merge indexes
            shutil.rmtree(_table_dir(work) / "Metadata" / "index")
        what = _damage(rng, _table_dir(work), other, kind)
        TALLY[f"{kind} {_judge(_BASELINE[0], _answers(work, capsys), what)}"] += 1
        shutil.rmtree(work.parent)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_random_damage(kind: str, pristine: dict[str, Path], tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    _run(kind, CASES, pristine, tmp_path, capsys)


@pytest.mark.long
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_random_damage_long(kind: str, pristine: dict[str, Path], tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    _run(kind, LONG_CASES, pristine, tmp_path, capsys)


def test_zz_print_tally() -> None:
    """The counts of this run (``-s`` shows them)."""
    print("\nrandom damage:", dict(sorted(TALLY.items())))

