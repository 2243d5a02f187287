"""docs/cluster.md, followed on a real standalone cluster: master and two workers on 127.0.0.1.

Every Spark step goes through ``spark-submit --master spark://...`` with the job file
``carbonstore/cli/submit.py``: two loads, a major compaction, analyze and a query. The
store lives on a local folder every "node" sees under the same path, as a shared mount
would be; locks are taken by the driver only.
"""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from carbonstore import Store
from carbonstore.statistics.store import get_segment_statistics
from tests.cluster.conftest import spark_submit

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1500)]

TABLE = "db.sales"

# (id, name, score): a NaN double, a null string, a null double, non-ASCII text, a quoted comma.
FIRST = [
    (1, "alpha", 1.5),
    (2, "Zoë 東京 ✓", math.nan),
    (3, None, -0.25),
]
SECOND = [
    (4, "comma, quoted", None),
    (5, "Ελληνικά", 1e300),
    (6, "alpha", 0.0),
]


def _write_csv(path: Path, rows: list[tuple[int, str | None, float | None]]) -> Path:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["id", "name", "score"])
    for id_, name, score in rows:
        text = "" if score is None else ("NaN" if math.isnan(score) else repr(score))
        w.writerow([id_, "" if name is None else name, text])
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", *args],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert res.returncode == 0, f"carbonstore {' '.join(args)} failed:\n{res.stderr[-3000:]}"
    return res


def _submit(url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    res = spark_submit(url, *args, cwd=cwd)
    assert res.returncode == 0, (
        f"spark-submit {' '.join(args)} exited {res.returncode}\n"
        f"stdout:\n{res.stdout[-2000:]}\nstderr:\n{res.stderr[-5000:]}"
    )
    return res


def _apps(cluster_dir: Path) -> set[str]:
    return {p.name for p in cluster_dir.glob("w*/app-*")}


def _executor_logs(cluster_dir: Path, app: str) -> list[Path]:
    return sorted(cluster_dir.glob(f"w*/{app}/*/stderr"))


def _parse_row(row: dict[str, str]) -> tuple[int, str | None, float | None]:
    score = row["score"]
    return (
        int(row["id"]),
        row["name"] or None,
        None if score == "" else float(score),
    )


def _key(row: tuple[int, str | None, float | None]) -> tuple[int, str, str]:
    # NaN != NaN: compare rows through their text.
    return (row[0], repr(row[1]), repr(row[2]))


def test_load_compact_analyze_query_through_spark_submit(
    spark_cluster: str, cluster_dir: Path, tmp_path: Path
) -> None:
    url = spark_cluster
    store_dir = tmp_path / "carbon.store"
    store = str(store_dir)
    work = tmp_path / "driver"
    work.mkdir()
    first = _write_csv(tmp_path / "first.csv", FIRST)
    second = _write_csv(tmp_path / "second.csv", SECOND)
    apps_before = _apps(cluster_dir)

    _cli("create", TABLE, "--schema", "id long not null, name string, score double",
         "--sort-columns", "id", "--store", store)

    # Two loads: segments 0 and 1.
    for expected_id, path, rows in (("0", first, FIRST), ("1", second, SECOND)):
        res = _submit(url, work, "load", TABLE, "--input", str(path), "--option", "header=true",
                      "--store", store, "--json")
        out = json.loads(res.stdout)
        assert (out["segment"], out["status"], out["rows"], out["badRecords"]) == (
            expected_id, "Success", len(rows), 0
        ), out

    # Major compaction merges both (each far below major_compaction_size) into 0.1.
    res = _submit(url, work, "compact", TABLE, "--type", "major", "--store", store, "--json")
    merged = [(m["output"], m["sources"], m["rows"]) for m in json.loads(res.stdout)["merged"]]
    assert merged == [("0.1", ["0", "1"], 6)]

    table = Store(store).table(TABLE)
    entries = {e.load_name: e for e in table.status.read().entries}
    assert {k: (e.status, e.merged_load_name) for k, e in entries.items()} == {
        "0": ("Compacted", "0.1"),
        "1": ("Compacted", "0.1"),
        "0.1": ("Success", None),
    }
    assert entries["0.1"].major_compacted
    assert entries["0.1"].row_count == len(FIRST) + len(SECOND)

    # The compaction wrote statistics; drop them so that analyze has to compute them again.
    assert get_segment_statistics(table, "0.1") is not None
    _cli("stats", TABLE, "--delete", "--segment", "0.1", "--store", store)
    assert get_segment_statistics(table, "0.1") is None

    res = _submit(url, work, "analyze", TABLE, "--store", store, "--json")
    assert json.loads(res.stdout) == [{"segment": "0.1", "rows": 6, "columns": 3}]

    stats = get_segment_statistics(table, "0.1")
    assert stats is not None
    assert stats.source == "analyze"
    assert stats.row_count == 6
    name, score, id_ = stats.column("name"), stats.column("score"), stats.column("id")
    assert name.num_nulls == 1
    assert name.num_dvs == 4  # alpha twice
    assert score.num_nulls == 1
    assert score.num_nans == 1
    assert (score.low_value, score.high_value) == (-0.25, 1e300)
    assert (id_.low_value, id_.high_value, id_.num_nulls) == (1, 6, 0)

    # Query through the cluster: every row exactly once, NaN and null kept apart.
    res = _submit(url, work, "query", TABLE, "--csv", "--store", store)
    got = [_parse_row(r) for r in csv.DictReader(io.StringIO(res.stdout))]
    assert sorted(map(_key, got)) == sorted(map(_key, FIRST + SECOND))

    # The work ran on the cluster, not in the driver: the workers launched executors for
    # each of the five spark-submit applications (local mode launches none); carbonstore's
    # Python code (writer, merger, statistics) ran in the executors' Python workers of the
    # first four, and the query's executors read the kept files with Spark's own Parquet
    # reader (no Python task: docs/query.md).
    apps = _apps(cluster_dir) - apps_before
    assert len(apps) == 5, sorted(apps)
    for i, app in enumerate(sorted(apps)):
        logs = _executor_logs(cluster_dir, app)
        assert logs, f"no executor of {app} was launched by a worker"
        text = "".join(p.read_text(errors="replace") for p in logs)
        wanted = "Reading File path" if i == 4 else "Starting Python task execution"
        assert wanted in text, f"executors of {app} show no '{wanted}':\n{text[-3000:]}"
