"""Records (carbonstore/store/records.py) behave as the dataclasses they replace: fields and
defaults, equality, hash, repr, immutability, ``replace``, ``match``, pickling and copying,
and none of them is a dataclass (a fresh lookup creates none: tests/pruning/test_scale_table.py)."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import carbonstore
from carbonstore.pruning.plan_types import FilePlan, RowGroupPlan, TablePlan
from carbonstore.store.entries import LoadEntry, build_plain
from carbonstore.store.paths import TableName
from carbonstore.store.records import Frozen, FrozenInstanceError, Record, field, replace
from carbonstore.store.schema import Column, TableSchema
from carbonstore.store.types import DataType


class Point(Frozen):
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()


class Bag(Record, kw_only=True):
    name: str
    items: list[int] = field(default_factory=list)
    seen: int = field(default=0, compare=False, repr=False)
    cache: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a bag needs a name")


def test_fields_defaults_equality_hash_and_repr() -> None:
    p = Point(1)
    assert (p.x, p.y, p.tags) == (1, 0, ())
    assert p == Point(1, 0, ()) and p != Point(1, 2) and p != (1, 0, ())
    assert hash(p) == hash(Point(x=1)) and {p, Point(1)} == {p}
    assert repr(p) == "Point(x=1, y=0, tags=())"
    assert Point.__slots__ == ("x", "y", "tags") and Point.__match_args__ == ("x", "y", "tags")
    assert not hasattr(p, "__dict__")
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]


def test_a_frozen_record_refuses_assignment_as_dataclasses_did() -> None:
    p = Point(1)
    with pytest.raises(FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):  # FrozenInstanceError is one, as dataclasses'
        del p.y
    assert p.x == 1


def test_a_mutable_record_factories_post_init_and_compare_false() -> None:
    a, b = Bag(name="a"), Bag(name="a")
    assert a.items == [] and a.items is not b.items and a.cache == {} and a.cache is not b.cache
    a.seen = 5
    assert a == b and repr(a) == "Bag(name='a', items=[])"
    a.items.append(1)
    assert a != b
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(TypeError):
        Bag("a")  # type: ignore[misc]  # keyword-only
    with pytest.raises(ValueError, match="needs a name"):
        Bag(name="")

    class Sack(Bag):  # a subclass adding methods only: the base's fields, compared alike
        __slots__ = ()

    s = Sack(name="a", seen=9)
    assert s == Sack(name="a") and s != Bag(name="a") and repr(s).endswith(".Sack(name='a', items=[])")


def test_replace_match_pickle_and_copy() -> None:
    p = Point(1, 2, ("t",))
    assert replace(p, y=5) == Point(1, 5, ("t",)) and p.y == 2
    with pytest.raises(TypeError):
        replace(p, z=1)
    b = Bag(name="b", items=[1], seen=3)
    assert replace(b, name="c").items == [1] and replace(b, name="c").seen == 3
    with pytest.raises(ValueError):
        replace(b, name="")  # __post_init__ checks the copy
    match p:
        case Point(x, y):
            assert (x, y) == (1, 2)
        case _:
            raise AssertionError("no match")
    for got in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
        assert got == p and type(got) is Point
    assert pickle.loads(pickle.dumps(b)) == b


def test_the_store_values_are_records_and_no_dataclasses() -> None:
    schema = TableSchema(database="db", table="t", columns=(Column(name="id", type=DataType("long")),))
    entry = LoadEntry(load_name="0", status="Success", load_start_time=1, extra={"k": 1})
    plan = TablePlan(table="db.t", where=None, expr=None, planning_ms=1.0, root="/r", segments=("0",),  # type: ignore[arg-type]
                     levels={}, files=(FilePlan(segment="0", path="a.parquet",
                                                row_groups=(RowGroupPlan(index=0, num_rows=3, row_ranges=((0, 3),)),)),))
    for value in (schema, entry, plan, TableName("db", "t")):
        assert not hasattr(type(value), "__dataclass_fields__")
        assert pickle.loads(pickle.dumps(value)) == value
    assert replace(entry, status="Compacted").status == "Compacted"
    assert replace(schema, table="u").columns == schema.columns
    built = build_plain(["0"], ["Success"], [1], [None], [0], [0], [0], [0], [None], [None],
                        [None], [None], ["parquet"], [None])
    assert built == (LoadEntry(load_name="0", status="Success", load_start_time=1),)
    with pytest.raises(FrozenInstanceError):
        built[0].status = "x"  # type: ignore[misc]


def test_importing_records_loads_no_dataclasses() -> None:
    """The module (and so every record class) needs neither dataclasses nor inspect."""
    code = ("import sys; import carbonstore.store.records as r\n"
            "class P(r.Frozen):\n    a: int\n"
            "print(sorted(m for m in ('dataclasses', 'inspect') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(Path(carbonstore.__file__).parents[1])}, check=True)
    assert out.stdout.strip() == "[]"
