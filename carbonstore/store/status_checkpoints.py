"""Old Arrow checkpoints of the tablestatus: which ones no retained version reads.

A checkpoint (``<N>.checkpoint.arrow``, every ``CHECKPOINT_INTERVAL``-th version) holds
every entry, so a table of 100,000 segments loaded every few minutes writes one of several
MB every 50 versions, and nothing ever removed them. A reader of version V starts from the
newest checkpoint at or below V that exists (tablestatus.py, ``_state``). So the
checkpoints a reader of a version at or after ``first`` (the oldest version kept
readable: the one that was the latest ``carbon.segment.retention.minutes`` ago) can use
are the newest existing one at or below ``first`` and every later one: the others are
removed by clean files. A version before it still reads (from an older checkpoint that
exists, or from version 0 and every delta after it: slower, never a different answer),
and so does any version while a checkpoint is removed under its reader (it then falls
back the same way). Version files are never removed.

``_checkpoints.json`` in the log folder records the checkpoint below which all were
removed, so the next clean probes only the checkpoints written since (a hint: without it
every checkpoint number from the first is probed once).
"""

from __future__ import annotations

import orjson

from carbonstore.store.fs import StoreFS

__all__ = ["checkpoint_name", "removable_checkpoints", "write_removed_below"]

_HINT = "_checkpoints.json"


def checkpoint_name(version: int) -> str:
    """The file name of the Arrow checkpoint of ``version`` in the log folder."""
    return f"{version:020d}.checkpoint.arrow"


def _below_hint(sfs: StoreFS, log_dir: str) -> int:
    try:
        raw = orjson.loads(sfs.read_bytes(f"{log_dir}/{_HINT}"))
        below = raw.get("removedBelow") if isinstance(raw, dict) else None
        return below if type(below) is int and below >= 0 else 0
    except (OSError, ValueError):
        return 0


def removable_checkpoints(sfs: StoreFS, log_dir: str, first: int, interval: int,
                          ) -> tuple[list[str], int]:
    """(paths of the checkpoints no reader of a version at or after ``first`` uses, the
    checkpoint they are all below: record it with ``write_removed_below`` once removed)."""
    keep = first - first % interval
    while keep > 0 and not sfs.exists(f"{log_dir}/{checkpoint_name(keep)}"):
        keep -= interval  # (not written: its readers use the one before)
    start = max(interval, _below_hint(sfs, log_dir))
    out = [path for c in range(start, keep, interval)
           if sfs.exists(path := f"{log_dir}/{checkpoint_name(c)}")]
    return out, keep


def write_removed_below(sfs: StoreFS, log_dir: str, below: int) -> None:
    try:
        sfs.write_atomic(f"{log_dir}/{_HINT}", orjson.dumps({"removedBelow": below}), durable=False)
    except OSError:  # a hint: the next clean probes from the first checkpoint
        pass
