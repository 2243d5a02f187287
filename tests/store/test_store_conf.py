"""Configuration: defaults < file (--conf / CARBON_CONF) < table properties < options."""

from __future__ import annotations

from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.errors import ConfigError, SchemaError
from carbonstore.store import CarbonConf, load_conf
from carbonstore.store.conf import DEFAULTS, KEY_TYPES, TABLE_PROPERTY_KEYS, check_value
from carbonstore.store.schema import PROPERTY_TYPES, TABLE_PROPERTIES

REPO_CONF = Path(__file__).resolve().parents[2] / "conf" / "carbon.properties"


@pytest.fixture(autouse=True)
def _no_env_conf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CARBON_CONF", raising=False)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults() -> None:
    conf = load_conf()
    assert dict(conf.values) == DEFAULTS
    assert conf.get("carbon.storelocation") == "./carbon.store"
    assert conf.get_int("carbon.page.rows") == 32000
    assert conf.get_int_list("carbon.compaction.level.threshold") == [4, 3]
    assert conf.get_int("carbon.major.compaction.size") == 1024
    assert conf.get_bool("carbon.enable.auto.load.merge") is False
    assert conf.get_float("carbon.bloom.fpp") == pytest.approx(0.01)
    assert CarbonConf().get("carbon.lock.retries") == DEFAULTS["carbon.lock.retries"]


def test_every_default_is_valid_for_its_key_type() -> None:
    # building a conf trusts the defaults without checking them (conf._DEFAULT_PAIRS)
    for key, value in DEFAULTS.items():
        assert isinstance(value, str), key
        if key in KEY_TYPES:
            check_value(KEY_TYPES[key], key, value)


def test_repository_conf_file_documents_every_key_with_its_default() -> None:
    text = REPO_CONF.read_text(encoding="utf-8")
    keys = [ln.split("=", 1)[0] for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert sorted(keys) == sorted(DEFAULTS), "conf/carbon.properties and DEFAULTS disagree"
    assert dict(load_conf(REPO_CONF).values) == DEFAULTS
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith("#"):
            assert lines[i - 1].startswith("#"), f"{line} has no comment above it"


def test_every_table_property_with_a_conf_key_maps_to_a_known_key() -> None:
    for prop, key in TABLE_PROPERTY_KEYS.items():
        assert prop in TABLE_PROPERTIES
        assert key in DEFAULTS
        assert prop in PROPERTY_TYPES, f"table property {prop} has no type and range"


def test_file_beats_defaults(tmp_path: Path) -> None:
    f = _write(tmp_path / "c.properties", "# comment\n! also a comment\n\n carbon.page.rows = 500 \n")
    conf = load_conf(f)
    assert conf.get_int("carbon.page.rows") == 500
    assert conf.get("carbon.bloom.fpp") == DEFAULTS["carbon.bloom.fpp"]


def test_env_file_is_used_and_explicit_path_beats_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _write(tmp_path / "env.properties", "carbon.page.rows=111\ncarbon.lock.retries=9\n")
    explicit = _write(tmp_path / "explicit.properties", "carbon.page.rows=222\n")
    monkeypatch.setenv("CARBON_CONF", str(env))
    assert load_conf().get_int("carbon.page.rows") == 111
    conf = load_conf(explicit)
    assert conf.get_int("carbon.page.rows") == 222
    # The explicit file replaces the env file; it is not layered on it.
    assert conf.get("carbon.lock.retries") == DEFAULTS["carbon.lock.retries"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("carbon.page.rowz=5\n", "unknown configuration key 'carbon.page.rowz'"),
        ("page_rows=5\n", "unknown configuration key"),
        ("carbon.page.rows 5\n", ":1: expected key=value"),
        ("# ok\ncarbon.page.rows=1\njunk\n", ":3: expected key=value"),
    ],
)
def test_bad_conf_files(tmp_path: Path, text: str, message: str) -> None:
    f = _write(tmp_path / "bad.properties", text)
    with pytest.raises(ConfigError, match=message) as info:
        load_conf(f)
    assert "bad.properties" in str(info.value)


def test_missing_conf_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="cannot read conf file"):
        load_conf(tmp_path / "nope.properties")
    monkeypatch.setenv("CARBON_CONF", str(tmp_path / "nope2.properties"))
    with pytest.raises(ConfigError, match="nope2.properties"):
        load_conf()


def test_full_precedence_chain(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "c.properties",
        "carbon.page.rows=5000\ncarbon.bloom.fpp=0.2\ncarbon.major.compaction.size=77\n",
    )
    store = Store(str(tmp_path / "store"), conf=load_conf(f))
    table = store.create_table(
        "t", "id long", properties={"page_rows": "1000", "bloom_fpp": "0.3"}
    )
    # table properties beat the file; untouched keys keep the file's value, then the default
    conf = store.table("t").conf
    assert conf.get_int("carbon.page.rows") == 1000
    assert conf.get_float("carbon.bloom.fpp") == pytest.approx(0.3)
    assert conf.get_int("carbon.major.compaction.size") == 77
    assert conf.get("carbon.table.block.size.in.mb") == DEFAULTS["carbon.table.block.size.in.mb"]
    # command options beat table properties
    opts = table.conf.with_overrides({"carbon.page.rows": "7"})
    assert opts.get_int("carbon.page.rows") == 7
    assert opts.get_float("carbon.bloom.fpp") == pytest.approx(0.3)
    # the store-level conf is not changed by a table's properties
    assert store.conf.get_int("carbon.page.rows") == 5000


def test_load_conf_overrides_beat_the_file(tmp_path: Path) -> None:
    f = _write(tmp_path / "c.properties", "carbon.page.rows=5000\n")
    assert load_conf(f, **{"carbon.page.rows": "9"}).get_int("carbon.page.rows") == 9


def test_unknown_keys_are_refused_everywhere() -> None:
    conf = load_conf()
    with pytest.raises(ConfigError, match="unknown configuration key 'carbon.nope'"):
        conf.with_overrides({"carbon.nope": "1"})
    with pytest.raises(ConfigError, match="unknown configuration key"):
        conf.get("carbon.nope")
    with pytest.raises(ConfigError, match="unknown configuration key"):
        load_conf(None, **{"nope": "1"})


def test_bad_values_are_refused_when_the_conf_is_built() -> None:
    # Checked where the value enters (here: options), not later by the getter that uses it.
    for key, raw, message in [
        ("carbon.page.rows", "many", "carbon.page.rows must be a number"),
        ("carbon.bloom.fpp", "low", "carbon.bloom.fpp must be a number"),
        ("carbon.enable.auto.load.merge", "perhaps", "true or false"),
        ("carbon.compaction.level.threshold", "4;3", "4,3"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_conf().with_overrides({key: raw})


# Values that made commands run away or act at once: a page of 0 rows never ends (a 30-row
# compaction grew to 18 GB), a negative retention deleted Compacted segments immediately.
RANGE_CASES = [
    ("carbon.page.rows", "0", "at least 1"),
    ("carbon.page.rows", "-1", "at least 1"),
    ("carbon.page.rows", "99999999999999999999", "at most 2147483647"),
    ("carbon.segment.retention.minutes", "-100", "at least 1"),
    ("carbon.trash.retention.days", "-1", "at least 0"),
    ("carbon.blocklet.size.in.mb", "0", "greater than 0"),
    ("carbon.blocklet.size.in.mb", "1e300", "at most 4096"),
    ("carbon.table.block.size.in.mb", "-0.5", "greater than 0"),
    ("carbon.bloom.fpp", "1", "less than 1"),
    ("carbon.bloom.fpp", "nan", "must be a number"),
    ("carbon.bloom.fpp", "inf", "must be a number"),
    ("carbon.lock.retries", "0", "at least 1"),
    ("carbon.lock.retry.timeout.sec", "-1", "at least 0"),
    ("carbon.major.compaction.size", "0", "at least 1"),
    ("carbon.dictionary.chunk.size", "0", "at least 1"),
    ("carbon.read.partition.size.mb", "0", "at least 1"),
    ("carbon.driver.index.cache.size.mb", "0", "at least 1"),
    ("carbon.read.local.rows", "-1", "at least 0"),
    ("carbon.index.snapshot.max.lag", "-1", "at least 0"),
    ("carbon.compaction.level.threshold", "4,3,2,1,1,1,1,1,1,1,1", "0 to 10"),
    ("carbon.compaction.level.threshold", "4,-3", "at least 0"),
    ("carbon.bad.records.action", "DROP", "one of FAIL, FORCE, REDIRECT, IGNORE"),
    ("carbon.load.csv.parser", "fast", "one of auto, spark"),
    ("carbon.statistics.enabled", "maybe", "true or false"),
    ("carbon.storelocation", "", "non-empty"),
    ("carbon.page.rows", "\u0661", "must be a number"),  # an Arabic-Indic digit one
    ("carbon.page.rows", "1_000", "must be a number"),
]


@pytest.mark.parametrize(("key", "raw", "allowed"), RANGE_CASES)
def test_out_of_range_values_are_refused_from_every_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, raw: str, allowed: str
) -> None:
    f = _write(tmp_path / "c.properties", f"{key}={raw}\n")
    expected = f"configuration key {key} must be"
    for make in (
        lambda: load_conf(f),  # --conf FILE
        lambda: load_conf().with_overrides({key: raw}),  # command options, Spark options
        lambda: CarbonConf({**DEFAULTS, key: raw}),  # any conf built directly
    ):
        with pytest.raises(ConfigError) as info:
            make()
        message = str(info.value)
        assert expected in message and allowed in message and "\n" not in message
        if raw.strip():
            assert repr(raw)[1:-1] in message
    monkeypatch.setenv("CARBON_CONF", str(f))
    with pytest.raises(ConfigError, match=str(f).replace("\\", "\\\\")):
        load_conf()


@pytest.mark.parametrize("key", sorted(KEY_TYPES))
def test_every_declared_default_is_in_range(key: str) -> None:
    assert key in DEFAULTS
    check_value(KEY_TYPES[key], key, DEFAULTS[key])


def test_a_key_without_a_declared_type_is_free_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DEFAULTS, "carbon.some.new.key", "5")
    conf = load_conf().with_overrides({"carbon.some.new.key": "  anything at all "})
    assert conf.get("carbon.some.new.key") == "  anything at all "
    assert load_conf().get_int("carbon.some.new.key") == 5
    with pytest.raises(ConfigError, match="carbon.some.new.key must be a number"):
        conf.get_int("carbon.some.new.key")


def test_table_properties_are_checked_against_their_ranges(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    for prop, raw, allowed in [
        ("page_rows", "3000000000", "at most 2147483647"),
        ("blocklet_size_in_mb", "5000", "at most 4096"),
        ("compaction_level_threshold", "4,101", "at most 100"),
        ("allowed_compaction_days", "99999999", "at most 36500"),
    ]:
        with pytest.raises(SchemaError, match=f"table property {prop} must be .*{allowed}"):
            store.create_table("t", "id long", properties={prop: raw})
    assert not store.exists("t")


def test_non_utf8_conf_file_is_one_clear_error(tmp_path: Path) -> None:
    f = tmp_path / "c.properties"
    f.write_bytes(b"# ok\ncarbon.page.rows=\xff\n")
    with pytest.raises(ConfigError, match="is not UTF-8 text: byte 0xff on line 2"):
        load_conf(f)


@pytest.mark.parametrize(
    ("raw", "value"),
    [("true", True), ("TRUE", True), ("1", True), ("yes", True),
     ("false", False), ("0", False), ("no", False), ("", False)],
)
def test_get_bool(raw: str, value: bool) -> None:
    conf = load_conf().with_overrides({"carbon.enable.auto.load.merge": raw})
    assert conf.get_bool("carbon.enable.auto.load.merge") is value


def test_store_location_comes_from_conf(tmp_path: Path) -> None:
    f = _write(tmp_path / "c.properties", f"carbon.storelocation={tmp_path / 'elsewhere'}\n")
    store = Store(conf=load_conf(f))
    store.create_table("t", "id long")
    assert (tmp_path / "elsewhere" / "default" / "t" / "Metadata" / "schema").is_file()
    # an explicit location beats the conf
    other = Store(str(tmp_path / "explicit"), conf=load_conf(f))
    assert other.sfs.base == str(tmp_path / "explicit")
