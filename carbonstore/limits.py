"""The limits of user input, in one place (docs/reliability.md, "Limits").

Every input a user controls - filters, ``--set`` and SQL text, schema strings, conf files,
store locations, names - is checked against these numbers before any work, and refused
with one line naming the limit (exit status 2 from the CLI). Each is chosen far above what
a real table or statement needs and far below what would exhaust Python's recursion limit,
memory or time; the docs say why each number was chosen.
"""

from __future__ import annotations

__all__ = [
    "MAX_COLUMNS",
    "MAX_CONF_FILE_BYTES",
    "MAX_EXPRESSION_DEPTH",
    "MAX_IDENTIFIER",
    "MAX_LOCATION_LENGTH",
    "MAX_NESTING",
    "MAX_NUMBER_LITERAL",
    "MAX_SQL_TEXT",
    "MAX_TYPE_DEPTH",
]

#: Parentheses, NOT and unary signs nested in a ``--where`` filter (its AND / OR chains are
#: no nesting: an OR of 3,000 terms is fine).
MAX_NESTING = 32

#: Levels of a parsed SQL expression of ``--set``, a DML condition, a MERGE clause or a
#: ``sql`` statement; each operand of an operator chain (``a + b + c``) is one level.
MAX_EXPRESSION_DEPTH = 128

#: Characters of one filter, ``--set`` assignment or SQL statement.
MAX_SQL_TEXT = 1_000_000

#: Characters of a number literal (Spark's DECIMAL holds 38 digits, a DOUBLE 309).
MAX_NUMBER_LITERAL = 1_000

#: Levels of a nested type (each array, map and struct is one): Hive's LazySimpleSerDe
#: stops at 24 levels, BigQuery at 15.
MAX_TYPE_DEPTH = 32

#: Columns of a table, each leaf field of a struct, array or map counted as one.
MAX_COLUMNS = 10_000

#: Characters of a table, database, column or struct field name.
MAX_IDENTIFIER = 128

#: Characters of a store location or input path (Linux's PATH_MAX is 4,096 bytes).
MAX_LOCATION_LENGTH = 4_096

#: Bytes of a conf (properties) file.
MAX_CONF_FILE_BYTES = 1 << 20
