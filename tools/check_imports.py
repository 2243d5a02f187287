"""The import rules of docs/architecture.md, checked over the source tree.

1. Layers: a package imports only from packages at or below its own layer (LAYERS, lowest
   first). That also rules out import cycles between packages.
2. No private name crosses a module border: ``from carbonstore.x import _name`` and
   ``x._name`` on an imported carbonstore module both fail.

Imports inside functions count: a lazy import hides a cycle, it does not remove it.
Exit status 1 with one line per violation; 0 and no output when the tree is clean.

    python tools/check_imports.py [SOURCE_ROOT]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "carbonstore"

# Lowest first; names on one line share a layer.
LAYERS: list[set[str]] = [
    {"errors", "progress"},
    {"store"},
    {"expressions"},
    {"dictionary"},
    {"indexfiles"},
    {"pruning"},
    {"statistics"},
    {"segments"},
    {"spark"},
    {"commands"},
    {"cli"},
    {"demo"},
]

# Edges that exist today and are scheduled to go (issue 17's layout), as (module, imported
# package). A new entry here needs a reason in the commit that adds it.
KNOWN_UPWARD: set[tuple[str, str]] = {
    ("carbonstore.spark.analyze_job", "cli"),
    ("carbonstore.spark.compact_job", "cli"),
    ("carbonstore.spark.load_job", "cli"),
    ("carbonstore.spark.submit", "cli"),
    # Table.delete / update / merge: the user's API (docs/dml.md) runs segments' DML code;
    # the layout change moves these methods to the public API module.
    ("carbonstore.store.table", "segments"),
}
KNOWN_PRIVATE: set[tuple[str, str]] = {
    ("carbonstore.segments.rebuild", "carbonstore.segments.writer._NanTracker"),
    ("carbonstore.segments.sketches", "carbonstore.segments.statistics._CLASSES"),
}


def _layer(package: str) -> int | None:
    for i, names in enumerate(LAYERS):
        if package in names:
            return i
    return None


def _top(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    return parts[1]


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    if node.level == 0:
        return node.module
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        if "_gen" in rel.parts:
            continue
        is_package = rel.name == "__init__"
        parts = rel.parts[:-1] if is_package else rel.parts
        found[".".join(parts)] = (path, is_package)
    return found


def check(root: Path) -> list[str]:
    modules = _modules(root)
    problems: list[str] = []
    for module, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        own = _top(module)
        own_layer = _layer(own) if own else None
        aliases: dict[str, str] = {}  # local name -> carbonstore module it names
        imported: list[tuple[int, str]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PACKAGE + "."):
                        imported.append((node.lineno, alias.name))
                        if alias.asname:
                            aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(node, module, is_package)
                if not target or not (target == PACKAGE or target.startswith(PACKAGE + ".")):
                    continue
                imported.append((node.lineno, target))
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    if full in modules:
                        aliases[alias.asname or alias.name] = full
                    elif alias.name.startswith("_") and (module, full) not in KNOWN_PRIVATE:
                        problems.append(f"{path}:{node.lineno}: private name {alias.name} "
                                        f"imported from {target}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in aliases):
                target = aliases[node.value.id]
                full = f"{target}.{node.attr}"
                if target != module and (module, full) not in KNOWN_PRIVATE:
                    problems.append(f"{path}:{node.lineno}: private name {node.attr} "
                                    f"used from {target}")
        for lineno, target in imported:
            theirs = _top(target)
            if own is None or theirs is None or theirs == own:
                continue
            their_layer = _layer(theirs)
            if own_layer is None or their_layer is None:
                problems.append(f"{path}:{lineno}: package {own if own_layer is None else theirs}"
                                " has no layer in tools/check_imports.py")
            elif their_layer > own_layer and (module, theirs) not in KNOWN_UPWARD:
                problems.append(f"{path}:{lineno}: upward import: {own} imports {theirs}")
    return sorted(set(problems))


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    problems = check(root)
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
