"""A plan's kept files (plan.py): as FilePlan objects when a caller reads
``TablePlan.files``, or straight to the JSON of ``carbonstore prune --json`` from the plan's
arrays - a part at a time, no object per file or row group, no byte range read (the
``rgpos`` sections of a format 8 snapshot stay unread) - each with its live delete delta."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from carbonstore.pruning import planner as planner_mod
from carbonstore.pruning.plan_types import FilePlan, RowGroupPlan
from carbonstore.store.partitioning import REMOVED_KEY
from carbonstore.store.paths import segment_dir_name
from carbonstore.store.readable import ReadableEntries
from carbonstore.store.records import replace

__all__ = ["SegDirs", "delta_map", "file_json", "file_plans", "marked", "rg_at"]


def delta_map(entries: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Load name -> data file -> its live delete delta, of the entries read now (never of
    the cached index view, whose entries may predate a DELETE)."""
    return {e.load_name: {d.data_file: d for d in e.delete_deltas}
            for e in marked(entries) if e.delete_deltas}


def _delta_of(deltas: dict[str, dict[str, Any]], segment: str, path: str) -> tuple[str, int] | None:
    """The live delete delta (path relative to the table, deleted rows) of kept file
    ``path`` of ``segment`` (None: none)."""
    mine = deltas.get(segment)
    if not mine:
        return None
    seg_dir, _, rel = path.partition(f"/Segment_{segment}/")
    d = mine.get(rel) if rel else None
    return None if d is None else (f"{seg_dir}/Segment_{segment}/{d.delta_file}", d.deleted_rows)


def _with_deltas(files: tuple[FilePlan, ...], entries: Sequence[Any]) -> tuple[FilePlan, ...]:
    """Name each kept file's live delete delta of the planned version."""
    deltas = delta_map(entries)
    if deltas:
        out = []
        for f in files:
            d = _delta_of(deltas, f.segment, f.path)
            out.append(f if d is None else replace(f, delete_delta=d[0], deleted_rows=d[1]))
        files = tuple(out)
    return files


def marked(entries: Sequence[Any]) -> Sequence[Any]:
    """The entries that may have delete deltas or replaced partitions (all of a list; of
    readable entries, only those: no other entry is built)."""
    if isinstance(entries, ReadableEntries):
        return [entries[i] for i in entries.with_deltas_or(REMOVED_KEY)]
    return entries


def _kept_rows(
    view: Any, rg_seg: list[npt.NDArray[np.intp]], parts: list[Any],
    plan: planner_mod.PrunePlan | None, seg_dir: SegDirs,
) -> Iterator[tuple[str, str, list[tuple[int, int, list[list[int]], int]]]]:
    """Each kept file in plan order: (segment id, path relative to the table, its kept row
    groups as (index, rows, [[start, end), ...], compressed bytes)), plain Python values
    taken once per array (a plan may keep tens of thousands of row groups)."""
    if plan is None:
        return
    ranges: dict[int, list[list[int]]] = {}  # global row group -> its ranges, as lists
    for g, ab in zip(plan.range_group.tolist(), plan.range_rows.tolist(), strict=True):
        got = ranges.get(g)
        if got is None:
            ranges[g] = [ab]
        else:
            got.append(ab)
    names = view.names
    for pi, arrays in enumerate(parts):
        rgs: dict[int, list[tuple[int, int, list[list[int]], int]]] = {}
        file_seg: dict[int, str] = {}
        lo, hi = np.searchsorted(plan.part, [pi, pi + 1])
        kept = np.flatnonzero(plan.kept[lo:hi])
        for g, f, seg, index, num_rows, length in zip(
            (kept + int(lo)).tolist(), arrays.rg_file[kept].tolist(), rg_seg[pi][kept].tolist(),
            arrays.rg_index[kept].tolist(), arrays.rg_num_rows[kept].tolist(),
            arrays.rg_length[kept].tolist(), strict=True,
        ):
            file_seg[f] = names[seg]
            rgs.setdefault(f, []).append((index, num_rows, ranges[g], length))
        order = sorted(rgs)
        of_paths = getattr(arrays.files, "paths", None)
        paths = of_paths(order) if of_paths is not None else [arrays.files[f].path for f in order]
        for f, path in zip(order, paths, strict=True):  # (a snapshot unit: paths, no DataFile)
            sid = file_seg[f]
            yield sid, f"{seg_dir[sid]}/{path}", rgs[f]


def file_plans(
    view: Any, rg_seg: list[npt.NDArray[np.intp]], parts: list[Any],
    plan: planner_mod.PrunePlan | None, seg_dir: SegDirs, entries: Sequence[Any],
) -> tuple[FilePlan, ...]:
    """The kept files and row groups as objects (built when a caller reads TablePlan.files)."""
    files = tuple(
        FilePlan(segment=sid, path=path, row_groups=tuple(
            RowGroupPlan(index=index, num_rows=num_rows, row_ranges=tuple(map(tuple, rr)), length=length)
            for index, num_rows, rr, length in rgs))
        for sid, path, rgs in _kept_rows(view, rg_seg, parts, plan, seg_dir))
    return _with_deltas(files, entries)


def file_json(
    view: Any, rg_seg: list[npt.NDArray[np.intp]], parts: list[Any],
    plan: planner_mod.PrunePlan | None, seg_dir: SegDirs, entries: Sequence[Any],
) -> list[dict[str, Any]]:
    """``[f.to_json() for f in file_plans(...)]`` without the objects: a scan's plan may
    keep tens of thousands of files, and ``carbonstore prune --json`` needs only this. Taken
    from the plan's arrays a part at a time: each kept row group's ranges are a slice of one
    list, its file a run of an ordering (no per-row-group lookups, no byte ranges read)."""
    deltas = delta_map(entries)
    out: list[dict[str, Any]] = []
    if plan is None:
        return out
    paused = gc.isenabled()  # tens of thousands of new dicts and lists, none of them cyclic:
    if paused:  # the collector would walk every live object of the process again and again
        gc.disable()  # (at 100,000 segments that was half of this function's time)
    try:
        _files_json_into(out, view, rg_seg, parts, plan, seg_dir, deltas)
    finally:
        if paused:
            gc.enable()
    return out


def _files_json_into(
    out: list[dict[str, Any]], view: Any, rg_seg: list[npt.NDArray[np.intp]], parts: list[Any],
    plan: planner_mod.PrunePlan, seg_dir: SegDirs, deltas: dict[str, dict[str, Any]],
) -> None:
    ranges = plan.range_rows.tolist()
    names = view.names
    take = getattr(names, "take", None)
    for pi, arrays in enumerate(parts):
        lo, hi = (int(x) for x in np.searchsorted(plan.part, [pi, pi + 1]))
        kept = np.flatnonzero(plan.kept[lo:hi])
        if not len(kept):
            continue
        files = rg_at(arrays, "rg_file", kept)
        order = np.argsort(files, kind="stable")  # by file; a file's row groups in plan order
        kept, files = kept[order], files[order]
        glob = kept + lo
        r_lo = np.searchsorted(plan.range_group, glob, side="left").tolist()
        r_hi = np.searchsorted(plan.range_group, glob, side="right").tolist()
        index, num_rows = rg_at(arrays, "rg_index", kept).tolist(), arrays.rg_num_rows[kept].tolist()
        cut = np.flatnonzero(files[1:] != files[:-1]) + 1
        starts = np.concatenate([[0], cut])
        of_paths = getattr(arrays.files, "paths", None)
        file_ids = files[starts].tolist()
        paths = of_paths(file_ids) if of_paths is not None else [arrays.files[f].path for f in file_ids]
        segs = take(rg_seg[pi][kept[starts]]) if take is not None else [  # (in one pass: ViewColumn.take)
            names[i] for i in rg_seg[pi][kept[starts]].tolist()]  # (a snapshot unit: paths, no DataFile)
        full = seg_dir.join(segs, paths)
        if len(starts) == len(kept):  # one kept row group per file (the usual): built in one pass
            part = [{"segment": sid, "path": path,
                     "row_groups": [{"index": i, "num_rows": n, "row_ranges": ranges[a:e]}]}
                    for sid, path, i, n, a, e in zip(segs, full, index, num_rows, r_lo, r_hi, strict=True)]
        else:
            rgs = [{"index": i, "num_rows": n, "row_ranges": ranges[a:e]}
                   for i, n, a, e in zip(index, num_rows, r_lo, r_hi, strict=True)]
            bounds = [*starts.tolist(), len(kept)]
            part = [{"segment": sid, "path": path, "row_groups": rgs[bounds[j]:bounds[j + 1]]}
                    for j, (sid, path) in enumerate(zip(segs, full, strict=True))]
        if deltas:
            for d in part:
                got = _delta_of(deltas, d["segment"], d["path"])
                if got is not None:
                    d["delete_delta"], d["deleted_rows"] = got
        out.extend(part)


def rg_at(arrays: Any, name: str, idx: npt.NDArray[np.intp]) -> npt.NDArray[Any]:
    """``getattr(arrays, name)[idx]`` (of a snapshot run: the kept row groups' values alone)."""
    at = getattr(arrays, "rg_at", None)
    return at(name, idx) if at is not None else getattr(arrays, name)[idx]  # type: ignore[no-any-return]


_SEG_DIRS: dict[tuple[str, str], str] = {}  # (table root, segment id) -> relative folder


class SegDirs(dict):  # type: ignore[type-arg]
    """Segment id -> its folder relative to the table, computed on first use (and kept for
    later plans of the process: the layout of a segment id never changes)."""

    def __init__(self, paths: Any) -> None:
        super().__init__()
        self.paths = paths
        self.root = paths.root  # (a property that joins: once, not once per segment)
        fact = _SEG_DIRS.get((self.root, ""))  # the Fact folder, relative: once
        if fact is None:
            fact = _SEG_DIRS[(self.root, "")] = str(paths.relative(paths.fact_dir))
        self.fact = fact

    def of(self, sids: list[str]) -> list[str]:
        """The folders of segments ``sids`` (a plain number's folder formatted in place)."""
        fact, get = self.fact, self.__getitem__
        return [f"{fact}/Segment_{sid}" if sid.isdigit() and sid.isascii() else get(sid) for sid in sids]

    def join(self, sids: list[str], paths: list[str]) -> list[str]:
        """``f"{folder of sids[i]}/{paths[i]}"`` (relative to the table): when every id is a
        plain number (the usual), formatted in one step each."""
        if all(map(str.isdigit, sids)) and "".join(sids).isascii():
            fact = self.fact
            return [f"{fact}/Segment_{sid}/{path}" for sid, path in zip(sids, paths, strict=True)]
        return [f"{folder}/{path}" for folder, path in zip(self.of(sids), paths, strict=True)]

    def __missing__(self, sid: str) -> str:
        if sid.isdigit() and sid.isascii():  # a plain number cannot leave the folder
            rel = self[sid] = f"{self.fact}/Segment_{sid}"
            return rel
        key = (self.root, sid)
        rel = _SEG_DIRS.get(key)
        if rel is None:
            rel = f"{self.fact}/{segment_dir_name(sid)}"
            if len(_SEG_DIRS) > 200_000:
                _SEG_DIRS.clear()
                _SEG_DIRS[(self.root, "")] = self.fact
            _SEG_DIRS[key] = rel
        self[sid] = rel
        return rel
