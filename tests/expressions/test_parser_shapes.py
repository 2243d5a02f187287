"""The parser's path for ``name op literal [AND ...]`` filters gives sqlglot's expression.

parse_where reads filters of that common shape (a lookup with a new key each time) without
sqlglot; the oracle is the sqlglot parse of the same text (``parser._parse_where``): same
nodes, same names, literals of the same type and value - or the shape is refused and the
text goes to sqlglot.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.errors import ExpressionError
from carbonstore.expressions import parser
from carbonstore.expressions.parser import parse_where


def _shape(e: Any) -> Any:
    """A structure that differs when the nodes, names or literal types differ (``==`` alone
    holds 5 == 5.0 == Decimal(5) == True)."""
    if dataclasses.is_dataclass(e) and not isinstance(e, type):
        return (type(e).__name__, *(_shape(getattr(e, f.name)) for f in dataclasses.fields(e)))
    if isinstance(e, tuple):
        return tuple(_shape(x) for x in e)
    return (type(e).__name__, repr(e))


def _sqlglot(text: str) -> Any:
    try:
        return _shape(parser._parse_where(text))
    except ExpressionError:
        return "refused"


NAMES = st.sampled_from(["id", "Id", "x_1", "_a", "k", "date", "timestamp", "true", "null", "and",
                         "not", "in", "current_date", "current_timestamp", "interval", "select",
                         "nan", "inf", "e", "case", "end", "is", "like", "between", "or"])
OPS = st.sampled_from(["=", "<", "<=", ">", ">=", "==", "<>", "!=", "< =", "=>", "<=>"])
INTS = st.integers(-10**20, 10**20).map(str) | st.sampled_from(["0005", "-0", "1e3", "5.", "5.0", "-5",
                                                                "- 5", "--5", "0x1f", "1_000", "0.999", "-0.0", "5.50", ".5", "1.2.3"]) | st.builds(
    lambda i, f: f"{i}.{f}", st.integers(-10**19, 10**19), st.integers(0, 10**20))
STRINGS = st.lists(st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from(
    ["'", "\\", "\n", "\t", "%", "_", "and", "${x}", "\x7f", "\x00"]), max_size=8).map(lambda s: "'" + "".join(s) + "'")
SPACE = st.sampled_from(["", " ", "  ", "\t", "\n"])
JOIN = st.sampled_from([" and ", " AND ", " And ", "and ", " and", " or ", "\nand\n", " && ", " and  "])


@st.composite
def filters(draw: Any) -> str:
    terms = []
    for _ in range(draw(st.integers(1, 4))):
        lit = draw(INTS | STRINGS)
        name, op = draw(NAMES), draw(OPS)
        s1, s2, s3 = draw(SPACE), draw(SPACE), draw(SPACE)
        terms.append(f"{s1}{name}{s2}{op}{s3}{lit}{draw(SPACE)}")
    out = terms[0]
    for t in terms[1:]:
        out += draw(JOIN) + t
    return out


@settings(max_examples=600, deadline=None)
@given(filters())
def test_the_shape_path_gives_the_sqlglot_expression(text: str) -> None:
    got = parser._simple(text)
    if got is not None:
        assert _shape(got) == _sqlglot(text), text
        assert _shape(parse_where(text)) == _shape(got)


def test_lookups_take_the_shape_path() -> None:
    for text in ["id = 5", "k = 'abc'", "id >= 3 and id <= 9", "a=1 AND b='x y' and c<-4", "v > 0.999",
                 "s = 'a and b'", "id = 0005"]:
        assert parser._simple(text) is not None, text
        assert _shape(parser._simple(text)) == _sqlglot(text)
    for text in ["id = 5.", "id = 1e3", "current_date = 1", "true = 1", "id = 5and x = 1",
                 "s = 'it''s'", "s = 'a\\\\b'", "id = 5 or x = 1", "id = 1234567890123456789",
                 "5 = id", "id = 5 -- c"]:
        assert parser._simple(text) is None, text
