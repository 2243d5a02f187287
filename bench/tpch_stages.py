"""Per query, the work each side does in Spark: jobs, stages, tasks and the final plan's operators.

For each query: both sides run once untimed (our occurrence views made, JIT warm), then once
more each inside a Spark job group; from Spark's status tracker: the number of jobs,
stages (skipped ones included as Spark reports them) and tasks of that run, the tasks per
stage; from Spark's status store the completed stages' executor run and CPU time, input
bytes and rows, shuffle bytes read and written (the work done, whatever the wall time);
from the executed (adaptive, final) plan: its operators counted by name, and those whose
counts differ between the two sides. Sides: ``carbonstore.spark.sql.run_statement`` against ``spark.sql`` over
``spark.read.parquet`` temp views of the same files. Uses the data of bench/tpch_bench.py::

    .venv/bin/python bench/tpch_stages.py --sf 1 --data /tmp/x --queries 5,17,19,20
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _operators(plan: str) -> collections.Counter[str]:
    ops: collections.Counter[str] = collections.Counter()
    for line in plan.splitlines():
        m = re.match(r"^[\s:+\-*|]*([A-Z][A-Za-z]+)(?: |\(|$)", line)
        if m and m.group(1) not in ("AdaptiveSparkPlan", "Output", "Arguments", "Input"):
            ops[m.group(1)] += 1
    return ops


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--segments", type=int, default=4)
    p.add_argument("--data", help="directory of the generated data (as bench/tpch_bench.py)")
    p.add_argument("--queries", default="5,17,19,20")
    p.add_argument("--plans", help="write each side's executed plan to DIR/qN-SIDE.txt")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.path.insert(0, str(HERE))
    import sqlglot
    import tpch_bench

    from carbonstore.spark.sql import run_statement

    meta = tpch_bench.generate(args.sf, args.segments, args.data)
    spark, store = tpch_bench.session_and_views(meta)
    sc = spark.sparkContext
    tracker = sc.statusTracker()

    def frame(statement: str, side: str) -> Any:
        return run_statement(spark, store, statement) if side == "ours" else spark.sql(statement)

    for n in (int(q) for q in args.queries.split(",")):
        statement = sqlglot.transpile(meta["queries"][str(n)], read="duckdb", write="spark")[0]
        seen: dict[str, Any] = {}
        for side in ("ours", "plain"):
            frame(statement, side).collect()  # untimed: views made, warm
            group = f"q{n}-{side}"
            sc.setJobGroup(group, group)
            df = frame(statement, side)
            df.collect()
            sc.setJobGroup("", "")
            jobs = sorted(tracker.getJobIdsForGroup(group))
            stages = [s for j in jobs for s in (tracker.getJobInfo(j).stageIds if tracker.getJobInfo(j) else [])]
            tasks = []
            for s in stages:
                info = tracker.getStageInfo(s)
                if info is not None:
                    tasks.append(info.numTasks)
            work = collections.Counter()  # the stages' own metrics (Spark's status store)
            status = sc._jsc.sc().statusStore()
            for stage_id in stages:
                try:
                    st = status.lastStageAttempt(stage_id)
                except Exception:  # noqa: BLE001 - a stage that never ran (skipped)
                    continue
                if str(st.status()) == "COMPLETE":
                    work["run ms"] += st.executorRunTime()
                    work["cpu ms"] += st.executorCpuTime() // 1_000_000
                    work["input MB"] += st.inputBytes() / 1e6
                    work["input rows"] += st.inputRecords()
                    work["shuffle read MB"] += st.shuffleReadBytes() / 1e6
                    work["shuffle write MB"] += st.shuffleWriteBytes() / 1e6
            plan = str(df._jdf.queryExecution().executedPlan().toString())
            if args.plans:
                Path(args.plans).mkdir(parents=True, exist_ok=True)
                Path(args.plans, f"q{n}-{side}.txt").write_text(plan)
            seen[side] = (len(jobs), len(stages), tasks, _operators(plan), work)
        for side in ("ours", "plain"):
            jobs, stages, tasks, _, work = seen[side]
            print(f"Q{n} {side:5s}: {jobs} jobs, {stages} stages, {sum(tasks)} tasks {tasks}; "
                  + ", ".join(f"{k} {v:.0f}" for k, v in work.items()), flush=True)
        a, b = seen["ours"][3], seen["plain"][3]
        diff = {k: (a.get(k, 0), b.get(k, 0)) for k in set(a) | set(b) if a.get(k, 0) != b.get(k, 0)}
        print(f"Q{n} operators differing (ours, plain): {diff or 'none'}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
