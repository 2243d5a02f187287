"""Configuration: documented defaults, a properties file, table properties, options.

Precedence, lowest first: built-in defaults < conf file (``--conf FILE`` or env
``CARBON_CONF``) < table properties < command options. ``conf/carbon.properties`` in the
repository lists every key with its default and what it means.

Every value is checked when a conf is built (read from a file, layered with table
properties or options), not when code first uses it: a key declared in ``KEY_TYPES`` must
parse as its type and lie in its range, else ``ConfigError`` names the key, the value, the
allowed range and where the value came from. A key in ``DEFAULTS`` without an entry in
``KEY_TYPES`` is a free string. To declare a new key: add its default to ``DEFAULTS`` and
its type to ``KEY_TYPES`` (``Int(low, high)``, ``Float(low, high, ...)``, ``Bool()``,
``Choice(...)``, ``IntList(...)``, ``Text(...)``), then document it in
conf/carbon.properties and docs/configuration.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from carbonstore.errors import ConfigError
from carbonstore.limits import MAX_CONF_FILE_BYTES
from carbonstore.store.records import Frozen

__all__ = [
    "DEFAULTS",
    "KEY_TYPES",
    "TABLE_PROPERTY_KEYS",
    "Bool",
    "CarbonConf",
    "Choice",
    "Float",
    "Int",
    "IntList",
    "KeyType",
    "Text",
    "check_value",
    "load_conf",
]

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
    # the session time zone of sessions carbonstore starts and of DML expressions
    "spark.sql.session.timeZone": "UTC",
    # versioned tablestatus: commit retries, lease of running loads and compactions
    "carbon.tablestatus.commit.retries": "60",
    "carbon.segment.lease.seconds": "120",
    # s3:// stores (docs/object-stores.md); empty: the AWS environment variables / profile
    "carbon.s3.endpoint": "",
    "carbon.s3.region": "",
    "carbon.s3.path.style.access": "false",
    "carbon.s3.access.key": "",
    "carbon.s3.secret.key": "",
    "carbon.s3.session.token": "",
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


# ---- value types ------------------------------------------------------------------------

_INT_RE = re.compile(r"[+-]?[0-9]{1,30}")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?")
_INT32_MAX = 2**31 - 1
_set = object.__setattr__


class KeyType(Frozen):
    """How the text of one key (or table property) is parsed and which values are allowed.

    ``parse(raw)`` returns the typed value or raises ``ValueError`` whose message is the
    complete "must be ..." phrase; :func:`check_value` turns it into a one-line error.
    """

    __slots__ = ()

    def parse(self, raw: str) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        """The allowed values in words, e.g. ``an integer at least 1 and at most 100``."""
        raise NotImplementedError


def _num(v: float) -> str:
    return str(v) if isinstance(v, int) else f"{v:g}"


def _bounds(low: float, high: float, low_open: bool, high_open: bool) -> str:
    return (f"{'greater than' if low_open else 'at least'} {_num(low)} and "
            f"{'less than' if high_open else 'at most'} {_num(high)}")


class Int(KeyType):
    """An integer in ``[low, high]`` (ASCII digits, optional sign)."""

    __slots__ = ("low", "high")
    __match_args__ = ("low", "high")
    low: int
    high: int

    def __init__(self, low: int, high: int) -> None:
        _set(self, "low", low)
        _set(self, "high", high)

    def parse(self, raw: str) -> int:
        text = raw.strip()
        if not _INT_RE.fullmatch(text):
            raise ValueError(f"must be a number: {self.describe()}")
        value = int(text)
        if not self.low <= value <= self.high:
            raise ValueError(f"must be {_bounds(self.low, self.high, False, False)}")
        return value

    def describe(self) -> str:
        return f"an integer {_bounds(self.low, self.high, False, False)}"


class Float(KeyType):
    """A finite decimal number between ``low`` and ``high`` (ends open when asked)."""

    __slots__ = ("low", "high", "low_open", "high_open")
    __match_args__ = ("low", "high", "low_open", "high_open")
    low: float
    high: float
    low_open: bool
    high_open: bool

    def __init__(self, low: float, high: float, low_open: bool = False, high_open: bool = False) -> None:
        _set(self, "low", low)
        _set(self, "high", high)
        _set(self, "low_open", low_open)
        _set(self, "high_open", high_open)

    def parse(self, raw: str) -> float:
        text = raw.strip()
        if not _FLOAT_RE.fullmatch(text):
            raise ValueError(f"must be {self.describe()}")
        value = float(text)
        low_ok = value > self.low if self.low_open else value >= self.low
        high_ok = value < self.high if self.high_open else value <= self.high
        if not (low_ok and high_ok):
            raise ValueError(f"must be {_bounds(self.low, self.high, self.low_open, self.high_open)}")
        return value

    def describe(self) -> str:
        return f"a number {_bounds(self.low, self.high, self.low_open, self.high_open)}"


class Bool(KeyType):
    """``true``/``false`` (any case); ``strict=False`` also takes ``1/0``, ``yes/no``, empty."""

    __slots__ = ("strict",)
    __match_args__ = ("strict",)
    strict: bool

    def __init__(self, strict: bool = False) -> None:
        _set(self, "strict", strict)

    def parse(self, raw: str) -> bool:
        text = raw.strip().lower()
        yes, no = (("true",), ("false",)) if self.strict else (("true", "1", "yes"), ("false", "0", "no", ""))
        if text in yes:
            return True
        if text in no:
            return False
        raise ValueError(f"must be {self.describe()}")

    def describe(self) -> str:
        return "true or false"


class Choice(KeyType):
    """One of a few words (compared without case); the value keeps the user's spelling."""

    __slots__ = ("choices",)
    __match_args__ = ("choices",)
    choices: tuple[str, ...]

    def __init__(self, choices: tuple[str, ...]) -> None:
        _set(self, "choices", choices)

    def parse(self, raw: str) -> str:
        text = raw.strip()
        if text.lower() not in (c.lower() for c in self.choices):
            raise ValueError(f"must be {self.describe()}")
        return text

    def describe(self) -> str:
        return "one of " + ", ".join(self.choices)


class IntList(KeyType):
    """Comma-separated integers in ``[low, high]``, between ``min_len`` and ``max_len`` of them."""

    __slots__ = ("low", "high", "min_len", "max_len", "example")
    __match_args__ = ("low", "high", "min_len", "max_len", "example")
    low: int
    high: int
    min_len: int
    max_len: int
    example: str

    def __init__(self, low: int, high: int, min_len: int, max_len: int, example: str = "4,3") -> None:
        _set(self, "low", low)
        _set(self, "high", high)
        _set(self, "min_len", min_len)
        _set(self, "max_len", max_len)
        _set(self, "example", example)

    def parse(self, raw: str) -> list[int]:
        parts = [p.strip() for p in raw.split(",")] if raw.strip() else []
        if not self.min_len <= len(parts) <= self.max_len or not all(
            _INT_RE.fullmatch(p) and self.low <= int(p) <= self.high for p in parts
        ):
            raise ValueError(f"must be {self.describe()}")
        return [int(p) for p in parts]

    def describe(self) -> str:
        n = (f"{self.min_len}" if self.min_len == self.max_len
             else f"{self.min_len} to {self.max_len}")
        return (f"{n} comma-separated integers like {self.example}, each "
                f"{_bounds(self.low, self.high, False, False)}")


class Text(KeyType):
    """Free text; ``non_empty`` refuses an empty (or blank) value."""

    __slots__ = ("non_empty",)
    __match_args__ = ("non_empty",)
    non_empty: bool

    def __init__(self, non_empty: bool = False) -> None:
        _set(self, "non_empty", non_empty)

    def parse(self, raw: str) -> str:
        if self.non_empty and not raw.strip():
            raise ValueError(f"must be {self.describe()}")
        return raw

    def describe(self) -> str:
        return "a non-empty text" if self.non_empty else "any text"


_MAX_MB = 1 << 20  # 1 TB in MB: above any sane size, far below an overflow

# Key -> type and range. A key of DEFAULTS missing here is a free string (see the module
# docstring); the ranges keep every command bounded in memory and time (a page of 0 rows
# never ends, a negative retention deletes at once).
KEY_TYPES: dict[str, KeyType] = {
    "carbon.storelocation": Text(non_empty=True),
    "carbon.lock.retry.timeout.sec": Float(0, 86_400),
    "carbon.lock.retries": Int(1, 1_000),
    "carbon.lock.path": Text(),
    "carbon.page.rows": Int(1, _INT32_MAX),
    "carbon.blocklet.size.in.mb": Float(0, 4_096, low_open=True),
    "carbon.table.block.size.in.mb": Float(0, _MAX_MB, low_open=True),
    "carbon.bloom.fpp": Float(0, 1, low_open=True, high_open=True),
    "carbon.compaction.level.threshold": IntList(0, 100, 0, 10),
    "carbon.major.compaction.size": Int(1, _MAX_MB),
    "carbon.enable.auto.load.merge": Bool(),
    "carbon.compaction.preserve.segments": Int(0, 1_000_000),
    "carbon.allowed.compaction.days": Int(0, 36_500),
    "carbon.minor.compaction.size": Int(0, _MAX_MB),
    "carbon.segment.retention.minutes": Int(1, 5_256_000),
    "carbon.trash.retention.days": Int(0, 36_500),
    "carbon.clean.files.force.allowed": Bool(),
    "carbon.driver.index.cache.size.mb": Int(1, _MAX_MB),
    "carbon.index.snapshot.max.lag": Int(0, 1_000_000),
    "carbon.read.partition.size.mb": Int(1, _MAX_MB),
    "carbon.read.local.rows": Int(0, _INT32_MAX),
    "carbon.dictionary.chunk.size": Int(1, 10_000_000),
    "carbon.bad.records.action": Choice(("FAIL", "FORCE", "REDIRECT", "IGNORE")),
    "carbon.badrecords.location": Text(),
    "carbon.statistics.enabled": Bool(),
    "carbon.spark.log.level": Choice(("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")),
    "carbon.tablestatus.commit.retries": Int(1, 10_000),
    "carbon.segment.lease.seconds": Float(1, 86_400),
    "carbon.load.csv.parser": Choice(("auto", "spark")),
    "spark.sql.session.timeZone": Text(non_empty=True),
    "carbon.s3.endpoint": Text(),
    "carbon.s3.region": Text(),
    "carbon.s3.path.style.access": Bool(),
    "carbon.s3.access.key": Text(),
    "carbon.s3.secret.key": Text(),
    "carbon.s3.session.token": Text(),
}


def check_value(key_type: KeyType, label: str, raw: object, *, origin: str = "",
                error: type[Exception] = ConfigError) -> Any:
    """Parse ``raw`` with ``key_type``; a bad value raises ``error`` in one line.

    ``label`` names what is checked (``configuration key carbon.page.rows``), ``origin``
    where the value came from (a file, "options", ...).
    """
    where = f" (in {origin})" if origin else ""
    if not isinstance(raw, str):
        raise error(f"{label} must be a string, got {raw!r}{where}")
    if (bad := _CONTROL.search(raw)) is not None:  # no path, name or number holds one
        code = ord(bad.group())
        name = "NUL" if code == 0 else f"U+{code:04X}"
        raise error(f"{label} holds a control character ({name}), got {_show(raw)}{where}")
    try:
        return key_type.parse(raw)
    except ValueError as err:
        raise error(f"{label} {err}, got {_show(raw)}{where}") from None


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # C0 controls but tab, and DEL


def _show(raw: str) -> str:
    return repr(raw if len(raw) <= 60 else raw[:57] + "...")


# (key, value) pairs already found valid: a table's conf is built on every use, and its
# values are the same few each time. Bounded: cleared when it grows large.
_VALID: set[tuple[str, str]] = set()
# The defaults are valid (tests/store/test_store_conf.py checks each against its key type): a
# fresh process's first conf does not check them again (~0.15 ms of every open).
_DEFAULT_PAIRS = frozenset((k, v) for k, v in DEFAULTS.items() if isinstance(v, str))


def _check(values: Mapping[str, str], origin: str) -> None:
    """Refuse unknown keys and values outside their key's type and range."""
    for key, raw in values.items():
        if isinstance(raw, str) and ((key, raw) in _DEFAULT_PAIRS or (key, raw) in _VALID):
            continue
        if key not in DEFAULTS:
            raise ConfigError(
                f"unknown configuration key {key!r} in {origin}; see conf/carbon.properties"
            )
        check_value(KEY_TYPES.get(key, Text()), f"configuration key {key}", raw, origin=origin)
        if len(_VALID) > 10_000:
            _VALID.clear()
        _VALID.add((key, raw))


def _parse_properties(path: str) -> dict[str, str]:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONF_FILE_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"cannot read conf file {path}: {err.strerror}") from err
    if len(data) > MAX_CONF_FILE_BYTES:
        raise ConfigError(f"conf file {path} is larger than {MAX_CONF_FILE_BYTES:,} bytes; "
                          "a properties file holds a few dozen keys")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        number = data[: err.start].count(b"\n") + 1
        raise ConfigError(
            f"conf file {path} is not UTF-8 text: byte 0x{data[err.start]:02x} on line {number}"
        ) from None
    out: dict[str, str] = {}
    # Lines end at \n, \r or \r\n only (as in Java properties files): str.splitlines would
    # also split a value at U+0085, U+2028, form feeds, ...
    for n, raw in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConfigError(f"{path}:{n}: expected key=value, got {_show(line)}")
        out[key.strip()] = value.strip()
    return out


class CarbonConf(Frozen):
    """Resolved configuration values (strings, each checked against its type), with typed getters.

    Building one checks every value (``ConfigError`` on an unknown key or a value out of
    range), so code that holds a ``CarbonConf`` never meets a bad value later.
    """

    __slots__ = ("values",)
    __match_args__ = ("values",)
    values: Mapping[str, str]

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        values = dict(DEFAULTS) if values is None else values
        _check(values, "the configuration")
        _set(self, "values", values)

    def with_overrides(self, overrides: Mapping[str, str], origin: str = "options") -> CarbonConf:
        _check(overrides, origin)
        return CarbonConf({**self.values, **overrides})

    def for_table(self, properties: Mapping[str, str]) -> CarbonConf:
        """Layer a table's properties over this conf."""
        mapped = {TABLE_PROPERTY_KEYS[k]: v for k, v in properties.items() if k in TABLE_PROPERTY_KEYS}
        _check(mapped, "table properties")
        return CarbonConf({**self.values, **mapped})

    def get(self, key: str) -> str:
        if key not in DEFAULTS:
            raise ConfigError(f"unknown configuration key {key!r}")
        return self.values.get(key, DEFAULTS[key])

    def _typed(self, key: str, fallback: KeyType) -> Any:
        return check_value(KEY_TYPES.get(key, fallback), f"configuration key {key}", self.get(key))

    def get_int(self, key: str) -> int:
        return int(self._typed(key, Int(-(2**63), 2**63 - 1)))

    def get_float(self, key: str) -> float:
        return float(self._typed(key, Float(-1e308, 1e308)))

    def get_bool(self, key: str) -> bool:
        return bool(self._typed(key, Bool()))

    def get_int_list(self, key: str) -> list[int]:
        return list(self._typed(key, IntList(-(2**63), 2**63 - 1, 0, 1_000)))


def load_conf(path: str | os.PathLike[str] | None = None, **overrides: str) -> CarbonConf:
    """Resolve defaults < file (``path`` or ``$CARBON_CONF``) < ``overrides``.

    Raises:
        ConfigError: the file is unreadable or not UTF-8, a line is not ``key=value``, a key
            is unknown or a value is outside its key's range (the message names the key,
            the value, the allowed range and the file).
    """
    values = dict(DEFAULTS)
    file = path if path is not None else os.environ.get("CARBON_CONF")
    if file:
        from_file = _parse_properties(os.fspath(file))
        _check(from_file, str(file))
        values.update(from_file)
    conf = CarbonConf(values)
    if overrides:
        conf = conf.with_overrides(overrides)
    return conf
