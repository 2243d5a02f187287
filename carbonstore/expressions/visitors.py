"""Visitors: one method per operator, dispatched on the node's exact class.

Subclass :class:`ExprVisitor` and implement every ``visit_*`` method; :meth:`ExprVisitor.visit`
calls the one for the node's class. The table below names each node class once, so a new or
renamed node class that no visitor handles fails at :meth:`~ExprVisitor.visit` with an
``ExpressionError`` (and mypy reports a visitor that misses an abstract method), never
silently as "cannot evaluate".

Walkers that must survive any depth (``nodes``, ``flatten``, ``references``, ``str``) stay
iterative in expr.py; a visitor recurses per level and relies on the depth limits of
:func:`carbonstore.expressions.bind.bind` (long AND / OR chains are kept balanced).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from carbonstore.errors import ExpressionError
from carbonstore.expressions.expr import (
    AlwaysFalse,
    AlwaysTrue,
    And,
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
    NotIn,
    NotNaN,
    NotStartsWith,
    Or,
    StartsWith,
)

__all__ = ["ExprVisitor", "VISIT_METHODS"]

T = TypeVar("T")

# node class -> the visitor method for it (every concrete node class of expr.py)
VISIT_METHODS: dict[type[Expr], str] = {
    AlwaysTrue: "visit_always_true",
    AlwaysFalse: "visit_always_false",
    And: "visit_and",
    Or: "visit_or",
    Not: "visit_not",
    Eq: "visit_eq",
    NotEq: "visit_not_eq",
    Lt: "visit_lt",
    LtEq: "visit_lt_eq",
    Gt: "visit_gt",
    GtEq: "visit_gt_eq",
    In: "visit_in",
    NotIn: "visit_not_in",
    IsNull: "visit_is_null",
    IsNotNull: "visit_is_not_null",
    IsNaN: "visit_is_nan",
    NotNaN: "visit_not_nan",
    StartsWith: "visit_starts_with",
    NotStartsWith: "visit_not_starts_with",
}


class ExprVisitor(ABC, Generic[T]):
    """Base of every expression visitor: one abstract method per operator."""

    def visit(self, expr: Expr) -> T:
        """The result of the method for ``expr``'s class (:meth:`visit_unknown` for none)."""
        name = VISIT_METHODS.get(type(expr))
        if name is None:
            return self.visit_unknown(expr)
        return getattr(self, name)(expr)  # type: ignore[no-any-return]

    def visit_unknown(self, expr: Expr) -> T:
        """Called for an object that is no expression node this module knows."""
        raise ExpressionError(f"not an expression node: {expr!r}")

    @abstractmethod
    def visit_always_true(self, expr: AlwaysTrue) -> T: ...

    @abstractmethod
    def visit_always_false(self, expr: AlwaysFalse) -> T: ...

    @abstractmethod
    def visit_and(self, expr: And) -> T: ...

    @abstractmethod
    def visit_or(self, expr: Or) -> T: ...

    @abstractmethod
    def visit_not(self, expr: Not) -> T: ...

    @abstractmethod
    def visit_eq(self, expr: Eq) -> T: ...

    @abstractmethod
    def visit_not_eq(self, expr: NotEq) -> T: ...

    @abstractmethod
    def visit_lt(self, expr: Lt) -> T: ...

    @abstractmethod
    def visit_lt_eq(self, expr: LtEq) -> T: ...

    @abstractmethod
    def visit_gt(self, expr: Gt) -> T: ...

    @abstractmethod
    def visit_gt_eq(self, expr: GtEq) -> T: ...

    @abstractmethod
    def visit_in(self, expr: In) -> T: ...

    @abstractmethod
    def visit_not_in(self, expr: NotIn) -> T: ...

    @abstractmethod
    def visit_is_null(self, expr: IsNull) -> T: ...

    @abstractmethod
    def visit_is_not_null(self, expr: IsNotNull) -> T: ...

    @abstractmethod
    def visit_is_nan(self, expr: IsNaN) -> T: ...

    @abstractmethod
    def visit_not_nan(self, expr: NotNaN) -> T: ...

    @abstractmethod
    def visit_starts_with(self, expr: StartsWith) -> T: ...

    @abstractmethod
    def visit_not_starts_with(self, expr: NotStartsWith) -> T: ...
