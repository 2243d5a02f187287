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

A reader in a process that has not loaded pyarrow (a metadata command: ``show-segments``,
``history``, ``describe``) reads a table of at most ``REPLAY_VERSIONS`` versions, whose
JSON versions up to the checkpoint hold at most ``REPLAY_BYTES``, from those versions
alone, from version 0, and leaves the Arrow checkpoints unread: the way it reads when a
checkpoint was never written, so the same entries. 400 versions (200 loads, 0.3 MB) read
so in 0.02-0.03 s of CPU, where importing pyarrow and numpy to decode the checkpoint costs
about 0.2 s. A table of 100,000 segments in 250 versions (50 MB of JSON) reads its
checkpoint, as does a process that has pyarrow loaded.
"""

from __future__ import annotations

import sys

import orjson

from carbonstore.store.fs import StoreFS

__all__ = ["REPLAY_BYTES", "REPLAY_VERSIONS", "checkpoint_name", "removable_checkpoints", "replays_json",
           "write_removed_below"]

#: The most versions a reader without pyarrow reads from version 0 instead of a checkpoint
#: (about 50 us of CPU each, against about 0.2 s to import pyarrow and numpy), and the most
#: bytes they may hold (1 MiB of JSON decodes in well under 0.1 s).
REPLAY_VERSIONS = 1_000
REPLAY_BYTES = 1 << 20

_HINT = "_checkpoints.json"


def checkpoint_name(version: int) -> str:
    """The file name of the Arrow checkpoint of ``version`` in the log folder."""
    return f"{version:020d}.checkpoint.arrow"


def replays_json(sfs: StoreFS, log_dir: str, checkpoint: int) -> bool:
    """Whether a reader skips the Arrow checkpoint of ``checkpoint`` (and every earlier one)
    and reads the JSON versions from version 0: pyarrow is not loaded in this process, and
    there are at most ``REPLAY_VERSIONS`` of them holding at most ``REPLAY_BYTES`` (one
    listing of the log folder). Same entries either way."""
    if checkpoint > REPLAY_VERSIONS or "pyarrow" in sys.modules:
        return False
    total = 0
    for info in sfs.list_dir(log_dir):
        name = info.base_name
        if name.endswith(".json") and name[:-5].isdigit() and int(name[:-5]) <= checkpoint:
            total += int(info.size or 0)
    return total <= REPLAY_BYTES


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
