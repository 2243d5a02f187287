"""A table's lease files (heartbeats of running loads and statements; see
carbonstore.store.leases), kept in its tablestatus log folder: ``TableStatus.leases``."""

from __future__ import annotations

from typing import Any

import orjson

from carbonstore.store.paths import TablePaths, check_segment_id
from carbonstore.store.records import Frozen

__all__ = ["LeaseFiles"]

_STATEMENT_PREFIX = "stmt-"


class LeaseFiles(Frozen):
    """Reads and writes the lease files of one table: ``<log_dir>/leases/``."""

    paths: TablePaths
    log_dir: str  # the table's tablestatus log folder

    # ---- leases (heartbeat files; see carbonstore.store.leases) ----------------------------
    def _lease_path(self, segment_id: str) -> str:
        return f"{self.log_dir}/leases/{check_segment_id(segment_id)}.json"

    def write_lease(self, segment_id: str, data: bytes) -> None:
        """Rewrite a heartbeat; FileNotFoundError when the table's log is gone (dropped)."""
        self._leases_folder()
        self.paths.sfs.write_atomic(self._lease_path(segment_id), data, durable=False)

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

    # ---- statement leases (DML, index rebuilds; see carbonstore.store.leases) ---------------
    def _statement_path(self, token: str, suffix: str) -> str:
        if not token.isalnum():
            raise ValueError(f"bad statement token {token!r}")
        return f"{self.log_dir}/leases/{_STATEMENT_PREFIX}{token}{suffix}"

    def write_statement_lease(self, token: str, data: bytes) -> None:
        """Rewrite a running statement's heartbeat (FileNotFoundError: the table was dropped)."""
        self._leases_folder()
        self.paths.sfs.write_atomic(self._statement_path(token, ".json"), data, durable=False)

    def statement_leases(self) -> list[tuple[str, dict[str, Any] | None, bool]]:
        """Every statement lease: (token, its heartbeat or None, whether it was marked dead)."""
        try:
            infos = self.paths.sfs.list_dir(f"{self.log_dir}/leases")
        except FileNotFoundError:
            return []
        beats: dict[str, dict[str, Any] | None] = {}
        dead: set[str] = set()
        for info in infos:
            name = info.base_name
            if not info.is_file or not name.startswith(_STATEMENT_PREFIX):
                continue
            token, _, suffix = name[len(_STATEMENT_PREFIX):].partition(".")
            if suffix == "dead":
                dead.add(token)
            elif suffix == "json":
                try:
                    obj = orjson.loads(self.paths.sfs.read_bytes(info.path))
                except (FileNotFoundError, orjson.JSONDecodeError):
                    obj = None  # released meanwhile, or torn by a crash
                beats[token] = obj if isinstance(obj, dict) else None
        return [(t, beats.get(t), t in dead) for t in sorted(beats.keys() | dead)]

    def mark_statement_dead(self, token: str) -> None:
        """Write the statement's tombstone (write-once: a renewal never overwrites it) and
        drop its heartbeat; its commit then fails (``statement_marked_dead``)."""
        self._leases_folder()
        self.paths.sfs.put_if_absent(self._statement_path(token, ".dead"), b"{}")
        self._delete_quietly(self._statement_path(token, ".json"))

    def tombstone_time_ms(self, token: str) -> int | None:
        """When a statement's tombstone was written (None: there is none)."""
        info = self.paths.sfs.file_info(self._statement_path(token, ".dead"))
        return int(info.mtime.timestamp() * 1000) if info.mtime is not None else None

    def statement_marked_dead(self, token: str) -> bool:
        return self.paths.sfs.exists(self._statement_path(token, ".dead"))

    def delete_statement_lease(self, token: str, *, tombstone: bool = True) -> None:
        """Remove a statement's heartbeat (and its tombstone: only once it can never commit)."""
        self._delete_quietly(self._statement_path(token, ".json"))
        if tombstone:
            self._delete_quietly(self._statement_path(token, ".dead"))

    def _leases_folder(self) -> None:
        sfs = self.paths.sfs
        folder = f"{self.log_dir}/leases"
        if not sfs.is_dir(folder):
            if not sfs.is_dir(self.log_dir):
                raise FileNotFoundError(self.log_dir)
            try:  # never recursive: a dropped table's log must not come back
                sfs.make_dir(folder)
            except FileExistsError:
                pass

    def _delete_quietly(self, path: str) -> None:
        try:
            self.paths.sfs.delete_file(path)
        except OSError:
            pass
