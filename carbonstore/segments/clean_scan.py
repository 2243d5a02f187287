"""Clean files, the folders worth listing: which readable segments may hold unnamed files.

Listing every segment folder for superseded deltas and replaced merge indexes cost 33 of
the 40 s of a clean of a 100,000-segment table, though a clean finds them in the few
folders written since the one before. After every clean that deleted or kept all it found,
``_clean_scan.json`` in the table's tablestatus log folder records the scan: the wall time
it started, the latest version it judged, and the segments in which it left unnamed files
(kept because a version in reach names them, written within the lease time, or kept for
a running statement). The next clean lists only:

* those segments (their files may be removable now);
* segments whose entry a version after the recorded one changed (a restore bringing back
  older files, a segment made readable);
* segment folders changed since the scan started (less the lease time, for clocks that
  disagree): a file created or removed in a folder changes the folder's time, so every
  delta or merge index written since - by a statement that committed, failed or was
  killed - is in one of them. The times come from ONE listing of ``Fact/Part0``.

Everything else was judged by the recorded scan and nothing in it changed since. A store
whose folders carry no time (object stores: a "folder" is a name prefix), a table without
the record (or with a damaged one) or one with more than ``MAX_VERSIONS`` versions since it
is listed whole, as before. The record only narrows what is listed: a file is deleted on
the same judgement as ever, so it can never cost a committed file - at worst a leftover
waits for a later clean.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import orjson

from carbonstore.errors import CarbonStoreError
from carbonstore.store.table import Table

__all__ = ["MAX_VERSIONS", "ScanRecord", "folders_to_list", "read_record", "write_record"]

_RECORD = "_clean_scan.json"
_SEGMENT_DIR_RE = re.compile(r"^Segment_(\d+(?:\.\d+)?)$")
#: more versions than this since the recorded scan: list every folder (reading that many
#: version files would cost about what the listing does)
MAX_VERSIONS = 20_000


@dataclass(frozen=True, slots=True)
class ScanRecord:
    """What one clean's scan of the segment folders judged (see the module docstring)."""

    started_ms: int  # wall clock when it started
    version: int  # the latest version it judged
    pending: tuple[str, ...]  # segments it left unnamed files in


def _path(table: Table) -> str:
    return f"{table.status.log_dir}/{_RECORD}"


def read_record(table: Table) -> ScanRecord | None:
    """The last clean's record; None when there is none or it cannot be read (a full scan
    then: the record is never needed for correctness)."""
    try:
        raw = orjson.loads(table.paths.sfs.read_bytes(_path(table)))
        started, version, pending = raw["startedMs"], raw["version"], raw["pending"]
        if type(started) is not int or type(version) is not int or not isinstance(pending, list):
            return None
        return ScanRecord(started, version, tuple(str(p) for p in pending))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_record(table: Table, record: ScanRecord) -> None:
    try:
        table.paths.sfs.write_atomic(_path(table), orjson.dumps({
            "startedMs": record.started_ms, "version": record.version,
            "pending": list(record.pending)}), durable=False)
    except OSError:  # the next clean lists every folder
        pass


def now_wall_ms() -> int:
    return int(time.time() * 1000)


def _changed_since(table: Table, after: int, upto: int) -> set[str] | None:
    """Segments whose entry a version in ``after+1 .. upto`` added, changed or removed;
    None when that cannot be told cheaply (too many versions, a version holding every
    entry, a damaged file: the caller lists everything)."""
    if upto - after > MAX_VERSIONS or after < 0:
        return None
    out: set[str] = set()
    try:
        for v in range(after + 1, upto + 1):
            rec = table.status.record(v)
            if rec.entries is not None:
                return None
            out.update(e.load_name for e in rec.upserts)
            out.update(rec.removes)
    except CarbonStoreError:
        return None
    return out


def folders_to_list(table: Table, readable: list[str], latest_version: int, slack_ms: int,
                    infos: list[Any] | None = None) -> tuple[list[str], bool]:
    """(the readable segments whose folders to list, whether that is all of them);
    ``infos``: the listing of ``Fact/Part0`` when the caller has it (taken after the
    scan's start time)."""
    record = read_record(table)
    if record is None or record.version > latest_version:
        return readable, True
    changed = _changed_since(table, record.version, latest_version)
    if changed is None:
        return readable, True
    touched = set(record.pending) | changed
    since = record.started_ms - slack_ms
    if infos is None:
        try:
            infos = table.paths.sfs.list_dir(table.paths.fact_dir)
        except FileNotFoundError:
            infos = []
    for info in infos:
        m = _SEGMENT_DIR_RE.match(info.base_name)
        if m is None or info.is_file:
            continue
        if info.mtime is None:  # an object store: folders carry no time
            return readable, True
        if info.mtime.timestamp() * 1000 >= since:
            touched.add(m.group(1))
    return [n for n in readable if n in touched], False
