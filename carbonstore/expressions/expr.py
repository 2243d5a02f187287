"""Pruning expressions: small frozen value objects, bound to a table schema once.

An expression is built unbound (column names as ``str``), from SQL with
``parser.parse_where`` or from Python with :func:`col` and friends (this module: the nodes,
the builders, iterative tree walks, NOT push-down). ``bind.bind`` then does three things,
once:

1. pushes ``NOT`` down to the leaves (De Morgan; ``NOT (x < 3)`` becomes ``x >= 3``, which
   is exact under Spark's total order where NaN is the greatest value and nulls stay null);
2. resolves names to :class:`BoundRef` (the schema ``Column`` and its type), refusing unknown
   columns with the list of known ones;
3. coerces literals to the *comparable representation* the index arrays use: ``int`` for
   integral types, dates (days since epoch), timestamps (microseconds since epoch, UTC) and
   decimals (unscaled, at the column's scale); ``float`` for float/double (``-0.0`` becomes
   ``0.0``); ``bytes`` (UTF-8) for strings and binary; ``bool`` for booleans. Literals that can
   never match become ``AlwaysFalse`` / ``IsNotNull`` / ``AlwaysTrue`` exactly (see
   docs/pruning.md).

Bound expressions contain no ``Not`` node, so a rewrite such as ``x < 1e30`` -> ``x IS NOT
NULL`` on an int column is exact: nothing negates it afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, TypeAlias

from carbonstore.errors import ExpressionError
from carbonstore.limits import MAX_NESTING
from carbonstore.store.records import Frozen
from carbonstore.store.schema import Column, DataType

__all__ = [
    "AlwaysFalse", "AlwaysTrue", "And", "BoundRef", "Comparison", "Eq", "Expr", "Gt", "GtEq",
    "In", "IsNaN", "IsNotNull", "IsNull", "Lt", "LtEq", "Not", "NotEq", "NotIn", "NotNaN",
    "MAX_DEPTH", "MAX_NESTING", "NotStartsWith", "Or", "StartsWith", "Term", "and_",
    "col", "flatten", "nodes", "not_", "or_", "push_not", "references",
    "balanced", "rebalance", "depth", "too_deep_error",
]

# Limits that keep every walk over an expression (binding, the evaluators, the planner,
# which recurse per level) far from Python's recursion limit. A chain of one connective
# (an OR of 500 terms, an AND of 10,000) is no nesting: it is kept balanced, so its depth
# grows with the logarithm of its length.
# MAX_NESTING (carbonstore.limits): parentheses, NOT and unary signs nested in a SQL filter
MAX_DEPTH = 128  # levels of a bound expression tree


_set = object.__setattr__


class BoundRef(Frozen):
    """A column resolved against a schema: the ``Column`` and therefore its type."""

    __slots__ = ("column",)
    __match_args__ = ("column",)
    column: Column

    def __init__(self, column: Column) -> None:
        _set(self, "column", column)

    def __hash__(self) -> int:
        return hash((self.column,))

    @property
    def name(self) -> str:
        return self.column.name

    @property
    def type(self) -> DataType:
        return self.column.type

    def __str__(self) -> str:
        return self.column.name


Term: TypeAlias = "str | BoundRef"


class Expr(Frozen):
    """Base of every expression; ``&``, ``|`` and ``~`` build And / Or / Not."""

    __slots__ = ()

    def __and__(self, other: Expr) -> Expr:
        return And(self, other)

    def __or__(self, other: Expr) -> Expr:
        return Or(self, other)

    def __invert__(self) -> Expr:
        return Not(self)


class AlwaysTrue(Expr):
    """True for every row, null or not."""

    __slots__ = ()

    def __str__(self) -> str:
        return "TRUE"


class AlwaysFalse(Expr):
    """True for no row."""

    __slots__ = ()

    def __str__(self) -> str:
        return "FALSE"


class _Connective(Expr):
    __slots__ = ("left", "right")
    __match_args__ = ("left", "right")
    left: Expr
    right: Expr

    def __init__(self, left: Expr, right: Expr) -> None:
        _set(self, "left", left)
        _set(self, "right", right)

    def __hash__(self) -> int:
        return hash((self.left, self.right))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.left, self.right) == (other.left, other.right)  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return _text(self)


class And(_Connective):
    __slots__ = ()


class Or(_Connective):
    __slots__ = ()


class Not(Expr):
    __slots__ = ("child",)
    __match_args__ = ("child",)
    child: Expr

    def __init__(self, child: Expr) -> None:
        _set(self, "child", child)

    def __str__(self) -> str:
        return _text(self)


class Comparison(Expr):
    """``term <op> literal``; never true for a null value or a null literal."""

    __slots__ = ("literal", "term")
    __match_args__ = ("term", "literal")
    term: Term
    literal: Any
    op: ClassVar[str] = "?"

    def __init__(self, term: Term, literal: Any) -> None:
        _set(self, "term", term)
        _set(self, "literal", literal)

    def __hash__(self) -> int:
        return hash((self.term, self.literal))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.term, self.literal) == (other.term, other.literal)  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return f"{self.term} {self.op} {self.literal!r}"


class Eq(Comparison):
    __slots__ = ()
    op = "="


class NotEq(Comparison):
    __slots__ = ()
    op = "<>"


class Lt(Comparison):
    __slots__ = ()
    op = "<"


class LtEq(Comparison):
    __slots__ = ()
    op = "<="


class Gt(Comparison):
    __slots__ = ()
    op = ">"


class GtEq(Comparison):
    __slots__ = ()
    op = ">="


class _Members(Expr):
    __slots__ = ("literals", "term")
    __match_args__ = ("term", "literals")
    term: Term
    literals: tuple[Any, ...]

    def __init__(self, term: Term, literals: tuple[Any, ...]) -> None:
        _set(self, "term", term)
        _set(self, "literals", literals)


class In(_Members):
    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.term} IN {self.literals!r}"


class NotIn(_Members):
    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.term} NOT IN {self.literals!r}"


class _OfTerm(Expr):
    __slots__ = ("term",)
    __match_args__ = ("term",)
    term: Term

    def __init__(self, term: Term) -> None:
        _set(self, "term", term)


class IsNull(_OfTerm):
    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.term} IS NULL"


class IsNotNull(_OfTerm):
    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.term} IS NOT NULL"


class IsNaN(_OfTerm):
    """Spark ``isnan(x)``: false (not null) for a null ``x``."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"isnan({self.term})"


class NotNaN(_OfTerm):
    """``NOT isnan(x)``: true for nulls and for every non-NaN value."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"NOT isnan({self.term})"


class _Prefix(Expr):
    __slots__ = ("prefix", "term")
    __match_args__ = ("term", "prefix")
    term: Term
    prefix: Any

    def __init__(self, term: Term, prefix: Any) -> None:
        _set(self, "term", term)
        _set(self, "prefix", prefix)


class StartsWith(_Prefix):
    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.term} STARTSWITH {self.prefix!r}"


class NotStartsWith(_Prefix):
    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.term} NOT STARTSWITH {self.prefix!r}"


# ---- Python builders ---------------------------------------------------------------------


class col:  # noqa: N801 - reads like a function at call sites: col("x") > 3
    """Column reference for the Python API: ``(col("x") > 3) & col("s").startswith("a")``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return Eq(self.name, other)

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return NotEq(self.name, other)

    def __lt__(self, other: object) -> Expr:
        return Lt(self.name, other)

    def __le__(self, other: object) -> Expr:
        return LtEq(self.name, other)

    def __gt__(self, other: object) -> Expr:
        return Gt(self.name, other)

    def __ge__(self, other: object) -> Expr:
        return GtEq(self.name, other)

    __hash__ = None  # type: ignore[assignment]

    def isin(self, values: Any) -> Expr:
        return In(self.name, tuple(values))

    def is_null(self) -> Expr:
        return IsNull(self.name)

    def is_not_null(self) -> Expr:
        return IsNotNull(self.name)

    def is_nan(self) -> Expr:
        return IsNaN(self.name)

    def startswith(self, prefix: str | bytes) -> Expr:
        return StartsWith(self.name, prefix)


def and_(*exprs: Expr) -> Expr:
    """Conjunction of any number of expressions (``AlwaysTrue`` for none), kept balanced."""
    items = list(exprs)
    while len(items) > 1 and isinstance(items[0], AlwaysTrue):
        items.pop(0)
    return balanced(And, items) if items else AlwaysTrue()


def or_(*exprs: Expr) -> Expr:
    """Disjunction of any number of expressions (``AlwaysFalse`` for none), kept balanced."""
    items = list(exprs)
    while len(items) > 1 and isinstance(items[0], AlwaysFalse):
        items.pop(0)
    return balanced(Or, items) if items else AlwaysFalse()


def not_(expr: Expr) -> Expr:
    return Not(expr)


# ---- walking without recursion -----------------------------------------------------------


def nodes(expr: Expr) -> Iterator[Expr]:
    """Every node of ``expr``, parents before children, left before right (no recursion)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        if isinstance(e, (And, Or)):
            stack.append(e.right)
            stack.append(e.left)
        elif isinstance(e, Not):
            stack.append(e.child)


def flatten(expr: Expr) -> list[Expr]:
    """The operands, left to right, of the chain of ``expr``'s connective that ``expr`` heads
    (``a AND (b AND c)`` gives ``[a, b, c]``); ``[expr]`` for anything but And / Or."""
    if not isinstance(expr, (And, Or)):
        return [expr]
    kind = type(expr)
    out: list[Expr] = []
    stack: list[Expr] = [expr]
    while stack:
        e = stack.pop()
        if type(e) is kind:
            stack.append(e.right)  # type: ignore[attr-defined]
            stack.append(e.left)  # type: ignore[attr-defined]
        else:
            out.append(e)
    return out


def _text(expr: Expr) -> str:
    """``str`` of a tree of any depth: ``(a AND b)``, ``(a OR b)``, ``(NOT a)``, built with
    an explicit stack instead of recursion."""
    out: list[str] = []
    stack: list[Expr | str] = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, str):
            out.append(e)
        elif isinstance(e, (And, Or)):
            stack += [")", e.right, " AND " if isinstance(e, And) else " OR ", e.left, "("]
        elif isinstance(e, Not):
            stack += [")", e.child, "(NOT "]
        else:
            out.append(str(e))
    return "".join(out)


def balanced(kind: type[And] | type[Or], items: list[Expr]) -> Expr:
    """``items`` joined by ``kind`` as a balanced tree (depth log2 of their number)."""
    while len(items) > 1:
        items = [kind(items[i], items[i + 1]) if i + 1 < len(items) else items[i]
                 for i in range(0, len(items), 2)]
    return items[0]


def rebalance(expr: Expr) -> Expr:
    """``expr`` with every And / Or chain balanced; recursion only where connectives alternate."""
    if isinstance(expr, (And, Or)):
        return balanced(type(expr), [rebalance(e) for e in flatten(expr)])
    if isinstance(expr, Not):
        return Not(rebalance(expr.child))
    return expr


def depth(expr: Expr) -> int:
    """Levels of ``expr`` (a leaf is 1), counted with an explicit stack."""
    deepest = 0
    stack = [(expr, 1)]
    while stack:
        e, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(e, (And, Or)):
            stack += [(e.left, d + 1), (e.right, d + 1)]
        elif isinstance(e, Not):
            stack.append((e.child, d + 1))
    return deepest


def too_deep_error(what: str) -> ExpressionError:
    """The error for a ``what`` (filter, expression) nested beyond :data:`MAX_NESTING`."""
    return ExpressionError(
        f"{what} nests too deeply: at most {MAX_NESTING} levels of parentheses / NOT are "
        "supported (a long AND / OR chain or an IN list needs no nesting)"
    )


# ---- NOT push-down -----------------------------------------------------------------------

_NEGATED_CMP: dict[type[Comparison], type[Comparison]] = {
    Eq: NotEq, NotEq: Eq, Lt: GtEq, GtEq: Lt, Gt: LtEq, LtEq: Gt,
}


def push_not(expr: Expr, *, negate: bool = False) -> Expr:
    """Rewrite ``expr`` (negated if ``negate``) so that no ``Not`` node remains.

    Exact under SQL three-valued logic: a comparison and its complement are both null on a
    null value, and Spark orders all non-null values totally (NaN greatest, -0.0 = 0.0).
    ``isnan`` is never null, so its negation ``NotNaN`` is true for nulls.
    """
    if isinstance(expr, Not):
        return push_not(expr.child, negate=not negate)
    if not negate:
        if isinstance(expr, And):
            return And(push_not(expr.left), push_not(expr.right))
        if isinstance(expr, Or):
            return Or(push_not(expr.left), push_not(expr.right))
        return expr
    if isinstance(expr, And):
        return Or(push_not(expr.left, negate=True), push_not(expr.right, negate=True))
    if isinstance(expr, Or):
        return And(push_not(expr.left, negate=True), push_not(expr.right, negate=True))
    if isinstance(expr, Comparison):
        return _NEGATED_CMP[type(expr)](expr.term, expr.literal)
    pairs: list[tuple[type, type]] = [
        (In, NotIn), (IsNull, IsNotNull), (IsNaN, NotNaN), (StartsWith, NotStartsWith),
        (AlwaysTrue, AlwaysFalse),
    ]
    for a, b in pairs:
        for src, dst in ((a, b), (b, a)):
            if type(expr) is src:
                return dst(*expr._values())
    raise ExpressionError(f"cannot negate expression {expr}")


def references(expr: Expr) -> set[str]:
    """Names of the columns an expression refers to."""
    out: set[str] = set()
    for e in nodes(expr):
        term = getattr(e, "term", None)
        if term is not None:
            out.add(term.name if isinstance(term, BoundRef) else str(term).lower())
    return out
