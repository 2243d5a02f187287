"""What a clustering is (columns and curve) and how a segment's tablestatus entry records it.

Light on purpose (no pyarrow): ``show-segments`` and ``describe`` read it for every entry.
The entry key ``"clustering": {"columns": [...], "curve": "zorder" | "hilbert"}`` is
optional: entries without it are not clustered, and readers that predate it keep it as an
unknown entry key (store/entries.py keeps unknown entry keys, as ``extra``) and ignore it.
"""

from __future__ import annotations

from typing import Any, Literal

from carbonstore.store.entries import LoadEntry
from carbonstore.store.records import Frozen

__all__ = ["CLUSTERING_KEY", "CURVES", "MAX_COLUMNS", "ClusterSpec", "Curve",
           "segment_clustering"]

Curve = Literal["zorder", "hilbert"]
CURVES: tuple[Curve, ...] = ("zorder", "hilbert")
MAX_COLUMNS = 4
#: The optional tablestatus entry key recording a segment's clustering.
CLUSTERING_KEY = "clustering"


class ClusterSpec(Frozen, kw_only=True):
    """Cluster on ``columns`` (table column names) along ``curve``."""

    columns: tuple[str, ...]
    curve: Curve = "zorder"

    def to_json(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "curve": self.curve}

    @classmethod
    def from_json(cls, obj: Any) -> ClusterSpec | None:
        """The spec an entry recorded; None for anything this version cannot read."""
        if not isinstance(obj, dict):
            return None
        cols, curve = obj.get("columns"), obj.get("curve")
        if not isinstance(cols, list) or not cols or not all(isinstance(c, str) for c in cols) \
                or curve not in CURVES:
            return None
        return cls(columns=tuple(cols), curve=curve)

    def describe(self) -> str:
        """``zorder(a,b)``."""
        return f"{self.curve}({','.join(self.columns)})"


def segment_clustering(entry: LoadEntry) -> ClusterSpec | None:
    """How a segment is clustered (None: not clustered, or by a key this version cannot read)."""
    return ClusterSpec.from_json(entry.extra.get(CLUSTERING_KEY))
