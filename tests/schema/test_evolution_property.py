"""Property: random loads and ALTERs (and compactions); every answer equals a reference built
from the same logical rows, at the current version and at every earlier one (time travel).

The reference is a model keyed by column id: a row is ``{column id: value}``; an added column
gives old rows its default, a rename changes no value, a widening changes no value. Reads go
through the driver-local path (plan from the indexes, read the kept row groups, filter):
an answer equal to the model's also shows that pruning dropped no matching row.
"""

from __future__ import annotations

import decimal
import tempfile
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from schema_helpers import load, read, reopen

from carbonstore import Store, Table
from carbonstore.segments.compaction import compact
from carbonstore.store.alter import SUB_ACTIONS, alter_table

NAMES = ("a", "b", "c", "名", "x y")
TYPES = ("int", "float", "string", "decimal(5,2)")
WIDER = {"int": "long", "float": "double", "decimal(5,2)": "decimal(9,2)"}


@dataclass
class Col:
    cid: str
    name: str
    type: str
    default: Any = None


@dataclass
class Model:
    cols: list[Col] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def names(self) -> list[str]:
        return [c.name for c in self.cols]

    def table(self) -> list[tuple[Any, ...]]:
        return sorted((tuple(r.get(c.cid) for c in self.cols) for r in self.rows), key=repr)

    def copy(self) -> Model:
        return Model([Col(c.cid, c.name, c.type, c.default) for c in self.cols],
                     [dict(r) for r in self.rows])


def _value(kind: str, n: int) -> Any:
    if n % 5 == 0:
        return None
    if kind in ("int", "long"):
        return n - 7
    if kind in ("float", "double"):
        return (n - 7) / 4  # exact in float32: widening keeps it
    if kind.startswith("decimal"):
        return decimal.Decimal(n - 7) / 4
    return f"s{n % 6}"


def _literal(v: Any) -> str:
    return f"'{v}'" if isinstance(v, str) else str(v)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


OPS = st.one_of(
    st.tuples(st.just("load"), st.integers(1, 6), st.integers(0, 1000)),
    st.tuples(st.just("add"), st.sampled_from(NAMES), st.sampled_from(TYPES), st.booleans()),
    st.tuples(st.just("drop"), st.integers(0, 9)),
    st.tuples(st.just("rename"), st.integers(0, 9), st.sampled_from(NAMES)),
    st.tuples(st.just("widen"), st.integers(0, 9)),
    st.tuples(st.just("compact")),
)


def _apply(t: Table, m: Model, op: tuple[Any, ...]) -> Table:
    kind = op[0]
    schema_ids = {c.name: c.column_id for c in t.schema.columns}
    if kind == "load":
        _, n, seed = op
        rows = []
        for i in range(n):
            row = {"k": seed + i}
            row.update({c.name: _value(c.type, seed + i + j) for j, c in enumerate(m.cols[1:])})
            rows.append(row)
        load(t, rows)
        m.rows += [{schema_ids[k]: v for k, v in r.items()} for r in rows]
        return t
    if kind == "compact":
        if len([e for e in t.status.read().readable]) > 1:
            compact(t, "major")
        return t
    if kind == "add":
        _, name, typ, with_default = op
        if name in m.names():
            return t
        default = _value(typ, 3) if with_default else None
        spec = f"{_quote(name)} {typ}" + (f" default {_literal(default)}" if default is not None else "")
        alter_table(t, SUB_ACTIONS["add-column"][1]([spec]), operation="add")
        t = reopen(t)
        cid = t.schema.column(name).column_id
        m.cols.append(Col(cid, name, typ, default))
        for r in m.rows:
            r[cid] = default
        return t
    victims = m.cols[1:]
    if not victims:
        return t
    c = victims[op[1] % len(victims)]
    if kind == "drop":
        alter_table(t, SUB_ACTIONS["drop-column"][1]([c.name]), operation="drop")
        m.cols.remove(c)
        for r in m.rows:
            r.pop(c.cid, None)
    elif kind == "rename":
        if op[2] in m.names():
            return t
        alter_table(t, SUB_ACTIONS["rename-column"][1]([c.name, op[2]]), operation="rename")
        c.name = op[2]
    elif kind == "widen":
        if c.type not in WIDER:
            return t
        alter_table(t, SUB_ACTIONS["widen"][1]([c.name, WIDER[c.type]]), operation="widen")
        c.type = WIDER[c.type]
    return reopen(t)


def _check(t: Table, m: Model) -> None:
    assert t.schema.column_names == m.names()
    rows, _ = read(t)
    got = sorted((tuple(r.values()) for r in rows.to_pylist()), key=repr)
    assert got == m.table()
    for c in m.cols:
        values = sorted({r.get(c.cid) for r in m.rows} - {None}, key=repr)[:2]
        preds = [(f"{_quote(c.name)} is null", lambda v: v is None)]
        for v in values:
            preds.append((f"{_quote(c.name)} = {_literal(v)}", lambda x, v=v: x == v))
            if not isinstance(v, str):
                preds.append((f"{_quote(c.name)} > {_literal(v)}",
                              lambda x, v=v: x is not None and x > v))
        for where, truth in preds:
            got_rows, plan = read(t, where)
            want = sorted((tuple(r.get(x.cid) for x in m.cols) for r in m.rows if truth(r.get(c.cid))),
                          key=repr)
            assert sorted((tuple(r.values()) for r in got_rows.to_pylist()), key=repr) == want, where


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=12))
@example([("load", 3, 1), ("rename", 0, "c"), ("rename", 1, "a"), ("load", 2, 40)])
@example([("load", 4, 2), ("drop", 0), ("add", "a", "string", True), ("load", 1, 9),
          ("widen", 1), ("compact",)])
def test_loads_and_alters_answer_like_the_model(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"{tmp}/s")
        t = store.create_table("p", "k long not null, a int, b string")
        ids = {c.name: c.column_id for c in t.schema.columns}
        m = Model([Col(ids["k"], "k", "long"), Col(ids["a"], "a", "int"), Col(ids["b"], "b", "string")])
        history: list[tuple[int, Model]] = []
        for op in ops:
            t = _apply(t, m, op)
            history.append((t.status.read().version, m.copy()))
            _check(t, m)  # after every step: cached indexes of earlier schemas are used
        for version, then in history[-3:-1]:
            _check(t.as_of(version), then)
