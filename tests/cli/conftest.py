"""Fixtures of the command tests: a small three-segment table and an in-process CLI run."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest

from carbonstore import Store
from carbonstore.cli import main
from tests.indexfiles.segbuild import add_segments

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def table(store: Store) -> object:
    """db.sales: 300 rows (id, cat, v) in three segments, 50-row row groups, 10-row pages."""
    t = store.create_table("db.sales", "id long not null, cat string, v double")
    datasets = []
    for k in range(3):
        ids = np.arange(k * 100, (k + 1) * 100)
        datasets.append(pa.table({"id": ids, "cat": [f"cat_{i % 7}" for i in ids], "v": ids / 2}))
    add_segments(t, datasets, row_group_size=50, page_rows=10)
    return t


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> RunCli:
    """``run_cli(store, *argv)``: the exit status, stdout and stderr of ``carbonstore --store
    <store> argv...`` run in this process."""
    def run(store: Store, *argv: str) -> tuple[int, str, str]:
        try:
            code = main(["--store", store.location, *argv])
        except SystemExit as done:  # argparse's own checks (e.g. --limit's range) exit
            code = int(done.code or 0)
        out, err = capsys.readouterr()
        return code, out, err
    return run
