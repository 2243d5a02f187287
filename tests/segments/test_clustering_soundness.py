"""Soundness over clustered tables: the pruning property test's random data and predicates
(tests/pruning/test_evaluator_soundness.py: NaN, +-0.0, +-inf, nulls, unicode, extreme
values), written as segments, clustered on 1-4 random columns along a random curve in
random units, then planned: every row the oracle matches lies in a kept row range."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.expressions.bind import bind
from carbonstore.expressions.expr import Expr
from carbonstore.pruning.rows import evaluate_rows
from carbonstore.segments.compaction import compact
from tests.pruning.test_evaluator_soundness import _TYPES, _predicate
from tests.segments.test_clustering import live, load, tasks_merger

# the store's own column types (ts_ms is a timestamp without zone in milliseconds)
_NAMES = sorted(n for n in _TYPES if n != "ts_ms")
_DDL = {"byte": "byte", "short": "short", "int": "int", "long": "long", "double": "double",
        "float": "float", "dec": "decimal(9,2)", "bigdec": "decimal(30,3)", "string": "string",
        "binary": "binary", "date": "date", "ts": "timestamp", "bool": "boolean"}


@st.composite
def _case(draw: st.DrawFn) -> tuple[dict[str, list[Any]], list[Expr], dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4, unique=True))
    n = draw(st.integers(1, 80))
    data = {name: draw(st.lists(st.none() | _TYPES[name][2], min_size=n, max_size=n))
            for name in names}
    # strings and binaries sharing a prefix longer than the 8 encoded bytes
    prefix = draw(st.sampled_from(["", "customer-number-"]))
    for name in ("string", "binary") if prefix else ():
        if name in data:
            pre: Any = prefix if name == "string" else prefix.encode()
            data[name] = [None if v is None else pre + v for v in data[name]]
    exprs = draw(st.lists(_predicate(data), min_size=1, max_size=12))
    options = {
        "by": draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True)),
        "curve": draw(st.sampled_from(["zorder", "hilbert"])),
        "tasks": draw(st.integers(1, 4)),
        "page_rows": draw(st.integers(1, 8)),
        "segments": draw(st.integers(1, 3)),
        "prefix": prefix,
    }
    return data, exprs, options


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case())
def test_every_matching_row_is_kept_after_clustering(
    scratch_dir: Path, case: tuple[dict[str, list[Any]], list[Expr], dict[str, Any]]
) -> None:
    data, exprs, options = case
    store = Store(str(scratch_dir / f"cluster-{uuid.uuid4().hex[:12]}"))
    schema = ", ".join(f"{n} {_DDL[n]}" for n in data)
    table = store.create_table("t", schema, properties={"page_rows": str(options["page_rows"])})
    rows = pa.table({n: pa.array(v, type=_TYPES[n][1]) for n, v in data.items()})
    k = options["segments"]
    for i in range(k):
        load(table, rows.slice(i * rows.num_rows // k, rows.num_rows // k + (i == k - 1) * k))
    everything = live(table)
    compact(table, "cluster", by=options["by"], curve=options["curve"],
            cluster_merger=tasks_merger(options["tasks"]))
    assert live(table).num_rows == everything.num_rows
    for expr in exprs:
        bound = bind(expr, table.schema)
        want = int(evaluate_rows(bound, everything).sum())
        got = int(evaluate_rows(bound, live(table, bound)).sum())
        assert got == want, f"{bound}: the plan keeps {got} of the {want} matching rows"
