"""Where a fresh open + plan spends its CPU time, phase by phase (prune_bench's dataset A).

Opens the table and plans one predicate ``--repeat`` times in one process, forgetting every
decoded tablestatus version, cached index, view and snapshot before each round (what a
fresh process has; imports and first calls are warm, so the totals are 10-20 % below
bench/open_bench.py's fresh processes), and times the main phases with
``time.process_time`` wrappers. Phases nest (``open`` holds ``open.dropped``; ``plan.levels``
the lazy snapshot decodes it triggers), so the rows do not add up; the medians are printed::

    .venv/bin/python bench/fresh_phases.py --segments 100,400,1600 --predicate "cat = 'cat_42'"
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _wrap(acc: dict[str, float], owner: Any, name: str, label: str) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[label] = acc.get(label, 0.0) + time.process_time() - t

    setattr(owner, name, timed)


def _instrument(acc: dict[str, float]) -> Callable[[], None]:
    """Wrap the phases; returns the function that forgets every cache of a plan."""
    import carbonstore.indexfiles.snapshot as snap
    import carbonstore.indexfiles.snapshot_file as snap_file
    import carbonstore.pruning.evaluator as ev
    import carbonstore.pruning.plan as plan
    import carbonstore.pruning.planner as planner
    import carbonstore.pruning.table_index as ti
    import carbonstore.pruning.view_keys as vk
    import carbonstore.store.table as table
    import carbonstore.store.tablestatus as ts
    import carbonstore.store.versions as versions
    from carbonstore.pruning.cache import clear_cache

    for owner, name, label in [
        (table.Store, "table", "open"),
        (ts.TableStatus, "dropped", "open.dropped (tablestatus decode)"),
        (ts.TableStatus, "read", "plan: tablestatus read"),
        (ti, "read_snapshot", "plan: snapshot open (core section)"),
        (ti, "TableIndex", "plan: table view"),
        (planner, "level_masks", "plan: level masks (every level, nested)"),
        (planner, "prune_row_groups", "plan: row groups + pages"),
        (planner, "_page_ranges", "plan: pages"),
        (plan, "_assemble", "plan: result"),
        (snap_file.SnapshotFile, "read", "  section read + verify + IPC"),
        (snap.Snapshot, "_check_chunk", "  section structure checks"),
        (snap.Snapshot, "values", "  flat arrays decoded"),
        (ev.UnitStats, "_from_arrays", "  statistics as units"),
    ]:
        _wrap(acc, owner, name, label)

    def forget() -> None:
        ts.forget_decoded()
        clear_cache()
        versions._IN_ORDER.clear()  # noqa: SLF001 - a bench resets the process's memos
        vk._ENTRY_KEYS.clear()  # noqa: SLF001

    return forget


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--segments", default="1600")
    parser.add_argument("--predicate", default="cat = 'cat_42'")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    import prune_bench as pb

    pb.import_system("ours")
    acc: dict[str, float] = {}
    forget = _instrument(acc)
    for n in [int(x) for x in args.segments.split(",")]:
        meta = json.loads((HERE / "data" / f"n{n}_r25000" / "meta.json").read_text())
        pb.ROWS_PER_FILE[0] = meta["rows"]
        sql = dict(pb.predicates(meta))[args.predicate]
        rows: list[dict[str, float]] = []
        for i in range(args.repeat + 1):
            forget()
            acc.clear()
            gc.collect()
            t = time.process_time()
            pb.ours_plan(pb.ours_open(meta), sql)
            acc["TOTAL open + plan"] = time.process_time() - t
            if i:  # the first round warms the process
                rows.append(dict(acc))
        print(f"{n} loads, {args.predicate!r}: median CPU ms of {args.repeat} rounds")
        for key in rows[-1]:
            print(f"  {key:<44} {1000 * statistics.median(r.get(key, 0.0) for r in rows):6.2f}")


if __name__ == "__main__":
    main()
