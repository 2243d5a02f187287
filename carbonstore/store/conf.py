"""Configuration: documented defaults, a properties file, table properties, options.

Precedence, lowest first: built-in defaults < conf file (``--conf FILE`` or env
``CARBON_CONF``) < table properties < command options. ``conf/carbon.properties`` in the
repository lists every key with its default and what it means.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from carbonstore.errors import ConfigError

__all__ = ["DEFAULTS", "TABLE_PROPERTY_KEYS", "CarbonConf", "load_conf"]

DEFAULTS: dict[str, str] = {
    "carbon.storelocation": "./carbon.store",
    "carbon.lock.retry.timeout.sec": "10",
    "carbon.lock.retries": "3",
    "carbon.lock.path": "",
    "carbon.page.rows": "32000",
    "carbon.blocklet.size.in.mb": "64",
    "carbon.table.block.size.in.mb": "1024",
    "carbon.bloom.fpp": "0.01",
    "carbon.compaction.level.threshold": "4,3",
    "carbon.major.compaction.size": "1024",
    "carbon.enable.auto.load.merge": "false",
    "carbon.compaction.preserve.segments": "0",
    "carbon.allowed.compaction.days": "0",
    "carbon.minor.compaction.size": "0",
    "carbon.segment.retention.minutes": "60",
    "carbon.trash.retention.days": "7",
    "carbon.clean.files.force.allowed": "false",
    "carbon.driver.index.cache.size.mb": "512",
    "carbon.index.snapshot.max.lag": "8",
    "carbon.read.partition.size.mb": "128",
    "carbon.read.local.rows": "100000",
    "carbon.spark.log.level": "FATAL",
    "carbon.dictionary.chunk.size": "10000",
    "carbon.bad.records.action": "FAIL",
    "carbon.badrecords.location": "",
    "carbon.statistics.enabled": "true",
    "carbon.load.csv.parser": "auto",
}

# Table property -> the conf key it overrides.
TABLE_PROPERTY_KEYS: dict[str, str] = {
    "page_rows": "carbon.page.rows",
    "blocklet_size_in_mb": "carbon.blocklet.size.in.mb",
    "table_blocksize": "carbon.table.block.size.in.mb",
    "bloom_fpp": "carbon.bloom.fpp",
    "compaction_level_threshold": "carbon.compaction.level.threshold",
    "major_compaction_size": "carbon.major.compaction.size",
    "auto_load_merge": "carbon.enable.auto.load.merge",
    "compaction_preserve_segments": "carbon.compaction.preserve.segments",
    "allowed_compaction_days": "carbon.allowed.compaction.days",
}


def _parse_properties(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read conf file {path}: {err.strerror}") from err
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConfigError(f"{path}:{n}: expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    return out


def _check_keys(values: Mapping[str, str], origin: str) -> None:
    for key in values:
        if key not in DEFAULTS:
            raise ConfigError(
                f"unknown configuration key {key!r} in {origin}; see conf/carbon.properties"
            )


@dataclass(frozen=True, slots=True)
class CarbonConf:
    """Resolved configuration values (strings), with typed getters."""

    values: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULTS))

    def with_overrides(self, overrides: Mapping[str, str], origin: str = "options") -> CarbonConf:
        _check_keys(overrides, origin)
        return CarbonConf({**self.values, **overrides})

    def for_table(self, properties: Mapping[str, str]) -> CarbonConf:
        """Layer a table's properties over this conf."""
        mapped = {TABLE_PROPERTY_KEYS[k]: v for k, v in properties.items() if k in TABLE_PROPERTY_KEYS}
        return CarbonConf({**self.values, **mapped})

    def get(self, key: str) -> str:
        if key not in DEFAULTS:
            raise ConfigError(f"unknown configuration key {key!r}")
        return self.values.get(key, DEFAULTS[key])

    def get_int(self, key: str) -> int:
        raw = self.get(key)
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"configuration key {key} must be an integer, got {raw!r}") from None

    def get_float(self, key: str) -> float:
        raw = self.get(key)
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"configuration key {key} must be a number, got {raw!r}") from None

    def get_bool(self, key: str) -> bool:
        raw = self.get(key).strip().lower()
        if raw in ("true", "1", "yes"):
            return True
        if raw in ("false", "0", "no", ""):
            return False
        raise ConfigError(f"configuration key {key} must be true or false, got {raw!r}")

    def get_int_list(self, key: str) -> list[int]:
        raw = self.get(key)
        try:
            return [int(p) for p in raw.split(",") if p.strip()]
        except ValueError:
            raise ConfigError(f"configuration key {key} must look like 4,3, got {raw!r}") from None


def load_conf(path: str | os.PathLike[str] | None = None, **overrides: str) -> CarbonConf:
    """Resolve defaults < file (``path`` or ``$CARBON_CONF``) < ``overrides``."""
    values = dict(DEFAULTS)
    file = path if path is not None else os.environ.get("CARBON_CONF")
    if file:
        from_file = _parse_properties(Path(file))
        _check_keys(from_file, str(file))
        values.update(from_file)
    conf = CarbonConf(values)
    if overrides:
        conf = conf.with_overrides(overrides)
    return conf
