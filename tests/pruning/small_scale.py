"""A small table of bench/scale_table.py's generator (21 segments of 2 files of 2 row
groups), with index snapshot chunks of 4 segments: the snapshot tests' table."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from carbonstore import Store
from carbonstore.store.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import scale_table  # noqa: E402

SEGMENTS, FILES, ROW_GROUPS, CHUNK = 21, 2, 2, 4

__all__ = ["CHUNK", "FILES", "ROW_GROUPS", "SEGMENTS", "generate", "scale_table", "table"]


def generate(out: str) -> dict[str, Any]:
    """The small table in store ``out`` (no index snapshot yet): its expected.json."""
    return scale_table.generate(out, SEGMENTS, FILES, ROW_GROUPS, per_commit=7, quiet=True,  # type: ignore[no-any-return]
                                snapshot=False)


def table(store: str) -> Table:
    return Store(store).table(scale_table.TABLE)
