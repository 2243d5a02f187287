"""A SQL script as its statements: split at each ``;`` outside quotes and comments.

Spark SQL's lexical rules: '...' and "..." strings (a backslash escapes the next character),
`...` names (```` is a backtick), ``-- ...`` line comments and ``/* ... */`` block comments.
sqlglot's tokenizer reads ``SHOW ...`` as one raw command up to the next ``;`` whatever its
quotes hold, so the script is scanned here.
"""

from __future__ import annotations

from carbonstore.errors import UserError

__all__ = ["split_script"]


def split_script(text: str) -> list[str]:
    """The statements of ``text`` in order, without their ``;``, leading comments and blank
    or comment-only pieces.

    Raises:
        UserError: a quote or block comment is not closed.
    """
    out: list[str] = []
    start = i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"`":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if ch != "`" and text[j] == "\\" else 1
            if j >= n:
                line = text.count("\n", 0, i) + 1
                raise UserError(f"cannot parse SQL: the {ch} at line {line} is not closed")
            i = j + 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise UserError(f"cannot parse SQL: the /* at line {text.count(chr(10), 0, i) + 1} "
                                "is not closed")
            i = end + 2
        elif ch == ";":
            out.append(text[start:i])
            i += 1
            start = i
        else:
            i += 1
    out.append(text[start:])
    return [s[_code_start(s):].strip() for s in out if _code_start(s) < len(s)]


def _code_start(piece: str) -> int:
    """Where ``piece``'s code starts after blanks and comments (its length: none)."""
    i, n = 0, len(piece)
    while i < n:
        if piece[i].isspace():
            i += 1
        elif piece.startswith("--", i):
            end = piece.find("\n", i)
            i = n if end < 0 else end + 1
        elif piece.startswith("/*", i):
            end = piece.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            return i
    return n
