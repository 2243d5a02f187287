"""Row-level DML on a real standalone cluster (master and two workers on 127.0.0.1).

One ``spark-submit --master spark://...`` application runs a script of UPDATE, MERGE (with
WHEN NOT MATCHED BY SOURCE) and a DELETE the index cannot bind (``carbonstore sql -f``):
their read, match, delta and insert tasks run in executors the workers launched, not in the
driver. The table then equals plain Spark running the same statements over the same rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from carbonstore import Store
from tests.cluster.conftest import spark_submit
from tests.dml.rows import SCHEMA, read_live, rows

# long: about 2 minutes on top of tests/cluster/test_cluster.py's cluster run (make test-long)
pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.spark, pytest.mark.timeout(1500)]

SCRIPT = """
UPDATE db.t SET score = score * 2, name = upper(name) WHERE id % 3 = 0;
MERGE INTO db.t AS t USING (SELECT * FROM VALUES (5L, 'm5', 0.5D), (150L, 'm150', 1.5D),
    (500L, 'new', 2.5D) AS v(id, name, score)) AS s ON t.id = s.id
  WHEN MATCHED THEN UPDATE SET score = t.score + s.score, name = s.name
  WHEN NOT MATCHED THEN INSERT *
  WHEN NOT MATCHED BY SOURCE AND t.id < 3 THEN DELETE;
DELETE FROM db.t WHERE id % 7 = 0;
"""

ORACLE = """
WITH u AS (
  SELECT id, CASE WHEN id % 3 = 0 THEN upper(name) ELSE name END AS name,
         CASE WHEN id % 3 = 0 THEN score * 2 ELSE score END AS score FROM v),
s AS (SELECT * FROM VALUES (5L, 'm5', 0.5D), (150L, 'm150', 1.5D), (500L, 'new', 2.5D)
      AS s(id, name, score)),
m AS (
  SELECT t.id, s.name, t.score + s.score AS score FROM u t JOIN s ON t.id = s.id
  UNION ALL SELECT s.* FROM s LEFT ANTI JOIN u t ON t.id = s.id
  UNION ALL SELECT t.* FROM u t LEFT ANTI JOIN s ON t.id = s.id WHERE NOT t.id < 3)
SELECT * FROM m WHERE NOT id % 7 = 0
"""


def test_update_merge_delete_on_a_cluster_equal_plain_spark(
    spark_cluster: str, cluster_dir: Path, tmp_path: Path, spark: Any
) -> None:
    store_dir = tmp_path / "carbon.store"
    table = Store(str(store_dir)).create_table("db.t", SCHEMA, properties={"sort_columns": "id"})
    data = rows(range(300))
    table.append(data.slice(0, 200))  # two segments
    table.append(data.slice(200))
    script = tmp_path / "dml.sql"
    script.write_text(SCRIPT, encoding="utf-8")
    work = tmp_path / "driver"
    work.mkdir()
    before = {p.name for p in cluster_dir.glob("w*/app-*")}

    res = spark_submit(spark_cluster, "sql", "-f", str(script), "--store", str(store_dir),
                       cwd=work, timeout=1200)  # three statements; minutes on a loaded box
    assert res.returncode == 0, f"stdout:\n{res.stdout[-2000:]}\nstderr:\n{res.stderr[-5000:]}"

    spark.createDataFrame(data).createOrReplaceTempView("v")
    want = spark.sql(ORACLE).toArrow().sort_by("id").to_pylist()
    got = read_live(Store(str(store_dir)).table("db.t")).sort_by("id").to_pylist()
    assert got == want
    ops = [i.operation for i in Store(str(store_dir)).table("db.t").history()]
    assert [o for o in ops if o in ("UPDATE", "MERGE", "DELETE")] == ["UPDATE", "MERGE", "DELETE"]

    # the statements' tasks ran in executors the workers launched (local mode launches
    # none), Python tasks among them (the delta and insert writers)
    (app,) = {p.name for p in cluster_dir.glob("w*/app-*")} - before
    logs = sorted(cluster_dir.glob(f"w*/{app}/*/stderr"))
    assert logs, f"no executor of {app} was launched by a worker"
    text = "".join(p.read_text(errors="replace") for p in logs)
    assert "Starting Python task execution" in text, text[-3000:]
