"""Function calls of DML expressions checked against Spark's argument counts.

sqlglot reads ``substr(c, 1, 2, 3)`` as a two-or-three-argument SUBSTRING (the extra argument
is dropped) and ``if(c, a)`` as a CASE without ELSE (the missing argument is filled), where
Spark refuses both statements (``WRONG_NUM_ARGS``); it also reads names Spark does not have
(``strpos``, ``iif``) as functions it knows. A DML expression must fail where Spark fails, so
each call is counted on the tokens (the parsed tree no longer shows a dropped argument) and
checked against :data:`SPARK_ARITY` before the expression is translated (``segments.merge``).
"""

from __future__ import annotations

import sqlglot

from carbonstore.errors import UserError

__all__ = ["NOT_SPARK_FUNCTIONS", "SPARK_ARITY", "check_calls"]

# Spark's argument counts (min, max; None: any number) of the functions whose calls sqlglot
# reads as verified nodes: sqlglot drops arguments past its own count (substr(a, 1, 2, 3))
# and fills missing ones (if(c, a)), where Spark refuses the statement (WRONG_NUM_ARGS).
# Probed from Spark 4 (tests/spark/test_wrong_answers_dml_calls.py checks the table).
SPARK_ARITY: dict[str, tuple[int, int | None]] = {
    **dict.fromkeys(("abs", "ascii", "char_length", "character_length", "length", "len",
                     "day", "dayofmonth", "dayofweek", "dayofyear", "month", "year",
                     "weekday", "initcap", "lcase", "lower", "ucase", "upper", "reverse",
                     "md5", "sha", "sha1", "isnan", "sign", "signum", "boolean", "tinyint",
                     "smallint", "int", "bigint", "float", "double", "decimal", "date",
                     "timestamp", "string", "binary"), (1, 1)),
    **dict.fromkeys(("ifnull", "nvl", "left", "right", "sha2", "mod", "pmod", "pow",
                     "power", "nanvl", "nullif", "repeat"), (2, 2)),
    **dict.fromkeys(("locate", "lpad", "rpad", "replace", "substr", "substring", "position"),
                    (2, 3)),
    **dict.fromkeys(("to_date", "to_timestamp", "trim", "ltrim", "rtrim", "btrim"), (1, 2)),
    "instr": (2, 4), "if": (3, 3), "coalesce": (1, None), "concat": (0, None), "greatest": (2, None),
    "least": (2, None),
}
# names sqlglot reads as verified nodes that are no Spark function (Spark fails the statement)
NOT_SPARK_FUNCTIONS = frozenset({
    "charindex", "date_to_date_str", "day_of_month", "day_of_week", "day_of_year", "iif",
    "is_nan", "leftpad", "rightpad", "str_position", "strpos", "time_to_time_str",
    "ts_or_ds_to_date", "ts_or_ds_to_date_str", "timestamp_ltz", "timestamp_ntz",
})
# calls Spark takes with more arguments than sqlglot translates: refused past this count
_TRANSLATED_ARITY = {"instr": 2}
# words inside a call that make it SQL syntax rather than a list of arguments
# (trim(BOTH 'x' FROM c), substring(c FROM 2 FOR 3), position('a' IN c))
_CALL_SYNTAX = frozenset({"from", "for", "in", "both", "leading", "trailing", "as"})


def check_calls(text: str, what: str) -> None:
    """Refuse a call of a function with an argument count Spark refuses, or of a function
    Spark does not have that sqlglot would translate (counted on the tokens: the parsed tree
    no longer shows arguments sqlglot dropped)."""
    from sqlglot.tokens import TokenType

    tokens = sqlglot.Dialect.get_or_raise("spark").tokenize(text)
    for i, tok in enumerate(tokens[:-1]):
        name = tok.text.lower()
        if tokens[i + 1].token_type != TokenType.L_PAREN or tok.token_type in (
                TokenType.IDENTIFIER, TokenType.STRING) or (
                i and tokens[i - 1].token_type in (TokenType.ALIAS, TokenType.DOT)):
            continue
        if name in NOT_SPARK_FUNCTIONS:
            raise UserError(f"{what}: {name} is not a Spark function")
        if name not in SPARK_ARITY:
            continue
        depth, count, syntax = 0, 0, False
        for j in range(i + 1, len(tokens)):
            kind = tokens[j].token_type
            if kind in (TokenType.L_PAREN, TokenType.L_BRACKET):
                depth += 1
            elif kind in (TokenType.R_PAREN, TokenType.R_BRACKET):
                depth -= 1
                if depth == 0:
                    count += j > i + 2  # no argument between the parentheses: 0
                    break
            elif depth == 1 and kind == TokenType.COMMA:
                count += 1
            elif depth == 1 and tokens[j].text.lower() in _CALL_SYNTAX:
                syntax = True
        if not syntax and count > _TRANSLATED_ARITY.get(name, count):
            raise UserError(f"{what}: {name} with {count} arguments is not supported in DML "
                            f"expressions (its result could differ from Spark's): {text[:80]}")
        low, high = SPARK_ARITY[name]
        if not syntax and (count < low or (high is not None and count > high)):
            takes = (f"{low}" if low == high else f"{low} or more" if high is None
                     else f"{low} to {high}")
            raise UserError(f"{what}: {name} takes {takes} argument{'s' * (takes != '1')} in "
                            f"Spark, not {count}: {text[:80]}")
