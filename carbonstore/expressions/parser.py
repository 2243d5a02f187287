"""The SQL WHERE parser: a sqlglot condition -> an unbound expression (expr.py nodes).

:func:`parse_where` refuses what it cannot represent with one-line messages
(:func:`sql_error_message`); :func:`and_terms` splits a sqlglot condition on its top-level ANDs.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from carbonstore.errors import ExpressionError
from carbonstore.expressions.expr import (
    MAX_NESTING,
    AlwaysFalse,
    AlwaysTrue,
    And,
    Comparison,
    Eq,
    Expr,
    Gt,
    GtEq,
    In,
    IsNaN,
    IsNotNull,
    IsNull,
    Lt,
    LtEq,
    Not,
    NotEq,
    Or,
    StartsWith,
    balanced,
    too_deep_error,
)
from carbonstore.expressions.literals import (
    spark_date,
    spark_double,
    spark_integer,
    spark_timestamp,
)
from carbonstore.expressions.sql_checks import check_sql_text
from carbonstore.limits import MAX_NUMBER_LITERAL

__all__ = ["and_terms", "parse_where", "sql_error_message"]


_PARSED_ENTRIES = 256  # filters remembered, least recently used first out
_PARSED_TEXT_LIMIT = 4096  # longer filters are parsed every time (their parse dominates anyway)


def parse_where(sql: str) -> Expr:
    """Parse a Spark SQL boolean condition, e.g. ``"d >= DATE '2024-01-01' AND s LIKE 'ab%'"``.

    Supports AND / OR / NOT, comparisons, [NOT] IN, IS [NOT] NULL, [NOT] BETWEEN,
    [NOT] LIKE 'prefix%' (or a pattern without wildcards), ``isnan(x)``, and literals:
    numbers, strings, TRUE / FALSE, NULL, DATE '...', TIMESTAMP '...', CAST('...' AS type).
    The result is unbound; :func:`bind` checks the column names and literal types.

    The expressions of the last few hundred filter texts are remembered (a bounded LRU):
    expressions are immutable and parsing depends on the text alone, so planning the same
    filter again does not run sqlglot again. Refused filters are not remembered.

    Raises:
        ExpressionError: a syntax error (with sqlglot's message) or an unsupported construct
            such as a column compared with a column.
    """
    if not isinstance(sql, str) or len(sql) > _PARSED_TEXT_LIMIT:
        return _parse_where(sql)
    return _parsed(sql)


def _parse_where(sql: str) -> Expr:
    """:func:`parse_where` without the memory."""
    from sqlglot import exp
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import ParseError, TokenError

    if not sql or not sql.strip():
        raise ExpressionError("empty filter; write a condition such as \"x > 3\"")
    check_sql_text(sql, "filter")
    bad = _not_utf8(sql)
    if bad is not None:
        raise ExpressionError(f"filter {_shown(sql)} is not valid UTF-8 text ({bad})")
    spark = Dialect.get_or_raise("spark")
    try:
        tokens = spark.tokenize(sql)
    except TokenError:
        raise ExpressionError(f"cannot parse filter {_shown(sql)}: {_unclosed(sql)}") from None
    if _nesting(tokens) > MAX_NESTING:
        raise too_deep_error(f"filter {_shown(sql)}")
    try:
        trees = spark.parser().parse(tokens, sql)
        if len(trees) != 1 or trees[0] is None:
            raise ExpressionError(f"cannot parse filter {_shown(sql)}: give one condition, without ';'")
        return _SqlConverter(sql, exp).convert(trees[0])
    except ParseError as err:
        raise ExpressionError(f"cannot parse filter {_shown(sql)}: {_syntax_error(err)}") from None
    except RecursionError:
        raise too_deep_error(f"filter {_shown(sql)}") from None


def _shown(text: str, limit: int = 120) -> str:
    """``text`` quoted for a one-line message, shortened in the middle when long."""
    if len(text) > limit:
        text = f"{text[: limit // 2]} ... {text[-limit // 2:]}"
    return repr(text)


def _not_utf8(text: str) -> str | None:
    """Where ``text`` holds a byte that is not UTF-8 (a lone surrogate, as Python decodes
    such bytes of command-line arguments), or None."""
    for i, ch in enumerate(text):
        if "\ud800" <= ch <= "\udfff":
            code = ord(ch)
            byte = f"byte 0x{code - 0xDC00:02x}" if code >= 0xDC80 else f"character U+{code:04X}"
            return f"{byte} at position {i}"
    return None


def _nesting(tokens: list[Any]) -> int:
    """How deep parentheses, NOT and unary signs nest (each costs the parser a level)."""
    from sqlglot.tokens import TokenType

    def kinds(*names: str) -> set[Any]:  # names differ between sqlglot versions (TILDA/TILDE)
        return {getattr(TokenType, n) for n in names if hasattr(TokenType, n)}

    prefix = kinds("NOT", "DASH", "PLUS", "TILDA", "TILDE")
    opens = kinds("L_PAREN", "L_BRACKET", "CASE")
    closes = kinds("R_PAREN", "R_BRACKET", "END")
    depth = deepest = 0
    run: list[int] = []  # prefix operators open around each parenthesis level
    unary = 0  # prefix operators in a row at this level (an operand ends the run)
    for tok in tokens:
        if tok.token_type in opens:
            run.append(unary)
            depth += 1
            unary = 0
        elif tok.token_type in closes:
            depth = max(0, depth - 1)
            if run:
                run.pop()
            unary = 0  # the group is an operand: the prefixes before it are applied
        elif tok.token_type in prefix:
            unary += 1
        else:
            unary = 0  # an operand (or a binary operator): a run of prefixes ends
            continue
        deepest = max(deepest, depth + unary + sum(run))
    return deepest


# sqlglot node names -> what the user typed
_SQL_WORDS = {
    "EQ": "=", "NEQ": "<>", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=", "NullSafeEQ": "<=>",
    "And": "AND", "Or": "OR", "Not": "NOT", "Like": "LIKE", "ILike": "ILIKE", "In": "IN",
    "Between": "BETWEEN", "Is": "IS", "Add": "+", "Sub": "-", "Mul": "*", "Div": "/",
    "Mod": "%", "Neg": "-", "Cast": "CAST", "TryCast": "TRY_CAST",
}


def sql_error_message(err: Any) -> str:
    """sqlglot's ParseError in the user's words (no class names, no tokens, no terminal
    codes), for any message about SQL text the user wrote."""
    return _syntax_error(err)


def _syntax_error(err: Any) -> str:
    """sqlglot's ParseError in the user's words (no class names, no terminal codes)."""
    first = (getattr(err, "errors", None) or [{}])[0]
    desc = str(first.get("description") or err)
    col = first.get("col")
    near = re.sub(r"\x1b\[[0-9;]*m", "", str(first.get("highlight") or "")).strip()
    where = f" at column {col}" if col else ""
    m = re.match(r"Required keyword: '(\w+)' missing for <class '[\w.]*\.(\w+)'>", desc)
    if m:
        key, node = m.groups()
        word = _SQL_WORDS.get(node, node.upper())
        if node in ("Not", "Neg", "Cast", "TryCast") or key != "this":
            side = {"low": "a lower bound", "high": "an upper bound after AND"}.get(key)
            return (f"{word!r} needs {side}{where}" if side
                    else f"{word!r} is missing what follows it{where}")
        return f"{word!r} is missing what comes before it{where}"
    if desc.startswith("Invalid expression / Unexpected token"):
        return f"unexpected {near!r}{where}" if near else f"unexpected end of the filter{where}"
    if desc.startswith("Error tokenizing"):
        return "a quoted string, quoted name or comment is not closed"
    if desc.startswith("Expecting )"):
        return f"a '(' is not closed (expected ')'{where})"
    text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", desc).split())
    text = re.sub(r"<class '[\w.]*\.(\w+)'>", lambda g: repr(_SQL_WORDS.get(g[1], g[1])), text)
    text = re.sub(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: [^>]*>",
                  lambda g: "the end" if g[1] == "SENTINEL" else repr(g[2]), text)
    return f"{text}{where}"


def _unclosed(sql: str) -> str:
    for opener, what in (("'", "a string"), ('"', "a string"), ("`", "a quoted name"),
                         ("/*", "a comment")):
        if opener in sql:
            return f"{what} opened with {opener} is not closed"
    return "it cannot be split into words"


_UNSET = object()


class _SqlConverter:
    def __init__(self, sql: str, exp: Any) -> None:
        self.sql = sql
        self.exp = exp
        self.cmp: dict[type, type[Comparison]] = {
            exp.EQ: Eq, exp.NEQ: NotEq, exp.LT: Lt, exp.LTE: LtEq, exp.GT: Gt, exp.GTE: GtEq,
        }
        self.flip: dict[type[Comparison], type[Comparison]] = {
            Eq: Eq, NotEq: NotEq, Lt: Gt, LtEq: GtEq, Gt: Lt, GtEq: LtEq,
        }

    def fail(self, node: Any, why: str) -> ExpressionError:
        text = node.sql(dialect="spark")
        shown = text if len(text) <= 80 else text[:77] + "..."
        return ExpressionError(f"cannot use {shown!r} in filter {_shown(self.sql)}: {why}")

    def chain(self, node: Any) -> list[Any]:
        """Operands of a chain of one connective, parentheses around its links dropped
        (sqlglot nests a long chain one level per term: walked here without recursion)."""
        exp = self.exp
        kind = type(node)
        out: list[Any] = []
        stack = [node]
        while stack:
            n = stack.pop()
            while isinstance(n, exp.Paren) and isinstance(n.this, kind):
                n = n.this
            if type(n) is kind:
                stack += [n.expression, n.this]
            else:
                out.append(n)
        return out

    def convert(self, node: Any) -> Expr:
        exp = self.exp
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, (exp.And, exp.Or)):
            kind = And if isinstance(node, exp.And) else Or
            return balanced(kind, [self.convert(n) for n in self.chain(node)])
        if isinstance(node, exp.Alias):  # "a IS" reads as "a AS IS"
            raise ExpressionError(
                f"cannot parse filter {_shown(self.sql)}: unexpected {node.alias!r} after "
                f"{node.this.sql(dialect='spark')!r}"
            )
        if isinstance(node, exp.Not):
            return Not(self.convert(node.this))
        if isinstance(node, exp.Boolean):
            return AlwaysTrue() if node.this else AlwaysFalse()
        if type(node) in self.cmp:
            op = self.cmp[type(node)]
            left, right = node.this, node.expression
            if self.is_column(left) and not self.is_column(right):
                return op(self.column(left), self.literal(right))
            if self.is_column(right) and not self.is_column(left):
                return self.flip[op](self.column(right), self.literal(left))
            raise self.fail(node, "compare a column with a literal (column op column and arithmetic cannot prune)")
        if isinstance(node, exp.NullSafeEQ):
            left, right = node.this, node.expression
            if not self.is_column(left):
                left, right = right, left
            value = self.literal(right)
            name = self.column(left)
            return IsNull(name) if value is None else And(Eq(name, value), IsNotNull(name))
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise self.fail(node, "IN needs a list of literals")
            return In(self.column(node.this), tuple(self.literal(e) for e in node.expressions))
        if isinstance(node, exp.Is):
            if isinstance(node.expression, exp.Null):
                return IsNull(self.column(node.this))
            if isinstance(node.expression, exp.Boolean):
                # x IS TRUE is never null: (x = TRUE) AND x IS NOT NULL
                name = self.column(node.this)
                return And(Eq(name, bool(node.expression.this)), IsNotNull(name))
            raise self.fail(node, "IS supports NULL, TRUE and FALSE")
        if isinstance(node, exp.Between):
            name = self.column(node.this)
            return And(GtEq(name, self.literal(node.args["low"])), LtEq(name, self.literal(node.args["high"])))
        if isinstance(node, exp.Like):
            return self.like(node)
        if isinstance(node, exp.IsNan):
            return IsNaN(self.column(node.this))
        if self.is_column(node):  # a bare boolean column: WHERE flag
            return Eq(self.column(node), True)
        raise self.fail(node, "not a supported predicate")

    def like(self, node: Any) -> Expr:
        if node.args.get("escape") is not None:
            raise self.fail(node, "LIKE ... ESCAPE is not supported")
        name = self.column(node.this)
        pattern = self.literal(node.expression)
        if not isinstance(pattern, str):
            raise self.fail(node, "LIKE needs a string pattern")
        prefix: list[str] = []
        i = 0
        while i < len(pattern):
            ch = pattern[i]
            if ch == "\\" and i + 1 < len(pattern):
                prefix.append(pattern[i + 1])
                i += 2
                continue
            if ch == "%":
                if pattern[i:].strip("%") == "":
                    return StartsWith(name, "".join(prefix))
                break
            if ch == "_":
                break
            prefix.append(ch)
            i += 1
        else:
            return Eq(name, "".join(prefix))
        raise self.fail(node, "only LIKE 'prefix%' or a pattern without wildcards can prune")

    def is_column(self, node: Any) -> bool:
        return isinstance(node, self.exp.Column)

    def column(self, node: Any) -> str:
        if not isinstance(node, self.exp.Column):
            raise self.fail(node, "expected a column name")
        if node.table:  # s.a: a struct field (bind refuses it when s is not a struct)
            return ".".join(str(p.name) for p in node.parts)
        return str(node.name)

    def literal(self, node: Any) -> Any:
        exp = self.exp
        if isinstance(node, exp.Paren):
            return self.literal(node.this)
        if isinstance(node, exp.Neg):
            value = self.literal(node.this)
            if isinstance(value, Decimal):
                return value.copy_negate()  # exact: unary minus rounds to 28 digits
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return -value
            raise self.fail(node, "only numbers can be negated")
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Literal):
            text = str(node.this)
            if node.is_string:
                return text
            if len(text) > MAX_NUMBER_LITERAL:
                raise self.fail(node, f"a number literal of {len(text):,} characters: at most "
                                      f"{MAX_NUMBER_LITERAL:,} are supported")
            try:
                value = Decimal(text)
            except InvalidOperation:
                raise self.fail(node, "not a number") from None
            if "e" in text.lower():  # Spark reads 1e10 / 1.5E-3 as a DOUBLE literal
                return float(value)
            return int(value) if value == value.to_integral_value() and "." not in text else value
        if isinstance(node, (exp.Cast, exp.TryCast)):
            inner = self.literal(node.this)
            target = node.to.this
            DT = exp.DataType.Type
            if inner is None:
                return None
            return self.cast(node, inner, target, DT)
        raise self.fail(node, "expected a literal (number, string, TRUE/FALSE, NULL, DATE '...')")


    def cast(self, node: Any, inner: Any, target: Any, DT: Any) -> Any:  # noqa: N803
        """The value of ``CAST(inner AS target)`` as Spark computes it (literals read as
        Spark casts text, carbonstore.expressions.literals), or a refusal where Spark fails
        or this cannot tell the value."""

        number = isinstance(inner, (int, Decimal)) and not isinstance(inner, bool)
        if isinstance(inner, str) and target == DT.DATE:
            day = spark_date(inner)
            if day is None:
                raise self.fail(node, "write dates as 'YYYY-MM-DD'")
            return day
        if isinstance(inner, str) and target in (DT.TIMESTAMP, DT.TIMESTAMPTZ, DT.TIMESTAMPNTZ,
                                                 DT.TIMESTAMPLTZ, DT.DATETIME):
            stamp = spark_timestamp(inner)
            if stamp is None:
                raise self.fail(node, "write timestamps as 'YYYY-MM-DD HH:MM:SS'")
            return stamp
        if target in (DT.DOUBLE, DT.FLOAT) and (number or isinstance(inner, (str, float))):
            value = spark_double(inner) if isinstance(inner, str) else float(inner)
            if value is None:
                raise self.fail(node, "not a number Spark reads")
            if target == DT.FLOAT:  # a FLOAT literal holds the nearest float32
                import numpy as np

                with np.errstate(over="ignore"):
                    value = float(np.float32(value))
            return value
        if target in (DT.TEXT, DT.VARCHAR, DT.CHAR) and isinstance(inner, str):
            return inner
        bits = {DT.TINYINT: 8, DT.SMALLINT: 16, DT.INT: 32, DT.BIGINT: 64}.get(target)
        if bits is not None and (number or isinstance(inner, str)):
            whole = spark_integer(inner) if isinstance(inner, str) else int(inner)  # truncates
            if whole is None or not -(2 ** (bits - 1)) <= whole < 2 ** (bits - 1):
                raise self.fail(node, "Spark cannot cast it (not a whole number, or an overflow)")
            return whole
        if target == DT.DECIMAL and (number or isinstance(inner, str)):
            return self.decimal(node, inner)
        raise self.fail(node, "unsupported CAST of a literal")

    def decimal(self, node: Any, inner: Any) -> Decimal:
        """``CAST(inner AS DECIMAL(p, s))``: rounded half up to scale s as Spark rounds it
        (DECIMAL alone is DECIMAL(10, 0)); more than p digits fails in Spark."""
        from decimal import ROUND_HALF_UP, Context


        params = [p.this for p in node.to.expressions]
        try:
            precision, scale = (int(params[0].name) if params else 10,
                                int(params[1].name) if len(params) > 1 else 0)
        except (AttributeError, ValueError):
            raise self.fail(node, "unsupported DECIMAL type") from None
        if isinstance(inner, str):
            if spark_double(inner) is None or not all(c in "+-.0123456789eE" for c in inner.strip()):
                raise self.fail(node, "not a number Spark reads")
            inner = Decimal(inner.strip())
        try:
            value = Decimal(inner).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP,
                                            context=Context(prec=100))
        except InvalidOperation:  # more digits than the context holds: far beyond p
            raise self.fail(node, f"the value does not fit DECIMAL({precision}, {scale})") from None
        if len(value.as_tuple().digits) > precision and value != 0:
            raise self.fail(node, f"the value does not fit DECIMAL({precision}, {scale})")
        return value


def and_terms(condition: Any) -> list[Any]:
    """The top-level AND terms of a sqlglot condition, in order (parentheses removed):
    what each WHERE / ON splitter of the package walks."""
    from sqlglot import exp

    out: list[Any] = []
    stack = [condition]
    while stack:
        node = stack.pop()
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            stack.extend([node.right, node.left])
        else:
            out.append(node)
    return out


# ---- the common shape without sqlglot -------------------------------------------------------
# ``name op literal [AND name op literal ...]`` with a plain number, string, DATE '...' or
# TIMESTAMP '...' literal: a lookup with a new key each time, a day range. Anything else (or
# anything unusual inside it) goes to sqlglot; the result is the expression sqlglot's parse
# gives (tests compare the two).
_TERM = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|=|<|>)\s*(-?[0-9]{1,18}(?:\.[0-9]{1,18})?|"
                   r"(?:(?i:date|timestamp)\s*)?'[^'\\\x00-\x1f\x7f\ud800-\udfff]*')\s*")
_AND = re.compile(r"(?i:and)\s")
_OPS: dict[str, type[Comparison]] = {"=": Eq, "<": Lt, "<=": LtEq, ">": Gt, ">=": GtEq}
#: The words sqlglot's Spark dialect does not read as a column name in ``word = 1`` (its
#: keywords and functions without parentheses), upper case: what the shape path leaves to
#: sqlglot. A static list, so a lookup imports no sqlglot (a fifth of a second of a fresh
#: process); tests/expressions/test_parser_shapes.py checks it against every keyword and
#: function name of the installed sqlglot.
NOT_COLUMN_NAMES = frozenset("""
    ALTER ANALYZE AND ANY AS BEGIN BETWEEN CACHE CALL CASE COMMENT COMMIT CONNECT_BY_ROOT COPY
    CREATE CROSS CURRENT_DATE CURRENT_TIMESTAMP CURRENT_USER DECLARE DELETE DESC DESCRIBE
    DISTINCT DROP ELSE EXCEPT EXECUTE EXPLAIN FALSE FETCH FOR FROM GLOB GRANT HAVING IF ILIKE
    INNER INSERT INTERSECT INTO JOIN KILL LATERAL LIKE LOAD MERGE MINUS NOT NOTNULL NULL ON
    OPTIMIZE OR OUTER PARTITIONED_BY PIVOT PRAGMA PREPARE QUALIFY REFRESH REGEXP RENAME
    RETURNING REVOKE RLIKE ROLLBACK SELECT SERDEPROPERTIES SESSION_USER SET SHOW TABLESAMPLE
    THEN TRUE TRUNCATE UNCACHE UNION UNPIVOT UPDATE USE USING VACUUM VALUES WHEN WHERE WITH XOR
""".split())


def _plain_name(name: str) -> bool:
    """``name`` is a column name to sqlglot (not a keyword or a function without
    parentheses such as CURRENT_DATE); sqlglot's keywords are case-insensitive."""
    return name.upper() not in NOT_COLUMN_NAMES


def _simple(sql: str) -> Expr | None:
    """The expression of a filter of the common shape, or None (parse it with sqlglot)."""
    terms: list[Expr] = []
    pos, end = 0, len(sql)
    while True:
        m = _TERM.match(sql, pos)
        if m is None:
            return None
        name, op, lit = m.groups()
        if not _plain_name(name):
            return None
        if lit[-1] == "'" and lit[0] != "'":  # DATE '...' / TIMESTAMP '...': Spark's cast
            text = lit[lit.index("'") + 1:-1]
            value = spark_date(text) if lit[0] in "dD" else spark_timestamp(text)
            if value is None:
                return None  # sqlglot's path says why
        else:
            value = lit[1:-1] if lit[0] == "'" else Decimal(lit) if "." in lit else int(lit)
        terms.append(_OPS[op](name, value))
        pos = m.end()
        if pos == end:
            return balanced(And, terms)
        if not sql[pos - 1].isspace() or (a := _AND.match(sql, pos)) is None:
            return None
        pos = a.end()


def _parse_text(sql: str) -> Expr:
    got = _simple(sql)
    return got if got is not None else _parse_where(sql)


# filter text -> its (immutable) expression; an exception is not remembered
_parsed = functools.lru_cache(maxsize=_PARSED_ENTRIES)(_parse_text)
