"""Damaged files: every read either answers exactly as before or fails naming the file and the fix.

Each case damages one file of a loaded table (truncates it, overwrites it with garbage or
deletes it), then plans and reads the whole table and a filtered part of it the way a query
does. Allowed outcomes: the same rows as before the damage (a documented fallback), or a
CarbonStoreError whose message names the damaged file and says how to recover. A different
answer fails the test.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import pytest

from carbonstore import Store
from carbonstore.dictionary import clear_cache as clear_dictionary_cache
from carbonstore.errors import CarbonStoreError, CorruptMetadataError
from carbonstore.pruning.cache import clear_cache
from carbonstore.store.table import Table
from carbonstore.store.tablestatus import forget_decoded
from tests.reliability.workload import SCHEMA, load, rows, scan

Damage = Callable[[bytes], bytes | None]

DAMAGES: dict[str, Damage] = {
    "truncated": lambda b: b[: len(b) // 2],
    "garbage": lambda b: bytes((i * 131 + 7) % 256 for i in range(len(b))),
    "empty": lambda b: b"",
    "deleted": lambda b: None,
}

# file kind -> (how to find it, words the error must contain besides the file name)
RECOVERY = {
    "tablestatus": r"restore it from a backup",
    "carbonindexmerge": r"carbonstore index rebuild",
    "carbonindex": r"carbonstore index rebuild",
    "dict": r"restore",
    "dictmeta": r"restore",
    "parquet": r"restore|delete-segments",
}


@pytest.fixture
def table(store: Store) -> Table:
    t = store.create_table("db.t", SCHEMA, properties={"dictionary_include": "city"})
    load(t, rows(0, 200), tasks=2)
    load(t, rows(500, 100), tasks=1)
    return t


def _answer(table: Table) -> tuple[list[int], list[tuple[int, str]]]:
    clear_cache()
    clear_dictionary_cache()
    forget_decoded()
    full = scan(table)
    part = scan(table, "id >= 500")
    pairs = sorted(zip(full.column("id").to_pylist(), full.column("city").to_pylist(), strict=True))
    return sorted(i for i in part.column("id").to_pylist() if i >= 500), pairs


def _victim(table: Table, kind: str) -> str:
    sfs = table.store.sfs
    if kind == "tablestatus":  # the latest version (the one that committed the last load)
        log = table.status.log_dir
        return f"{log}/{max(n for n in os.listdir(log) if n[0].isdigit())}"
    if kind in ("dict", "dictmeta"):
        folder = table.paths.dictionary_dir
    else:
        folder = table.paths.segment_dir("0")
    names = sorted(i.base_name for i in sfs.list_dir(folder) if i.is_file)
    return f"{folder}/{next(n for n in names if n.endswith('.' + kind))}"


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("kind", sorted(RECOVERY))
def test_damaged_file_fails_clearly_or_answers_the_same(table: Table, kind: str, damage: str) -> None:
    before = _answer(table)
    path = _victim(table, kind)
    sfs = table.store.sfs
    damaged = DAMAGES[damage](sfs.read_bytes(path))
    if damaged is None:
        sfs.delete_file(path)
    else:
        sfs.write_bytes(path, damaged)
    try:
        after = _answer(table)
    except CarbonStoreError as err:
        msg = str(err)
        name = path.rsplit("/", 1)[1]
        assert name in msg, f"the error does not name {name}: {msg}"
        assert re.search(RECOVERY[kind], msg), f"the error does not say how to recover: {msg}"
        return
    # No error: only a documented fallback may answer, and it must answer the same.
    assert after == before
    assert (kind, damage) in FALLBACKS, f"{kind} {damage}: answered without error"


# Documented fallbacks (docs/reliability.md): a task .carbonindex is only an input of the
# segment's merge index, which is what planning reads; an empty tablestatus... is not one.
# The same for a dictionary's .dict and .dictmeta: each version's commit record keeps its
# chunks and the entry's checksum, so damaged ones are read from the records
# (tests/reliability/test_dictionary_damage.py damages the records too).
FALLBACKS = {(kind, d) for kind in ("carbonindex", "dict", "dictmeta") for d in DAMAGES}


def test_corrupt_tablestatus_version_is_named(table: Table) -> None:
    # Changed behaviour: the tablestatus is a chain of version files, no single file + backup.
    path = _victim(table, "tablestatus")
    table.store.sfs.write_bytes(path, b'{"formatVersion": 1, "version": 4, "upse')
    forget_decoded()
    with pytest.raises(CorruptMetadataError, match=re.escape(path.rsplit("/", 1)[1])):
        Store(table.store.location).table("db.t").status.read()
