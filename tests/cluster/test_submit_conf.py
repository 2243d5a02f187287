"""spark-submit's own settings reach the session the commands run in.

``carbonstore/cli/submit.py`` starts the session from what spark-submit was given before
the command runs, so a user ``--conf`` such as ``spark.sql.session.timeZone`` wins over the
embedded defaults, and UTC stays the default when nobody names a zone. It is the only
spark-submit job file. Runs spark-submit with ``--master local[1]``: no cluster needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from carbonstore import Store
from tests.cluster.conftest import spark_submit

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(900)]

TABLE = "db.events"
# A timestamp without offset: Spark reads it in the session time zone.
WALL = "2024-01-02 03:04:05"


def _load(store: str, csv: Path, cwd: Path, conf: dict[str, str] | None) -> str:
    args = [TABLE, "--input", str(csv), "--store", store, "--json"]
    res = spark_submit("local[1]", "load", *args, cwd=cwd, conf=conf)
    assert res.returncode == 0, (
        f"spark-submit load exited {res.returncode}\n"
        f"stdout:\n{res.stdout[-2000:]}\nstderr:\n{res.stderr[-5000:]}"
    )
    out = json.loads(res.stdout)
    assert (out["status"], out["rows"], out["badRecords"]) == ("Success", 1, 0), out
    return str(out["segment"])


def _stored(store: str, segment: str) -> datetime:
    folder = Path(Store(store).table(TABLE).paths.segment_dir(segment))
    files = sorted(folder.glob("*.parquet"))
    assert len(files) == 1, files
    rows = pq.read_table(files[0], columns=["id", "ts"]).to_pylist()
    assert [r["id"] for r in rows] == [1]
    ts = rows[0]["ts"]
    assert isinstance(ts, datetime) and ts.tzinfo is not None, ts
    return ts


def test_session_time_zone_from_submit_conf_wins_utc_is_the_default(tmp_path: Path) -> None:
    store = str(tmp_path / "carbon.store")
    csv = tmp_path / "events.csv"
    csv.write_text(f"id,ts\n1,{WALL}\n", encoding="utf-8")
    work = tmp_path / "driver"
    work.mkdir()
    created = subprocess.run(
        [sys.executable, "-m", "carbonstore.cli", "create", TABLE,
         "--schema", "id long not null, ts timestamp", "--store", store],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert created.returncode == 0, created.stderr[-3000:]

    tokyo = _load(store, csv, work, {"spark.sql.session.timeZone": "Asia/Tokyo"})
    default = _load(store, csv, work, None)
    assert (tokyo, default) == ("0", "1")

    wall = datetime.fromisoformat(WALL)
    # Without a zone the wall time is read as UTC; with Asia/Tokyo (UTC+9, no DST) it is
    # nine hours earlier as an instant.
    assert _stored(store, default) == wall.replace(tzinfo=UTC)
    assert _stored(store, tokyo) == wall.replace(tzinfo=timezone(timedelta(hours=9)))
    assert _stored(store, default) - _stored(store, tokyo) == timedelta(hours=9)
