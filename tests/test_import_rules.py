"""tools/check_imports.py: the layer, cycle, private-name, function-level import and module
length rules hold on the repo, and each can fail (on a copy of the tree, or on a small fake
package built for the case)."""

from __future__ import annotations

import re
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
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "import_allowlist.toml", tmp_path / "tools")
    return tmp_path


def _fake(tmp_path: Path, files: dict[str, str], allowlist: str | None = None) -> Path:
    """A small tree of its own: ``carbonstore/`` with ``files`` (path -> source), every
    folder a package, and ``tools/import_allowlist.toml`` when given."""
    (tmp_path / "carbonstore").mkdir(parents=True)
    (tmp_path / "carbonstore/__init__.py").write_text("")
    for name, text in files.items():
        path = tmp_path / "carbonstore" / name
        for folder in path.relative_to(tmp_path / "carbonstore").parents:
            (tmp_path / "carbonstore" / folder).mkdir(exist_ok=True)
            init = tmp_path / "carbonstore" / folder / "__init__.py"
            if not init.exists():
                init.write_text("")
        path.write_text(text)
    if allowlist is not None:
        (tmp_path / "tools").mkdir()
        (tmp_path / "tools/import_allowlist.toml").write_text(allowlist)
    return tmp_path


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def test_tree_is_clean():
    result = _run(ROOT)
    assert result.returncode == 0, result.stdout
    assert result.stdout == ""


def test_copy_of_the_tree_is_clean(tmp_path):
    """The copy the failing cases below start from passes as it is (with the allowlist)."""
    result = _run(_copy(tmp_path))
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
    assert re.search(r"import cycle between packages \S+( -> \S+)* -> spark -> cli", result.stdout)


def test_a_module_listed_apart_sits_in_its_own_layer(tmp_path):
    """``spark.sql`` (the public ``carbonstore.spark.sql``) sits in the SQL front end's layer,
    above dml/: it may import the front end, and no module of spark/ may import it."""
    files = {
        "sql/router.py": "from carbonstore.dml import run  # noqa\n",
        "dml/run.py": "from carbonstore.spark import queries  # noqa\n",
        "spark/queries.py": "import os  # noqa\n",
        "spark/sql.py": "from carbonstore.sql.router import run  # noqa\n",
    }
    result = _run(_fake(tmp_path / "ok", files))
    assert (result.returncode, result.stdout) == (0, "")
    files["spark/queries.py"] = "from carbonstore.spark.sql import run  # noqa\n"
    result = _run(_fake(tmp_path / "back", files))
    assert result.returncode == 1
    assert "spark/queries.py:1: upward import: spark imports spark.sql" in result.stdout
    assert "import cycle between packages" in result.stdout


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


# ---- rules 4-6 on small fake packages ------------------------------------------------------

def test_fake_package_without_problems_passes(tmp_path):
    root = _fake(tmp_path, {
        "store/a.py": "from carbonstore.store import b  # noqa\n",
        "store/b.py": "import os  # noqa\n",
        "segments/c.py": "from carbonstore.store.a import b  # noqa\n",
    })
    result = _run(root)
    assert (result.returncode, result.stdout) == (0, "")


def test_back_edge_between_packages_fails(tmp_path):
    root = _fake(tmp_path, {
        "segments/c.py": "from carbonstore.store import a  # noqa\n",
        "store/a.py": "from carbonstore.segments import c  # noqa\n",
    })
    result = _run(root)
    assert result.returncode == 1
    assert "store/a.py:1: upward import: store imports segments" in result.stdout
    assert "import cycle between packages segments -> store -> segments" in result.stdout


def test_module_circle_inside_a_package_fails(tmp_path):
    # a -> b -> c -> a, all at module level: no layer rule sees it (one package)
    root = _fake(tmp_path, {
        "store/a.py": "from carbonstore.store import b  # noqa\n",
        "store/b.py": "from carbonstore.store.c import X  # noqa\n",
        "store/c.py": "import carbonstore.store.a  # noqa\nX = 1\n",
    })
    result = _run(root)
    assert result.returncode == 1
    assert ("import cycle between modules of store: store.a -> store.b -> store.c -> store.a"
            in result.stdout)
    assert "upward import" not in result.stdout


def test_circle_closed_inside_a_function_or_for_types_fails(tmp_path):
    root = _fake(tmp_path, {
        "store/ddl.py": "def parse():\n    from carbonstore.store.schema import T  # noqa\n",
        "store/schema.py": "from carbonstore.store import ddl  # noqa\nT = 1\n",
        "store/fs.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                        "    from carbonstore.store.paths import P  # noqa\n"),
        "store/paths.py": "from carbonstore.store.fs import open_  # noqa\n",
    })
    result = _run(root)
    assert result.returncode == 1
    assert "modules of store: store.ddl -> store.schema -> store.ddl" in result.stdout
    assert "modules of store: store.fs -> store.paths -> store.fs" in result.stdout
    # listed, the import inside the function still does not hide the circle
    allow = '[lazy."carbonstore.store.ddl"]\n"carbonstore.store.schema" = "a reason"\n'
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools/import_allowlist.toml").write_text(allow)
    result = _run(root)
    assert "store.ddl -> store.schema -> store.ddl" in result.stdout
    assert "inside a function" not in result.stdout


def test_known_circle_passes_only_while_it_is_listed(tmp_path):
    files = {"store/a.py": "from carbonstore.store import b  # noqa\n",
             "store/b.py": "from carbonstore.store import a  # noqa\n"}
    listed = ('[[cycle]]\nmodules = ["carbonstore.store.a", "carbonstore.store.b"]\n'
              'reason = "scheduled to go"\n')
    assert _run(_fake(tmp_path / "one", files, listed)).returncode == 0
    # once the circle is gone the entry fails, so the list only shrinks
    files["store/b.py"] = "import os  # noqa\n"
    result = _run(_fake(tmp_path / "two", files, listed))
    assert result.returncode == 1
    assert "is not a cycle of the tree" in result.stdout


def test_unlisted_function_level_import_fails(tmp_path):
    files = {
        "store/a.py": "import os\n\n\ndef late():\n    from carbonstore.store import b  # noqa\n",
        "store/b.py": "import os  # noqa\n",
    }
    result = _run(_fake(tmp_path / "one", files))
    assert result.returncode == 1
    assert ("store/a.py:5: import of carbonstore.store.b inside a function: move it to the top, "
            "or list it with its reason in") in result.stdout
    # nested functions, methods and lambdas' bodies count; imports of other libraries do not
    files["store/a.py"] = ("import os\n\n\nclass K:\n    def m(self):\n        def inner():\n"
                           "            import json  # noqa\n"
                           "            import carbonstore.store.b  # noqa\n")
    result = _run(_fake(tmp_path / "two", files))
    assert "store/a.py:8: import of carbonstore.store.b inside a function" in result.stdout
    assert "json" not in result.stdout


def test_listed_function_level_import_passes_and_stale_entries_fail(tmp_path):
    files = {
        "store/a.py": "def late():\n    from carbonstore.store.b import B  # noqa\n",
        "store/b.py": "B = 1\n",
    }
    allow = ('[lazy."carbonstore.store.a"]\n'
             '"carbonstore.store.b" = "defers 120 ms (python -X importtime)"\n')
    assert _run(_fake(tmp_path / "one", files, allow)).stdout == ""
    stale = allow + '"carbonstore.store.c" = "gone long ago"\n'
    result = _run(_fake(tmp_path / "two", files, stale))
    assert result.returncode == 1
    assert '"carbonstore.store.c" matches no import inside a function' in result.stdout
    no_reason = '[lazy."carbonstore.store.a"]\n"carbonstore.store.b" = " "\n'
    result = _run(_fake(tmp_path / "three", files, no_reason))
    assert result.returncode == 1
    assert "every entry needs its reason" in result.stdout


def test_module_over_600_lines_fails(tmp_path):
    body = "".join(f"X{i} = {i}\n" for i in range(601))
    files = {"store/long.py": body, "store/ok.py": body[: body.index("X600")],
             "store/_gen/thrift.py": body * 3}
    result = _run(_fake(tmp_path / "one", files))
    assert result.returncode == 1
    assert result.stdout.count("lines, over 600") == 1
    assert "store/long.py: 601 lines, over 600" in result.stdout
    listed = '[long]\n"carbonstore.store.long" = "601 lines: split next"\n'
    assert _run(_fake(tmp_path / "two", files, listed)).stdout == ""
    files["store/long.py"] = body[: body.index("X600")]
    result = _run(_fake(tmp_path / "three", files, listed))
    assert result.returncode == 1
    assert '"carbonstore.store.long" is not over 600 lines: remove the entry' in result.stdout


def test_pyarrow_fs_outside_the_store_fails(tmp_path):
    """pyarrow.fs is the store's file layer's business: every other package goes through
    StoreFS (carbonstore/store/fs.py), so local and s3:// stores differ in one place."""
    files = {
        "store/fs.py": "import pyarrow.fs as pafs  # noqa\n",
        "store/objectstore.py": "from pyarrow import fs  # noqa\n",
        "segments/a.py": "import pyarrow.fs as pafs  # noqa\n",
        "pruning/b.py": "from pyarrow import fs as pafs, parquet  # noqa\n",
        "cli/c.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from pyarrow.fs import FileSystem  # noqa\n"),
        "spark/d.py": "def late():\n    import pyarrow.fs  # noqa\n",
        "spark/e.py": "import pyarrow.parquet  # noqa\nimport pyarrow as pa  # noqa\n",
    }
    result = _run(_fake(tmp_path, files))
    assert result.returncode == 1
    lines = [line for line in result.stdout.splitlines() if "pyarrow.fs" in line]
    assert sorted(line.split(":")[0].split("carbonstore/")[-1] for line in lines) == [
        "cli/c.py", "pruning/b.py", "segments/a.py", "spark/d.py"]
    assert all("outside the store's file layer: use StoreFS" in line for line in lines)
    assert "segments/a.py:1:" in result.stdout and "spark/d.py:2:" in result.stdout


def test_bare_filesystem_of_a_store_fs_outside_the_store_fails(tmp_path):
    """``sfs.fs`` / ``table.store.sfs.fs`` reach past StoreFS to the bare pyarrow
    filesystem; only the store package may."""
    files = {
        "store/paths.py": "def f(sfs):\n    return sfs.fs.get_file_info('/')\n",
        "segments/a.py": "def f(table):\n    return table.store.sfs.fs\n",
        "pruning/b.py": "def f(sfs):\n    return read(sfs.fs, 'x')\n",
        "cli/c.py": "def f(sfs, fs):\n    return sfs.exists('x'), fs.size\n",
    }
    result = _run(_fake(tmp_path, files))
    assert result.returncode == 1
    assert result.stdout.count("bare filesystem") == 2, result.stdout
    assert "segments/a.py:2: bare filesystem" in result.stdout
    assert "pruning/b.py:2: bare filesystem" in result.stdout
