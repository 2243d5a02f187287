"""Finding and opening a table's index snapshot files (``Metadata/index/*.carbonsnap``).

The newest file of the current format is opened with ranged reads (its directory and core
section now, other sections when a plan first needs them) and kept in the driver cache; a
damaged or older one is refused here and planning falls back to the merge indexes
(table_index.py, which also writes snapshots).
"""

from __future__ import annotations

import functools
from typing import Any

import pyarrow as pa

from carbonstore.errors import CorruptIndexError
from carbonstore.indexfiles.arrays import BloomSource
from carbonstore.indexfiles.snapshot import SNAPSHOT_VERSION, Snapshot, SnapshotFile
from carbonstore.indexfiles.snapshot_file import READ_VERSIONS
from carbonstore.pruning.cache import COUNTERS, bloom_source, driver_cache
from carbonstore.pruning.segment_index import merge_index_names
from carbonstore.store.table import Table

__all__ = ["DAMAGED_SNAPSHOTS", "SNAPSHOT_LOCK", "SNAPSHOT_PREFIX", "SNAPSHOT_SUFFIX", "all_snapshot_files", "read_snapshot",
           "snapshot_names"]

SNAPSHOT_SUFFIX = ".carbonsnap"
SNAPSHOT_LOCK = "index_snapshot.lock"
#: File names of the current format start so; those of the formats still read
#: (READ_VERSIONS: format 7) are read until a write replaces them, older formats' snapshots
#: (``snapshot_*``) are not read (a process of an older release still finds its own) and are
#: deleted when a new snapshot is written.
SNAPSHOT_PREFIX = f"snapshot{SNAPSHOT_VERSION}_"
_READ_PREFIXES = tuple(f"snapshot{v}_" for v in READ_VERSIONS)
# (table folder, snapshot name) of snapshots found damaged after they were opened: not
# taken again (planning falls back to the merge indexes and writes a new one)
DAMAGED_SNAPSHOTS: set[tuple[str, str]] = set()


def all_snapshot_files(table: Table) -> list[str]:
    infos = table.store.sfs.list_dir(table.paths.index_snapshot_dir)
    return sorted(i.base_name for i in infos if i.is_file and i.base_name.endswith(SNAPSHOT_SUFFIX))


def snapshot_names(table: Table) -> list[str]:
    """The table's snapshot files of the formats read, oldest first (by the time in their
    names: a newer format's first snapshot follows the older one it replaces)."""
    names = [n for n in all_snapshot_files(table) if n.startswith(_READ_PREFIXES)]
    return sorted(names, key=lambda n: (n.partition("_")[2], n))


def _snapshot_blooms(table: Table) -> Any:
    fs = table.store.sfs

    def source(segment_id: str, merge: str, base: int) -> BloomSource:
        return bloom_source(fs, merge_index_names(table, segment_id, merge)[0], base)

    return source


def read_snapshot(table: Table) -> tuple[Snapshot | None, bool]:
    """The table's newest snapshot, and whether a snapshot file was there but refused."""
    names = snapshot_names(table)
    if not names:
        return None, False
    name = names[-1]
    if (table.paths.root, name) in DAMAGED_SNAPSHOTS:
        return None, True
    cached = driver_cache().get_snapshot(table.paths.root, name)
    if cached is not None:
        if cached.damaged:
            DAMAGED_SNAPSHOTS.add((table.paths.root, name))
            return None, True
        return cached, False
    COUNTERS["snapshot_reads"] += 1
    path = f"{table.paths.index_snapshot_dir}/{name}"
    try:
        # ranged reads (a local file is mapped): the directory and the core section now,
        # other sections when a plan first needs them (verified then)
        mapped = table.store.sfs.map_file(path)  # local: pages touched, not copies
        if mapped is not None:
            read_at, size = (lambda off, n: mapped[off:off + n]), len(mapped)
        else:
            f = table.store.sfs.open_input_file(path)
            read_at, size = (lambda off, n: f.read_at(n, off)), f.size()
        snap = Snapshot(SnapshotFile(name, read_at, size), bloom_source=_snapshot_blooms(table), counters=COUNTERS)
    except (OSError, pa.ArrowException, KeyError, ValueError, TypeError, CorruptIndexError):
        # A damaged (or older) snapshot only costs speed: plan from the merge indexes
        # instead, and write a new one.
        COUNTERS["snapshot_errors"] += 1
        return None, True
    driver_cache().put_snapshot(table.paths.root, snap)
    snap.on_grow = functools.partial(_recount, table.paths.root, name)
    return snap, False


def _recount(root: str, name: str) -> None:
    """Sections and arrays a plan reads count in the budget as they come: get_snapshot
    recounts the table's snapshot (nothing when the cache no longer holds it)."""
    driver_cache().get_snapshot(root, name)
