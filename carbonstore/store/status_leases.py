"""A table's lease files (heartbeats of running loads; see carbonstore.store.leases),
kept in its tablestatus log folder: part of :class:`carbonstore.store.tablestatus.TableStatus`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from carbonstore.store.paths import TablePaths

__all__ = ["LeaseFiles"]


class LeaseFiles:
    """The lease-file methods of TableStatus."""

    __slots__ = ()

    if TYPE_CHECKING:  # provided by TableStatus
        paths: TablePaths

        @property
        def log_dir(self) -> str: ...

    # ---- leases (heartbeat files; see carbonstore.store.leases) ----------------------------
    def _lease_path(self, segment_id: str) -> str:
        from carbonstore.store.paths import check_segment_id

        return f"{self.log_dir}/leases/{check_segment_id(segment_id)}.json"

    def write_lease(self, segment_id: str, data: bytes) -> None:
        """Rewrite a heartbeat; FileNotFoundError when the table's log is gone (dropped)."""
        sfs = self.paths.sfs
        folder = f"{self.log_dir}/leases"
        if not sfs.is_dir(folder):
            if not sfs.is_dir(self.log_dir):
                raise FileNotFoundError(self.log_dir)
            try:  # never recursive: a dropped table's log must not come back
                sfs.fs.create_dir(folder, recursive=False)
            except FileExistsError:
                pass
        sfs.write_atomic(self._lease_path(segment_id), data, durable=False)

    def read_lease(self, segment_id: str) -> dict[str, Any] | None:
        try:
            obj = orjson.loads(self.paths.sfs.read_bytes(self._lease_path(segment_id)))
        except (FileNotFoundError, orjson.JSONDecodeError):
            return None  # no heartbeat (yet), or one torn by a crash: the entry's lease counts
        return obj if isinstance(obj, dict) else None

    def delete_lease(self, segment_id: str) -> None:
        try:
            self.paths.sfs.delete_file(self._lease_path(segment_id))
        except OSError:
            pass
