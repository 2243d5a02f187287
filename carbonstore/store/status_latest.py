"""Finding a table's latest tablestatus version without listing its log (docs/tablestatus.md).

A reader starts from the hint ``_latest.json`` (or from the newest version this process
has seen, whichever is newer) and probes forward until a version does not exist. The hint
is written without fsync after commits: a stale or lost hint costs probes, never a wrong
answer. A hint that names a version that does not exist means the newest version file was
lost: ``CorruptMetadataError``, never an answer from older versions.
"""

from __future__ import annotations

import orjson

from carbonstore.errors import CorruptMetadataError
from carbonstore.store.fs import StoreFS
from carbonstore.store.versions import corrupt_version

__all__ = ["find_latest", "listed_versions", "version_path", "write_hint"]

_HINT = "_latest.json"
_DIGITS = 20


def version_path(log_dir: str, version: int) -> str:
    return f"{log_dir}/{version:0{_DIGITS}d}.json"


def listed_versions(sfs: StoreFS, log_dir: str) -> list[int]:
    out = []
    for info in sfs.list_dir(log_dir):
        stem = info.base_name.removesuffix(".json")
        if info.is_file and len(stem) == _DIGITS and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def write_hint(sfs: StoreFS, log_dir: str, version: int) -> None:
    try:
        sfs.write_atomic(f"{log_dir}/{_HINT}", orjson.dumps({"version": version}), durable=False)
    except OSError:  # a hint is never needed for correctness
        pass


def find_latest(sfs: StoreFS, log_dir: str, known: int | None) -> int | None:
    """The latest version; None when the log does not exist (a legacy table). ``known``:
    the newest version this process has seen."""
    start: int | None = None
    try:
        hint = orjson.loads(sfs.read_bytes(f"{log_dir}/{_HINT}"))
        if isinstance(hint, dict) and type(hint.get("version")) is int and hint["version"] >= 0:
            start = hint["version"]
    except FileNotFoundError:
        pass
    except (orjson.JSONDecodeError, OSError):  # a damaged hint is only a slower start
        start = None
    hint_version = start
    if start is None or (known is not None and known >= start):
        # Seen by this process, so it exists (versions are never deleted) - unless the
        # whole log went with a drop, which a missing hint makes worth a look.
        start = known
        if start is not None and hint_version is None and not sfs.exists(version_path(log_dir, start)):
            start = None
    elif not sfs.exists(version_path(log_dir, start)):
        start = -start - 1  # the hint names a version that is not there (see below)
    if start is None or start < 0:
        hinted = None if start is None else -start - 1
        if not sfs.is_dir(log_dir):
            return None
        listed = listed_versions(sfs, log_dir)
        if hinted is not None and (not listed or listed[-1] < hinted):
            # The hint is written after its version exists and versions are never
            # deleted: the newest commit's file was lost. Never answer from older ones.
            raise corrupt_version(version_path(log_dir, hinted), FileNotFoundError("it is missing"))
        if not listed:
            raise CorruptMetadataError(
                f"tablestatus log {log_dir} holds no version; the table's creation "
                "did not finish - drop the table and create it again"
            )
        start = listed[-1]
    n = start
    while sfs.exists(version_path(log_dir, n + 1)):
        n += 1
    if n - start >= 8:  # keep later fresh readers from probing as far
        write_hint(sfs, log_dir, n)
    return n
