"""The commands' JSON printer hands orjson's bytes to a UTF-8 stdout as they are: the same
bytes the text stream wrote before (decoded, a newline added, encoded again)."""

from __future__ import annotations

import io
import subprocess
import sys

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.cli import _common
from carbonstore.cli._common import print_json

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)  # any str orjson takes
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                  st.floats(allow_nan=False, allow_infinity=False), _text, st.binary(max_size=6))
_json = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)), max_leaves=20)


def _through_text(obj: object) -> bytes:
    """What the printer wrote before: the text, decoded, with a newline, through a text stream."""
    data = orjson.dumps(obj, default=_common._default, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    return (data.decode() + "\n").encode("utf-8")


def _printed(obj: object, monkeypatch: object, encoding: str = "utf-8") -> bytes:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, newline="\n")
    monkeypatch.setattr(sys, "stdout", stream)  # type: ignore[attr-defined]
    stream.write("before\n")  # text written earlier stays first
    print_json(obj)
    stream.write("after\n")
    stream.flush()
    return raw.getvalue()


@settings(max_examples=200, deadline=None)
@given(_json)
def test_the_printed_bytes_are_the_texts(obj: object) -> None:
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        assert _printed(obj, mp) == b"before\n" + _through_text(obj) + b"after\n"


def test_a_stream_of_another_encoding_is_written_as_text(monkeypatch: object) -> None:
    obj = {"path": "caf\u00e9/\u00e5", "n": 1}
    got = _printed(obj, monkeypatch, encoding="latin-1")
    assert got == ("before\n" + _through_text(obj).decode() + "after\n").encode("latin-1")


def test_a_stream_without_bytes_below_gets_the_text(monkeypatch: object) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)  # type: ignore[attr-defined]
    print_json({"a": ["\u00e9", 1]})
    assert out.getvalue().encode() == _through_text({"a": ["\u00e9", 1]})


def test_a_command_prints_the_same_bytes_through_a_pipe() -> None:
    code = ("import sys; from carbonstore.cli._common import print_json; "
            "print('head'); print_json({'x': ['\\u00e9', 2, None], 'y': {'z': 1.5}}); print('tail')")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60,
                         env={"PYTHONIOENCODING": "utf-8", "PATH": "/usr/bin:/bin",
                              "PYTHONPATH": ":".join(p for p in sys.path if p)}).stdout
    assert got == b"head\n" + _through_text({"x": ["\u00e9", 2, None], "y": {"z": 1.5}}) + b"tail\n"
