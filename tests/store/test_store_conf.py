"""Configuration: defaults < file (--conf / CARBON_CONF) < table properties < options."""

from __future__ import annotations

from pathlib import Path

import pytest

from carbonstore.errors import ConfigError
from carbonstore.store import CarbonConf, Store, load_conf
from carbonstore.store.conf import DEFAULTS, TABLE_PROPERTY_KEYS
from carbonstore.store.schema import TABLE_PROPERTIES

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


def test_typed_getters_refuse_bad_values() -> None:
    conf = load_conf().with_overrides({
        "carbon.page.rows": "many", "carbon.bloom.fpp": "low",
        "carbon.enable.auto.load.merge": "perhaps", "carbon.compaction.level.threshold": "4;3",
    })
    with pytest.raises(ConfigError, match="carbon.page.rows must be an integer"):
        conf.get_int("carbon.page.rows")
    with pytest.raises(ConfigError, match="must be a number"):
        conf.get_float("carbon.bloom.fpp")
    with pytest.raises(ConfigError, match="true or false"):
        conf.get_bool("carbon.enable.auto.load.merge")
    with pytest.raises(ConfigError, match="4,3"):
        conf.get_int_list("carbon.compaction.level.threshold")


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
