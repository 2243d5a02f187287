"""Partition masks group a segment's files once: the same masks and dropped files as the
previous per-file grouping (kept below as the oracle), over tables whose segments were
written with different specs, bucketed, and partly replaced by dynamic overwrites."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carbonstore import Store
from carbonstore.expressions.expr import Expr
from carbonstore.pruning import partition_prune as pp
from carbonstore.pruning import plan as plan_mod
from carbonstore.pruning.partition_prune import (
    REMOVED_KEY,
    PartitionMasks,
    PartitionSpec,
    _distinct_segments,
    _evaluate,
    _folder_file,
    _keys,
    _may_drop,
    _names_any,
    _paths,
    _refs,
    _Specs,
    extras_of,
    partition_of,
    removed_partitions,
)
from carbonstore.store.readable import ReadableEntries
from tests.partitioning.test_table import DAY0, LINEITEM, lineitem, load

Mask = npt.NDArray[np.bool_]


# the grouping before (one dict.setdefault per file), verbatim
def _previous_partition_masks(
    view: Any, parts: Sequence[Any], rg_seg: Sequence[npt.NDArray[np.intp]], expr: Expr
) -> PartitionMasks | None:
    """Row-group masks over ``parts`` (plan units) from the files' partitions; None
    when no planned segment is partitioned, or nothing here can drop a file (the filter
    names no partition or bucket column and no segment lost partitions to an overwrite).

    Files are grouped by the spec their segment was written with and by their partition
    folder: each distinct folder is parsed and evaluated once, so a plan over many
    segments of few partitions costs one string operation per file, not one parse.
    """
    entries = view.entries
    if not view.partitioned:  # TableIndex.partitioned: applies(entries), once per view
        return None
    refs = _refs(expr)
    if isinstance(entries, ReadableEntries) and not _may_drop(entries, refs):
        return None  # (what the check below finds of the planned segments, from every extra)
    segs = [np.asarray(rg_seg[pi], dtype=np.int64) for pi in range(len(parts))]
    specs = _Specs()
    # what is read of each planned segment's entry, without building it (readable.py)
    entries = extras_of(entries, _distinct_segments(segs))
    # readable entries share one object per distinct extra: each is parsed once
    lost = specs.parse(entries, list({id(e): si for si, e in entries.items()}.values()))
    if not lost and not any(_names_any(spec, refs) for spec in specs.seen()):
        return None
    # (spec, removed partitions or None) -> [(part, unit file, path)]
    groups: dict[tuple[PartitionSpec, Any], list[tuple[int, int, str]]] = {}
    part_keep: list[Mask] = []
    pair_index: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []
    for pi, arrays in enumerate(parts):
        rg_file = np.asarray(arrays.rg_file, dtype=np.int64)
        pairs = (segs[pi] << 32) | rg_file
        uniq, inverse = np.unique(pairs, return_inverse=True)
        pair_index.append((uniq, np.asarray(inverse).reshape(-1)))
        part_keep.append(np.ones(len(uniq), dtype=bool))
        seg_of, file_of = (uniq >> 32).tolist(), (uniq & 0xFFFFFFFF).tolist()
        paths = _paths(arrays.files, file_of)
        for k, (si, path) in enumerate(zip(seg_of, paths, strict=True)):
            e = entries[si]
            gone = frozenset(removed_partitions(e)) if REMOVED_KEY in e.extra else None
            groups.setdefault((specs.of(e), gone), []).append((pi, k, path or ""))
    dropped = 0
    for (spec, gone), files in groups.items():
        # the folder decides, except for bucketed files (their bucket is in the file name)
        folders = ([p for _, _, p in files] if spec.bucket_number
                   else [_folder_file(p) for _, _, p in files])
        distinct = list(dict.fromkeys(folders))
        at = {f: i for i, f in enumerate(distinct)}
        keep_f = np.ones(len(distinct), dtype=bool)
        if gone:
            keep_f &= np.array([partition_of(f) not in gone for f in distinct], dtype=bool)
        if not spec.is_empty:
            keep_f &= _evaluate(expr, spec, _keys(spec, distinct))
        keep = keep_f[np.array([at[f] for f in folders], dtype=np.intp)]
        for (pi, k, _), ok in zip(files, keep.tolist(), strict=True):
            if not ok:
                part_keep[pi][k] = False
        dropped += int((~keep).sum())
    masks = [keep[inv] for keep, (_, inv) in zip(part_keep, pair_index, strict=True)]
    return PartitionMasks(masks=masks, files_dropped=dropped)


@pytest.fixture(scope="module")
def mixed_table(tmp_path_factory: Any) -> tuple[Any, pa.Table]:
    """Segments of three specs (day; flag + month with 4 buckets; none), one of them partly
    replaced by a dynamic overwrite."""
    store = Store(str(tmp_path_factory.mktemp("pm")))
    t = store.create_table("e", LINEITEM, properties={"partition_by": "day(l_shipdate)"})
    load(t, lineitem(600, seed=7))
    load(t, lineitem(400, seed=3, key0=2000), tasks=3)
    load(t, lineitem(60, seed=2, days=[3], key0=7000), options={"overwrite_partitions": "true"})
    t = t.set_partition_spec("l_returnflag, month(l_shipdate)", buckets=4, bucket_columns="l_orderkey")
    load(t, lineitem(500, seed=8, key0=5000))
    t = t.set_partition_spec("", buckets=0)
    load(t, lineitem(50, seed=9, key0=9000))
    return t


_where = st.one_of(
    st.integers(-2, 10).map(lambda d: f"l_shipdate = DATE '{DAY0 + dt.timedelta(days=d)}'"),
    st.tuples(st.integers(-2, 10), st.integers(0, 4)).map(
        lambda p: f"l_shipdate >= DATE '{DAY0 + dt.timedelta(days=p[0])}' "
                  f"AND l_shipdate < DATE '{DAY0 + dt.timedelta(days=p[0] + p[1])}'"),
    st.sampled_from("ANRX").map(lambda f: f"l_returnflag = '{f}'"),
    st.integers(0, 9100).map(lambda k: f"l_orderkey = {k}"),
    st.lists(st.integers(0, 9100), min_size=1, max_size=4).map(
        lambda ks: f"l_orderkey IN ({', '.join(map(str, ks))})"),
    st.tuples(st.integers(0, 9100), st.sampled_from("ANR")).map(
        lambda p: f"l_orderkey = {p[0]} AND l_returnflag = '{p[1]}'"),
    st.integers(1, 50).map(lambda q: f"l_quantity < {q}"),
    st.just("l_shipdate IS NULL OR l_returnflag = 'A'"),
)


COMPARED: list[PartitionMasks] = []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=_where, segments=st.sampled_from([None, "0,1", "2,3", "1,3,4", "3"]))
def test_partition_masks_equal_the_per_file_grouping(mixed_table: Any, where: str, segments: str | None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[PartitionMasks | None] = []

    def both(view: Any, parts: Any, rg_seg: Any, expr: Expr) -> PartitionMasks | None:
        new = pp.partition_masks(view, parts, rg_seg, expr)
        old = _previous_partition_masks(view, parts, rg_seg, expr)
        assert (new is None) == (old is None)
        if new is not None and old is not None:
            assert new.files_dropped == old.files_dropped
            assert len(new.masks) == len(old.masks)
            for a, b in zip(new.masks, old.masks, strict=True):
                assert np.array_equal(a, b)
        seen.append(new)
        return new

    with monkeypatch.context() as mp:
        mp.setattr(plan_mod, "partition_masks", both)
        plan_mod.prune(mixed_table, where, segments=segments)
    assert len(seen) <= 1  # (none: every segment dropped first, or the plan memoized)
    COMPARED.extend(s for s in seen if s is not None)


def test_the_mixed_table_drops_files_by_partition_and_by_overwrite(mixed_table: Any) -> None:
    """The table the equivalence runs over exercises both reasons (else it proves little),
    and the equivalence compared masks that drop files."""
    assert sum(m.files_dropped > 0 for m in COMPARED) >= 10
    plan = plan_mod.prune(mixed_table, "l_shipdate = DATE '1995-03-12' AND l_orderkey = 5005")
    assert plan.levels["files"].to_json()["dropped_by_partition"] > 0
    assert any(REMOVED_KEY in e.extra for e in mixed_table.status.read().readable)
