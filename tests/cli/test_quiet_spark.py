"""Spark, quiet and clear: a worker that cannot import carbonstore is one line naming
PYSPARK_PYTHON; PySpark's pandas warning is not shown; spark-submit with conf/log4j2.properties
starts without Spark's INFO lines."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from carbonstore import Store

ROOT = Path(__file__).resolve().parents[2]
PYSPARK = Path(sys.executable).parent.parent / "lib"

_BLOCK = textwrap.dedent("""
    import sys

    class _NoCarbonstore:  # this Python has no carbonstore
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "carbonstore":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoCarbonstore())
""")


@pytest.mark.spark
def test_workers_without_carbonstore_are_one_line(store: Store, tmp_path: Path) -> None:
    blocked = tmp_path / "other-python"
    blocked.mkdir()
    (blocked / "sitecustomize.py").write_text(_BLOCK)
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={blocked} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    (tmp_path / "in.csv").write_text("id,name\n1,a\n2,b\n")
    table = store.create_table("db.t", "id long, name string")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": str(python),
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    out = subprocess.run(
        [sys.executable, "-m", "carbonstore", "--store", store.location, "load", "db.t",
         "--input", str(tmp_path / "in.csv")],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    lines = [ln for ln in out.stderr.splitlines() if not ln.startswith("WARNING: Using incubator")]
    assert out.returncode == 2, out.stderr[-3000:]
    assert len(lines) == 1, out.stderr[-3000:]
    assert "Spark's Python workers cannot import carbonstore" in lines[0]
    assert "set PYSPARK_PYTHON" in lines[0] and sys.executable in lines[0]
    assert table.scan().count() == 0  # nothing loaded


_WARN = textwrap.dedent("""
    import subprocess, sys
    from carbonstore.cli import main
    if sys.argv[1] == "cli":
        main(["--store", sys.argv[2], "tables"])
    from pyspark.sql.pandas.utils import require_minimum_pandas_version
    require_minimum_pandas_version()  # PySpark's own check: pandas 3 -> FutureWarning
    # a Python worker Spark would start from this process
    subprocess.run([sys.executable, "-c", "from pyspark.sql.pandas.utils import "
                    "require_minimum_pandas_version as r; r()"], check=True)
""")


@pytest.mark.parametrize("how", ["cli", "bare"])
def test_pysparks_pandas_warning_is_not_shown(tmp_path: Path, how: str) -> None:
    fake = tmp_path / "pandas3"
    (fake / "pandas").mkdir(parents=True)
    (fake / "pandas" / "__init__.py").write_text('__version__ = "3.0.0"\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(fake)])}
    env.pop("PYTHONWARNINGS", None)
    out = subprocess.run([sys.executable, "-c", _WARN, how, str(tmp_path / "s")],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    shown = out.stderr.count("PySpark does not yet fully support pandas")
    # without the command line's setup PySpark warns in both processes (the test can fail)
    assert shown == (0 if how == "cli" else 2), out.stderr


@pytest.mark.spark
def test_spark_submit_with_the_shipped_log_conf_starts_quiet(store: Store) -> None:
    store.create_table("db.t", "id long")
    submit = Path(sys.executable).parent / "spark-submit"
    if not submit.exists():
        import pyspark

        submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    conf = ROOT / "conf" / "log4j2.properties"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    out = subprocess.run(
        [str(submit), "--master", "local[1]", "--driver-java-options",
         f"-Dlog4j2.configurationFile=file:{conf}", str(ROOT / "carbonstore/cli/submit.py"),
         "--store", store.location, "tables"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["db.t"] or "db.t" in out.stdout
    noise = [ln for ln in out.stderr.splitlines()
             if " INFO " in ln or " WARN " in ln or ln.startswith(("Setting default", "Using "))]
    assert noise == [], noise[:5]
