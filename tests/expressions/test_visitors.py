"""The visitor base: every node class has its method, a missing method or node fails loudly."""

from __future__ import annotations

import inspect

import pytest

from carbonstore.errors import ExpressionError
from carbonstore.expressions import expr as expr_mod
from carbonstore.expressions.expr import Comparison, Eq, Expr, col
from carbonstore.expressions.visitors import VISIT_METHODS, ExprVisitor
from carbonstore.pruning.all_rows import AllRowsEvaluator
from carbonstore.pruning.evaluator import StatsEvaluator


def _node_classes() -> set[type[Expr]]:
    # the private bases (_Connective, _OfTerm, ...) share fields; they are no nodes
    return {c for name, c in inspect.getmembers(expr_mod, inspect.isclass)
            if issubclass(c, Expr) and c not in (Expr, Comparison) and not name.startswith("_")}


def test_every_node_class_has_a_visit_method() -> None:
    assert set(VISIT_METHODS) == _node_classes()
    for name in VISIT_METHODS.values():
        assert name in ExprVisitor.__abstractmethods__


@pytest.mark.parametrize("visitor", [StatsEvaluator, AllRowsEvaluator])
def test_evaluators_implement_every_operator(visitor: type) -> None:
    assert issubclass(visitor, ExprVisitor)
    assert not inspect.isabstract(visitor)


class _Names(ExprVisitor[str]):
    """A visitor that names the method it was dispatched to."""


for _name in VISIT_METHODS.values():
    setattr(_Names, _name, lambda self, e, _n=_name: _n)
_Names.__abstractmethods__ = frozenset()


def test_dispatch_is_by_exact_class() -> None:
    v = _Names()
    assert v.visit(col("x") == 1) == "visit_eq"
    assert v.visit(col("x") != 1) == "visit_not_eq"
    assert v.visit(col("x").is_null()) == "visit_is_null"
    assert v.visit(~(col("x") == 1)) == "visit_not"
    assert v.visit((col("x") == 1) & (col("y") == 2)) == "visit_and"


def test_a_visitor_missing_an_operator_cannot_be_built() -> None:
    class Partial(ExprVisitor[int]):
        def visit_eq(self, expr: Eq) -> int:
            return 1

    with pytest.raises(TypeError, match="abstract"):
        Partial()  # type: ignore[abstract]


def test_an_object_that_is_no_node_is_refused() -> None:
    class Unknown(Expr):
        pass

    with pytest.raises(ExpressionError, match="not an expression node"):
        _Names().visit(Unknown())
    with pytest.raises(ExpressionError, match="cannot evaluate"):
        StatsEvaluator(3, lambda ref: None, level=0).evaluate(Unknown())
