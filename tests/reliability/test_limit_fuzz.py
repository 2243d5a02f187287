"""The CLI fuzz of the documented input limits (docs/reliability.md#limits): the shapes of
every limit (tests/reliability/limit_shapes.py) drawn by hypothesis for each command that
reads them, the same shapes far beyond their limits as fixed cases, and odd store
locations. The oracle is test_cli_fuzz's: one line and no traceback, and never a line of
the CLI's last line of defence (an input that reached it needs a check of its own).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.store import objectstore
from tests.reliability.limit_shapes import (
    ODD_URIS,
    SCHEMA_SHAPES,
    SETS,
    WHERE_SHAPES,
    far_cases,
)
from tests.reliability.test_cli_fuzz import CI, COUNTS, _build, _exercise, check, run_inprocess


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """As test_cli_fuzz's: ``read`` is never changed, commands may change ``scratch``."""
    base = tmp_path_factory.mktemp("limits")
    out = {"read": str(base / "read"), "scratch": str(base / "scratch"), "base": str(base)}
    _build(out["read"], base / "inputs")
    _build(out["scratch"], base / "inputs")
    return out

# ---- every limit's shapes, on the valid table ---------------------------------------------------

LIMIT_SHAPES: dict[str, st.SearchStrategy[list[str]]] = {
    "prune": WHERE_SHAPES.map(lambda w: ["t", "--where", w]),
    "delete": WHERE_SHAPES.map(lambda w: ["t", "--where", w]),
    "update": st.tuples(SETS, st.sampled_from([[], ["--where", "order_id = 3"]])).map(
        lambda p: ["t", "--set", p[0], *p[1]]),
    "create": SCHEMA_SHAPES.map(lambda schema: [f"x{uuid.uuid4().hex[:8]}", "--schema", schema]),
    "alter": SCHEMA_SHAPES.map(lambda schema: ["t", "add-column", schema]),
    "sql": st.one_of(WHERE_SHAPES.map(lambda w: f"SELECT count(*) FROM default.t WHERE {w}"),
                     SETS.map(lambda e: f"SELECT {e} FROM default.t")).map(lambda q: [q]),
    "query": WHERE_SHAPES.map(lambda w: ["t", "--where", w]),
}


def _on_spark(values: list[Any], command: Callable[[Any], str]) -> list[Any]:
    """DELETE and UPDATE conditions the index cannot bind run on Spark."""
    return [pytest.param(v, marks=pytest.mark.spark) if command(v) in ("delete", "update") else v
            for v in values]


@pytest.mark.parametrize("command", _on_spark(sorted(LIMIT_SHAPES), lambda c: c))
@given(data=st.data())
@settings(CI, max_examples=12)
def test_limit_shapes(stores: dict[str, str], command: str, data: st.DataObject) -> None:
    """Deep nesting, long chains, huge literals, control characters, deep and wide schemas,
    for each command that reads them: each refused in one line or answered, never by the
    CLI's last line of defence."""
    _exercise(stores, command, data.draw(LIMIT_SHAPES[command]),
              write=command in ("delete", "update", "create", "alter"))


@pytest.mark.parametrize("argv", _on_spark(far_cases(), lambda a: a[0]),
                         ids=lambda a: f"{a[0]}-{a[-1][:12]}")
def test_far_beyond_each_limit(stores: dict[str, str], argv: list[str]) -> None:
    _exercise(stores, argv[0], argv[1:], write=argv[0] in ("delete", "update", "create", "alter"))


# ---- odd store locations ---------------------------------------------------------------------


class _WouldConnect(BaseException):
    pass


def _no_network(*_: object, **__: object) -> None:
    raise _WouldConnect


@given(location=ODD_URIS, command=st.sampled_from([["tables"], ["describe", "t"],
                                                   ["show-segments", "t", "--json"]]))
@settings(CI, max_examples=80)
def test_odd_store_locations(monkeypatch: pytest.MonkeyPatch, location: str,
                             command: list[str]) -> None:
    """A location is refused in one line before any library sees it; one that passes every
    check would connect (the S3 client is replaced: no network in a test)."""
    monkeypatch.setattr(objectstore, "s3_filesystem", _no_network)
    monkeypatch.setattr(objectstore, "_bucket_region", lambda _: "us-east-1")
    argv = ["--store", location, *command]
    try:
        result = run_inprocess(argv)
    except _WouldConnect:
        COUNTS["cases"] += 1
        return
    check(result, argv)
    if "://" in location and ("/../" in location or location.endswith("/..")):
        assert result.code == 2, (argv, result)


