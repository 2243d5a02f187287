"""Expression nodes are frozen values as dataclasses made them: equal and hashed by class
and fields, immutable, pickled and copied whole, matched by their fields
(carbonstore/store/records.py writes these out to spare the import its code generation)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from carbonstore.expressions.expr import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundRef,
    Eq,
    Gt,
    In,
    IsNaN,
    IsNull,
    Not,
    NotIn,
    NotNaN,
    NotStartsWith,
    Or,
    StartsWith,
    push_not,
)
from carbonstore.store.records import FrozenInstanceError
from carbonstore.store.schema import parse_schema_string

REF = BoundRef(parse_schema_string("x long")[0])
NODES: list[Any] = [
    Eq("x", 1), Gt(REF, 2.5), In("x", (1, 2)), NotIn(REF, (3,)), IsNull("x"), IsNaN(REF),
    NotNaN("x"), StartsWith("s", b"ab"), NotStartsWith("s", "a"), And(Eq("x", 1), IsNull("y")),
    Or(AlwaysTrue(), AlwaysFalse()), Not(Eq("x", 1)), AlwaysTrue(), REF,
]


@pytest.mark.parametrize("node", NODES, ids=lambda n: type(n).__name__)
def test_a_node_is_a_frozen_value(node: Any) -> None:
    fields = type(node).__match_args__
    twin = type(node)(*(getattr(node, f) for f in fields))
    assert twin == node and hash(twin) == hash(node) and twin is not node
    assert pickle.loads(pickle.dumps(node)) == node
    assert copy.deepcopy(node) == node and copy.copy(node) == node
    assert repr(node).startswith(f"{type(node).__qualname__}(")
    with pytest.raises(FrozenInstanceError):
        node.term = "z"
    with pytest.raises(AttributeError):
        node.__dict__  # noqa: B018 - slots: no per-instance dict
    for f in fields:
        with pytest.raises(FrozenInstanceError):
            delattr(node, f)


def test_equal_fields_of_another_class_are_not_equal() -> None:
    assert Eq("x", 1) != Gt("x", 1) and IsNull("x") != IsNaN("x")
    assert And(Eq("x", 1), Eq("y", 2)) != Or(Eq("x", 1), Eq("y", 2))
    assert AlwaysTrue() == AlwaysTrue() and AlwaysTrue() != AlwaysFalse()
    assert Eq("x", 1) != ("x", 1)
    assert len({Eq("x", 1), Eq("x", 1), Eq("x", 2)}) == 2


def test_a_node_matches_by_its_fields() -> None:
    match Gt("x", 3):
        case Gt(term, literal):
            assert (term, literal) == ("x", 3)
        case _:
            pytest.fail("no match")
    assert push_not(Not(In("x", (1,)))) == NotIn("x", (1,))
    assert push_not(Not(StartsWith("s", "a"))) == NotStartsWith("s", "a")
