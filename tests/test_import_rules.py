"""tools/check_imports.py: the layer and private-name rules hold, and the check can fail."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "tools" / "check_imports.py"


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK), str(root)], capture_output=True,
                          text=True, timeout=120)


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "carbonstore", tmp_path / "carbonstore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def test_tree_is_clean():
    result = _run(ROOT)
    assert result.returncode == 0, result.stdout


def test_upward_import_fails(tmp_path):
    root = _copy(tmp_path)
    _append(root / "carbonstore/store/paths.py",
            "\n\ndef _late():\n    from carbonstore.segments import manage  # noqa\n")
    result = _run(root)
    assert result.returncode == 1
    assert "paths.py" in result.stdout and "upward import: store imports segments" in result.stdout


def test_back_edge_fails_as_upward_import_and_as_cycle(tmp_path):
    # dictionary imports store; a back-edge store -> dictionary closes a cycle
    root = _copy(tmp_path)
    _append(root / "carbonstore/store/schema.py", "\nfrom carbonstore.dictionary import codec  # noqa\n")
    result = _run(root)
    assert result.returncode == 1
    assert "schema.py" in result.stdout and "upward import: store imports dictionary" in result.stdout
    assert "import cycle between packages dictionary -> store -> dictionary" in result.stdout


def test_cycle_between_packages_of_one_layer_fails(tmp_path):
    # errors and progress share the lowest layer: no upward import, still a cycle
    root = _copy(tmp_path)
    _append(root / "carbonstore/errors.py", "\nfrom carbonstore import progress  # noqa\n")
    _append(root / "carbonstore/progress.py", "\n\ndef _late():\n    import carbonstore.errors  # noqa\n")
    result = _run(root)
    assert result.returncode == 1
    assert "upward import" not in result.stdout
    assert "import cycle between packages errors -> progress -> errors" in result.stdout
    assert "errors.py:" in result.stdout and "progress.py:" in result.stdout


def test_spark_does_not_import_cli(tmp_path):
    # the spark-submit entry is cli/submit.py; a job module importing the CLI is a back-edge
    root = _copy(tmp_path)
    _append(root / "carbonstore/spark/load_job.py",
            "\n\nif __name__ == '__main__':\n    from carbonstore.cli import main  # noqa\n")
    result = _run(root)
    assert result.returncode == 1
    assert "upward import: spark imports cli" in result.stdout
    assert "import cycle between packages cli -> spark -> cli" in result.stdout


def test_private_name_across_modules_fails(tmp_path):
    root = _copy(tmp_path)
    _append(root / "carbonstore/segments/manage.py",
            "\nfrom carbonstore.store.fs import _fsync_dir  # noqa\n")
    _append(root / "carbonstore/segments/clean.py",
            "\nfrom carbonstore.store import fs as _fs  # noqa\n_x = _fs._write_fsynced\n")
    result = _run(root)
    assert result.returncode == 1
    assert "private name _fsync_dir imported from carbonstore.store.fs" in result.stdout
    assert "private name _write_fsynced used from carbonstore.store.fs" in result.stdout


def test_unknown_package_must_get_a_layer(tmp_path):
    root = _copy(tmp_path)
    (root / "carbonstore/newpkg").mkdir()
    (root / "carbonstore/newpkg/__init__.py").write_text("from carbonstore.store import fs\n")
    result = _run(root)
    assert result.returncode == 1
    assert "package newpkg has no layer" in result.stdout


def test_statistics_importing_segments_fails(tmp_path):
    """Statistics sit below segments: the writer, commit and compaction call into them."""
    root = _copy(tmp_path)
    _append(root / "carbonstore/statistics/analyze.py",
            "\n\ndef _late():\n    from carbonstore.segments import compaction  # noqa\n")
    result = _run(root)
    assert result.returncode == 1
    assert "upward import: statistics imports segments" in result.stdout
