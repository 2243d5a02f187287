"""Spark jobs take the session ``carbonstore.spark.session.get_spark`` gives when they run,
not the one bound when their module was first imported: a session replaced afterwards (a
test's stub, an embedding application's own) is the one they use. JVM-free."""

from __future__ import annotations

import pytest

from carbonstore.spark import compact_job, session


class _Asked(Exception):
    pass


def _stub() -> object:
    raise _Asked


def test_the_compaction_mergers_ask_for_the_session_when_they_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "get_spark", _stub)  # replaced after compact_job's import
    with pytest.raises(_Asked):
        compact_job.spark_merger()(None, [], "0")  # type: ignore[arg-type]
    with pytest.raises(_Asked):
        compact_job.spark_cluster_merger()(None, [], "0", None)  # type: ignore[arg-type]
