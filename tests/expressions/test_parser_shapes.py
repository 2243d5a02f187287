"""The parser's path for ``name op literal [AND ...]`` filters gives sqlglot's expression.

parse_where reads filters of that common shape (a lookup with a new key each time) without
sqlglot; the oracle is the sqlglot parse of the same text (``parser._parse_where``): same
nodes, same names, literals of the same type and value - or the shape is refused and the
text goes to sqlglot.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from carbonstore.errors import ExpressionError
from carbonstore.expressions import parser
from carbonstore.expressions.parser import parse_where


def _shape(e: Any) -> Any:
    """A structure that differs when the nodes, names or literal types differ (``==`` alone
    holds 5 == 5.0 == Decimal(5) == True)."""
    fields = getattr(type(e), "__match_args__", None)  # an expression node or a BoundRef
    if fields is not None and not isinstance(e, type):
        return (type(e).__name__, *(_shape(getattr(e, f)) for f in fields))
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
DAYS = st.sampled_from(["'2024-02-10'", "'2024-2-1'", "'2024'", "' 2024-02-10 '", "'2024-02-10 10:00:00'",
                        "'2024-02-30'", "'x'", "''", "'2024-02-10T10:11:12.5'", "'+2024-01-01'", "'1-1-1'"])
DATED = st.builds(lambda w, sp, d: f"{w}{sp}{d}", st.sampled_from(["DATE", "date", "Timestamp", "TIMESTAMP",
                                                                   "datetime", "DATE_"]),
                  st.sampled_from(["", " ", "\n"]), DAYS | STRINGS)
JOIN = st.sampled_from([" and ", " AND ", " And ", "and ", " and", " or ", "\nand\n", " && ", " and  "])


@st.composite
def filters(draw: Any) -> str:
    terms = []
    for _ in range(draw(st.integers(1, 4))):
        lit = draw(INTS | STRINGS | DATED)
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
                 "s = 'a and b'", "id = 0005", "d >= DATE '2024-02-10' AND d < DATE '2024-02-13'",
                 "t = timestamp'2024-02-10 10:00:00'"]:
        assert parser._simple(text) is not None, text
        assert _shape(parser._simple(text)) == _sqlglot(text)
    for text in ["id = 5.", "id = 1e3", "current_date = 1", "true = 1", "id = 5and x = 1",
                 "s = 'it''s'", "s = 'a\\\\b'", "id = 5 or x = 1", "id = 1234567890123456789",
                 "5 = id", "id = 5 -- c"]:
        assert parser._simple(text) is None, text


def _sqlglot_words() -> set[str]:
    """Every one-word keyword and function name the installed sqlglot's Spark dialect knows."""
    import re

    from sqlglot.dialects.dialect import Dialect

    spark = Dialect.get_or_raise("spark")
    tok, par = spark.tokenizer_class, spark.parser_class
    words: set[str] = set()
    for table in (tok.KEYWORDS, par.FUNCTIONS, par.NO_PAREN_FUNCTION_PARSERS, par.FUNCTION_PARSERS,
                  getattr(par, "NO_PAREN_FUNCTIONS", {}), getattr(par, "PRIMARY_PARSERS", {}),
                  getattr(par, "RANGE_PARSERS", {}), getattr(par, "STATEMENT_PARSERS", {}),
                  getattr(par, "PROPERTY_PARSERS", {}), getattr(par, "CONSTRAINT_PARSERS", {})):
        for key in table:
            word = key if isinstance(key, str) else getattr(key, "name", str(key))
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word):
                words.add(word.upper())
    return words


def test_the_static_list_of_words_that_are_not_names_is_sqlglots() -> None:
    """The shape path decides without sqlglot which words are column names; for every
    keyword and function name of the installed sqlglot (in three spellings) it decides as
    sqlglot's own parse of ``word = 1`` does. Fails when a sqlglot upgrade adds a keyword."""
    words = _sqlglot_words()
    assert len(words) > 500
    assert parser.NOT_COLUMN_NAMES <= words
    for word in sorted(words):
        for spelled in (word, word.lower(), word.capitalize()):
            text = f"{spelled} = 1"
            expected = _sqlglot(text)
            got = parser._simple(text)
            if got is None:
                assert word in parser.NOT_COLUMN_NAMES, f"{spelled} is a column name to sqlglot"
            else:
                assert _shape(got) == expected, text


def test_a_lookup_imports_no_sqlglot() -> None:
    """parse_where of the common shape runs without importing sqlglot (a fresh process)."""
    import subprocess
    import sys

    code = ("import sys; from carbonstore.expressions.parser import parse_where; "
            "parse_where(\"id = 5 AND k = 'abc'\"); parse_where('Date >= 3'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sqlglot'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
